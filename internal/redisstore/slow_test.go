package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/faulttest"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/redisstore"
	"github.com/quotad/quotad/internal/redistest"
	"github.com/quotad/quotad/internal/tiers"
)

// A Redis slower than the timeout, but answering, is waited for: its
// checks are counted there, not degraded. One that goes silent (a black
// hole) is given up on within its silence (four timeouts, at least a
// second), and checks go on in process, degraded.
//
// The windows' clock stands still, mid-minute: on the wall clock a minute
// may end between two checks, and the sliding window then weighs the
// last minute's count down (two checks before the boundary and one after
// read as floor(2·59.5/60)+1 = 2, not 3), however well Redis counted.
func TestSlowRedisIsNotAnOutage(t *testing.T) {
	t.Parallel()
	server := redistest.StartServer(t)
	proxy := faulttest.Start(t, fmt.Sprintf("127.0.0.1:%d", server.Port()))
	const timeout = 100 * time.Millisecond // silence: 1 s
	prefix := redistest.Prefix(t)
	s, err := redisstore.New("redis://"+proxy.Addr()+"/0", redisstore.Options{Prefix: prefix,
		Timeout: timeout, Wait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	catalog := quotafake.NewCatalog()
	catalog.PutMetric("api_calls", nil)
	catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{{Metric: "api_calls", Window: tiers.Minute, Limit: 1000}})
	clock := quotafake.NewClock(time.Date(2026, 12, 6, 12, 0, 30, 0, time.UTC))
	ledger := quotafake.NewLedger()
	engine := quota.New(quota.Options{Catalog: catalog, Counts: ledger, Requests: ledger, Maintenance: ledger, Audits: ledger, Shared: s,
		Clock: clock, StoreTimeout: time.Minute})
	ctx := context.Background()
	check := func() quota.Decision {
		t.Helper()
		d, err := engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 1})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := check(); d.Degraded {
		t.Fatalf("before any fault: %+v", d)
	}
	// 300 ms each way: a round trip of six timeouts, within the silence.
	proxy.Latency(3 * timeout)
	for i := range 3 {
		if d := check(); d.Degraded || !d.Allowed || d.Limits[0].Used != int64(i+2) {
			t.Errorf("check %d through a slow network: %+v, want counted in Redis", i+2, d)
		}
	}
	// What Redis holds, read by another process straight from the server:
	// every check counted there once, none only in this process.
	direct, err := redisstore.New(server.URL(), redisstore.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(direct.Close)
	ledger = quotafake.NewLedger()
	other := quota.New(quota.Options{Catalog: catalog, Counts: ledger, Requests: ledger, Maintenance: ledger, Audits: ledger,
		Shared: direct, Clock: clock, StoreTimeout: time.Minute})
	if _, u, err := other.Usage(ctx, "acme", ""); err != nil || len(u) != 1 || u[0].Used != 4 {
		t.Errorf("usage in Redis after four checks: %+v, %v; want 4 used", u, err)
	}
	proxy.Clear()
	proxy.BlackHole()
	start := time.Now()
	d := check()
	took := time.Since(start)
	if !d.Degraded {
		t.Errorf("Redis silent: %+v, want degraded", d)
	}
	// A bound, not a measure: the silence and a busy machine's slack,
	// well below the minute a call may wait for a Redis that answers.
	if took > 10*time.Second {
		t.Errorf("the check waited %s for a silent Redis", took)
	}
	t.Logf("a silent Redis was given up on after %s", took.Round(time.Millisecond))
}
