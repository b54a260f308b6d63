package countertest

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// The cases of this file move the clock: each charge's At. Short windows
// count by their algorithm, so what a case expects depends on it (a byAlg
// value); T is the first window's length in milliseconds, U the second's.
// The expected values are worked out from the algorithms' definitions:
//
//   - sliding window: floor(prev*(T-e)/T) + cur, with prev and cur the
//     units of the previous and the current clock-aligned bucket and e
//     the milliseconds into the current one;
//   - fixed window: cur alone;
//   - sliding log: every unit admitted within the last T milliseconds (a
//     unit admitted at ms leaves at ms+T);
//   - token bucket: ceil(debt/T), the debt growing by cost*T with each
//     take and falling by the limit (its rate) every millisecond; its
//     threshold is its burst.
//
// Every algorithm admits cost while count + cost <= threshold.

// byAlg is a value for each algorithm, indexed by tiers.Algorithm:
// sliding window, fixed window, sliding log, token bucket.
type byAlg [4]int64

// all is the same value for every algorithm.
func all(n int64) byAlg { return byAlg{n, n, n, n} }

// burst is a hard limit of rate units per window, up to burst at once: a
// token bucket's (the other algorithms count to burst).
func burst(rate, burst int64) lim {
	return lim{mode: tiers.Hard, limit: rate, size: burst, threshold: burst, ceiling: tiers.MaxLimit}
}

// length returns window i's length in milliseconds (short windows).
func (s suite) length(i int) int64 { return s.Windows[i].Length().Milliseconds() }

// when names a moment of a case: ms after At.
func when(ms int64) string { return fmt.Sprintf("at +%dms", ms) }

// event is a take a case makes before what it checks: admitted.
type event struct {
	customer string // "": acme
	ms, cost int64
	limits   []lim // nil: the case's
}

// waitCase is a check denied at ms, and the wait each of its spans must
// report: 0 for a span that passes, -1 for never.
type waitCase struct {
	name   string
	only   []tiers.Algorithm // the algorithms the case is for; nil: all
	metric metric
	limits []lim
	takes  []event
	ms     int64
	cost   int64
	want   [2]byAlg // each span's wait
}

