// Package countertest is the contract of quota.Counter written once as a
// test suite, so that every implementation — the in-process sliding
// window, the PostgreSQL ledger, the lease pool, and the test doubles —
// is held to the same behaviour.
package countertest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// Harness is what the suite needs of an implementation.
type Harness struct {
	// New returns a fresh counter in which the customers exist.
	New func(t *testing.T, customers ...string) quota.Counter
	// Windows are two windows the counter counts (short ones, or long).
	Windows [2]tiers.Window
	// At is the moment every charge of the suite happens.
	At time.Time
	// Algorithm is how the spans count (short windows only).
	Algorithm tiers.Algorithm
}

// Run runs the suite against h.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		run  func(t *testing.T, h Harness)
	}{
		{"takes up to the threshold, all or nothing", allOrNothing},
		{"peek counts nothing", peekCountsNothing},
		{"give back never goes below zero", giveBackFloor},
		{"a cost above the threshold never passes", neverPasses},
		{"customers count apart", customersApart},
		{"concurrent takes admit exactly the threshold", concurrentExact},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, h)
		})
	}
}

// charge returns a charge of customer's metric with one hard span per
// threshold, on h's windows in order.
func charge(h Harness, customer string, cost int64, thresholds ...int64) *quota.Charge {
	c := &quota.Charge{Customer: customer, Metric: "api_calls", Cost: cost, At: h.At}
	for i, th := range thresholds {
		w := h.Windows[i]
		start, end := quota.Bounds(w, h.At, tiers.Anchor{})
		c.Spans = append(c.Spans, quota.Span{
			Key: quota.CounterKey{Customer: customer, Metric: "api_calls", Window: w, Start: start},
			End: end,
			Rule: quota.Rule{Mode: tiers.Hard, Limit: th, Size: th, Threshold: th, Ceiling: tiers.MaxLimit,
				Algorithm: h.Algorithm},
		})
	}
	return c
}

func take(t *testing.T, c quota.Counter, ch *quota.Charge) (bool, []quota.Outcome) {
	t.Helper()
	out := make([]quota.Outcome, len(ch.Spans))
	ok, err := c.Take(context.Background(), ch, out)
	if err != nil {
		t.Fatalf("take: %v", err)
	}
	return ok, out
}

func peek(t *testing.T, c quota.Counter, ch *quota.Charge) []quota.Outcome {
	t.Helper()
	out := make([]quota.Outcome, len(ch.Spans))
	if err := c.Peek(context.Background(), ch, out); err != nil {
		t.Fatalf("peek: %v", err)
	}
	return out
}

func allOrNothing(t *testing.T, h Harness) {
	c := h.New(t, "acme")
	for i, want := range []struct {
		ok       bool
		usedA    int64
		usedB    int64
		passedB  bool
		endUsedA int64
	}{
		{ok: true, usedA: 0, usedB: 0, passedB: true, endUsedA: 3},
		// The second window (threshold 5) denies 3 + 3: the first, which
		// admits it, counts nothing either.
		{ok: false, usedA: 3, usedB: 3, passedB: false, endUsedA: 3},
	} {
		ok, out := take(t, c, charge(h, "acme", 3, 10, 5))
		if ok != want.ok || out[0].Used != want.usedA || out[1].Used != want.usedB ||
			!out[0].Passed || out[1].Passed != want.passedB {
			t.Fatalf("take %d: %v %+v, want %v with used %d and %d", i, ok, out, want.ok, want.usedA, want.usedB)
		}
		if !want.ok && out[1].Wait == 0 {
			t.Errorf("take %d: the denying window reports no wait: %+v", i, out[1])
		}
		if got := peek(t, c, charge(h, "acme", 1, 10, 5)); got[0].Used != want.endUsedA {
			t.Errorf("after take %d: first window counts %d, want %d", i, got[0].Used, want.endUsedA)
		}
	}
	if ok, out := take(t, c, charge(h, "acme", 2, 10, 5)); !ok || out[1].Used != 3 {
		t.Errorf("a take that fits both: %v %+v", ok, out)
	}
}

func peekCountsNothing(t *testing.T, h Harness) {
	c := h.New(t, "acme")
	if ok, _ := take(t, c, charge(h, "acme", 4, 10)); !ok {
		t.Fatal("denied")
	}
	for range 3 {
		out := peek(t, c, charge(h, "acme", 6, 10))
		if out[0].Used != 4 || !out[0].Passed {
			t.Fatalf("peek of 6 at 4 of 10: %+v, want passed at 4", out[0])
		}
	}
	if out := peek(t, c, charge(h, "acme", 7, 10)); out[0].Passed || out[0].Used != 4 {
		t.Errorf("peek of 7 at 4 of 10: %+v, want denied", out[0])
	}
}

func giveBackFloor(t *testing.T, h Harness) {
	c := h.New(t, "acme")
	if ok, _ := take(t, c, charge(h, "acme", 6, 10)); !ok {
		t.Fatal("denied")
	}
	for i, want := range []struct{ before, after int64 }{{6, 4}, {4, 0}, {0, 0}} {
		cost := int64(2)
		if i > 0 {
			cost = 100
		}
		out := make([]quota.Outcome, 1)
		if err := c.GiveBack(context.Background(), charge(h, "acme", cost, 10), out); err != nil {
			t.Fatal(err)
		}
		if out[0].Used != want.before {
			t.Errorf("give back %d: count before %d, want %d", i, out[0].Used, want.before)
		}
		if got := peek(t, c, charge(h, "acme", 1, 10))[0].Used; got != want.after {
			t.Errorf("give back %d: count after %d, want %d", i, got, want.after)
		}
	}
}

func neverPasses(t *testing.T, h Harness) {
	c := h.New(t, "acme")
	ok, out := take(t, c, charge(h, "acme", 6, 5))
	if ok || out[0].Passed || out[0].Wait != -1 {
		t.Errorf("cost 6 at a threshold of 5: %v %+v, want denied with wait -1 (never)", ok, out)
	}
	ok, out = take(t, c, charge(h, "acme", 1, 0))
	if ok || out[0].Wait != -1 {
		t.Errorf("a threshold of 0: %v %+v, want denied with wait -1 (never)", ok, out)
	}
}

func customersApart(t *testing.T, h Harness) {
	c := h.New(t, "a", "b")
	if ok, _ := take(t, c, charge(h, "a", 5, 5)); !ok {
		t.Fatal("a denied")
	}
	if ok, out := take(t, c, charge(h, "b", 5, 5)); !ok || out[0].Used != 0 {
		t.Errorf("b after a filled its own window: %v %+v", ok, out)
	}
}

func concurrentExact(t *testing.T, h Harness) {
	const workers, each, threshold = 64, 10, 250
	c := h.New(t, "acme")
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				out := make([]quota.Outcome, 1)
				ok, err := c.Take(context.Background(), charge(h, "acme", 1, threshold), out)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != threshold {
		t.Errorf("%d takes of 1 at a threshold of %d admitted %d", workers*each, threshold, got)
	}
}

// Long returns the long windows the suite uses for stores of calendar
// counters, and a moment inside them.
func Long() ([2]tiers.Window, time.Time) {
	return [2]tiers.Window{tiers.Day, tiers.Month}, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
}

// Short returns the short windows the suite uses for in-process counters,
// and a moment inside them.
func Short() ([2]tiers.Window, time.Time) {
	return [2]tiers.Window{tiers.Second, tiers.Minute}, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
}
