package leasetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/tiers"
)

// The case of this file runs the store's one client, lease.Pool, in
// several processes at once over it: whatever order the store's calls
// come in, the pools keep the lease rules (see quota's lease.go) on sets
// of charges, all or nothing.

// atClock is a quota.Clock that stays at At.
type atClock struct{}

func (atClock) Now() time.Time { return At }

// poolPart is a charge the sets of poolSets are made of: a customer's
// api_calls in some windows of At, under hard limits (its counters'
// bounds).
type poolPart struct {
	customer string
	windows  []tiers.Window
	bounds   []int64
}

// charge returns a charge of cost units of p, as a check resolves it: its
// day window counts in the metric's global usage.
func (p poolPart) charge(cost int64) quota.Charge {
	c := quota.Charge{Customer: p.customer, Metric: "api_calls", Cost: cost, At: At, Globals: []quota.GlobalKey{global()},
		Out: make([]quota.Outcome, len(p.windows))}
	for i, w := range p.windows {
		start, end := quota.Bounds(w, At, tiers.Anchor{})
		sp := quota.Span{Key: quota.CounterKey{Customer: p.customer, Metric: "api_calls", Window: w, Start: start}, End: end,
			Rule: quota.Rule{Mode: tiers.Hard, Limit: p.bounds[i], Size: p.bounds[i], Threshold: p.bounds[i], Ceiling: tiers.MaxLimit}}
		if w == tiers.Day {
			sp.Global = global()
		}
		c.Spans = append(c.Spans, sp)
	}
	return c
}

// poolSets: 4 processes, each with its lease pool over the store and 16
// goroutines taking random sets of charges (of acme in the hour and the
// day, of globex in the day: three counters; random costs, subsets and
// orders) against bounds the sets soon reach, recalling one another's
// units and flushing as they go (settling leases idle for two flushes).
// No set is admitted beyond a bound, and once every pool has settled,
// each counter holds exactly the units of the admitted sets that charged
// it, and the metric's global usage their sum.
func poolSets(t *testing.T, s Store) {
	const procs, workers, each = 4, 16, 8
	parts := []poolPart{
		{customer: "acme", windows: []tiers.Window{tiers.Hour, tiers.Day}, bounds: []int64{300, 400}},
		{customer: "globex", windows: []tiers.Window{tiers.Day}, bounds: []int64{250}},
	}
	ctx := context.Background()
	done := make(chan struct{}) // the listeners stop
	type proc struct {
		*Process
		pool     *lease.Pool
		flushing sync.Mutex
	}
	ps := make([]*proc, procs)
	var yields sync.WaitGroup // recalls being answered, as quotad does: each in a goroutine
	var listening sync.WaitGroup
	for i := range ps {
		p := &proc{Process: s.Process(t)}
		p.pool = lease.NewPool(p.Store, atClock{})
		p.pool.IdleAfter = 2 * quota.FlushEvery
		ps[i] = p
		listening.Go(func() {
			for {
				select {
				case k := <-p.Recalls:
					yields.Go(func() {
						if err := p.pool.Yield(ctx, k); err != nil {
							t.Errorf("process %d: yield of %v: %v", i, k, err)
						}
					})
				case k := <-p.Freed:
					p.pool.Freed(k)
				case <-done:
					return
				}
			}
		})
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	admitted := make([]atomic.Int64, len(parts))
	var sets, denied atomic.Int64
	var wg sync.WaitGroup
	for i, p := range ps {
		for w := range workers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(seed, uint64(i*workers+w)))
				for j := range each {
					pick := rng.Perm(len(parts))[:1+rng.IntN(len(parts))]
					cs := make([]quota.Charge, len(pick))
					for k, pi := range pick {
						cs[k] = parts[pi].charge(1 + rng.Int64N(5))
					}
					ok, err := p.pool.Take(ctx, cs)
					if err != nil {
						t.Errorf("process %d: take: %v", i, err)
						return
					}
					sets.Add(1)
					if !ok {
						denied.Add(1)
					} else {
						for k, pi := range pick {
							admitted[pi].Add(cs[k].Cost)
						}
					}
					if j%4 == 3 && p.flushing.TryLock() { // one flush at a time per process
						err := p.pool.Flush(ctx, At)
						p.flushing.Unlock()
						if err != nil {
							t.Errorf("process %d: flush: %v", i, err)
							return
						}
					}
				}
			})
		}
	}
	wg.Wait()
	// The listeners stop, the recalls being answered end, and every pool
	// settles.
	close(done)
	listening.Wait()
	yields.Wait()
	for i, p := range ps {
		if err := p.pool.Close(ctx); err != nil {
			t.Errorf("process %d: close: %v", i, err)
		}
	}
	if t.Failed() {
		return
	}
	if denied.Load() == 0 {
		t.Errorf("%d sets asking for more than the bounds admitted every one", sets.Load())
	}
	what := fmt.Sprintf("%d sets, %d denied, every pool settled", sets.Load(), denied.Load())
	var total int64
	for i, p := range parts {
		n := admitted[i].Load()
		total += n
		for j, w := range p.windows {
			k := key(p.customer)
			k.Window, k.Start = w, first(w)
			if n > p.bounds[j] {
				t.Errorf("%s: %d units of %s admitted in the %s, bound %d", what, n, p.customer, w, p.bounds[j])
			}
			if got := s.Count(t, k); got != n {
				t.Errorf("%s: %s's %s counts %d, want the %d units admitted", what, p.customer, w, got, n)
			}
		}
	}
	if g := globalUsage(t, ps[0].Process); g != total {
		t.Errorf("%s: global usage %d, want the %d units admitted", what, g, total)
	}
}

// first returns the start of window w at At.
func first(w tiers.Window) time.Time {
	start, _ := quota.Bounds(w, At, tiers.Anchor{})
	return start
}