func waitCases(T, U int64) []waitCase {
	full := []event{{ms: 0, cost: 10}}
	return []waitCase{{
		// Sliding window: the next bucket starts with prev 10, whose
		// weight falls below 10 one millisecond in. Fixed window, log:
		// the units leave at T. Token bucket: one token refills in T/10.
		name: "a full window", limits: []lim{hard(10)}, takes: full, ms: 0, cost: 1,
		want: [2]byAlg{{T + 1, T, T, T / 10}},
	}, {
		// Sliding window: floor(10*(T-e)/T) <= 4 from e = T/2+1 into the
		// next bucket. Token bucket: at T/2 the debt is 5T, and 6 fit
		// once it is 4T.
		name: "half a window on", limits: []lim{hard(10)}, takes: full, ms: T / 2, cost: 6,
		want: [2]byAlg{{T + 1, T / 2, T / 2, T / 10}},
	}, {
		// Sliding log: the 4 units of 0 leave at T, which is not enough;
		// the 6 of T/4 leave at 5T/4. Token bucket: the debt is 4T at 0,
		// 1.5T + 6T at T/4, 5T at T/2, and 6 fit once it is 4T.
		name: "the oldest units leave first", limits: []lim{hard(10)},
		takes: []event{{ms: 0, cost: 4}, {ms: T / 4, cost: 6}}, ms: T / 2, cost: 6,
		want: [2]byAlg{{T + 1, T / 2, 3 * T / 4, T / 10}},
	}, {
		// A soft limit waits for its threshold, not its limit (the token
		// bucket refills at the limit, 10 a window).
		name: "a soft limit waits for its threshold", limits: []lim{soft(10, 15)},
		takes: []event{{ms: 0, cost: 15}}, ms: 0, cost: 1,
		want: [2]byAlg{{T + 1, T, T, T / 10}},
	}, {
		name: "both windows full: each its own wait", limits: []lim{hard(10), hard(10)}, takes: full, ms: 0, cost: 1,
		want: [2]byAlg{{T + 1, T, T, T / 10}, {U + 1, U, U, U / 10}},
	}, {
		name: "only the window that denies waits", limits: []lim{hard(10), hard(100)}, takes: full, ms: 0, cost: 1,
		want: [2]byAlg{{T + 1, T, T, T / 10}, all(0)},
	}, {
		// 20 at once, refilled at 10 a window: 5 tokens in T/2.
		name: "a token bucket's burst", only: []tiers.Algorithm{tiers.TokenBucket}, limits: []lim{burst(10, 20)},
		takes: []event{{ms: 0, cost: 20}}, ms: 0, cost: 5,
		want: [2]byAlg{{tiers.TokenBucket: T / 2}},
	}, {
		name: "a token bucket of rate 0 never refills", only: []tiers.Algorithm{tiers.TokenBucket}, limits: []lim{burst(0, 5)},
		takes: []event{{ms: 0, cost: 5}}, ms: 0, cost: 1,
		want: [2]byAlg{{tiers.TokenBucket: -1}},
	}, {
		// Spare capacity (100, barely used) admits up to the ceiling, 8,
		// sooner than the count falls to the limit, 5. Sliding window:
		// floor(8*(T-e)/T) <= 7 from e = 1 into the next bucket (<= 4
		// would take until 3T/8+1). Token bucket (rate 5): the debt 8T
		// falls to 7T in T/5 (to 4T in 4T/5).
		name: "an elastic window waits for its ceiling", metric: metric{capacity: [2]int64{100, 0}},
		limits: []lim{elastic(5, 8)}, takes: []event{{ms: 0, cost: 5}, {ms: 0, cost: 3}}, ms: 0, cost: 1,
		want: [2]byAlg{{T + 1, T, T, T / 5}},
	}, {
		// acme (limit 2, no ceiling) counts 6, of a global usage of 8, the
		// capacity. The global window slides whatever acme's algorithm:
		// floor(8*(T-e)/T) <= 7 from e = 1 into the next bucket, T+1,
		// which is sooner than acme's count falls to 1 by a sliding
		// window (2T/3+1 into it) or a token bucket of rate 2 (5T/2); a
		// fixed window or a log are back to 0 at T.
		name: "an elastic window waits for spare capacity", metric: metric{capacity: [2]int64{8, 0}},
		limits: []lim{elastic(2, tiers.MaxLimit)},
		takes: []event{{customer: "b", ms: 0, cost: 2, limits: []lim{hard(10)}},
			{ms: 0, cost: 2}, {ms: 0, cost: 4}},
		ms: 0, cost: 1,
		want: [2]byAlg{{T + 1, T, T, T + 1}},
	}}
}

func exactWaits(t *testing.T, s suite) {
	if !s.ShortWindows {
		calendarWaits(t, s)
		return
	}
	for _, tc := range waitCases(s.length(0), s.length(1)) {
		if tc.only != nil && !slices.Contains(tc.only, s.alg) {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			c := s.New(t, "acme", "b")
			for i, ev := range tc.takes {
				customer, ls := ev.customer, ev.limits
				if customer == "" {
					customer = "acme"
				}
				if ls == nil {
					ls = tc.limits
				}
				mustTake(t, c, s.charge(tc.metric, customer, ev.cost, ev.ms, ls...),
					fmt.Sprintf("take %d: %s takes %d %s", i, customer, ev.cost, when(ev.ms)))
			}
			ok, out := take(t, c, s.charge(tc.metric, "acme", tc.cost, tc.ms, tc.limits...))
			var wait int64 // when the charge is admitted: its spans' longest wait
			for i := range out {
				want := tc.want[i][s.alg]
				if o := out[i]; o.Passed != (want == 0) || !o.Passed && o.Wait != want {
					t.Errorf("take of %d %s: %s %+v, want wait %d (0: passed, -1: never)",
						tc.cost, when(tc.ms), s.Windows[i], o, want)
				}
				if wait >= 0 && (want < 0 || want > wait) {
					wait = want
				}
			}
			if ok != (wait == 0) {
				t.Fatalf("take of %d %s: admitted %v, want %v", tc.cost, when(tc.ms), ok, wait == 0)
			}
			if t.Failed() || wait == 0 {
				return
			}
			if wait < 0 {
				// Never: not even two of the longer window on.
				at := tc.ms + 2*s.length(1)
				if ok, out := take(t, c, s.charge(tc.metric, "acme", tc.cost, at, tc.limits...)); ok {
					t.Errorf("take of %d %s, where it never is: admitted %+v", tc.cost, when(at), out)
				}
				return
			}
			at := tc.ms + wait - 1
			if ok, out := take(t, c, s.charge(tc.metric, "acme", tc.cost, at, tc.limits...)); ok {
				t.Fatalf("take of %d %s, a millisecond before the wait of %d ends: admitted %+v", tc.cost, when(at), wait, out)
			}
			at++
			if ok, out := take(t, c, s.charge(tc.metric, "acme", tc.cost, at, tc.limits...)); !ok {
				t.Errorf("take of %d %s, when the wait of %d ends: denied %+v", tc.cost, when(at), wait, out)
			}
		})
	}
}

