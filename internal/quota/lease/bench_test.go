package lease_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/tiers"
)

// nopLedger is a ledger that grants every lease in full and does nothing
// else: for measuring the lease pool's own cost.
type nopLedger struct{ quota.Counts }

func (nopLedger) Lease(_ context.Context, rs []lease.Request) error {
	for i := range rs {
		r := &rs[i]
		r.Granted, r.Used = r.Need+r.Extra, r.Need+r.Extra
	}
	return nil
}

func (nopLedger) Settle(context.Context, []lease.Settlement) error      { return nil }
func (nopLedger) Report(context.Context, []lease.Settlement) error      { return nil }
func (nopLedger) Resolve(context.Context, []lease.Resolution) error     { return nil }
func (nopLedger) Recall(context.Context, quota.CounterKey) (int, error) { return 0, nil }
func (nopLedger) Alone(context.Context) (bool, error)                   { return true, nil }

// benchCatalog holds one metric and one plan, for any customer id.
type benchCatalog struct {
	metric tiers.Metric
	acct   tiers.Account
}

func (*benchCatalog) PublicPlans(context.Context) ([]tiers.Plan, error) { return nil, nil }

func (c *benchCatalog) Metric(context.Context, string) (tiers.Metric, error) { return c.metric, nil }
func (c *benchCatalog) Account(_ context.Context, id string) (tiers.Account, error) {
	a := c.acct
	a.Customer.ID = id
	return a, nil
}

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// BenchmarkEngineCheckLeased measures a whole decision of a second and a
// day window, the day served from a lease: what a check costs once its
// customer holds a block.
func BenchmarkEngineCheckLeased(b *testing.B) {
	cat := &benchCatalog{
		metric: tiers.Metric{Key: "api_calls"},
		acct: tiers.Account{
			Customer: tiers.Customer{Plan: "pro"},
			Plan: tiers.Plan{Key: "pro", Limits: []tiers.Limit{
				{Metric: "api_calls", Window: tiers.Second, Limit: 1 << 40, Mode: tiers.Hard},
				{Metric: "api_calls", Window: tiers.Day, Limit: 1 << 40, Mode: tiers.Hard},
			}},
		},
	}
	clock := fixedClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	e := quota.New(quota.Options{Catalog: cat, Counts: nopLedger{}, Clock: clock, Leases: lease.NewPool(nopLedger{}, clock)})
	ids := make([]string, 10_000)
	for i := range ids {
		ids[i] = "c" + strconv.Itoa(i)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		d, err := e.Check(ctx, quota.Request{Customer: ids[i%len(ids)], Metric: "api_calls", Cost: 1})
		if err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
	}
}
