package lease

import (
	"context"
	"github.com/quotad/quotad/internal/quota"
	"slices"

	"github.com/quotad/quotad/internal/tiers"
)

// Take implements quota.Counter: every span of every charge takes its cost from
// this process's lease, refilled from the store when short. Beyond a
// limit, the ledger decides, directly, the spans of the set beyond theirs
// in one transaction. Once a span denied the set, the others are only
// reported: from what this process's leases know where they can.
func (p *Pool) Take(ctx context.Context, cs []quota.Charge) (bool, error) {
	var directBuf [quota.MaxLong]spanAt // spans beyond their limit
	direct := directBuf[:0]
	allowed := true
	var err error
	for ci := range cs {
		cs[ci].Memo = [quota.MaxLong]any{}
	}
take:
	for ci := range cs {
		c := &cs[ci]
		for i := range c.Spans {
			if !allowed {
				if used, ok := p.known(c, i); ok {
					c.Out[i] = c.Judge(i, used, 0)
					continue
				}
			}
			var l *lease
			if l, c.Out[i], err = p.acquire(ctx, c, i); err != nil {
				break take
			}
			switch {
			case c.Out[i].Passed:
				c.Memo[i] = l
			case c.Spans[i].Rule.Beyond():
				direct = append(direct, spanAt{ci, i})
			default:
				allowed = false
			}
		}
	}
	switch {
	case err != nil || len(direct) == 0:
	case allowed:
		allowed, err = p.takeDirect(ctx, cs, direct)
	default:
		p.judge(ctx, cs, direct)
	}
	keep := err == nil && allowed
	for ci := range cs {
		c := &cs[ci]
		for i := range c.Spans {
			if l := took(c, i); l != nil && l.endTake(c.Cost, keep) {
				p.returnToStore(ctx, l, c.Cost)
			}
		}
		if !keep {
			c.Memo = [quota.MaxLong]any{}
		}
	}
	if !keep {
		return false, err
	}
	for ci := range cs {
		if !hasDirect(direct, ci) {
			p.globals.add(&cs[ci], cs[ci].Cost)
		}
	}
	return true, nil
}

// spanAt names span i of charge c of a set.
type spanAt struct{ c, i int }

// hasDirect reports whether a span of charge c is in direct.
func hasDirect(direct []spanAt, c int) bool {
	for _, d := range direct {
		if d.c == c {
			return true
		}
	}
	return false
}

// known returns the admitted units of span i of c as this process's lease
// of it knows them, when that is enough to judge the span without the
// store: how a check already denied reports its other spans.
func (p *Pool) known(c *quota.Charge, i int) (int64, bool) {
	l := p.leases.existing(c.Spans[i].Key)
	if l == nil {
		return 0, false
	}
	var buf quota.Span
	return l.known(leaseSpan(c, i, &buf), c.Cost)
}

// leaseSpan returns span i of c as the lease of its counter counts it (in
// buf when that differs from the span): the lease counts what it is
// granted in the span's global window only if c counts there, listing the
// window in its Globals. A subject's charge does not: its customer's
// charge of the same set counts the set's units there, once, though the
// subject's spans name the window, where spare capacity is measured.
func leaseSpan(c *quota.Charge, i int, buf *quota.Span) *quota.Span {
	sp := &c.Spans[i]
	if sp.Global.Metric == "" || slices.Contains(c.Globals, sp.Global) {
		return sp
	}
	*buf = *sp
	buf.Global = quota.GlobalKey{}
	return buf
}

// judge reports the spans idx of cs, which their leases denied but which
// may admit beyond their limits, in a set another span denied: as the
// ledger would decide them (a soft window's overage, spare capacity),
// counting nothing. Spare capacity needs the metric's global usage; if it
// cannot be read, those spans stay reported as their leases denied them.
func (p *Pool) judge(ctx context.Context, cs []quota.Charge, idx []spanAt) {
	var globals []quota.GlobalKey
	for _, x := range idx {
		if sp := &cs[x.c].Spans[x.i]; sp.Rule.Spare {
			globals = append(globals, sp.Global)
		}
	}
	var global []int64
	if len(globals) > 0 {
		var err error
		_, global, err = p.Read(ctx, nil, globals)
		cs[0].Trips++
		if err != nil {
			return
		}
	}
	for _, x := range idx {
		c := &cs[x.c]
		var g int64
		if c.Spans[x.i].Rule.Spare {
			g, global = global[0], global[1:]
		}
		c.Out[x.i] = c.Judge(x.i, c.Out[x.i].Used, g)
	}
}