// calendarWaits: a calendar window's count only falls when the window
// ends, so a window that denies waits for its end (its span's End).
func calendarWaits(t *testing.T, s suite) {
	c := s.New(t, "acme", "soft")
	mustTake(t, c, s.hardCharge("acme", 10, 10, 10), "acme takes 10")
	mustTake(t, c, s.charge(plain, "soft", 15, 0, soft(10, 15)), "soft takes 15")
	for _, ch := range []*quota.Charge{s.hardCharge("acme", 1, 10, 10), s.charge(plain, "soft", 1, 0, soft(10, 15))} {
		ok, out := take(t, c, ch)
		if ok {
			t.Errorf("%s takes 1 at its threshold: admitted", ch.Customer)
		}
		for i, sp := range ch.Spans {
			want := sp.End.Sub(ch.At).Milliseconds()
			if out[i].Passed || out[i].Wait != want {
				t.Errorf("%s takes 1 at its threshold: %s %+v, want denied with wait %d (until %s)",
					ch.Customer, sp.Key.Window, out[i], want, sp.End)
			}
		}
	}
}

// never is a reset that never comes: math.MaxInt64 (a token bucket that
// does not refill).
const never = -1

// resetStep is a take or a peek of a case, and what its first span must
// report: the count, whether it passed, and its resets in milliseconds
// after At (never: math.MaxInt64). A span reporting a reset of 0 resets at
// its End: so do sliding and fixed windows.
type resetStep struct {
	peek         bool
	ms, cost     int64
	used         byAlg
	denied       [4]bool
	reset, after byAlg
}

func usedAndResets(t *testing.T, s suite) {
	if !s.ShortWindows {
		calendarResets(t, s)
		return
	}
	T := s.length(0)
	c := s.New(t, "acme", "still")
	// A limit of 10 (a token bucket's rate). Bucket windows reset at the
	// end of their bucket. A log resets when its newest unit leaves (at
	// once when empty); with the cost, when the cost leaves. A bucket
	// when its debt is paid off, at 10 a window: 3 units in 3T/10.
	steps := []resetStep{
		{ms: 0, cost: 3, used: all(0), reset: byAlg{T, T, 0, 0}, after: byAlg{T, T, T, 3 * T / 10}},
		// The bucket owes 3T - 2.5T.
		{ms: T / 4, cost: 2, used: byAlg{3, 3, 3, 1},
			reset: byAlg{T, T, T, 3 * T / 10}, after: byAlg{T, T, T/4 + T, T / 2}},
		// The bucket is paid off at T/2.
		{ms: T / 2, cost: 5, used: byAlg{5, 5, 5, 0},
			reset: byAlg{T, T, T/4 + T, T / 2}, after: byAlg{T, T, T/2 + T, T}},
		{peek: true, ms: T / 2, cost: 1, used: byAlg{10, 10, 10, 5}, denied: [4]bool{true, true, true, false},
			reset: byAlg{T, T, T/2 + T, T}, after: byAlg{T, T, T/2 + T, T/2 + 6*T/10}},
		// The sliding window weighs the previous bucket's 10 by 3/4; the
		// log keeps the 5 units of T/2.
		{peek: true, ms: 5 * T / 4, cost: 1, used: byAlg{7, 0, 5, 0},
			reset: byAlg{2 * T, 2 * T, T/2 + T, 5 * T / 4}, after: byAlg{2 * T, 2 * T, 5*T/4 + T, 5*T/4 + T/10}},
	}
	for _, st := range steps {
		s.wantResets(t, c, "acme", hard(10), st)
	}
	if s.alg != tiers.TokenBucket {
		return
	}
	// A bucket that never refills (rate 0, burst 5) never resets.
	for _, st := range []resetStep{
		{ms: 0, cost: 2, used: all(0), reset: all(0), after: all(never)},
		{ms: T, cost: 1, used: all(2), reset: all(never), after: all(never)},
	} {
		s.wantResets(t, c, "still", burst(0, 5), st)
	}
}

