package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/redisstore"
	"github.com/quotad/quotad/internal/redistest"
	"github.com/quotad/quotad/internal/tiers"
)

// Units a check admits while Redis is out of reach, counted in process
// and answered degraded, reach Redis once it answers again: every process
// then counts them in the windows still current.
func TestDegradedUnitsReachRedis(t *testing.T) {
	t.Parallel()
	server := redistest.StartServer(t)
	prefix := redistest.Prefix(t)
	catalog := quotafake.NewCatalog()
	catalog.PutMetric("api_calls", nil)
	catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{{Metric: "api_calls", Window: tiers.Minute, Limit: 100}})
	clock := quotafake.NewClock(time.Date(2026, 12, 6, 12, 0, 10, 0, time.UTC))
	engine := func() *quota.Engine {
		s, err := redisstore.New(server.URL(), redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		ledger := quotafake.NewLedger()
		return quota.New(quota.Options{Catalog: catalog, Counts: ledger, Requests: ledger, Maintenance: ledger,
			Audits: ledger, Clock: clock, Shared: s, StoreTimeout: time.Minute})
	}
	ctx := context.Background()
	a := engine()
	if d, err := a.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 2}); err != nil || !d.Allowed || d.Degraded {
		t.Fatalf("before the outage: %+v, %v", d, err)
	}
	server.Stop()
	for range 5 {
		d, err := a.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 3})
		if err != nil || !d.Allowed || !d.Degraded {
			t.Fatalf("Redis stopped: %+v, %v; want allowed, degraded", d, err)
		}
	}
	if got := a.Stats().Debts.Owed; got != 15 {
		t.Fatalf("owed %d during the outage, want 15", got)
	}
	server.Start()
	if err := a.Close(ctx); err != nil { // Close repays, as Run does every second
		t.Fatal(err)
	}
	if got := a.Stats().Debts; got.Owed != 0 || got.Repaid != 15 {
		t.Fatalf("debts after Redis came back: %+v, want 15 repaid", got)
	}
	b := engine() // another process: it sees what Redis holds
	d, err := b.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 1, DryRun: true})
	// The restarted Redis kept nothing (it runs without persistence): its
	// minute window holds the 15 units repaid, and a dry run of 1 reads
	// the count its own unit would make.
	if err != nil || d.Degraded || len(d.Limits) != 1 || d.Limits[0].Used != 15+1 {
		t.Errorf("another process reads %+v, %v; want the minute window at 15 (+1 asked)", d, err)
	}
}
