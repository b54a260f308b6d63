package lease

import (
	"context"
	"errors"
	"github.com/quotad/quotad/internal/quota"
	"sync"
	"time"
)

// Flush does the pool's periodic work at now: it drops leases of windows
// that ended, resolves calls in doubt, settles leases idle for quota.IdleAfter
// (or holding more than a block, after units were put back), reports the
// unused units of leases idle since the last flush, and writes the global
// usage it counted. Run calls it every quota.FlushEvery; on failure it tries
// again the next time. Each kind of call is one statement for every lease
// that needs it.
func (p *Pool) Flush(ctx context.Context, now time.Time) error {
	tick := p.tick.Add(1)
	idle := max(1, int64(p.IdleAfter/quota.FlushEvery))
	// Reports are for other processes' reads: none when there is none.
	alone, err := p.store.Alone(ctx)
	reports := err != nil || !alone
	resolving, settling, reporting := newGather[Resolution](), newGather[Settlement](), newGather[Settlement]()
	p.leases.each(func(l *lease) {
		switch l.duty(now, tick, idle, reports) {
		case dutyResolve:
			if r, ok := l.beginResolve(resolving.busy); ok {
				resolving.add(l, r)
			}
		case dutySettle:
			if st, _, s := l.beginSettle(p.nextSeq, settling.busy); st == settleSend {
				settling.add(l, s)
			}
		case dutyReport:
			if s, ok := l.beginReport(p.nextSeq, reporting.busy); ok {
				reporting.add(l, s)
			}
		}
	})
	return errors.Join(err, p.resolve(ctx, resolving), p.report(ctx, reporting), p.settle(ctx, settling),
		p.FlushGlobals(ctx))
}

// globalBuffer holds the global usage checks admitted from leases
// counted, until it is written: a lease counts the units it is granted in
// its span's global window at once, so only checks whose spans took no
// lease counting there add to it.
type globalBuffer struct {
	mu sync.Mutex
	m  map[quota.GlobalKey]int64
}

// add counts n units (negative: gives back) in the global windows of c
// that no lease c took units from counts in.
func (g *globalBuffer) add(c *quota.Charge, n int64) {
	if len(c.Globals) == 0 {
		return
	}
	g.mu.Lock()
	for _, k := range c.Globals {
		if !leased(c, k) {
			g.m[k] += n
		}
	}
	g.mu.Unlock()
}

// addTo adds what the buffer holds of globals to global, one for one.
func (g *globalBuffer) addTo(globals []quota.GlobalKey, global []int64) {
	g.mu.Lock()
	for i, k := range globals {
		global[i] += g.m[k]
	}
	g.mu.Unlock()
}

// take empties the buffer and returns what it held.
func (g *globalBuffer) take() []quota.GlobalDelta {
	g.mu.Lock()
	defer g.mu.Unlock()
	deltas := make([]quota.GlobalDelta, 0, len(g.m))
	for k, n := range g.m {
		if n != 0 {
			deltas = append(deltas, quota.GlobalDelta{Key: k, Units: n})
		}
	}
	clear(g.m)
	return deltas
}

// restore puts back deltas that could not be written.
func (g *globalBuffer) restore(deltas []quota.GlobalDelta) {
	g.mu.Lock()
	for _, d := range deltas {
		g.m[d.Key] += d.Units
	}
	g.mu.Unlock()
}

// FlushGlobals writes the global usage counted since the last flush.
func (p *Pool) FlushGlobals(ctx context.Context) error {
	deltas := p.globals.take()
	if len(deltas) == 0 {
		return nil
	}
	if err := p.store.AddGlobal(ctx, deltas); err != nil {
		p.globals.restore(deltas)
		return err
	}
	return nil
}
