package quota_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// algoStart is a moment on a whole minute, so that second and minute
// buckets start there; steps give their time as milliseconds after it.
var algoStart = time.Date(2026, 11, 10, 10, 30, 0, 0, time.UTC)

// algoStep is one check at ms after algoStart and what it must answer for
// its single window.
type algoStep struct {
	ms      int64
	cost    int64
	allowed bool
	used    int64 // after the check when allowed, before it when denied
	remain  int64
	retry   int64 // denied steps: retry_after in seconds, or never
	resetMs int64 // reset_at, ms after algoStart
}

func limitOf(alg tiers.Algorithm, w tiers.Window, limit int64, burst *int64) tiers.Limit {
	return tiers.Limit{Metric: "api_calls", Window: w, Limit: limit, Mode: tiers.Hard, Algorithm: alg, Burst: burst}
}

// Each algorithm over a manual clock, the arithmetic in the comments. T is
// the window's length in milliseconds.
func TestAlgorithmsTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		limit tiers.Limit
		steps []algoStep
	}{
		{"fixed window admits twice the limit across a boundary",
			limitOf(tiers.FixedWindow, tiers.Second, 10, nil), []algoStep{
				// Bucket [0, 1000) takes 10, the limit.
				{ms: 999, cost: 10, allowed: true, used: 10, remain: 0, resetMs: 1000},
				{ms: 999, cost: 1, used: 10, remain: 0, retry: 1, resetMs: 1000},
				// 1 ms later the bucket [1000, 2000) starts from zero: 20 units
				// within 2 ms.
				{ms: 1000, cost: 10, allowed: true, used: 10, remain: 0, resetMs: 2000},
				// Denied until 2000: 1000 ms, 1 s.
				{ms: 1000, cost: 1, used: 10, remain: 0, retry: 1, resetMs: 2000},
				{ms: 1500, cost: 11, used: 10, retry: never, resetMs: 2000},
			}},
		{"sliding log never admits more than the limit in any window",
			limitOf(tiers.SlidingLog, tiers.Second, 10, nil), []algoStep{
				{ms: 999, cost: 10, allowed: true, used: 10, remain: 0, resetMs: 1999},
				// At 1000 the 10 units of 999 are still within (0, 1000].
				// They leave at 999 + 1000 = 1999: 999 ms, 1 s.
				{ms: 1000, cost: 1, used: 10, remain: 0, retry: 1, resetMs: 1999},
				{ms: 1998, cost: 1, used: 10, remain: 0, retry: 1, resetMs: 1999},
				{ms: 1999, cost: 4, allowed: true, used: 4, remain: 6, resetMs: 2999},
				{ms: 2500, cost: 6, allowed: true, used: 10, remain: 0, resetMs: 3500},
				// 4 units leave at 2999 and 6 at 3500. A cost of 5 needs 5
				// free: at 2999 only 4 are, at 3500 all 10.
				{ms: 2600, cost: 5, used: 10, remain: 0, retry: 1, resetMs: 3500},
				{ms: 2999, cost: 5, used: 6, remain: 4, retry: 1, resetMs: 3500},
				{ms: 3500, cost: 5, allowed: true, used: 5, remain: 5, resetMs: 4500},
			}},
		{"sliding log retry_after to the second on a minute",
			limitOf(tiers.SlidingLog, tiers.Minute, 5, nil), []algoStep{
				{ms: 0, cost: 5, allowed: true, used: 5, remain: 0, resetMs: 60_000},
				// The units leave at 60,000: 30,000 ms is 30 s exactly...
				{ms: 30_000, cost: 1, used: 5, retry: 30, resetMs: 60_000},
				// ...and 29,999 ms rounds up to 30 s.
				{ms: 30_001, cost: 1, used: 5, retry: 30, resetMs: 60_000},
				{ms: 59_001, cost: 1, used: 5, retry: 1, resetMs: 60_000},
				{ms: 60_000, cost: 5, allowed: true, used: 5, resetMs: 120_000},
			}},
		{"sliding window weighs the previous bucket",
			limitOf(tiers.SlidingWindow, tiers.Second, 10, nil), []algoStep{
				{ms: 999, cost: 10, allowed: true, used: 10, remain: 0, resetMs: 1000},
				// At 1000, e = 0: floor(10 * 1000/1000) + 0 = 10. It admits 1
				// once floor(10*(1000-e)/1000) <= 9, e >= 100: at 1100.
				{ms: 1000, cost: 1, used: 10, retry: 1, resetMs: 2000},
				{ms: 1100, cost: 1, allowed: true, used: 10, remain: 0, resetMs: 2000},
				// At 1500: floor(10 * 500/1000) + 1 = 6.
				{ms: 1500, cost: 4, allowed: true, used: 10, remain: 0, resetMs: 2000},
			}},
		{"token bucket spends its burst, then refills at the limit's rate",
			limitOf(tiers.TokenBucket, tiers.Second, 10, ptr(int64(20))), []algoStep{
				// A full bucket of 20: debt 20*1000, paid off at 10 a ms...
				// that is 20,000/10 = 2000 ms.
				{ms: 0, cost: 20, allowed: true, used: 20, remain: 0, resetMs: 2000},
				// One token takes 1000/10 = 100 ms to come back.
				{ms: 0, cost: 1, used: 20, retry: 1, resetMs: 2000},
				{ms: 99, cost: 1, used: 20, retry: 1, resetMs: 2000},
				// At 100 the debt is 19,000: 19 tokens used, 1 left.
				{ms: 100, cost: 1, allowed: true, used: 20, remain: 0, resetMs: 2100},
				// 500 ms later 5 tokens came back (debt 15,000).
				{ms: 600, cost: 5, allowed: true, used: 20, remain: 0, resetMs: 2600},
				// A cost above the burst never passes.
				{ms: 600, cost: 21, used: 20, retry: never, resetMs: 2600},
				// Empty bucket, refilled: 20 tokens again after 2000 ms.
				{ms: 2600, cost: 20, allowed: true, used: 20, resetMs: 4600},
			}},
		{"token bucket refills exactly when the rate does not divide T",
			limitOf(tiers.TokenBucket, tiers.Second, 3, nil), []algoStep{
				// Burst defaults to the limit, 3: debt 3000 at 3 a ms, paid
				// off at 1000.
				{ms: 0, cost: 3, allowed: true, used: 3, remain: 0, resetMs: 1000},
				// At 333 the debt is 3000 - 999 = 2001: ceil(2001/1000) = 3
				// used. One token needs a debt of 2000: ceil(1000/3) = 334 ms.
				{ms: 333, cost: 1, used: 3, retry: 1, resetMs: 1000},
				// The debt is then 1998 + 1000 = 2998, paid off at
				// 334 + ceil(2998/3) = 334 + 1000 = 1334.
				{ms: 334, cost: 1, allowed: true, used: 3, remain: 0, resetMs: 1334},
				{ms: 1334, cost: 3, allowed: true, used: 3, resetMs: 2334},
			}},
		{"token bucket of a minute: retry_after to the second",
			limitOf(tiers.TokenBucket, tiers.Minute, 60, ptr(int64(1))), []algoStep{
				// A burst of 1, one token a second (60 per 60,000 ms).
				{ms: 0, cost: 1, allowed: true, used: 1, remain: 0, resetMs: 1000},
				{ms: 1, cost: 1, used: 1, retry: 1, resetMs: 1000},
				{ms: 1000, cost: 1, allowed: true, used: 1, remain: 0, resetMs: 2000},
				{ms: 1000, cost: 2, used: 1, retry: never, resetMs: 2000},
			}},
		{"limit 0 never passes, whatever the algorithm",
			limitOf(tiers.TokenBucket, tiers.Second, 0, nil), []algoStep{
				{ms: 0, cost: 1, used: 0, retry: never, resetMs: 0},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, algoStart, false, false)
			f.catalog.PutMetric("api_calls", nil)
			f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{tt.limit})
			for i, s := range tt.steps {
				f.clock.Set(algoStart.Add(time.Duration(s.ms) * time.Millisecond))
				d, err := f.engine.Check(context.Background(), quota.Request{Customer: "acme", Metric: "api_calls", Cost: s.cost})
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if len(d.Limits) != 1 {
					t.Fatalf("step %d: %d windows", i, len(d.Limits))
				}
				w := d.Limits[0]
				retry := d.RetryAfter
				if d.Never {
					retry = never
				}
				reset := w.ResetAt.Sub(algoStart).Milliseconds()
				if d.Allowed != s.allowed || w.Used != s.used || w.Remaining != s.remain || retry != s.retry || reset != s.resetMs {
					t.Errorf("step %d at %d ms, cost %d: allowed %v used %d remaining %d retry %d reset %d ms; "+
						"want %v %d %d %d %d", i, s.ms, s.cost, d.Allowed, w.Used, w.Remaining, retry, reset,
						s.allowed, s.used, s.remain, s.retry, s.resetMs)
				}
			}
		})
	}
}

