package lease

import (
	"context"
	"github.com/quotad/quotad/internal/quota"
)

// Beyond a window's limit (a soft window's overage, an elastic window's
// spare capacity) the ledger decides each check directly, and it can only
// do so once the units leases hold of that counter are back: it counts
// them as admitted. So does a give-back (a refund), which may give back
// admitted units only.

// takeDirect has the ledger decide the spans direct of cs, beyond their
// limit, in one transaction, with the global windows of their charges
// that leases did not count in, after writing the global usage this
// process counted so that the ledger sees all of it.
func (p *Pool) takeDirect(ctx context.Context, cs []quota.Charge, direct []spanAt) (bool, error) {
	for _, x := range direct {
		// The ledger counts the units this process holds unused as
		// admitted: they go back first (other processes' were recalled).
		if l := p.leases.existing(cs[x.c].Spans[x.i].Key); l != nil {
			trips, err := p.settleNow(ctx, l)
			cs[0].Trips += trips
			if err != nil {
				return false, err
			}
		}
	}
	if err := p.FlushGlobals(ctx); err != nil {
		return false, err
	}
	var ds []quota.Charge
	var from []int // ds[j]'s charge in cs
	for _, x := range direct {
		if len(from) == 0 || from[len(from)-1] != x.c {
			c := &cs[x.c]
			ds = append(ds, quota.Charge{Customer: c.Customer, Metric: c.Metric, Subject: c.Subject, Cost: c.Cost, At: c.At,
				Globals: unleasedGlobals(c)})
			from = append(from, x.c)
		}
		d := &ds[len(ds)-1]
		d.Spans = append(d.Spans, cs[x.c].Spans[x.i])
		d.Out = append(d.Out, quota.Outcome{})
	}
	ok, err := p.store.Take(ctx, ds)
	for j := range ds {
		cs[0].Trips += ds[j].Trips
	}
	if err != nil {
		return false, err
	}
	j, k := 0, 0
	for _, x := range direct {
		if from[j] != x.c {
			j, k = j+1, 0
		}
		cs[x.c].Out[x.i] = ds[j].Out[k]
		k++
	}
	return ok, nil
}

// leased reports whether a span of c took its units from a lease that
// counts in global window g: a lease counts the units it is granted in
// its span's global window, at once.
func leased(c *quota.Charge, g quota.GlobalKey) bool {
	for i := range c.Spans {
		if l := took(c, i); l != nil && l.global == g {
			return true
		}
	}
	return false
}

// unleasedGlobals returns the global windows of c that no lease c took
// units from counts in: where the ledger counts a direct take.
func unleasedGlobals(c *quota.Charge) []quota.GlobalKey {
	var out []quota.GlobalKey
	for _, g := range c.Globals {
		if !leased(c, g) {
			out = append(out, g)
		}
	}
	return out
}

// GiveBack implements quota.Counter. An undone take (see quota.Charge.Undoing) gives
// its units back to the leases they came from (see Undo). Units admitted
// earlier (quota.Charge.Admitted: what a reservation held beyond its cost) go to
// this process's lease of their counter where it holds a sound one (its
// units are counted in the store as the lease's: no round trip, and its
// next report tells the store), the rest to the ledger. A refund's go to
// the ledger, once the counters' leases came home (see Reclaim), as the
// ledger gives back admitted units only.
func (p *Pool) GiveBack(ctx context.Context, cs []quota.Charge) error {
	if len(cs) == 0 {
		return nil
	}
	if cs[0].Undone() {
		return p.Undo(ctx, cs)
	}
	if cs[0].Admitted {
		return p.giveBackAdmitted(ctx, cs)
	}
	if err := p.Reclaim(ctx, cs); err != nil {
		return err
	}
	return p.store.GiveBack(ctx, cs)
}

// giveBackAdmitted gives back units admitted earlier (see GiveBack): to
// this process's sound leases where it holds them, the rest, with the
// global windows no lease counted, to the ledger.
func (p *Pool) giveBackAdmitted(ctx context.Context, cs []quota.Charge) error {
	var rest []quota.Charge
	var from [][]int // per charge of rest: its spans' indexes in their charge of cs
	var of []int     // per charge of rest: its charge in cs
	for ci := range cs {
		c := &cs[ci]
		r := quota.Charge{Customer: c.Customer, Metric: c.Metric, Subject: c.Subject, Cost: c.Cost, At: c.At, Admitted: true}
		var idx []int
		for i := range c.Spans {
			var buf quota.Span
			if p.giveToLease(ctx, leaseSpan(c, i, &buf), c.Cost) {
				// Admitted in this window, they were counted: the count
				// held them at least.
				c.Out[i] = quota.Outcome{Used: c.Cost, Passed: true}
				continue
			}
			r.Spans = append(r.Spans, c.Spans[i])
			idx = append(idx, i)
		}
		// A lease counted its units in its span's global window when it
		// was granted: they stay counted there, as the lease's.
		for _, g := range c.Globals {
			if c.SpanOf(g) < 0 || r.SpanOf(g) >= 0 {
				r.Globals = append(r.Globals, g)
			}
		}
		if len(r.Spans)+len(r.Globals) > 0 {
			r.Out = make([]quota.Outcome, len(r.Spans))
			rest, from, of = append(rest, r), append(from, idx), append(of, ci)
		}
	}
	if len(rest) == 0 {
		return nil
	}
	if err := p.Reclaim(ctx, rest); err != nil {
		return err
	}
	err := p.store.GiveBack(ctx, rest)
	for j := range rest {
		cs[0].Trips += rest[j].Trips
		for k, i := range from[j] {
			cs[of[j]].Out[i] = rest[j].Out[k]
		}
	}
	return err
}

// giveToLease gives n units of span sp's counter, admitted before, to this
// process's lease of it, if it holds one that is sound (held, not in
// doubt, not being verified, its limit unchanged): they become units the
// lease holds unused, counted in the store as before. It reports whether
// it did.
func (p *Pool) giveToLease(ctx context.Context, sp *quota.Span, n int64) bool {
	l := p.leases.existing(sp.Key)
	if l == nil {
		return false
	}
	l.mu.Lock()
	ok := l.leased && !l.gone && !l.verify && l.doubt.kind == noCall && !l.changed(sp)
	l.mu.Unlock()
	if !ok {
		return false
	}
	// A lease settled meanwhile sends them to the store (putBack).
	_ = p.putBack(ctx, l, n)
	return true
}

// Reclaim prepares cs's counters for a give-back in the ledger, which must
// know how many units are admitted: this process settles its leases of
// them and writes the global usage it counted, and the other processes are
// asked to settle theirs (it waits a little for them; units of processes
// that do not answer stay counted, so a refund gives back too few rather
// than too many).
func (p *Pool) Reclaim(ctx context.Context, cs []quota.Charge) error {
	for ci := range cs {
		for i := range cs[ci].Spans {
			if l := p.leases.existing(cs[ci].Spans[i].Key); l != nil {
				if _, err := p.settleNow(ctx, l); err != nil {
					return err
				}
			}
		}
	}
	if err := p.FlushGlobals(ctx); err != nil {
		return err
	}
	for ci := range cs {
		c := &cs[ci]
		for i := range c.Spans {
			for attempt := 0; ; attempt++ {
				n, err := p.store.Recall(ctx, c.Spans[i].Key)
				c.Trips++
				if err != nil {
					return err
				}
				if n == 0 || attempt == recallAttempts {
					break
				}
				if err := p.Wait(ctx, attempt); err != nil {
					return outOfTime(err)
				}
			}
		}
	}
	return nil
}