// wantResets takes (or peeks at) st and checks the first span's outcome.
func (s suite) wantResets(t *testing.T, c quota.Counter, customer string, l lim, st resetStep) {
	t.Helper()
	ch := s.charge(plain, customer, st.cost, st.ms, l)
	what := fmt.Sprintf("%s takes %d %s", customer, st.cost, when(st.ms))
	var out []quota.Outcome
	if st.peek {
		what = fmt.Sprintf("%s peeks at %d %s", customer, st.cost, when(st.ms))
		out = peek(t, c, ch)
	} else {
		var ok bool
		ok, out = take(t, c, ch)
		if ok == st.denied[s.alg] {
			t.Fatalf("%s: admitted %v, want %v: %+v", what, ok, !st.denied[s.alg], out[0])
		}
	}
	o := out[0]
	ms := func(off int64) int64 {
		if off == never {
			return math.MaxInt64
		}
		return s.At.UnixMilli() + off
	}
	reset := func(got int64) int64 {
		if got == 0 {
			return ch.Spans[0].End.UnixMilli()
		}
		return got
	}
	if o.Used != st.used[s.alg] || o.Passed == st.denied[s.alg] {
		t.Errorf("%s: %+v, want used %d, passed %v", what, o, st.used[s.alg], !st.denied[s.alg])
	}
	if got, want := reset(o.ResetMs), ms(st.reset[s.alg]); got != want {
		t.Errorf("%s: resets at %d (+%d), want %d (+%d)", what, got, got-s.At.UnixMilli(), want, want-s.At.UnixMilli())
	}
	if got, want := reset(o.ResetAfterMs), ms(st.after[s.alg]); got != want {
		t.Errorf("%s: resets with the cost at %d (+%d), want %d (+%d)", what, got, got-s.At.UnixMilli(), want, want-s.At.UnixMilli())
	}
}

// calendarResets: a calendar window's count is back to zero when it ends.
func calendarResets(t *testing.T, s suite) {
	c := s.New(t, "acme")
	for i, st := range []struct {
		peek bool
		cost int64
		used int64
	}{{false, 3, 0}, {false, 2, 3}, {true, 1, 5}} {
		ch := s.hardCharge("acme", st.cost, 10, 10)
		var out []quota.Outcome
		if st.peek {
			out = peek(t, c, ch)
		} else {
			out = mustTake(t, c, ch, fmt.Sprintf("step %d", i))
		}
		for j, sp := range ch.Spans {
			o := out[j]
			if o.Used != st.used || !o.Passed {
				t.Errorf("step %d: %s %+v, want passed at %d", i, sp.Key.Window, o, st.used)
			}
			for _, r := range []int64{o.ResetMs, o.ResetAfterMs} {
				if r != 0 && r != sp.End.UnixMilli() {
					t.Errorf("step %d: %s resets at %d, want its end %s (or 0)", i, sp.Key.Window, r, sp.End)
				}
			}
		}
	}
}