// Every algorithm takes part in what a check is beyond its own count: all
// or nothing with a long window, dry runs, refunds, resets, a second
// window of another algorithm, spare capacity, soft overage, and a change
// of algorithm that keeps the count.
func TestAlgorithmsInEveryOperation(t *testing.T) {
	t.Parallel()
	for _, alg := range tiers.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			eachMode(t, func(t *testing.T, leases bool) {
				ctx := context.Background()
				f := newFixture(t, algoStart, false, leases)
				f.catalog.PutMetric("api_calls", map[tiers.Window]int64{tiers.Second: 12})
				second := limitOf(alg, tiers.Second, 10, nil)
				minute := limitOf(tiers.SlidingWindow, tiers.Minute, 100, nil)
				if alg != tiers.SlidingWindow {
					minute.Algorithm = tiers.FixedWindow
				}
				f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{second, minute, hard(tiers.Day, 6)})
				check := func(cost int64, dry bool) quota.Decision {
					t.Helper()
					d, err := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: cost, DryRun: dry})
					if err != nil {
						t.Fatal(err)
					}
					return d
				}
				usedAll := func(want ...int64) {
					t.Helper()
					for i, w := range []tiers.Window{tiers.Second, tiers.Minute, tiers.Day} {
						if got := f.used(t, "acme", w); got != want[i] {
							t.Errorf("%s used %d, want %d", w, got, want[i])
						}
					}
				}
				if d := check(4, true); !d.Allowed || d.Limits[0].Used != 4 {
					t.Errorf("dry run: %+v, want allowed with used 4", d)
				}
				usedAll(0, 0, 0)
				if !check(5, false).Allowed {
					t.Fatal("cost 5 denied")
				}
				// The day (6) denies 2 more; the short windows give theirs back.
				if d := check(2, false); d.Allowed || d.Limits[2].State != quota.StateExceeded {
					t.Errorf("cost 2 past the day's limit: %+v, want denied by the day", d.Limits)
				}
				usedAll(5, 5, 5)
				if _, err := f.engine.Refund(ctx, quota.RefundRequest{Customer: "acme", Metric: "api_calls", Cost: 3}); err != nil {
					t.Fatal(err)
				}
				usedAll(2, 2, 2)
				if err := f.engine.Reset(ctx, "ops", "acme", "api_calls"); err != nil {
					t.Fatal(err)
				}
				usedAll(0, 0, 0)

				// An elastic second window of the algorithm borrows the
				// metric's spare capacity beyond its limit of 2: 12 a second,
				// of which acme's 2 are taken (a reset leaves global usage).
				el := limitOf(alg, tiers.Second, 2, nil)
				el.Mode = tiers.Elastic
				f.catalog.PutCustomer("el", tiers.Anchor{}, []tiers.Limit{el})
				d, err := f.engine.Check(ctx, quota.Request{Customer: "el", Metric: "api_calls", Cost: 10})
				if err != nil || !d.Allowed || !d.Elastic || d.Limits[0].State != quota.StateElastic {
					t.Errorf("elastic cost 10 within capacity: %+v %v, want allowed on spare capacity", d, err)
				}
				if d, _ := f.engine.Check(ctx, quota.Request{Customer: "el", Metric: "api_calls", Cost: 1}); d.Allowed {
					t.Errorf("elastic cost 1 with the capacity spent: allowed, want denied")
				}

				// A soft second window of the algorithm admits 50 % more and
				// reports the units above the limit as overage.
				sw := limitOf(alg, tiers.Second, 4, nil)
				sw.Mode, sw.OveragePercent = tiers.Soft, 50
				f.catalog.PutCustomer("soft", tiers.Anchor{}, []tiers.Limit{sw})
				d, _ = f.engine.Check(ctx, quota.Request{Customer: "soft", Metric: "api_calls", Cost: 6})
				if !d.Allowed || !d.Overage || d.Limits[0].State != quota.StateOverage || d.Limits[0].Used != 6 {
					t.Errorf("soft cost 6 of 4 +50 %%: %+v, want allowed with overage", d)
				}

				// Switching the second window to another algorithm keeps the
				// count: 5 used stay 5.
				f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{second})
				check(5, false)
				for _, next := range tiers.Algorithms {
					f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{limitOf(next, tiers.Second, 10, nil)})
					if got := f.used(t, "acme", tiers.Second); got != 5 {
						t.Errorf("after switching to %s: used %d, want 5", next, got)
					}
				}
			})
		})
	}
}

