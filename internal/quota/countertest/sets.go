package countertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// The cases of this file charge sets. A check of several metrics (items),
// of a metric that draws on a credit pool, or of a metric with limits per
// subject is several charges, one per owner of counters, which a counter
// admits all or none: a set is admitted only when every span of every
// charge admits its cost, and a set denied counts nothing anywhere.
//
// Their owners are acme's api_calls, exports (another item) and credits
// (a pool), and, with Harness.Subjects, the api_calls of acme's subject
// alice. Without it, subjects' charges are left out of every set, and a
// step that needs one is skipped.

// part is an owner of counters the sets of a case charge, and its limits.
type part struct {
	owner
	limits []lim
}

// acmes returns a part of acme's metric m (of subject, if not "") under
// limits ls.
func acmes(m metric, subject string, ls ...lim) part {
	return part{owner: owner{customer: "acme", subject: subject, metric: m}, limits: ls}
}

// parts returns ps without subjects' parts unless the harness names
// subjects apart.
func (s suite) parts(ps ...part) []part {
	if s.Subjects {
		return ps
	}
	return slices.DeleteFunc(ps, func(p part) bool { return p.subject != "" })
}

// bound returns the most part p's counters may count: its lowest
// threshold.
func (p part) bound() int64 {
	b := tiers.MaxLimit
	for _, l := range p.limits {
		if !l.absent {
			b = min(b, l.threshold)
		}
	}
	return b
}

// window returns the index in s.Windows of span sp's window.
func (s suite) window(sp quota.Span) int { return slices.Index(s.Windows[:], sp.Key.Window) }

// runSet runs op on the charges chs as one set, in their order, each with
// outcomes of its own, and keeps in each what the counter kept there (its
// outcomes, and what an undo of a take needs).
func runSet(chs []*quota.Charge, op func(cs []quota.Charge) error) error {
	cs := make([]quota.Charge, len(chs))
	for i, ch := range chs {
		cs[i] = *ch
		cs[i].Out = make([]quota.Outcome, len(ch.Spans))
	}
	err := op(cs)
	for i, ch := range chs {
		*ch = cs[i]
	}
	return err
}

// tryTakeSet takes chs as one set, as takeSet does, and returns the error
// rather than failing the test (from goroutines).
func tryTakeSet(c quota.Counter, chs []*quota.Charge) (bool, error) {
	var ok bool
	err := runSet(chs, func(cs []quota.Charge) (err error) {
		ok, err = c.Take(context.Background(), cs)
		return err
	})
	return ok, err
}

// takeSet takes chs as one set; each charge's outcomes are then in its
// Out.
func takeSet(t *testing.T, c quota.Counter, chs []*quota.Charge) bool {
	t.Helper()
	ok, err := tryTakeSet(c, chs)
	if err != nil {
		t.Fatalf("take of a set: %v", err)
	}
	return ok
}

// peekSet peeks at chs as one set.
func peekSet(t *testing.T, c quota.Counter, chs []*quota.Charge) {
	t.Helper()
	if err := runSet(chs, func(cs []quota.Charge) error { return c.Peek(context.Background(), cs) }); err != nil {
		t.Fatalf("peek of a set: %v", err)
	}
}

// tryUndoSet undoes the take of chs, a set a take admitted, at now: each
// charge is marked as that take undone, and the set given back.
func tryUndoSet(c quota.Counter, chs []*quota.Charge, now time.Time) error {
	for _, ch := range chs {
		ch.Undoing(now)
	}
	return runSet(chs, func(cs []quota.Charge) error { return c.GiveBack(context.Background(), cs) })
}

// pick returns a random subset of n parts, not empty, in a random order:
// the engine lists a check's charges in the order of its items, so two
// sets may list the same counters in two orders.
func (s suite) pick(rng *rand.Rand, n int) []int {
	return rng.Perm(n)[:1+rng.IntN(n)]
}

// share is one charge of a step of a case: cost units of a part.
type share struct {
	part int
	cost int64
}

// setOf returns the charges of shares at ms, those of parts the harness
// leaves out (subjects) left out.
func (s suite) setOf(parts []part, ms int64, shares ...share) (chs []*quota.Charge, of []int) {
	for _, sh := range shares {
		if sh.part < len(parts) {
			chs = append(chs, s.chargeOf(parts[sh.part].owner, sh.cost, ms, parts[sh.part].limits...))
			of = append(of, sh.part)
		}
	}
	return chs, of
}

