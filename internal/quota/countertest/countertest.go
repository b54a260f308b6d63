// Package countertest is the contract of quota.Counter written once as a
// test suite, so that every implementation — the in-process sliding
// window, the shared (Redis) counter, the fail-over between them, the
// PostgreSQL ledger, the lease pool, and the test doubles — is held to the
// same behaviour.
//
// Every expected value of the suite comes from the limits a case sets and
// from the definition of each algorithm (see the comments of quota's
// algorithms.go and sliding.go), worked out by hand in the case: none is
// copied from an implementation's answer.
package countertest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// Harness is what the suite needs of an implementation.
type Harness struct {
	// New returns a fresh counter, sharing no state with any other, in
	// which the customers exist, and the metrics the suite charges (see
	// Metrics).
	New func(t *testing.T, customers ...string) quota.Counter
	// Windows are two windows the counter counts (short ones, or long).
	Windows [2]tiers.Window
	// At is when the suite's charges happen; with ShortWindows, the start
	// of a bucket of both windows, from which cases move on.
	At time.Time
	// ShortWindows says the counter keeps short windows, counting by every
	// tiers.Algorithm, and decides each charge at its At, so that counts
	// fall as At moves on. The suite then runs every case once per
	// algorithm, moving At within and across windows: exact waits, counts
	// that fall, resets, undone takes, refunds across buckets.
	// Long-window counters (the ledger, the lease pool) leave it false:
	// their charges all happen at At, their waits and resets are their
	// windows' ends, and the cases that need short windows are skipped.
	ShortWindows bool
	// HoldsInGlobals says the counter counts in a metric's global windows,
	// besides the units it admitted, units it holds for checks to come:
	// the lease pool, whose lease counts its whole grant there (the cost
	// and a block of max(1, 1% of the limit)) until it is settled. Its
	// global usage, and so the spare capacity elastic windows borrow,
	// differ from the other counters' then: the cases that count global
	// usage exactly are skipped, and one checks the bounds it keeps.
	HoldsInGlobals bool
	// Subjects says the counter names a subject's counters apart from its
	// customer's (Charge.Subject, and the Subject of its spans' keys): the
	// cases of sets then charge a customer and one of its subjects
	// together. Without it they leave subjects out.
	Subjects bool
}

// Metrics returns the metrics the suite charges: api_calls, and two more
// that sets of charges count in besides it (an item of another metric,
// and a credit pool).
func Metrics() []string { return []string{calls.name(), exports.name(), credits.name()} }

// suite is a harness with the algorithm a run of the cases counts short
// windows by (long windows: the zero value, which they ignore).
type suite struct {
	Harness
	alg tiers.Algorithm
}

// testCase is one case of the contract.
type testCase struct {
	name string
	run  func(t *testing.T, s suite)
	// short: the case moves the clock, or undoes takes (ShortWindows only).
	short bool
	// exactGlobals: the case counts global usage exactly (not for
	// HoldsInGlobals); heldGlobals: it checks the bounds of a counter
	// that holds units there (HoldsInGlobals only).
	exactGlobals, heldGlobals bool
}

func cases() []testCase {
	return []testCase{
		{name: "takes up to the threshold, all or nothing", run: allOrNothing},
		{name: "peek counts nothing", run: peekCountsNothing},
		{name: "give back never goes below zero", run: giveBackFloor},
		{name: "a cost above the threshold never passes", run: neverPasses},
		{name: "customers count apart", run: customersApart},
		{name: "concurrent takes admit exactly the threshold", run: concurrentExact},
		{name: "a soft limit admits overage up to its threshold", run: softOverage},
		{name: "an elastic window borrows spare capacity up to the capacity", run: elasticCapacity, exactGlobals: true},
		{name: "an elastic window borrows no further than its ceiling", run: elasticCeiling},
		{name: "global windows count every customer's admitted units", run: globalsCount, exactGlobals: true},
		{name: "global windows count the admitted units and what is held", run: globalsHeld, heldGlobals: true},
		{name: "a refund gives the global windows back their share", run: refundGlobals, exactGlobals: true},
		{name: "a denied window reports its exact wait", run: exactWaits},
		{name: "outcomes report the count and the resets", run: usedAndResets},
		{name: "counts fall as the algorithm says", run: countsFall, short: true},
		{name: "an undone take gives back its own units", run: undoTake, short: true},
		{name: "a refund gives back from now first", run: refundsOverTime, short: true},
		{name: "concurrent takes undone give back all their units", run: concurrentUndo, short: true},
		{name: "a set is admitted only when every charge admits, and a denied one counts nothing", run: setAllOrNothing},
		{name: "concurrent sets are all or nothing, within every limit", run: concurrentSets},
		{name: "concurrent sets undone give back all their units", run: concurrentSetUndo},
		{name: "a set counts once in each global window of its metrics", run: setGlobals},
	}
}

