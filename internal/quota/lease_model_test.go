package quota_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotatest"
	"github.com/quotad/quotad/internal/tiers"
)

// modelProc is one quotad process of the model: its lease pool over its
// view of the shared store.
type modelProc struct {
	ledger *quotatest.Ledger
	pool   *quota.LeasePool
	alive  bool
	deaf   bool // alive, but it does not answer recalls
	// unheard: it has not heard of the last reset yet (it will).
	unheard bool
}

// TestLeasePoolModel runs lease pools of several processes over one store
// through random interleavings of checks, periodic flushes (reports, idle
// settlements, resolutions), recalls answered or not, crashes, new
// processes, refunds, window rollovers, resets, and store calls that fail
// before the store applies them, lose their answer after it did, or reach
// it late (a copy sent on a connection given up on), and holds them to a
// plain count of admitted units:
//
//   - never over-granted: the units admitted in a window, less those
//     refunded, never exceed its bound;
//   - every unit a live process may still admit is reserved in the store,
//     with the units admitted: reserved >= admitted + held unused;
//   - nothing stranded: while every live process answers recalls and
//     hears that units came back, a check that met no failure is denied
//     only when its cost exceeds, in one of its windows, the units still
//     free plus those live processes hold unused;
//   - nothing lost: once failures stop and every live process settles,
//     a counter holds exactly its admitted units, and at most the units
//     dead processes last reported holding unused besides.
func TestLeasePoolModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		clock := quotatest.NewClock(time.Date(2026, 11, 22, 22, 45, 0, 0, time.UTC)) // hour and day roll over
		store := quotatest.NewStore()
		bound := map[tiers.Window]int64{
			tiers.Hour: rapid.Int64Range(0, 120).Draw(rt, "hour bound"),
			tiers.Day:  rapid.Int64Range(0, 400).Draw(rt, "day bound"),
		}
		var procs []*modelProc
		// faulty: the step's store calls may fail, lose their answer or
		// arrive late.
		faulty := false
		faults := func(op quotatest.LeaseOp) quotatest.Fault {
			if !faulty {
				return quotatest.NoFault
			}
			return quotatest.Fault(rapid.IntRange(0, 3).Draw(rt, "fault of "+string(op)))
		}
		start := func() {
			l := store.Process()
			l.Faults = faults
			p := &modelProc{ledger: l, pool: quota.NewLeasePool(l, clock), alive: true}
			p.pool.Wait = func(context.Context, int) error { return nil }
			p.pool.IdleAfter = 3 * quota.FlushEvery // settle idle leases often
			l.OnRecall(func(k quota.CounterKey) {
				if !p.deaf {
					// A release that fails leaves the lease to be resolved.
					if err := p.pool.Release(ctx, k); err != nil && !faulty {
						rt.Fatalf("release: %v", err)
					}
				}
			})
			l.OnFreed(func(k quota.CounterKey) {
				if !p.deaf {
					p.pool.Freed(k)
				}
			})
			procs = append(procs, p)
		}
		for range rapid.IntRange(1, 4).Draw(rt, "processes") {
			start()
		}
		live := func() []*modelProc {
			var out []*modelProc
			for _, p := range procs {
				if p.alive {
					out = append(out, p)
				}
			}
			return out
		}
		charge := func(cost int64) *quota.Charge {
			now := clock.Now()
			c := &quota.Charge{Customer: "acme", Metric: "api_calls", Cost: cost, At: now}
			for _, w := range []tiers.Window{tiers.Hour, tiers.Day} {
				start, end := quota.Bounds(w, now, tiers.Anchor{})
				c.Spans = append(c.Spans, quota.Span{
					Key: quota.CounterKey{Customer: "acme", Metric: "api_calls", Window: w, Start: start}, End: end,
					Rule: quota.Rule{Mode: tiers.Hard, Limit: bound[w], Size: bound[w], Threshold: bound[w], Ceiling: tiers.MaxLimit}})
			}
			return c
		}
		// held is what live processes hold unused of k.
		held := func(k quota.CounterKey) int64 {
			var n int64
			for _, p := range live() {
				n += p.pool.Held(k)
			}
			return n
		}
		admitted := map[quota.CounterKey]int64{} // less refunds

		steps := rapid.IntRange(1, 150).Draw(rt, "steps")
		for i := range steps {
			alive := live()
			if len(alive) == 0 {
				start()
				continue
			}
			p := rapid.SampledFrom(alive).Draw(rt, fmt.Sprintf("process %d", i))
			if p.unheard && rapid.Bool().Draw(rt, fmt.Sprintf("hears %d", i)) {
				p.pool.Forget("acme", "api_calls")
				p.unheard = false
			}
			faulty = rapid.IntRange(0, 4).Draw(rt, fmt.Sprintf("faulty %d", i)) == 0
			switch op := rapid.IntRange(0, 11).Draw(rt, fmt.Sprintf("op %d", i)); {
			case op < 5: // a check
				c := charge(rapid.Int64Range(1, 12).Draw(rt, fmt.Sprintf("cost %d", i)))
				free := make([]int64, len(c.Spans))
				for j, sp := range c.Spans {
					free[j] = bound[sp.Key.Window] - store.Count(sp.Key) + held(sp.Key)
				}
				answering := !p.unheard
				for _, q := range alive {
					answering = answering && !q.deaf
				}
				out := make([]quota.Outcome, len(c.Spans))
				ok, err := p.pool.Take(ctx, one(c, out))
				rt.Logf("step %d: process %d checks %d: %v %v (%d calls)", i, slices.Index(procs, p), c.Cost, ok, err, c.Trips)
				switch {
				case err != nil && faulty:
					break
				case err != nil:
					rt.Fatalf("step %d: take: %v", i, err)
				case ok:
					for _, sp := range c.Spans {
						admitted[sp.Key] += c.Cost
					}
				}
				if err != nil || ok {
					break
				}
				stranded := answering
				for j := range c.Spans {
					stranded = stranded && free[j] >= c.Cost
				}
				if stranded {
					rt.Fatalf("step %d: a check of %d denied with %v units to be had (free or held by live processes)", i, c.Cost, free)
				}
			case op == 5:
				err := p.pool.Flush(ctx, clock.Now())
				rt.Logf("step %d: process %d flushes: %v", i, slices.Index(procs, p), err)
				if err != nil && !faulty {
					rt.Fatalf("step %d: flush: %v", i, err)
				}
			case op == 6:
				clock.Advance(time.Duration(rapid.IntRange(0, 20).Draw(rt, fmt.Sprintf("minutes %d", i))) * time.Minute)
			case op == 7: // SIGKILL: nothing settled, the lease rows stay
				store.Kill(p.ledger)
				p.alive = false
			case op == 8:
				if len(procs) < 6 {
					start()
				} else if p.deaf = !p.deaf; !p.deaf {
					p.pool.ClearMarks() // as its listener's resync does
				}
			case op == 9: // a refund, as the engine does it
				c := charge(rapid.Int64Range(1, 12).Draw(rt, fmt.Sprintf("refund %d", i)))
				out := make([]quota.Outcome, len(c.Spans))
				if err := p.pool.Reclaim(ctx, one(c, out)); err != nil {
					if faulty {
						break
					}
					rt.Fatalf("step %d: reclaim: %v", i, err)
				}
				err := p.ledger.Atomically(ctx, func(ctx context.Context, tx quota.Tx) error {
					return tx.GiveBack(ctx, one(c, out))
				})
				if err != nil {
					rt.Fatalf("step %d: give back: %v", i, err)
				}
				for j, sp := range c.Spans {
					admitted[sp.Key] = max(0, admitted[sp.Key]-min(c.Cost, out[j].Used))
				}
			case op == 10: // copies of failed calls reach the store late
				rt.Logf("step %d: %d late calls arrive", i, store.DeliverLate())
			}
			faulty = false
			for _, w := range []tiers.Window{tiers.Hour, tiers.Day} {
				k := charge(1).Spans[w-tiers.Hour].Key
				line := fmt.Sprintf("step %d: %s counts %d, %d admitted; leases:", i, w, store.Count(k), admitted[k])
				for j, q := range procs {
					held, unused := store.Lease(q.ledger, k)
					line += fmt.Sprintf(" %d(alive %v, row %v %d, holds %d, %+v)", j, q.alive, held, unused, q.pool.Held(k), q.pool.Stats())
				}
				rt.Logf("%s", line)
			}
			if rapid.IntRange(0, 20).Draw(rt, fmt.Sprintf("reset %d", i)) == 0 {
				// A reset zeroes the counters and ends their leases. The
				// processes are told at once (a notification, within
				// milliseconds), but one holding no unused units may hear
				// late: its next refill finds its lease lost, or, if it
				// knows the counter full, it denies from memory until it
				// hears.
				if err := p.ledger.Reset(ctx, "ops", "acme", "api_calls", clock.Now()); err != nil {
					rt.Fatalf("step %d: reset: %v", i, err)
				}
				for _, q := range live() {
					c := charge(1)
					holds := false
					for _, sp := range c.Spans {
						holds = holds || q.pool.Held(sp.Key) > 0
					}
					if holds || rapid.Bool().Draw(rt, fmt.Sprintf("told %d", i)) {
						q.pool.Forget("acme", "api_calls")
					} else {
						q.unheard = true
					}
				}
				clear(admitted)
			}
			for k, n := range admitted {
				if n > bound[k.Window] {
					rt.Fatalf("step %d: %d units admitted in the %s from %s, bound %d", i, n, k.Window, k.Start, bound[k.Window])
				}
				if r, h := store.Count(k), held(k); r < n+h {
					rt.Fatalf("step %d: %s from %s reserves %d units, but %d are admitted and %d held unused", i, k.Window, k.Start, r, n, h)
				}
			}
		}

		// Failures stop: late copies arrive, every live process resolves
		// its calls in doubt and settles. What stays counted is admitted,
		// or was held by a process that died.
		store.DeliverLate()
		for _, p := range live() {
			for range 2 { // a release heard during the first may leave a second to do
				if err := p.pool.Flush(ctx, clock.Now()); err != nil {
					rt.Fatalf("final flush: %v", err)
				}
			}
			if err := p.pool.Close(ctx); err != nil {
				rt.Fatalf("close: %v", err)
			}
			if s := p.pool.Stats(); s.InDoubt != 0 || s.Units != 0 {
				rt.Fatalf("after close: %+v, want nothing held or in doubt", s)
			}
		}
		for k, n := range admitted {
			if _, end := quota.Bounds(k.Window, k.Start, tiers.Anchor{}); !clock.Now().Before(end) {
				continue // leases of ended windows are dropped, not settled: nothing counts there any more
			}
			var dead int64
			for _, p := range procs {
				if !p.alive {
					_, unused := store.Lease(p.ledger, k)
					dead += unused
				}
			}
			if r := store.Count(k); r < n || r > n+dead {
				rt.Fatalf("%s from %s counts %d units, every live lease settled: %d are admitted, and dead processes reported %d unused", k.Window, k.Start, r, n, dead)
			}
		}
	})
}
