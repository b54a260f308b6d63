package quota_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// TestHardLimitsNeverExceeded: for any sequence of timed checks against
// hard limits, the units admitted in any calendar window (a day, or an
// aligned bucket of a short window) never exceed the limit, and the
// sliding window's weighted count never exceeds it either.
func TestHardLimitsNeverExceeded(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		rapid.Check(t, func(rt *rapid.T) {
			limits := map[tiers.Window]int64{
				tiers.Second: rapid.Int64Range(0, 20).Draw(rt, "per second"),
				tiers.Minute: rapid.Int64Range(0, 200).Draw(rt, "per minute"),
				tiers.Day:    rapid.Int64Range(0, 2000).Draw(rt, "per day"),
			}
			start := time.Date(2026, 11, 22, 23, 58, 0, 0, time.UTC) // crosses midnight
			f := newFixture(t, start, false, leases)
			f.catalog.PutMetric("api_calls", nil)
			f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{
				hard(tiers.Second, limits[tiers.Second]), hard(tiers.Minute, limits[tiers.Minute]), hard(tiers.Day, limits[tiers.Day]),
			})
			admitted := map[string]int64{}
			steps := rapid.IntRange(1, 300).Draw(rt, "steps")
			for i := range steps {
				f.clock.Advance(time.Duration(rapid.Int64Range(0, 1500).Draw(rt, fmt.Sprintf("wait %d", i))) * time.Millisecond)
				cost := rapid.Int64Range(1, 8).Draw(rt, fmt.Sprintf("cost %d", i))
				d, err := f.engine.Check(context.Background(), quota.Request{Customer: "acme", Metric: "api_calls", Cost: cost})
				if err != nil {
					rt.Fatal(err)
				}
				now := f.clock.Now()
				for _, w := range d.Limits {
					if w.Used > limits[w.Window] {
						rt.Fatalf("step %d: %s weighted count %d exceeds the limit %d", i, w.Window, w.Used, limits[w.Window])
					}
				}
				if !d.Allowed {
					continue
				}
				for w, lim := range limits {
					s, _ := quota.Bounds(w, now, tiers.Anchor{})
					key := w.String() + s.String()
					admitted[key] += cost
					if admitted[key] > lim {
						rt.Fatalf("step %d: %d units admitted in the %s from %s, limit %d", i, admitted[key], w, s, lim)
					}
				}
			}
		})
	})
}
