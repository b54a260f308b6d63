package quota

import (
	"context"

	"github.com/quotad/quotad/internal/tiers"
)

// Take implements Counter: every span takes its cost from this process's
// lease, refilled from the store when short. Beyond a limit, the ledger
// decides, directly. Once a span denied the check, the others are only
// reported: from what this process's leases know where they can.
func (p *LeasePool) Take(ctx context.Context, c *Charge, out []Outcome) (bool, error) {
	c.took = [maxLong]*lease{}
	var direct [maxLong]int // spans beyond their limit
	nd := 0
	allowed := true
	var err error
	for i := range c.Spans {
		if !allowed {
			if used, ok := p.known(c, i); ok {
				out[i] = c.Judge(i, used, 0)
				continue
			}
		}
		var l *lease
		if l, out[i], err = p.acquire(ctx, c, i); err != nil {
			break
		}
		switch {
		case out[i].Passed:
			c.took[i] = l
		case c.Spans[i].Rule.Beyond():
			direct[nd] = i
			nd++
		default:
			allowed = false
		}
	}
	switch {
	case err != nil || nd == 0:
	case allowed:
		allowed, err = p.takeDirect(ctx, c, direct[:nd], out)
	default:
		p.judge(ctx, c, direct[:nd], out)
	}
	keep := err == nil && allowed
	for _, l := range c.took[:len(c.Spans)] {
		if l != nil && l.endTake(c.Cost, keep) {
			p.returnToStore(ctx, l, c.Cost)
		}
	}
	if !keep {
		c.took = [maxLong]*lease{}
		return false, err
	}
	if nd == 0 {
		p.globals.add(c, c.Cost)
	}
	return true, nil
}

// known returns the admitted units of span i of c as this process's lease
// of it knows them, when that is enough to judge the span without the
// store: how a check already denied reports its other spans.
func (p *LeasePool) known(c *Charge, i int) (int64, bool) {
	l := p.existing(c.Spans[i].Key)
	if l == nil {
		return 0, false
	}
	return l.known(&c.Spans[i], c.Cost)
}

// judge reports spans idx of c, which their leases denied but which may
// admit beyond their limits, in a check another span denied: as the
// ledger would decide them (a soft window's overage, spare capacity),
// counting nothing. Spare capacity needs the metric's global usage; if it
// cannot be read, those spans stay reported as their leases denied them.
func (p *LeasePool) judge(ctx context.Context, c *Charge, idx []int, out []Outcome) {
	var globals []GlobalKey
	for _, i := range idx {
		if c.Spans[i].Rule.Spare {
			globals = append(globals, c.Spans[i].Global)
		}
	}
	var global []int64
	if len(globals) > 0 {
		var err error
		_, global, err = p.Read(ctx, nil, globals)
		c.Trips++
		if err != nil {
			return
		}
	}
	for _, i := range idx {
		var g int64
		if c.Spans[i].Rule.Spare {
			g, global = global[0], global[1:]
		}
		out[i] = c.Judge(i, out[i].Used, g)
	}
}

// acquire takes c.Cost units of span i from this process's lease, asking
// the store for more when the lease holds too few, and recalling other
// processes' units when the store has none left. The outcome reports the
// units admitted before the check as this process knows them. It returns
// tiers.ErrUnavailable when the store cannot be had before ctx ends.
func (p *LeasePool) acquire(ctx context.Context, c *Charge, i int) (*lease, Outcome, error) {
	sp := &c.Spans[i]
	for attempt := 0; ; {
		l := p.lookup(sp)
		st := l.next(sp, c.Cost, p.tick.Load())
		switch st.kind {
		case stepAgain:
			continue
		case stepWait:
			if err := waitFor(ctx, st.busy); err != nil {
				return nil, Outcome{}, err
			}
			continue
		case stepResolve:
			c.Trips++
			b := &batch[Resolution]{busy: st.busy, leases: []*lease{l}, calls: []Resolution{st.res}}
			if err := p.resolve(ctx, b); err != nil {
				return nil, Outcome{}, err
			}
			continue
		case stepVerify:
			c.Trips++
			b := &batch[Settlement]{busy: st.busy}
			rep := st.rep
			rep.Seq = p.nextSeq()
			b.add(l, rep)
			if err := p.report(ctx, b); err != nil {
				return nil, Outcome{}, err
			}
			continue
		case stepSettle:
			trips, err := p.settleNow(ctx, l)
			c.Trips += trips
			if err != nil {
				return nil, Outcome{}, err
			}
			continue
		case stepTaken:
			return l, Outcome{Used: st.used, Passed: true}, nil
		case stepFull:
			p.fromMemory.Add(1)
			return nil, Outcome{Used: st.used, Wait: sp.CalendarWait(st.used, c.Cost, c.At)}, nil
		}
		r := st.req
		r.Seq = p.nextSeq()
		freed := p.freed.Load()
		r, sent, err := p.grants.do(ctx, r)
		c.Trips++
		st = l.landGrant(&r, st.had, c.Cost, p.tick.Load(), err, sent, p.freed.Load() == freed)
		switch st.kind {
		case stepFailed:
			return nil, Outcome{}, err
		case stepGone:
			return nil, Outcome{}, tiers.ErrCustomerNotFound
		case stepAgain:
			if r.Granted > 0 && !r.Lost {
				// The lease went meanwhile (a reset): what the store
				// granted after the reset goes back whole. If it cannot be
				// given back, it stays counted, as a crash would leave it.
				c.Trips++
				_ = p.store.Settle(ctx, []Settlement{{Key: r.Key, Seq: p.nextSeq(), Unused: r.Granted, Global: sp.Global}})
			}
			continue
		case stepTaken:
			p.refills.Add(1)
			return l, Outcome{Used: st.used, Passed: true}, nil
		}
		// The counter has no room for what this check needs. If other
		// processes hold enough unused, they were asked for it: try again
		// while they give it back.
		if r.RecallHelps() && attempt < recallAttempts {
			if attempt == 0 {
				p.recalls.Add(1)
			}
			if err := p.Wait(ctx, attempt); err != nil {
				return nil, Outcome{}, outOfTime(err)
			}
			attempt++
			continue
		}
		// Denied by the lease; beyond its limit a span may still pass (soft
		// overage, spare capacity), which the ledger decides.
		return nil, Outcome{Used: st.used, Wait: sp.CalendarWait(st.used, c.Cost, c.At)}, nil
	}
}