// countAt is a count a case expects at ms after At.
type countAt struct {
	ms   int64
	want byAlg
}

// wantCounts checks customer's count in window i (limits ls) at each
// moment of want.
func (s suite) wantCounts(t *testing.T, c quota.Counter, m metric, customer string, i int, ls []lim, what string, want []countAt) {
	t.Helper()
	for _, w := range want {
		if got := s.count(t, c, m, customer, w.ms, i, ls...); got != w.want[s.alg] {
			t.Errorf("%s: %s counts %d %s, want %d", what, s.Windows[i], got, when(w.ms), w.want[s.alg])
		}
	}
}

func countsFall(t *testing.T, s suite) {
	T := s.length(0)
	c := s.New(t, "acme")
	ls := []lim{hard(10)}
	mustTake(t, c, s.charge(plain, "acme", 4, 0, ls...), "takes 4 at 0")
	mustTake(t, c, s.charge(plain, "acme", 6, T/2, ls...), "takes 6 at T/2")
	// The token bucket owes 4T at 0, nothing from 4T/10, 6T at T/2, paid
	// off at T/2 + 6T/10.
	s.wantCounts(t, c, plain, "acme", 0, ls, "4 at 0, 6 at T/2", []countAt{
		{T / 2, byAlg{10, 10, 10, 6}},
		{3 * T / 4, byAlg{10, 10, 10, 4}}, // 3.5 tokens
		{T - 1, byAlg{10, 10, 10, 2}},     // 1 token and 10/T
		{T, byAlg{10, 0, 6, 1}},           // the log's 4 units of 0 left
		{T + T/4, byAlg{7, 0, 6, 0}},      // floor(10 * 3/4)
		{T + T/2, byAlg{5, 0, 0, 0}},
		{2*T - 1, byAlg{0, 0, 0, 0}}, // floor(10 * 1/T)
		{2 * T, all(0)},
	})
}

func undoTake(t *testing.T, s suite) {
	T := s.length(0)
	// Limits of 10 and 20 (token buckets refill 10 in T, 20 in U); the
	// metric declares capacities, so every take counts in its global
	// windows too, and an undo lists them all.
	m := metric{capacity: [2]int64{100, 100}}
	ls := []lim{hard(10), hard(20)}
	undo := func(t *testing.T, c quota.Counter, ch *quota.Charge, ms int64) {
		t.Helper()
		ch.Undoing(s.ms(ms))
		giveBack(t, c, ch)
	}
	wantAll := func(t *testing.T, c quota.Counter, ms int64, want int64, what string) {
		t.Helper()
		for i := range 2 {
			s.wantCounts(t, c, m, "acme", i, ls, what, []countAt{{ms, all(want)}})
			s.wantGlobal(t, c, m, i, ms, want, what+", "+when(ms))
		}
	}

	t.Run("at once", func(t *testing.T) {
		c := s.New(t, "acme", probe)
		a := s.charge(m, "acme", 4, 0, ls...)
		mustTake(t, c, a, "takes 4")
		b := s.charge(m, "acme", 3, 0, ls...)
		mustTake(t, c, b, "takes 3")
		undo(t, c, b, 0)
		wantAll(t, c, 0, 4, "4 and 3 taken, the 3 undone")
		undo(t, c, a, 0)
		wantAll(t, c, 0, 0, "both undone")
	})

	t.Run("after another take", func(t *testing.T) {
		// A's 4 leave, B's 3 stay: a token bucket gives back what A
		// still owes at T/4 (1.5T), not 4 tokens (which would leave 1).
		c := s.New(t, "acme", probe)
		a := s.charge(m, "acme", 4, 0, ls...)
		mustTake(t, c, a, "takes 4 at 0")
		mustTake(t, c, s.charge(m, "acme", 3, T/4, ls...), "takes 3 at T/4")
		undo(t, c, a, T/4)
		wantAll(t, c, T/4, 3, "4 at 0 undone at T/4, after 3 at T/4")
	})

	t.Run("in the next bucket", func(t *testing.T) {
		// At T, A's 4 are the first window's previous bucket: they leave
		// it, not the current one (a refund would take B's 3 first). The
		// log's entry of A and the bucket's debt of it are gone already:
		// nothing of B's goes with them. The global windows counted A
		// all the same: they give back all 4.
		c := s.New(t, "acme", probe)
		a := s.charge(m, "acme", 4, 0, ls...)
		mustTake(t, c, a, "takes 4 at 0")
		mustTake(t, c, s.charge(m, "acme", 3, T, ls...), "takes 3 at T")
		undo(t, c, a, T)
		wantAll(t, c, T, 3, "4 at 0 undone at T, after 3 at T")
		// Half a bucket on, the sliding window still counts B's 3 whole
		// (had the undo taken them, it would count floor(3/2) of A's); the
		// token bucket has refilled them.
		s.wantCounts(t, c, m, "acme", 0, ls, "4 at 0 undone at T, after 3 at T", []countAt{{T + T/2, byAlg{3, 3, 3, 0}}})
	})

	t.Run("taken after a later one", func(t *testing.T) {
		// B's clock was read before A's, but B counted after A (two
		// concurrent checks; or a store's clock, as a process learns it,
		// stepping back a millisecond). A log keeps B's 3 in A's entry of
		// T/4, not in one of its own at 0: undoing B takes them from
		// there, and A's 4 stay.
		c := s.New(t, "acme", probe)
		mustTake(t, c, s.charge(m, "acme", 4, T/4, ls...), "takes 4 at T/4")
		b := s.charge(m, "acme", 3, 0, ls...)
		mustTake(t, c, b, "then takes 3 at 0")
		undo(t, c, b, T/4)
		for i := range 2 {
			s.wantCounts(t, c, m, "acme", i, ls, "4 at T/4, then 3 at 0 undone at T/4", []countAt{{T / 4, byAlg{4, 4, 4, 4}}})
		}
	})
}

