package quota

import (
	"context"
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
func (p *LeasePool) takeDirect(ctx context.Context, cs []Charge, direct []spanAt) (bool, error) {
	for _, x := range direct {
		// The ledger counts the units this process holds unused as
		// admitted: they go back first (other processes' were recalled).
		if l := p.existing(cs[x.c].Spans[x.i].Key); l != nil {
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
	var ds []Charge
	var from []int // ds[j]'s charge in cs
	for _, x := range direct {
		if len(from) == 0 || from[len(from)-1] != x.c {
			c := &cs[x.c]
			ds = append(ds, Charge{Customer: c.Customer, Metric: c.Metric, Subject: c.Subject, Cost: c.Cost, At: c.At,
				Globals: unleasedGlobals(c)})
			from = append(from, x.c)
		}
		d := &ds[len(ds)-1]
		d.Spans = append(d.Spans, cs[x.c].Spans[x.i])
		d.Out = append(d.Out, Outcome{})
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
func leased(c *Charge, g GlobalKey) bool {
	for _, l := range c.took[:len(c.Spans)] {
		if l != nil && l.global == g {
			return true
		}
	}
	return false
}

// unleasedGlobals returns the global windows of c that no lease c took
// units from counts in: where the ledger counts a direct take.
func unleasedGlobals(c *Charge) []GlobalKey {
	var out []GlobalKey
	for _, g := range c.Globals {
		if !leased(c, g) {
			out = append(out, g)
		}
	}
	return out
}

// GiveBack implements Counter: the counters' leases come home first (see
// Reclaim), then the ledger gives the units back.
func (p *LeasePool) GiveBack(ctx context.Context, cs []Charge) error {
	if err := p.Reclaim(ctx, cs); err != nil {
		return err
	}
	return p.store.GiveBack(ctx, cs)
}

// Reclaim prepares cs's counters for a give-back in the ledger, which must
// know how many units are admitted: this process settles its leases of
// them and writes the global usage it counted, and the other processes are
// asked to settle theirs (it waits a little for them; units of processes
// that do not answer stay counted, so a refund gives back too few rather
// than too many).
func (p *LeasePool) Reclaim(ctx context.Context, cs []Charge) error {
	for ci := range cs {
		for i := range cs[ci].Spans {
			if l := p.existing(cs[ci].Spans[i].Key); l != nil {
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