// acquire takes c.Cost units of span i from this process's lease, asking
// the store for more when the lease holds too few, and recalling other
// processes' units when the store has none left. The outcome reports the
// units admitted before the check as this process knows them. It returns
// tiers.ErrUnavailable when the store cannot be had before ctx ends.
func (p *Pool) acquire(ctx context.Context, c *quota.Charge, i int) (*lease, quota.Outcome, error) {
	var buf quota.Span
	sp := leaseSpan(c, i, &buf)
	for attempt := 0; ; {
		l := p.leases.lookup(sp, p.tick.Load())
		st := l.next(sp, c.Cost, p.tick.Load())
		switch st.kind {
		case stepAgain:
			continue
		case stepWait:
			if err := waitFor(ctx, st.busy); err != nil {
				return nil, quota.Outcome{}, err
			}
			continue
		case stepResolve:
			c.Trips++
			b := &gather[Resolution]{busy: st.busy, leases: []*lease{l}, calls: []Resolution{st.res}}
			if err := p.resolve(ctx, b); err != nil {
				return nil, quota.Outcome{}, err
			}
			continue
		case stepVerify:
			c.Trips++
			b := &gather[Settlement]{busy: st.busy}
			rep := st.rep
			rep.Seq = p.nextSeq()
			b.add(l, rep)
			if err := p.report(ctx, b); err != nil {
				return nil, quota.Outcome{}, err
			}
			continue
		case stepSettle:
			trips, err := p.settleNow(ctx, l)
			c.Trips += trips
			if err != nil {
				return nil, quota.Outcome{}, err
			}
			continue
		case stepTaken:
			return l, quota.Outcome{Used: st.used, Passed: true}, nil
		case stepFull:
			p.fromMemory.Add(1)
			return nil, quota.Outcome{Used: st.used, Wait: sp.CalendarWait(st.used, c.Cost, c.At)}, nil
		}
		r := st.req
		r.Seq = p.nextSeq()
		freed := p.freed.Load()
		r, sent, err := p.grants.Do(ctx, r)
		c.Trips++
		st = l.landGrant(&r, st.had, c.Cost, p.tick.Load(), err, sent, p.freed.Load() == freed)
		switch st.kind {
		case stepFailed:
			return nil, quota.Outcome{}, err
		case stepGone:
			return nil, quota.Outcome{}, tiers.ErrCustomerNotFound
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
			return l, quota.Outcome{Used: st.used, Passed: true}, nil
		}
		// The counter has no room for what this check needs. If other
		// processes hold enough unused, they were asked for it: try again
		// while they give it back.
		if r.RecallHelps() && attempt < recallAttempts {
			if attempt == 0 {
				p.recalls.Add(1)
			}
			if err := p.Wait(ctx, attempt); err != nil {
				return nil, quota.Outcome{}, outOfTime(err)
			}
			attempt++
			continue
		}
		// Denied by the lease; beyond its limit a span may still pass (soft
		// overage, spare capacity), which the ledger decides.
		return nil, quota.Outcome{Used: st.used, Wait: sp.CalendarWait(st.used, c.Cost, c.At)}, nil
	}
}

// Undo gives back the units of a take whose answer was not kept (the
// call that was to keep it failed, or another charge of its set was
// denied): to the leases they came from, and, for spans the ledger
// decided directly (beyond their limit), to the ledger.
func (p *Pool) Undo(ctx context.Context, cs []quota.Charge) error {
	var rest []quota.Charge
	var spans [quota.MaxLong]quota.Span
	for ci := range cs {
		c := &cs[ci]
		nd := 0
		for i := range c.Spans {
			if l := took(c, i); l != nil {
				if err := p.putBack(ctx, l, c.Cost); err != nil {
					return err
				}
				continue
			}
			spans[nd] = c.Spans[i]
			nd++
		}
		if nd == 0 {
			p.globals.add(c, -c.Cost)
			continue
		}
		rest = append(rest, quota.Charge{Customer: c.Customer, Metric: c.Metric, Subject: c.Subject, Cost: c.Cost, At: c.At,
			Spans: append([]quota.Span(nil), spans[:nd]...), Out: make([]quota.Outcome, nd), Globals: unleasedGlobals(c)})
	}
	if len(rest) == 0 {
		return nil
	}
	return p.store.GiveBack(ctx, rest)
}