// Keys of every algorithm are dropped once they count nothing, and not
// before: a fixed window's at its bucket's end, a log's when its newest
// units leave, a token bucket's when it is full again (a burst of 20 at
// 10 a second: 2 s after the last take).
func TestAlgorithmsEvictIdleKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		limit      tiers.Limit
		kept, gone time.Duration // after the check at algoStart + 500 ms
	}{
		{limitOf(tiers.SlidingWindow, tiers.Second, 20, nil), 1499 * time.Millisecond, 1500 * time.Millisecond},
		{limitOf(tiers.FixedWindow, tiers.Second, 20, nil), 499 * time.Millisecond, 500 * time.Millisecond},
		{limitOf(tiers.SlidingLog, tiers.Second, 20, nil), 999 * time.Millisecond, time.Second},
		{limitOf(tiers.TokenBucket, tiers.Second, 10, ptr(int64(20))), 1999 * time.Millisecond, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.limit.Algorithm.String(), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, algoStart.Add(500*time.Millisecond), false, false)
			f.catalog.PutMetric("api_calls", nil)
			for i := range 30 {
				id := fmt.Sprintf("c%d", i)
				f.catalog.PutCustomer(id, tiers.Anchor{}, []tiers.Limit{tt.limit})
				if d, err := f.engine.Check(context.Background(), quota.Request{Customer: id, Metric: "api_calls", Cost: 20}); err != nil || !d.Allowed {
					t.Fatalf("check: %+v %v", d, err)
				}
			}
			start := f.clock.Now()
			f.clock.Set(start.Add(tt.kept))
			if n := f.engine.EvictIdle(); n != 0 {
				t.Errorf("evicted %d keys %v after their check, want none: they still count", n, tt.kept)
			}
			f.clock.Set(start.Add(tt.gone))
			if n := f.engine.EvictIdle(); n != 30 || f.engine.Stats().ShortKeys != 0 {
				t.Errorf("evicted %d keys %v after their check, %d left; want all 30", n, tt.gone, f.engine.Stats().ShortKeys)
			}
			// Evicted keys start afresh, and their storage is used again.
			for i := range 30 {
				d, _ := f.engine.Check(context.Background(), quota.Request{Customer: fmt.Sprintf("c%d", i), Metric: "api_calls", Cost: 20})
				if !d.Allowed || d.Limits[0].Used != 20 {
					t.Fatalf("check after eviction: %+v", d)
				}
			}
		})
	}
}
