package webhooks_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/tiers"
	"github.com/quotad/quotad/internal/webhooks"
)

// BenchmarkCheckWatched measures a whole check of a second and a day
// window (the day leased), as quota's BenchmarkEngineCheckLeased does:
// without a detector, with one while no webhook is registered, with one
// whose thresholds the windows have not reached, and with one for windows
// past a threshold already noticed (every check looks its window's mark
// up; compare with "none, past the limit", the same checks unwatched: most
// are denied). 10,000 customers in turn.
func BenchmarkCheckWatched(b *testing.B) {
	cases := []struct {
		name    string
		watcher bool
		watch   webhooks.Watch
		limit   int64
	}{
		{"none", false, webhooks.Watch{}, 1 << 40},
		{"no webhooks", true, webhooks.Watch{}, 1 << 40},
		{"below thresholds", true, everything, 1 << 40},
		{"none, past the limit", false, webhooks.Watch{}, 1},
		{"past a threshold", true, webhooks.Watch{Types: map[webhooks.EventType]bool{webhooks.Threshold: true}, Thresholds: []int{1}}, 1},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			cat := quotafake.NewSameAccount(
				tiers.Metric{Key: "api_calls"},
				tiers.Account{
					Customer: tiers.Customer{Plan: "pro"},
					Plan: tiers.Plan{Key: "pro", Limits: []tiers.Limit{
						{Metric: "api_calls", Window: tiers.Second, Limit: 1 << 40, Mode: tiers.Hard},
						{Metric: "api_calls", Window: tiers.Day, Limit: c.limit, Mode: tiers.Soft, OveragePercent: 1000},
					}},
				},
			)
			o := quota.Options{Catalog: cat, Counts: quotafake.NopLedger{}, Clock: quotafake.FixedClock(t0), Leases: lease.NewPool(quotafake.NopLedger{}, quotafake.FixedClock(t0))}
			if c.watcher {
				d := webhooks.NewDetector(newMemEvents(c.watch))
				d.SetWatch(c.watch)
				o.Watcher = d
			}
			e := quota.New(o)
			ids := make([]string, 10_000)
			for i := range ids {
				ids[i] = "c" + strconv.Itoa(i)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				// The soft day window of limit 1 allows 11 units a day: the
				// clock stays, so each customer is checked at most 11 times
				// per 10,000 × 11 iterations; past that, checks are denied
				// and still observed.
				if _, err := e.Check(ctx, quota.Request{Customer: ids[i%len(ids)], Metric: "api_calls", Cost: 1}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