func refundsOverTime(t *testing.T, s suite) {
	T := s.length(0)
	ls := []lim{hard(10)}
	refund := func(t *testing.T, c quota.Counter, cost, ms, used int64) {
		t.Helper()
		if out := giveBack(t, c, s.charge(plain, "acme", cost, ms, ls...)); out[0].Used != used {
			t.Errorf("refund of %d %s: count before %d, want %d", cost, when(ms), out[0].Used, used)
		}
	}

	t.Run("within a bucket", func(t *testing.T) {
		// 4 at 0, 3 at T/4, 5 refunded at T/2: a log gives back its newest
		// units first (the 3 of T/4, then 2 of 0), so that what remains
		// leaves at T. The token bucket owes 2T at T/2.
		c := s.New(t, "acme")
		mustTake(t, c, s.charge(plain, "acme", 4, 0, ls...), "takes 4 at 0")
		mustTake(t, c, s.charge(plain, "acme", 3, T/4, ls...), "takes 3 at T/4")
		refund(t, c, 5, T/2, byAlg{7, 7, 7, 2}[s.alg])
		s.wantCounts(t, c, plain, "acme", 0, ls, "7 taken, 5 refunded at T/2", []countAt{
			{T / 2, byAlg{2, 2, 2, 0}},
			{T, byAlg{2, 0, 0, 0}},
			{T + T/2, byAlg{1, 0, 0, 0}},
		})
	})

	t.Run("across buckets", func(t *testing.T) {
		// 6 at 0, 3 at T, 5 refunded at T: bucket windows give back the
		// current bucket's 3 first, then 2 of the previous one's 6.
		c := s.New(t, "acme")
		mustTake(t, c, s.charge(plain, "acme", 6, 0, ls...), "takes 6 at 0")
		mustTake(t, c, s.charge(plain, "acme", 3, T, ls...), "takes 3 at T")
		refund(t, c, 5, T, byAlg{9, 3, 3, 3}[s.alg])
		s.wantCounts(t, c, plain, "acme", 0, ls, "6 at 0, 3 at T, 5 refunded at T", []countAt{
			{T, byAlg{4, 0, 0, 0}},
			{T + T/2, byAlg{2, 0, 0, 0}},
		})
	})
}
