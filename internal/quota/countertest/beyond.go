package countertest

import (
	"fmt"
	"testing"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// The cases of this file happen at one moment, At: every algorithm counts
// the units admitted so far, and every counter, short windows or long,
// answers them alike.

// step is one take of a case at At: who asks for how much, and what the
// first span must answer.
type step struct {
	customer string
	cost     int64
	ok       bool
	elastic  bool
	used     int64
}

func (st step) String() string { return fmt.Sprintf("%s takes %d", st.customer, st.cost) }

// wantStep checks the first span's outcome of step i.
func wantStep(t *testing.T, i int, st step, ok bool, out []quota.Outcome) {
	t.Helper()
	o := out[0]
	if ok != st.ok || o.Passed != st.ok || o.Elastic != st.elastic || o.Used != st.used {
		t.Errorf("step %d, %v: %v %+v, want admitted %v, elastic %v, used %d", i, st, ok, o, st.ok, st.elastic, st.used)
	}
	if !st.ok && o.Wait == 0 {
		t.Errorf("step %d, %v: denied with no wait: %+v", i, st, o)
	}
}

func softOverage(t *testing.T, s suite) {
	c := s.New(t, "acme")
	// A soft limit of 10 with an allowance up to 15 in the first window; a
	// hard 100 in the second, which every step passes.
	var total int64
	for i, st := range []step{
		{"acme", 8, true, false, 0},
		{"acme", 5, true, false, 8},   // 13: overage, within the threshold
		{"acme", 3, false, false, 13}, // 16: beyond the threshold
		{"acme", 2, true, false, 13},  // 15: the threshold itself
		{"acme", 1, false, false, 15},
	} {
		ok, out := take(t, c, s.charge(plain, st.customer, st.cost, 0, soft(10, 15), hard(100)))
		wantStep(t, i, st, ok, out)
		if !out[1].Passed || out[1].Used != total {
			t.Errorf("step %d, %v: the hard window %+v, want passed at %d", i, st, out[1], total)
		}
		if ok {
			total += st.cost
		}
	}
	if got := s.count(t, c, plain, "acme", 0, 1, soft(10, 15), hard(100)); got != 15 {
		t.Errorf("the hard window counts %d, want 15", got)
	}
}

func elasticCapacity(t *testing.T, s suite) {
	c := s.New(t, "a", "b", probe)
	// The metric declares a capacity of 10 in the first window; a and b
	// each have an elastic limit of 5 there, without a ceiling. Beyond 5,
	// a take is admitted while every customer's units of the metric, with
	// it, stay within 10.
	m := metric{capacity: [2]int64{10, 0}}
	for i, st := range []step{
		{"a", 5, true, false, 0},  // global 5
		{"b", 4, true, false, 0},  // global 9
		{"a", 2, false, false, 5}, // beyond its limit, and 11 > 10
		{"a", 1, true, true, 5},   // spare capacity: global 10
		{"b", 1, true, false, 4},  // within its own limit, whatever the global usage: 11
		{"b", 1, false, false, 5}, // beyond its limit, no spare capacity left
		{"a", 1, false, false, 6},
	} {
		ok, out := take(t, c, s.charge(m, st.customer, st.cost, 0, elastic(5, tiers.MaxLimit)))
		wantStep(t, i, st, ok, out)
	}
	if out := peek(t, c, s.charge(m, "a", 1, 0, elastic(5, tiers.MaxLimit))); out[0].Passed || out[0].Used != 6 {
		t.Errorf("a peek beyond the capacity: %+v, want denied at 6", out[0])
	}
}

func elasticCeiling(t *testing.T, s suite) {
	c := s.New(t, "a", "b")
	// A capacity of 100 in the first window, and limits of 5 that spare
	// capacity takes up to 7.
	m := metric{capacity: [2]int64{100, 0}}
	for i, st := range []step{
		{"a", 5, true, false, 0},
		{"a", 2, true, true, 5}, // 7: the ceiling itself
		{"a", 1, false, false, 7},
		{"b", 6, true, true, 0}, // one take across the limit
		{"b", 2, false, false, 6},
		{"b", 1, true, true, 6},
	} {
		ok, out := take(t, c, s.charge(m, st.customer, st.cost, 0, elastic(5, 7)))
		wantStep(t, i, st, ok, out)
	}
	// Without a declared capacity an elastic limit has no spare to borrow.
	c = s.New(t, "a")
	ok, out := take(t, c, s.charge(plain, "a", 6, 0, elastic(5, 7)))
	wantStep(t, 0, step{"a (no capacity declared)", 6, false, false, 0}, ok, out)
}

func globalsCount(t *testing.T, s suite) {
	c := s.New(t, "plain", "free", probe)
	// Capacities of 10 and 20. plain has a hard limit of 100 in the first
	// window only, free no limit of the metric at all: every unit either
	// is admitted counts in both global windows.
	m := metric{capacity: [2]int64{10, 20}}
	wantGlobals := func(g0, g1 int64, when string) {
		t.Helper()
		s.wantGlobal(t, c, m, 0, 0, g0, when)
		s.wantGlobal(t, c, m, 1, 0, g1, when)
	}
	wantGlobals(0, 0, "at first")
	globalSteps(t, s, c, m, func(admitted int64, when string) { wantGlobals(admitted, admitted, when) })
	// The second window's limit denies: the first, which admits, counts
	// nothing, nor do the global windows.
	if ok, _ := take(t, c, s.charge(m, "plain", 2, 0, hard(100), hard(1))); ok {
		t.Fatal("plain's take of 2 at a limit of 1 admitted")
	}
	wantGlobals(7, 7, "plain was denied 2 by its second window")
	// Hard limits count on past the capacity: it bounds only spare.
	mustTake(t, c, s.charge(m, "plain", 5, 0, hard(100)), "plain takes 5")
	wantGlobals(12, 12, "plain took 5 more")
}

// globalsHeld is globalsCount for a counter that holds units in global
// windows (Harness.HoldsInGlobals): usage is never below the units
// admitted, nor above them and what the customer's limits let it hold, a
// block of max(1, 1% of the limit) per window with a limit, once the check
// that took it was admitted. Windows without a limit count the admitted
// units exactly.
func globalsHeld(t *testing.T, s suite) {
	c := s.New(t, "plain", "free", probe)
	m := metric{capacity: [2]int64{10, 20}}
	within := func(admitted, held int64, when string) {
		t.Helper()
		if got := s.globalUsage(t, c, m, 0, 0); got < admitted || got > admitted+held {
			t.Errorf("%s: %s global usage %d, want %d admitted and at most %d held", when, s.Windows[0], got, admitted, held)
		}
		if got := s.globalUsage(t, c, m, 1, 0); got != admitted {
			t.Errorf("%s: %s global usage %d, want %d (no limit there holds units)", when, s.Windows[1], got, admitted)
		}
	}
	// plain's limit of 100 holds a block of 1.
	globalSteps(t, s, c, m, func(admitted int64, when string) { within(admitted, 1, when) })
}

// globalSteps takes the steps globalsCount and globalsHeld share (plain
// takes 4, free without limits 3, plain peeks at 50 and is denied 101),
// calling want after each with the units admitted so far.
func globalSteps(t *testing.T, s suite, c quota.Counter, m metric, want func(admitted int64, when string)) {
	t.Helper()
	mustTake(t, c, s.charge(m, "plain", 4, 0, hard(100)), "plain takes 4")
	want(4, "plain took 4")
	mustTake(t, c, s.charge(m, "free", 3, 0), "free, without limits, takes 3")
	want(7, "free took 3")
	peek(t, c, s.charge(m, "plain", 50, 0, hard(100)))
	want(7, "plain peeked at 50")
	if ok, _ := take(t, c, s.charge(m, "plain", 101, 0, hard(100))); ok {
		t.Fatal("plain's take of 101 at a limit of 100 admitted")
	}
	want(7, "plain was denied 101")
}

func refundGlobals(t *testing.T, s suite) {
	c := s.New(t, "acme", probe)
	// Capacities of 10 in both windows; acme has a hard limit of 10 in the
	// first only. A refund gives each global window back what acme's span
	// of the same window gave back or, where acme has none, up to the
	// cost; the engine lists only the first kind (where the customer's
	// share is known).
	m := metric{capacity: [2]int64{10, 10}}
	ch := func(cost int64, ls ...lim) *quota.Charge { return s.charge(m, "acme", cost, 0, ls...) }
	mustTake(t, c, ch(6, hard(10)), "acme takes 6")
	s.wantGlobal(t, c, m, 0, 0, 6, "acme took 6")
	s.wantGlobal(t, c, m, 1, 0, 6, "acme took 6")

	if out := giveBack(t, c, ch(2, hard(10))); out[0].Used != 6 {
		t.Errorf("refund of 2: count before %d, want 6", out[0].Used)
	}
	s.wantGlobal(t, c, m, 0, 0, 4, "refund of 2 listing both global windows")
	s.wantGlobal(t, c, m, 1, 0, 4, "refund of 2 listing both global windows")

	r := ch(10, hard(10))
	r.Globals = r.Globals[:1] // acme's share of the second is not known
	if out := giveBack(t, c, r); out[0].Used != 4 {
		t.Errorf("refund of 10: count before %d, want 4", out[0].Used)
	}
	if got := s.count(t, c, m, "acme", 0, 0, hard(10)); got != 0 {
		t.Errorf("after a refund of 10 at 4: acme counts %d, want 0", got)
	}
	s.wantGlobal(t, c, m, 0, 0, 0, "refund of 10 at 4, listing the first global window")
	s.wantGlobal(t, c, m, 1, 0, 4, "refund of 10 at 4, listing the first global window")

	for _, st := range []struct{ cost, want int64 }{{3, 1}, {5, 0}} {
		r := ch(st.cost)
		r.Globals = r.Globals[1:]
		giveBack(t, c, r)
		s.wantGlobal(t, c, m, 1, 0, st.want, fmt.Sprintf("refund of %d listing only the second global window", st.cost))
	}
}