// Run runs the suite against h: with ShortWindows, once per algorithm.
func Run(t *testing.T, h Harness) {
	for _, w := range h.Windows {
		if w.Short() != h.ShortWindows {
			t.Fatalf("harness: window %s with ShortWindows %v", w, h.ShortWindows)
		}
		if start, _ := quota.Bounds(w, h.At, tiers.Anchor{}); h.ShortWindows && !start.Equal(h.At) {
			t.Fatalf("harness: At %s does not start a bucket of window %s", h.At, w)
		}
	}
	if !h.ShortWindows {
		runCases(t, suite{Harness: h})
		return
	}
	for _, alg := range tiers.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			runCases(t, suite{Harness: h, alg: alg})
		})
	}
}

func runCases(t *testing.T, s suite) {
	for _, tc := range cases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			switch {
			case tc.short && !s.ShortWindows:
				t.Skip("long windows: the case needs short ones (Harness.ShortWindows)")
			case tc.exactGlobals && s.HoldsInGlobals:
				t.Skip("global windows count units held besides those admitted (Harness.HoldsInGlobals)")
			case tc.heldGlobals && !s.HoldsInGlobals:
				t.Skip("global windows count admitted units alone: see the exact cases")
			}
			tc.run(t, s)
		})
	}
}

// lim is the limit of one window of a charge: a Rule, as quota.RuleFor
// would resolve it, set out by hand.
type lim struct {
	absent    bool // no limit in this window
	mode      tiers.Mode
	limit     int64 // a token bucket's rate: units refilled per window
	size      int64 // what the count is measured against: the limit, or a token bucket's burst
	threshold int64 // how far the count goes: the size, or a soft limit's allowance
	ceiling   int64 // elastic: how far spare capacity takes the count
}

// none is no limit in a window.
var none = lim{absent: true}

func hard(n int64) lim {
	return lim{mode: tiers.Hard, limit: n, size: n, threshold: n, ceiling: tiers.MaxLimit}
}

// soft is a soft limit of n that admits up to threshold (n and its
// overage percentage).
func soft(n, threshold int64) lim {
	return lim{mode: tiers.Soft, limit: n, size: n, threshold: threshold, ceiling: tiers.MaxLimit}
}

// elastic is an elastic limit of n, which borrows the metric's spare
// capacity, where it declares one, up to ceiling.
func elastic(n, ceiling int64) lim {
	return lim{mode: tiers.Elastic, limit: n, size: n, threshold: n, ceiling: ceiling}
}

// metric is a metric as a case declares it: its key (api_calls when
// empty) and its capacity in each window of the harness (0: none
// declared). Every charge of a metric with capacity counts in its global
// windows.
type metric struct {
	key      string
	capacity [2]int64
}

// plain is api_calls without capacity.
var plain metric

// The metrics of sets of charges, without capacity: api_calls, an item of
// another metric, a credit pool.
var (
	calls   = metric{}
	exports = metric{key: "exports"}
	credits = metric{key: "credits"}
)

// name returns the metric's key.
func (m metric) name() string {
	if m.key == "" {
		return "api_calls"
	}
	return m.key
}

// with returns m declaring capacity.
func (m metric) with(capacity [2]int64) metric {
	m.capacity = capacity
	return m
}

func (m metric) declared() bool { return m.capacity[0] > 0 || m.capacity[1] > 0 }

// ms returns the moment ms milliseconds after s.At.
func (s suite) ms(ms int64) time.Time { return s.At.Add(time.Duration(ms) * time.Millisecond) }

