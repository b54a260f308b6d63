package lease_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/tiers"
)

// BenchmarkEngineCheckLeased measures a whole decision of a second and a
// day window, the day served from a lease: what a check costs once its
// customer holds a block.
func BenchmarkEngineCheckLeased(b *testing.B) {
	cat := quotafake.NewSameAccount(
		tiers.Metric{Key: "api_calls"},
		tiers.Account{
			Customer: tiers.Customer{Plan: "pro"},
			Plan: tiers.Plan{Key: "pro", Limits: []tiers.Limit{
				{Metric: "api_calls", Window: tiers.Second, Limit: 1 << 40, Mode: tiers.Hard},
				{Metric: "api_calls", Window: tiers.Day, Limit: 1 << 40, Mode: tiers.Hard},
			}},
		},
	)
	clock := quotafake.FixedClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	e := quota.New(quota.Options{Catalog: cat, Counts: quotafake.NopLedger{}, Clock: clock, Leases: lease.NewPool(quotafake.NopLedger{}, clock)})
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
