package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/redistest"
	"github.com/quotad/quotad/internal/tiers"
)

// Two processes on one customer's keys: each decides on what it saw last,
// and a decision the other process overtook is made again on what Redis
// holds. So a check costs one round trip when its process wrote the keys
// last, two when the other did, and every count is exact. A denial writes
// nothing: Redis confirms what it was decided on.
func TestDecidedAgainOnWhatAnotherProcessWrote(t *testing.T) {
	t.Parallel()
	prefix := redistest.Prefix(t)
	a, b := quota.NewShared(open(t, prefix), false), quota.NewShared(open(t, prefix), false)
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	take := func(c *quota.SharedCounters, cost int64) (ok bool, used int64, trips int) {
		t.Helper()
		ch := &quota.Charge{Customer: "acme", Metric: "api_calls", Cost: cost, At: at, Spans: []quota.Span{{
			Key:  quota.CounterKey{Customer: "acme", Metric: "api_calls", Window: tiers.Minute, Start: at.Truncate(time.Minute)},
			End:  at.Truncate(time.Minute).Add(time.Minute),
			Rule: quota.RuleFor(tiers.Limit{Metric: "api_calls", Window: tiers.Minute, Limit: 12}, tiers.Metric{}),
		}}}
		ch.Out = make([]quota.Outcome, 1)
		cs := []quota.Charge{*ch}
		ok, err := c.Take(context.Background(), cs)
		if err != nil {
			t.Fatalf("take %d: %v", cost, err)
		}
		return ok, cs[0].Out[0].Used, cs[0].Trips
	}
	for i, step := range []struct {
		process   *quota.SharedCounters
		cost      int64
		wantOK    bool
		wantUsed  int64
		wantTrips int
	}{
		{a, 3, true, 0, 1}, // a new key: expected absent, and it is
		{b, 4, true, 3, 2}, // b expected none, found a's
		{b, 1, true, 7, 1}, // b wrote last
		{a, 2, true, 8, 2}, // a's mirror says 3, Redis 8
		{a, 2, true, 10, 1},
		{b, 1, false, 12, 1}, // admitted on b's mirror (8), denied on what Redis answered the write it refused
		{b, 1, false, 12, 1}, // confirmed, not written
		{a, 0, true, 12, 1},  // a cost of 0 changes nothing: confirmed
	} {
		ok, used, trips := take(step.process, step.cost)
		if ok != step.wantOK || used != step.wantUsed || trips != step.wantTrips {
			t.Errorf("step %d: admitted %t, used %d before, in %d round trips; want %t, %d in %d",
				i, ok, used, trips, step.wantOK, step.wantUsed, step.wantTrips)
		}
	}
}