// Undo gives back the units of a take whose answer was not kept (the
// call that was to keep it failed): to the leases they came from, and,
// for spans the ledger decided directly (beyond their limit), to the
// ledger.
func (p *LeasePool) Undo(ctx context.Context, c *Charge) error {
	var direct [maxLong]Span
	nd := 0
	for i := range c.Spans {
		if l := c.took[i]; l != nil {
			if err := p.putBack(ctx, l, c.Cost); err != nil {
				return err
			}
			continue
		}
		direct[nd] = c.Spans[i]
		nd++
	}
	if nd == 0 {
		p.globals.add(c, -c.Cost)
		return nil
	}
	d := Charge{Customer: c.Customer, Metric: c.Metric, Cost: c.Cost, At: c.At, Spans: direct[:nd], Globals: unleasedGlobals(c)}
	var o [maxLong]Outcome
	return p.store.GiveBack(ctx, &d, o[:nd])
}

// putBack returns n units a check kept to l, and has the store told at
// once if l now holds more than it reported, so that other processes
// recall them.
func (p *LeasePool) putBack(ctx context.Context, l *lease, n int64) error {
	b := newBatch[Settlement]()
	toStore, report := l.putBack(n, p.nextSeq(), b.busy)
	switch {
	case toStore:
		p.returnToStore(ctx, l, n)
	case report != nil:
		b.add(l, *report)
		return p.report(ctx, b)
	}
	return nil
}

// returnToStore gives back to the store n units a check took from l and
// did not keep, after l was settled: a settlement gives back what the
// lease held unused, so the store still counts them. If the store cannot
// be told, they stay counted: fewer units admitted, never more.
func (p *LeasePool) returnToStore(ctx context.Context, l *lease, n int64) {
	c := Charge{Customer: l.key.Customer, Metric: l.key.Metric, Cost: n, At: l.key.Start, Spans: []Span{{Key: l.key}}}
	if l.global.Metric != "" {
		c.Globals = []GlobalKey{l.global}
	}
	var o [1]Outcome
	_ = p.store.GiveBack(ctx, &c, o[:])
}

// Peek implements Counter: each span as this process's lease of it knows
// it, as Take would report it; spans without one (or that need global
// usage) from the counts in the store, less what this process holds
// unused, with the global usage it has not written yet. So a check the
// short windows denied, or a dry run, of a customer with leases costs no
// round trip.
func (p *LeasePool) Peek(ctx context.Context, c *Charge, out []Outcome) error {
	var rest [maxLong]Span
	var at [maxLong]int
	n := 0
	for i := range c.Spans {
		if used, ok := p.known(c, i); ok {
			out[i] = c.Judge(i, used, 0)
			continue
		}
		rest[n], at[n] = c.Spans[i], i
		n++
	}
	if n == 0 {
		return nil
	}
	d := Charge{Customer: c.Customer, Metric: c.Metric, Cost: c.Cost, At: c.At, Spans: rest[:n]}
	var o [maxLong]Outcome
	err := d.PeekWith(func(counters []CounterKey, globals []GlobalKey) ([]int64, []int64, error) {
		return p.Read(ctx, counters, globals)
	}, o[:n])
	c.Trips += d.Trips
	if err != nil {
		return err
	}
	for j, i := range at[:n] {
		out[i] = o[j]
	}
	return nil
}

// Read returns the admitted units of counters and the global usage of
// globals, as Counts.Read does, counting this process's leases too.
func (p *LeasePool) Read(ctx context.Context, counters []CounterKey, globals []GlobalKey) ([]int64, []int64, error) {
	used, global, err := p.store.Read(ctx, counters, globals)
	if err != nil {
		return nil, nil, err
	}
	for i, k := range counters {
		if l := p.existing(k); l != nil {
			used[i] = max(0, used[i]-l.unusedHeld())
		}
	}
	p.globals.addTo(globals, global)
	return used, global, nil
}