// counts returns what each part's counter holds in each window at ms, by
// one peek of a set of them all: -1 where the part has no limit.
func (s suite) counts(t *testing.T, c quota.Counter, parts []part, ms int64) [][2]int64 {
	t.Helper()
	chs := make([]*quota.Charge, len(parts))
	for i, p := range parts {
		chs[i] = s.chargeOf(p.owner, 1, ms, p.limits...)
	}
	peekSet(t, c, chs)
	out := make([][2]int64, len(parts))
	for i, ch := range chs {
		out[i] = [2]int64{-1, -1}
		for j, sp := range ch.Spans {
			out[i][s.window(sp)] = ch.Out[j].Used
		}
	}
	return out
}

// wantCountsOf checks that each part's counter holds want(part, window)
// at ms, in every window the part has a limit in.
func (s suite) wantCountsOf(t *testing.T, c quota.Counter, parts []part, ms int64, want func(part, window int) int64, what string) {
	t.Helper()
	for i, got := range s.counts(t, c, parts, ms) {
		for w, n := range got {
			if n < 0 {
				continue
			}
			if wn := want(i, w); n != wn {
				t.Errorf("%s: %v counts %d in its %s %s, want %d", what, parts[i].owner, n, s.Windows[w], when(ms), wn)
			}
		}
	}
}

func setAllOrNothing(t *testing.T, s suite) {
	c := s.New(t, "acme")
	// acme's api_calls has limits of 10 and 8, exports of 5 in the first
	// window only, the credit pool of 12 in the second only; alice's
	// api_calls, 4 and 6. Each step is one set; a denied one names the
	// span that denies it (its charge and window), and every other span
	// passes. All happen at one moment: every counter of a part holds the
	// units its admitted charges took, in each of its windows.
	const a, b, p, alice = 0, 1, 2, 3
	parts := []part{
		acmes(calls, "", hard(10), hard(8)),
		acmes(exports, "", hard(5)),
		acmes(credits, "", none, hard(12)),
		acmes(calls, "alice", hard(4), hard(6)),
	}
	type denial struct{ part, window int }
	admitted := denial{-1, -1}
	steps := []struct {
		name     string
		subjects bool // the step needs alice's charge
		set      []share
		deny     denial
		after    [4]int64
	}{
		{name: "every charge within its limits", set: []share{{a, 3}, {b, 2}, {p, 4}, {alice, 2}},
			deny: admitted, after: [4]int64{3, 2, 4, 2}},
		// 3 + 6 = 9 passes 10, not 8.
		{name: "the first charge's second window denies", set: []share{{a, 6}, {b, 1}, {p, 1}, {alice, 1}},
			deny: denial{a, 1}, after: [4]int64{3, 2, 4, 2}},
		{name: "a charge in the middle denies", set: []share{{a, 1}, {b, 4}, {p, 1}},
			deny: denial{b, 0}, after: [4]int64{3, 2, 4, 2}},
		{name: "the last charge denies", set: []share{{b, 1}, {a, 1}, {alice, 1}, {p, 9}},
			deny: denial{p, 1}, after: [4]int64{3, 2, 4, 2}},
		// 2 + 3 = 5 passes alice's 6, not her 4; acme's own 3 + 1 passes.
		{name: "a subject's charge denies where its customer's admits", subjects: true,
			set: []share{{alice, 3}, {a, 1}}, deny: denial{alice, 0}, after: [4]int64{3, 2, 4, 2}},
		{name: "every charge up to its limit", set: []share{{p, 8}, {alice, 2}, {b, 3}, {a, 5}},
			deny: admitted, after: [4]int64{8, 5, 12, 4}},
	}
	parts = s.parts(parts...)
	before := [4]int64{}
	for _, st := range steps {
		if st.subjects && !s.Subjects {
			continue
		}
		chs, of := s.setOf(parts, 0, st.set...)
		ok := takeSet(t, c, chs)
		if ok != (st.deny == admitted) {
			t.Fatalf("%s: admitted %v, want %v", st.name, ok, !ok)
		}
		for i, ch := range chs {
			for j, sp := range ch.Spans {
				w := s.window(sp)
				passed := st.deny != denial{of[i], w}
				o := ch.Out[j]
				if o.Passed != passed || o.Used != before[of[i]] {
					t.Errorf("%s: %v's %s: %+v, want passed %v at %d", st.name, parts[of[i]].owner, s.Windows[w], o,
						passed, before[of[i]])
				}
				if !passed && o.Wait == 0 {
					t.Errorf("%s: %v's %s denies the set with no wait: %+v", st.name, parts[of[i]].owner, s.Windows[w], o)
				}
			}
		}
		s.wantCountsOf(t, c, parts, 0, func(p, _ int) int64 { return st.after[p] }, st.name)
		before = st.after
	}
}

