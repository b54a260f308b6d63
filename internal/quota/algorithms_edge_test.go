package quota_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// Token buckets at the edges of their arithmetic: a burst far above the
// rate is spent exactly, and a payoff centuries away is reported as the
// latest time an answer can carry, not one JSON cannot encode.
func TestTokenBucketEdges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("a burst of 10^14 at one token a minute", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, algoStart, false, false)
		f.catalog.PutMetric("api_calls", nil)
		f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{limitOf(tiers.TokenBucket, tiers.Minute, 1, ptr(int64(1e14)))})
		// All in one millisecond, nothing refills: 10^14 / 10^9 = 100,000
		// checks pass, no more. The debt is paid off 6*10^18 ms later.
		allowed := 0
		for range 100_010 {
			d, err := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: quota.MaxCost})
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				allowed++
			}
		}
		if allowed != 100_000 {
			t.Errorf("admitted %d checks of 10^9 from a bucket of 10^14, want 100000", allowed)
		}
	})
	t.Run("a payoff past year 9999", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, algoStart, false, false)
		f.catalog.PutMetric("api_calls", nil)
		f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{
			limitOf(tiers.TokenBucket, tiers.Minute, 1, ptr(int64(5e9))), hard(tiers.Day, 1e15)})
		var d quota.Decision
		for range 5 { // 5*10^9 tokens at one a minute: paid off in 9,500 years
			d, _ = f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: quota.MaxCost})
		}
		last := time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC)
		if !d.Allowed || !d.Limits[0].ResetAt.Equal(last) {
			t.Errorf("reset_at %v (allowed %v), want %v", d.Limits[0].ResetAt, d.Allowed, last)
		}
		// The answer is kept under a request id: it must encode.
		f.clock.Advance(time.Hour)
		if _, err := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 1, RequestID: "r1"}); err != nil {
			t.Errorf("check with a request id: %v", err)
		}
	})
	t.Run("limit 0 never refills", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, algoStart, false, false)
		f.catalog.PutMetric("api_calls", nil)
		f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{limitOf(tiers.TokenBucket, tiers.Second, 0, ptr(int64(5)))})
		f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 1})
		f.clock.Advance(time.Hour)
		d, _ := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 1})
		if never := time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC); d.Limits[0].Used != 2 || !d.Limits[0].ResetAt.Equal(never) {
			t.Errorf("an hour later: used %d, reset_at %v; want 2 and %v (never)", d.Limits[0].Used, d.Limits[0].ResetAt, never)
		}
	})
}

// reset_at answers when the count is back to zero as the answer reports
// the count: a dry run as the check it previews (with its units), a check
// a long window denied without them (they were given back), as usage then
// says.
func TestResetAtFollowsTheReportedCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, alg := range []tiers.Algorithm{tiers.SlidingLog, tiers.TokenBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, algoStart, false, false)
			f.catalog.PutMetric("api_calls", nil)
			f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{limitOf(alg, tiers.Second, 10, nil)})
			dry, _ := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 5, DryRun: true})
			real, _ := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 5})
			if dry.Limits[0].Used != real.Limits[0].Used || !dry.Limits[0].ResetAt.Equal(real.Limits[0].ResetAt) ||
				!real.Limits[0].ResetAt.After(algoStart) {
				t.Errorf("dry run: used %d, reset_at %v; the check it previews: used %d, reset_at %v",
					dry.Limits[0].Used, dry.Limits[0].ResetAt, real.Limits[0].Used, real.Limits[0].ResetAt)
			}

			f.catalog.PutCustomer("dayless", tiers.Anchor{}, []tiers.Limit{limitOf(alg, tiers.Second, 10, nil), hard(tiers.Day, 0)})
			d, _ := f.engine.Check(ctx, quota.Request{Customer: "dayless", Metric: "api_calls", Cost: 5})
			_, usage, _ := f.engine.Usage(ctx, "dayless", "")
			if d.Allowed || !d.Limits[0].ResetAt.Equal(algoStart) || !usage[0].ResetAt.Equal(algoStart) {
				t.Errorf("denied by the day: reset_at %v, usage's %v; want both now, nothing counted",
					d.Limits[0].ResetAt, usage[0].ResetAt)
			}
		})
	}
}