// global returns the key of m's global usage in window i at ms.
func (s suite) global(m metric, i int, ms int64) quota.GlobalKey {
	start, _ := quota.Bounds(s.Windows[i], s.ms(ms), tiers.Anchor{})
	return quota.GlobalKey{Metric: m.name(), Window: s.Windows[i], Start: start}
}

// owner is whose counters a charge counts in: a customer's metric, for
// the customer as a whole or (subject set) for one of its subjects.
type owner struct {
	customer string
	subject  string
	metric   metric
}

func (o owner) String() string {
	if o.subject != "" {
		return fmt.Sprintf("%s's %s of %s", o.customer, o.metric.name(), o.subject)
	}
	return fmt.Sprintf("%s's %s", o.customer, o.metric.name())
}

// charge returns a charge of cost units of customer's metric m at ms, with
// a span per window of the harness that ls limits (in order), and every
// global window of m, as the engine resolves a check.
func (s suite) charge(m metric, customer string, cost, ms int64, ls ...lim) *quota.Charge {
	return s.chargeOf(owner{customer: customer, metric: m}, cost, ms, ls...)
}

// chargeOf returns a charge of cost units of o's counters at ms, with a
// span per window of the harness that ls limits (in order), as the engine
// resolves a check: a customer's own charge lists every global window of
// its metric, where every unit the set admits counts; a subject's lists
// none (its customer's charge of the set counts them), though its spans
// still name their global window, where spare capacity is measured.
func (s suite) chargeOf(o owner, cost, ms int64, ls ...lim) *quota.Charge {
	at, m := s.ms(ms), o.metric
	c := &quota.Charge{Customer: o.customer, Metric: m.name(), Subject: o.subject, Cost: cost, At: at,
		MetricCapacity: m.declared()}
	for i, w := range s.Windows {
		if m.capacity[i] > 0 && o.subject == "" {
			c.Globals = append(c.Globals, s.global(m, i, ms))
		}
		if i >= len(ls) || ls[i].absent {
			continue
		}
		l := ls[i]
		start, end := quota.Bounds(w, at, tiers.Anchor{})
		sp := quota.Span{
			Key: quota.CounterKey{Customer: o.customer, Metric: m.name(), Subject: o.subject, Window: w, Start: start},
			End: end,
			Rule: quota.Rule{Mode: l.mode, Limit: l.limit, Algorithm: s.alg, Size: l.size, Threshold: l.threshold,
				Ceiling: l.ceiling},
		}
		if m.capacity[i] > 0 {
			sp.Global = s.global(m, i, ms)
			if l.mode == tiers.Elastic {
				sp.Rule.Spare, sp.Rule.Capacity = true, m.capacity[i]
			}
		}
		c.Spans = append(c.Spans, sp)
	}
	return c
}

// hardCharge returns a charge at At with one hard limit per threshold.
func (s suite) hardCharge(customer string, cost int64, thresholds ...int64) *quota.Charge {
	ls := make([]lim, len(thresholds))
	for i, th := range thresholds {
		ls[i] = hard(th)
	}
	return s.charge(plain, customer, cost, 0, ls...)
}

// set runs op on ch as a set of one, with outcomes of their own, and
// keeps in ch what the counter kept there (for an undo of a take).
func set(ch *quota.Charge, op func(cs []quota.Charge) error) ([]quota.Outcome, error) {
	err := runSet([]*quota.Charge{ch}, op)
	return ch.Out, err
}

// tryTake takes ch, as take does, and returns the error rather than
// failing the test (from goroutines).
func tryTake(c quota.Counter, ch *quota.Charge) (bool, []quota.Outcome, error) {
	var ok bool
	out, err := set(ch, func(cs []quota.Charge) (err error) {
		ok, err = c.Take(context.Background(), cs)
		return err
	})
	return ok, out, err
}

func take(t *testing.T, c quota.Counter, ch *quota.Charge) (bool, []quota.Outcome) {
	t.Helper()
	ok, out, err := tryTake(c, ch)
	if err != nil {
		t.Fatalf("take: %v", err)
	}
	return ok, out
}

func peek(t *testing.T, c quota.Counter, ch *quota.Charge) []quota.Outcome {
	t.Helper()
	out, err := set(ch, func(cs []quota.Charge) error { return c.Peek(context.Background(), cs) })
	if err != nil {
		t.Fatalf("peek: %v", err)
	}
	return out
}