// concurrentSets: 64 goroutines take random sets (random costs, random
// subsets of the parts, in random orders) against small limits. Every
// counter then holds exactly the units of the sets admitted that charged
// it, never more than its limit.
func concurrentSets(t *testing.T, s suite) {
	const workers, each = 64, 8
	c := s.New(t, "acme")
	parts := s.parts(
		acmes(calls, "", hard(60), hard(50)),
		acmes(exports, "", hard(40)),
		acmes(credits, "", none, hard(70)),
		acmes(calls, "alice", hard(30), hard(45)),
	)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	admitted := make([]atomic.Int64, len(parts))
	var denied atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for range each {
				pick := s.pick(rng, len(parts))
				shares := make([]share, len(pick))
				for i, p := range pick {
					shares[i] = share{p, 1 + rng.Int64N(4)}
				}
				chs, _ := s.setOf(parts, 0, shares...)
				ok, err := tryTakeSet(c, chs)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					denied.Add(1)
					continue
				}
				for _, sh := range shares {
					admitted[sh.part].Add(sh.cost)
				}
			}
		})
	}
	wg.Wait()
	if denied.Load() == 0 {
		t.Errorf("%d sets asking for more than the limits admitted every one", workers*each)
	}
	s.wantCountsOf(t, c, parts, 0, func(p, _ int) int64 { return admitted[p].Load() },
		fmt.Sprintf("%d sets at once, %d denied", workers*each, denied.Load()))
	for i, p := range parts {
		if n := admitted[i].Load(); n > p.bound() {
			t.Errorf("%v: %d units admitted, beyond its limit of %d", p.owner, n, p.bound())
		}
	}
}

