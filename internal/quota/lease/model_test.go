package lease_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/tiers"
)

// modelProc is one quotad process of the model: its lease pool over its
// view of the shared store.
type modelProc struct {
	ledger *quotafake.Ledger
	pool   *lease.Pool
	alive  bool
	deaf   bool // alive, but it does not answer recalls
	// unheard: the metrics it has not heard the last reset of yet (it
	// will).
	unheard map[string]bool
}

// modelMetrics are the metrics of the model's checks: each check is a set
// of a charge of each, decided together.
var modelMetrics = [2]string{"api_calls", "exports"}

// modelWindows are the windows each charge of a check counts in.
var modelWindows = [2]tiers.Window{tiers.Hour, tiers.Day}

// TestLeasePoolModel runs lease pools of several processes over one store
// through random interleavings of checks, periodic flushes (reports, idle
// settlements, resolutions), recalls answered or not, crashes, new
// processes, refunds, window rollovers, resets, and store calls that fail
// before the store applies them, lose their answer after it did, or reach
// it late (a copy sent on a connection given up on). Each check, and each
// refund, is a set of two charges, of two metrics, each in an hour and a
// day (four counters), admitted all or none; a reset resets one metric.
// It holds them to a plain count of admitted units, per counter:
//
//   - never over-granted: the units admitted in a window, less those
//     refunded, never exceed its bound;
//   - every unit a live process may still admit is reserved in the store,
//     with the units admitted: reserved >= admitted + held unused;
//   - nothing stranded: while every live process answers recalls and
//     hears that units came back, a check that met no failure is denied
//     only when a charge's cost exceeds, in one of its windows, the units
//     still free plus those live processes hold unused;
//   - all or nothing: the units of a set denied count nowhere (the
//     counts above would find them: reserved beyond admitted and held,
//     or left over once every lease settled);
//   - nothing lost: once failures stop and every live process settles,
//     a counter holds exactly its admitted units, and at most the units
//     dead processes last reported holding unused besides.
func TestLeasePoolModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		clock := quotafake.NewClock(time.Date(2026, 11, 22, 22, 45, 0, 0, time.UTC)) // hour and day roll over
		store := quotafake.NewStore()
		bound := map[string]map[tiers.Window]int64{}
		for _, m := range modelMetrics {
			bound[m] = map[tiers.Window]int64{
				tiers.Hour: rapid.Int64Range(0, 120).Draw(rt, m+" hour bound"),
				tiers.Day:  rapid.Int64Range(0, 400).Draw(rt, m+" day bound"),
			}
		}
		var procs []*modelProc
		// faulty: the step's store calls may fail, lose their answer or
		// arrive late.
		faulty := false
		faults := func(op quotafake.LeaseOp) quotafake.Fault {
			if !faulty {
				return quotafake.NoFault
			}
			return quotafake.Fault(rapid.IntRange(0, 3).Draw(rt, "fault of "+string(op)))
		}
		start := func() {
			l := store.Process()
			l.Faults = faults
			p := &modelProc{ledger: l, pool: lease.NewPool(l, clock), alive: true, unheard: map[string]bool{}}
			p.pool.Wait = func(context.Context, int) error { return nil }
			p.pool.IdleAfter = 3 * quota.FlushEvery // settle idle leases often
			l.OnRecall(func(k quota.CounterKey) {
				if !p.deaf {
					// A release that fails leaves the lease to be resolved.
					if err := p.pool.Yield(ctx, k); err != nil && !faulty {
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
		charge := func(metric string, cost int64) quota.Charge {
			now := clock.Now()
			c := quota.Charge{Customer: "acme", Metric: metric, Cost: cost, At: now, Out: make([]quota.Outcome, len(modelWindows))}
			for _, w := range modelWindows {
				start, end := quota.Bounds(w, now, tiers.Anchor{})
				b := bound[metric][w]
				c.Spans = append(c.Spans, quota.Span{
					Key: quota.CounterKey{Customer: "acme", Metric: metric, Window: w, Start: start}, End: end,
					Rule: quota.Rule{Mode: tiers.Hard, Limit: b, Size: b, Threshold: b, Ceiling: tiers.MaxLimit}})
			}
			return c
		}
		// set returns a set of a charge of each metric, each of a cost
		// drawn from 1 to 12, in a drawn order.
		set := func(what string) []quota.Charge {
			var cs []quota.Charge
			for _, m := range modelMetrics {
				cs = append(cs, charge(m, rapid.Int64Range(1, 12).Draw(rt, what+" of "+m)))
			}
			if rapid.Bool().Draw(rt, what+" order") {
				cs[0], cs[1] = cs[1], cs[0]
			}
			return cs
		}
		// held is what live processes hold unused of k.
		held := func(k quota.CounterKey) int64 {
			var n int64
			for _, p := range live() {
				n += p.pool.Unused(k)
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
			for _, m := range modelMetrics {
				if p.unheard[m] && rapid.Bool().Draw(rt, fmt.Sprintf("hears %d of %s", i, m)) {
					p.pool.Forget("acme", m)
					delete(p.unheard, m)
				}
			}
			faulty = rapid.IntRange(0, 4).Draw(rt, fmt.Sprintf("faulty %d", i)) == 0
			switch op := rapid.IntRange(0, 11).Draw(rt, fmt.Sprintf("op %d", i)); {
			case op < 5: // a check: a set of a charge of each metric
				cs := set(fmt.Sprintf("check %d", i))
				// What each span of each charge could have: free, or held
				// unused by live processes.
				var free [2][len(modelWindows)]int64
				for ci := range cs {
					for j, sp := range cs[ci].Spans {
						free[ci][j] = bound[sp.Key.Metric][sp.Key.Window] - store.Count(sp.Key) + held(sp.Key)
					}
				}
				answering := len(p.unheard) == 0
				for _, q := range alive {
					answering = answering && !q.deaf
				}
				ok, err := p.pool.Take(ctx, cs)
				rt.Logf("step %d: process %d checks %s %d and %s %d: %v %v (%d calls)", i, slices.Index(procs, p),
					cs[0].Metric, cs[0].Cost, cs[1].Metric, cs[1].Cost, ok, err, cs[0].Trips+cs[1].Trips)
				switch {
				case err != nil && faulty:
					break
				case err != nil:
					rt.Fatalf("step %d: take: %v", i, err)
				case ok:
					for _, c := range cs {
						for _, sp := range c.Spans {
							admitted[sp.Key] += c.Cost
						}
					}
				}
				if err != nil || ok {
					break
				}
				stranded := answering
				for ci, c := range cs {
					for j := range c.Spans {
						stranded = stranded && free[ci][j] >= c.Cost
					}
				}
				if stranded {
					rt.Fatalf("step %d: a set of %s %d and %s %d denied with %v units to be had (free or held by live processes)",
						i, cs[0].Metric, cs[0].Cost, cs[1].Metric, cs[1].Cost, free)
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
			case op == 9: // a refund of a set, as the engine does it
				cs := set(fmt.Sprintf("refund %d", i))
				if err := p.pool.Reclaim(ctx, cs); err != nil {
					if faulty {
						break
					}
					rt.Fatalf("step %d: reclaim: %v", i, err)
				}
				err := p.ledger.Atomically(ctx, func(ctx context.Context, tx quota.Tx) error {
					return tx.GiveBack(ctx, cs)
				})
				if err != nil {
					rt.Fatalf("step %d: give back: %v", i, err)
				}
				for _, c := range cs {
					for j, sp := range c.Spans {
						admitted[sp.Key] = max(0, admitted[sp.Key]-min(c.Cost, c.Out[j].Used))
					}
				}
			case op == 10: // copies of failed calls reach the store late
				rt.Logf("step %d: %d late calls arrive", i, store.DeliverLate())
			}
			faulty = false
			line := fmt.Sprintf("step %d: processes:", i)
			for n, q := range procs {
				line += fmt.Sprintf(" %d(alive %v, %+v)", n, q.alive, q.pool.Stats())
			}
			rt.Logf("%s", line)
			for _, m := range modelMetrics {
				for j, sp := range charge(m, 1).Spans {
					k := sp.Key
					line := fmt.Sprintf("step %d: %s's %s counts %d, %d admitted; leases:", i, m, modelWindows[j],
						store.Count(k), admitted[k])
					for n, q := range procs {
						held, unused := store.Lease(q.ledger, k)
						line += fmt.Sprintf(" %d(row %v %d, holds %d)", n, held, unused, q.pool.Unused(k))
					}
					rt.Logf("%s", line)
				}
			}
			if rapid.IntRange(0, 20).Draw(rt, fmt.Sprintf("reset %d", i)) == 0 {
				// A reset zeroes a metric's counters and ends their
				// leases; the other metric's go on. The processes are told
				// at once (a notification, within milliseconds), but one
				// holding no unused units may hear late: its next refill
				// finds its lease lost, or, if it knows the counter full,
				// it denies from memory until it hears.
				m := rapid.SampledFrom(modelMetrics[:]).Draw(rt, fmt.Sprintf("reset %d of", i))
				if err := p.ledger.Reset(ctx, "ops", "acme", m, clock.Now()); err != nil {
					rt.Fatalf("step %d: reset: %v", i, err)
				}
				for _, q := range live() {
					holds := false
					for _, sp := range charge(m, 1).Spans {
						holds = holds || q.pool.Unused(sp.Key) > 0
					}
					if holds || rapid.Bool().Draw(rt, fmt.Sprintf("told %d", i)) {
						q.pool.Forget("acme", m)
					} else {
						q.unheard[m] = true
					}
				}
				maps.DeleteFunc(admitted, func(k quota.CounterKey, _ int64) bool { return k.Metric == m })
			}
			for k, n := range admitted {
				if b := bound[k.Metric][k.Window]; n > b {
					rt.Fatalf("step %d: %d units of %s admitted in the %s from %s, bound %d", i, n, k.Metric, k.Window, k.Start, b)
				}
				if r, h := store.Count(k), held(k); r < n+h {
					rt.Fatalf("step %d: %s's %s from %s reserves %d units, but %d are admitted and %d held unused", i,
						k.Metric, k.Window, k.Start, r, n, h)
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
				rt.Fatalf("%s's %s from %s counts %d units, every live lease settled: %d are admitted, and dead processes reported %d unused",
					k.Metric, k.Window, k.Start, r, n, dead)
			}
		}
	})
}