func giveBack(t *testing.T, c quota.Counter, ch *quota.Charge) []quota.Outcome {
	t.Helper()
	out, err := set(ch, func(cs []quota.Charge) error { return c.GiveBack(context.Background(), cs) })
	if err != nil {
		t.Fatalf("give back: %v", err)
	}
	return out
}

// mustTake takes ch, which the case expects admitted.
func mustTake(t *testing.T, c quota.Counter, ch *quota.Charge, what string) []quota.Outcome {
	t.Helper()
	ok, out := take(t, c, ch)
	if !ok {
		t.Fatalf("%s: denied, want admitted: %+v", what, out)
	}
	return out
}

// count returns the count of span i of a peek of customer's limits ls at
// ms: what the counter holds there.
func (s suite) count(t *testing.T, c quota.Counter, m metric, customer string, ms int64, i int, ls ...lim) int64 {
	t.Helper()
	ch := s.charge(m, customer, 1, ms, ls...)
	return peek(t, c, ch)[i].Used
}

// probe is the customer whose peeks read a metric's global usage.
const probe = "probe"

// globalUsage returns m's global usage in window i at ms, as the probe
// customer, whose elastic limit of 0 admits only from spare capacity,
// finds it: the capacity less the most units a peek of it admits. A usage
// at or beyond the capacity reads as the capacity.
func (s suite) globalUsage(t *testing.T, c quota.Counter, m metric, i int, ms int64) int64 {
	t.Helper()
	ls := make([]lim, i+1)
	for j := range ls {
		ls[j] = none
	}
	ls[i] = elastic(0, tiers.MaxLimit)
	// The peek admits k units iff usage + k <= capacity: search the
	// largest k admitted in [0, capacity].
	lo, hi := int64(0), m.capacity[i]
	for lo < hi {
		k := (lo + hi + 1) / 2
		if peek(t, c, s.charge(m, probe, k, ms, ls...))[0].Passed {
			lo = k
		} else {
			hi = k - 1
		}
	}
	return m.capacity[i] - lo
}

// wantGlobal checks that m's global usage in window i at ms is want (or,
// want at or beyond the capacity, that no spare capacity is left).
func (s suite) wantGlobal(t *testing.T, c quota.Counter, m metric, i int, ms, want int64, when string) {
	t.Helper()
	got := s.globalUsage(t, c, m, i, ms)
	switch capacity := m.capacity[i]; {
	case want >= capacity && got < capacity:
		t.Errorf("%s: %s global usage %d, want %d (beyond the capacity, %d)", when, s.Windows[i], got, want, capacity)
	case want < capacity && got != want:
		t.Errorf("%s: %s global usage %d, want %d (capacity %d)", when, s.Windows[i], got, want, capacity)
	}
}

func allOrNothing(t *testing.T, s suite) {
	c := s.New(t, "acme")
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
		ok, out := take(t, c, s.hardCharge("acme", 3, 10, 5))
		if ok != want.ok || out[0].Used != want.usedA || out[1].Used != want.usedB ||
			!out[0].Passed || out[1].Passed != want.passedB {
			t.Fatalf("take %d: %v %+v, want %v with used %d and %d", i, ok, out, want.ok, want.usedA, want.usedB)
		}
		if !want.ok && out[1].Wait == 0 {
			t.Errorf("take %d: the denying window reports no wait: %+v", i, out[1])
		}
		if got := peek(t, c, s.hardCharge("acme", 1, 10, 5)); got[0].Used != want.endUsedA {
			t.Errorf("after take %d: first window counts %d, want %d", i, got[0].Used, want.endUsedA)
		}
	}
	if ok, out := take(t, c, s.hardCharge("acme", 2, 10, 5)); !ok || out[1].Used != 3 {
		t.Errorf("a take that fits both: %v %+v", ok, out)
	}
}

func peekCountsNothing(t *testing.T, s suite) {
	c := s.New(t, "acme")
	if ok, _ := take(t, c, s.hardCharge("acme", 4, 10)); !ok {
		t.Fatal("denied")
	}
	for range 3 {
		out := peek(t, c, s.hardCharge("acme", 6, 10))
		if out[0].Used != 4 || !out[0].Passed {
			t.Fatalf("peek of 6 at 4 of 10: %+v, want passed at 4", out[0])
		}
	}
	if out := peek(t, c, s.hardCharge("acme", 7, 10)); out[0].Passed || out[0].Used != 4 {
		t.Errorf("peek of 7 at 4 of 10: %+v, want denied", out[0])
	}
}