// concurrentSetUndo: sets taken and then undone, concurrently, give back
// what they took and nothing else, of every charge, in every window, and
// in the metric's global windows. With short windows their clocks are
// read in one order and they count in another, as concurrentUndo's.
func concurrentSetUndo(t *testing.T, s suite) {
	const workers, each = 16, 12
	var spread int64
	if s.ShortWindows {
		spread = 8
	}
	m := calls.with([2]int64{10_000, 10_000})
	wide := []lim{hard(1000), hard(1000)}
	parts := s.parts(acmes(m, "", wide...), acmes(exports, "", wide...), acmes(credits, "", wide...),
		acmes(m, "alice", wide...))
	c := s.New(t, "acme", probe)
	kept := make([]share, len(parts))
	for i := range parts {
		kept[i] = share{i, 5}
	}
	if chs, _ := s.setOf(parts, 0, kept...); !takeSet(t, c, chs) {
		t.Fatalf("a set of 5 of each under limits of 1000: denied")
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for j := range each {
				pick := s.pick(rng, len(parts))
				shares := make([]share, len(pick))
				for i, p := range pick {
					shares[i] = share{p, 1 + rng.Int64N(3)}
				}
				var ms int64
				if spread > 0 {
					ms = int64(w+j) % spread
				}
				chs, _ := s.setOf(parts, ms, shares...)
				ok, err := tryTakeSet(c, chs)
				if err != nil || !ok {
					t.Errorf("take of a set under limits of 1000: %v %v", ok, err)
					return
				}
				if err := tryUndoSet(c, chs, s.ms(spread)); err != nil {
					t.Errorf("undo: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	// The 5 kept of each count 5 at spread ms; but a token bucket
	// refilling 1000 a second has paid them off there, 5 ms after they
	// were taken (see concurrentUndo).
	want := [2]byAlg{{5, 5, 5, 0}, all(5)}
	what := fmt.Sprintf("5 kept of each, %d sets undone", workers*each)
	s.wantCountsOf(t, c, parts, spread, func(_, w int) int64 { return want[w][s.alg] }, what)
	if s.HoldsInGlobals {
		return // leases count their units there until settled
	}
	// The global windows counted the kept set's 5 once (alice's charge
	// counts there through acme's), and got back all that each set undone
	// counted.
	for i := range s.Windows {
		s.wantGlobal(t, c, m, i, spread, 5, what)
	}
}

// setGlobals: a set counts its units in each global window of its
// metrics once: its customer's charge of the metric counts there, and a
// subject's charge of the same metric does not count them again. A
// counter that holds units there (HoldsInGlobals) counts at most a block
// more per lease counting there. Within a set, every charge is judged on
// the global usage from before the set: an elastic subject's spare
// capacity is not taken by its customer's charge of the same set.
func setGlobals(t *testing.T, s suite) {
	c := s.New(t, "acme", probe)
	// api_calls declares capacities of 100, exports 50 in the first
	// window only. Limits of 100: a lease holds a block of 1.
	callsM, exportsM := calls.with([2]int64{100, 100}), exports.with([2]int64{50, 0})
	const a, b, alice = 0, 1, 2
	parts := s.parts(
		acmes(callsM, "", hard(100), hard(100)),
		acmes(exportsM, "", hard(100), hard(100)),
		acmes(callsM, "alice", hard(100), hard(100)),
	)
	wantGlobals := func(callsUsage, exportsUsage int64, what string) {
		t.Helper()
		for _, g := range []struct {
			m    metric
			w    int
			want int64
		}{{callsM, 0, callsUsage}, {callsM, 1, callsUsage}, {exportsM, 0, exportsUsage}} {
			if !s.HoldsInGlobals {
				s.wantGlobal(t, c, g.m, g.w, 0, g.want, what)
				continue
			}
			// acme's lease of the window's counter holds a block of 1.
			if got := s.globalUsage(t, c, g.m, g.w, 0); got < g.want || got > g.want+1 {
				t.Errorf("%s: %s's %s global usage %d, want %d admitted and at most 1 held", what, g.m.name(),
					s.Windows[g.w], got, g.want)
			}
		}
	}
	chs, _ := s.setOf(parts, 0, share{a, 3}, share{b, 2}, share{alice, 3})
	if !takeSet(t, c, chs) {
		t.Fatal("a set within its limits: denied")
	}
	wantGlobals(3, 2, "acme and alice took 3 of api_calls, acme 2 of exports")
	// exports denies (first: a lease pool would take the others' units
	// from its leases, then hold them there when the set is denied).
	if chs, _ := s.setOf(parts, 0, share{b, 101}, share{a, 4}, share{alice, 4}); takeSet(t, c, chs) {
		t.Fatal("a set with 101 exports at a limit of 100: admitted")
	}
	wantGlobals(3, 2, "a set denied by its exports")
	if chs, _ := s.setOf(parts, 0, share{a, 1}, share{b, 1}); !takeSet(t, c, chs) {
		t.Fatal("a set within its limits: denied")
	}
	wantGlobals(4, 3, "acme took 1 more of each")

	if !s.Subjects || s.HoldsInGlobals {
		return
	}
	// api_calls declares a capacity of 10 in the first window, of which
	// globex takes 6. alice's elastic limit of 2 borrows spare capacity
	// for her 4: 6 + 4 fit in 10, as the set found it, though acme's
	// charge of the same set counts its 4 there too.
	c = s.New(t, "acme", "globex", probe)
	spare := calls.with([2]int64{10, 0})
	parts = []part{acmes(spare, "", hard(100)), acmes(spare, "alice", elastic(2, tiers.MaxLimit))}
	mustTake(t, c, s.charge(spare, "globex", 6, 0, hard(100)), "globex takes 6")
	for i, st := range []struct {
		cost    int64
		ok      bool
		elastic bool
		used    int64
		global  int64
	}{
		{cost: 4, ok: true, elastic: true, used: 0, global: 10},
		{cost: 1, ok: false, used: 4, global: 10}, // no spare capacity left
	} {
		chs, _ := s.setOf(parts, 0, share{a, st.cost}, share{1, st.cost})
		ok := takeSet(t, c, chs)
		what := fmt.Sprintf("set %d: acme and alice take %d", i, st.cost)
		if own := chs[0].Out[0]; ok != st.ok || !own.Passed || own.Elastic || own.Used != st.used {
			t.Errorf("%s: admitted %v, acme's %+v; want admitted %v, acme's passed at %d", what, ok, own, st.ok, st.used)
		}
		if o := chs[1].Out[0]; o.Passed != st.ok || o.Elastic != st.elastic || o.Used != st.used {
			t.Errorf("%s: alice's %+v, want passed %v, elastic %v, at %d", what, o, st.ok, st.elastic, st.used)
		}
		s.wantGlobal(t, c, spare, 0, 0, st.global, what)
	}
}