// putBack returns n units a check kept to l, and has the store told at
// once if l now holds more than it reported, so that other processes
// recall them.
func (p *Pool) putBack(ctx context.Context, l *lease, n int64) error {
	b := newGather[Settlement]()
	toStore, report := l.putBack(n, p.nextSeq, b.busy)
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
func (p *Pool) returnToStore(ctx context.Context, l *lease, n int64) {
	// Admitted: the store counts them (the lease's grant did), so they
	// come off its count whatever other processes' leases last reported
	// unused (units admitted from them since count there as unused).
	c := quota.Charge{Customer: l.key.Customer, Metric: l.key.Metric, Subject: l.key.Subject, Cost: n, At: l.key.Start,
		Spans: []quota.Span{{Key: l.key}}, Out: make([]quota.Outcome, 1), Admitted: true}
	if l.global.Metric != "" {
		c.Globals = []quota.GlobalKey{l.global}
	}
	_ = p.store.GiveBack(ctx, []quota.Charge{c})
}

// Peek implements quota.Counter: each span as this process's lease of it knows
// it, as Take would report it; spans without one (or that need global
// usage) from the counts in the store, less what this process holds
// unused, with the global usage it has not written yet, in one read for
// the whole set. So a check the short windows denied, or a dry run, of a
// customer with leases costs no round trip.
func (p *Pool) Peek(ctx context.Context, cs []quota.Charge) error {
	var rest []quota.Charge
	var at [][]int // per charge of rest: the spans' indexes in their charge of cs
	var from []int // per charge of rest: its charge in cs
	for ci := range cs {
		c := &cs[ci]
		var spans []quota.Span
		var idx []int
		for i := range c.Spans {
			if used, ok := p.known(c, i); ok {
				c.Out[i] = c.Judge(i, used, 0)
				continue
			}
			spans = append(spans, c.Spans[i])
			idx = append(idx, i)
		}
		if len(spans) > 0 {
			rest = append(rest, quota.Charge{Customer: c.Customer, Metric: c.Metric, Subject: c.Subject, Cost: c.Cost, At: c.At,
				Spans: spans, Out: make([]quota.Outcome, len(spans))})
			at = append(at, idx)
			from = append(from, ci)
		}
	}
	if len(rest) == 0 {
		return nil
	}
	err := quota.PeekWith(rest, func(counters []quota.CounterKey, globals []quota.GlobalKey) ([]int64, []int64, error) {
		return p.Read(ctx, counters, globals)
	})
	cs[0].Trips += rest[0].Trips
	if err != nil {
		return err
	}
	for j, d := range rest {
		c := &cs[from[j]]
		for k, i := range at[j] {
			c.Out[i] = d.Out[k]
		}
	}
	return nil
}

// Read returns the admitted units of counters and the global usage of
// globals, as quota.Counts.Read does, counting this process's leases too.
func (p *Pool) Read(ctx context.Context, counters []quota.CounterKey, globals []quota.GlobalKey) ([]int64, []int64, error) {
	used, global, err := p.store.Read(ctx, counters, globals)
	if err != nil {
		return nil, nil, err
	}
	for i, k := range counters {
		if l := p.leases.existing(k); l != nil {
			used[i] = max(0, used[i]-l.unusedHeld())
		}
	}
	p.globals.addTo(globals, global)
	return used, global, nil
}

// took returns the lease span i of c took its units from in the last Take
// that counted them (kept in the charge's Memo), or nil: the ledger
// decided the span directly.
func took(c *quota.Charge, i int) *lease {
	l, _ := c.Memo[i].(*lease)
	return l
}