func giveBackFloor(t *testing.T, s suite) {
	c := s.New(t, "acme")
	if ok, _ := take(t, c, s.hardCharge("acme", 6, 10)); !ok {
		t.Fatal("denied")
	}
	for i, want := range []struct{ before, after int64 }{{6, 4}, {4, 0}, {0, 0}} {
		cost := int64(2)
		if i > 0 {
			cost = 100
		}
		out := giveBack(t, c, s.hardCharge("acme", cost, 10))
		if out[0].Used != want.before {
			t.Errorf("give back %d: count before %d, want %d", i, out[0].Used, want.before)
		}
		if got := peek(t, c, s.hardCharge("acme", 1, 10))[0].Used; got != want.after {
			t.Errorf("give back %d: count after %d, want %d", i, got, want.after)
		}
	}
}

func neverPasses(t *testing.T, s suite) {
	c := s.New(t, "acme")
	ok, out := take(t, c, s.hardCharge("acme", 6, 5))
	if ok || out[0].Passed || out[0].Wait != -1 {
		t.Errorf("cost 6 at a threshold of 5: %v %+v, want denied with wait -1 (never)", ok, out)
	}
	ok, out = take(t, c, s.hardCharge("acme", 1, 0))
	if ok || out[0].Wait != -1 {
		t.Errorf("a threshold of 0: %v %+v, want denied with wait -1 (never)", ok, out)
	}
}

func customersApart(t *testing.T, s suite) {
	c := s.New(t, "a", "b")
	if ok, _ := take(t, c, s.hardCharge("a", 5, 5)); !ok {
		t.Fatal("a denied")
	}
	if ok, out := take(t, c, s.hardCharge("b", 5, 5)); !ok || out[0].Used != 0 {
		t.Errorf("b after a filled its own window: %v %+v", ok, out)
	}
}

func concurrentExact(t *testing.T, s suite) {
	const workers, each, threshold = 64, 10, 250
	c := s.New(t, "acme")
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				ok, _, err := tryTake(c, s.hardCharge("acme", 1, threshold))
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

// concurrentUndo: checks whose clocks were read in one order and that
// count in another (as concurrent checks do) each take and then undo their
// units, as a check does when a later window denies it: every unit comes
// back, and nothing else does.
func concurrentUndo(t *testing.T, s suite) {
	const workers, each, spread = 16, 20, 8
	c := s.New(t, "acme")
	ls := []lim{hard(1000), hard(1000)}
	mustTake(t, c, s.charge(plain, "acme", 5, 0, ls...), "takes 5 at 0, kept")
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for j := range each {
				ch := s.charge(plain, "acme", 1, int64(w+j)%spread, ls...)
				ok, out, err := tryTake(c, ch)
				if err != nil || !ok {
					t.Errorf("take of 1 under a limit of 1000: %v %v %+v", ok, err, out)
					return
				}
				ch.Undoing(s.ms(spread))
				if _, err := set(ch, func(cs []quota.Charge) error { return c.GiveBack(context.Background(), cs) }); err != nil {
					t.Errorf("undo: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	// At spread ms, the 5 kept count 5; a token bucket refilling 1000 a
	// second has paid them off there, one refilling 1000 a minute not.
	want := [2]byAlg{{5, 5, 5, 0}, all(5)}
	for i := range 2 {
		s.wantCounts(t, c, plain, "acme", i, ls, fmt.Sprintf("5 kept, %d takes of 1 undone", workers*each),
			[]countAt{{spread, want[i]}})
	}
}

// Long returns the long windows the suite uses for stores of calendar
// counters, and a moment inside them.
func Long() ([2]tiers.Window, time.Time) {
	return [2]tiers.Window{tiers.Day, tiers.Month}, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
}

// Short returns the short windows the suite uses for counters of short
// windows, and a moment that starts a bucket of both.
func Short() ([2]tiers.Window, time.Time) {
	return [2]tiers.Window{tiers.Second, tiers.Minute}, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
}
