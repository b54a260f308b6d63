package quota

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// debts are the units of checks admitted degraded, failing open: units
// no shared or long window counted, because the store that keeps those
// windows did not answer. Each is owed to the counters it would have
// counted in, and charged there once the store answers again (repay), to
// the windows still current, whatever their limits say: the units were
// admitted. So usage, history, statements and billing see every admitted
// unit. A process that dies before it repays loses what it owes, at most
// maxDebts charges and whatever units they carry (Stats.Debts says how
// many units are owed).
//
// A check whose customer or metric could not even be looked up owes its
// items as they were asked for (pending): repaying resolves them first,
// as of when they were admitted.
type debts struct {
	mu      sync.Mutex
	long    map[debtKey]*Charge // owed to the ledger
	short   map[debtKey]*Charge // owed to the shared store of short windows
	pending []pendingCheck
	// doubts are repayments to the ledger whose answer was lost: each is
	// tried again under its id, which the ledger keeps with the charges
	// it applied, so that none is charged twice.
	doubts []repayment
	owed   atomic.Int64 // units owed, all kinds
	lost   atomic.Int64 // units never charged: their windows ended first, or the bound was reached
	repaid atomic.Int64 // units charged late
}

// maxDebts bounds the charges (and pending checks) a process owes: a
// long outage under many customers must not grow memory without bound.
// Beyond it a degraded admission's units are lost (counted in
// DebtStats.Lost).
const maxDebts = 100_000

// repayBatch bounds the charges of one repaying call to a store.
const repayBatch = 500

// debtKey names what a charge owes: its customer's (or subject's) metric
// in each window it spans, by window start, and its global windows.
type debtKey struct {
	customer, metric, subject string
	starts                    [len(windowIndex)]int64 // Unix s of each span's window, by window; 0: none
	globals                   [len(windowIndex)]int64 // Unix s of each global window, by window; 0: none
}

// windowIndex has a place for every window (see tiers.Windows).
var windowIndex [tiers.Total + 1]struct{}

// repayment is a batch of charges repaid to the ledger in one
// transaction, under an id of its own.
type repayment struct {
	id string
	cs []Charge
}

// pendingCheck is a check admitted before its customer and metrics could
// be looked up: its items, and when it was admitted.
type pendingCheck struct {
	customer string
	items    []Item
	at       time.Time
}

// DebtStats describe the units of checks admitted degraded (see
// Stats.Debts).
type DebtStats struct {
	Owed   int64 // units admitted degraded and not charged yet
	Repaid int64 // units charged once their store answered again
	Lost   int64 // units never charged: their windows ended first, or too many were owed
}

func (d *debts) stats() DebtStats {
	return DebtStats{Owed: d.owed.Load(), Repaid: d.repaid.Load(), Lost: d.lost.Load()}
}

// add owes the units of charges cs, which a store did not count (long:
// the ledger; otherwise the shared store of short windows).
func (d *debts) add(cs []Charge, long bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range cs {
		c := &cs[i]
		if len(c.Spans) == 0 && len(c.Globals) == 0 {
			continue
		}
		d.addLocked(c, long)
	}
}

func (d *debts) addLocked(c *Charge, long bool) {
	m := &d.short
	if long {
		m = &d.long
	}
	if *m == nil {
		*m = make(map[debtKey]*Charge)
	}
	k := keyOfDebt(c)
	if owed := (*m)[k]; owed != nil {
		owed.Cost = min(owed.Cost+c.Cost, tiers.MaxLimit)
		d.owed.Add(c.Cost)
		return
	}
	if d.sizeLocked() >= maxDebts {
		d.lost.Add(c.Cost)
		return
	}
	(*m)[k] = owedCharge(c)
	d.owed.Add(c.Cost)
}

// addPending owes the items of a check admitted unconsulted.
func (d *debts) addPending(customer string, items []Item, at time.Time) {
	var units int64
	for _, it := range items {
		units += it.Cost
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sizeLocked() >= maxDebts {
		d.lost.Add(units)
		return
	}
	d.pending = append(d.pending, pendingCheck{customer: customer, items: append([]Item(nil), items...), at: at})
	d.owed.Add(units)
}

func (d *debts) sizeLocked() int {
	n := len(d.long) + len(d.short) + len(d.pending)
	for _, r := range d.doubts {
		n += len(r.cs)
	}
	return n
}

// keyOfDebt returns what charge c owes to.
func keyOfDebt(c *Charge) debtKey {
	k := debtKey{customer: c.Customer, metric: c.Metric, subject: c.Subject}
	for _, sp := range c.Spans {
		k.starts[sp.Key.Window] = sp.Key.Start.Unix()
	}
	for _, g := range c.Globals {
		k.globals[g.Window] = g.Start.Unix()
	}
	return k
}

// owedCharge returns a copy of c that admits its units whatever its
// windows' counts: what repaying it charges.
func owedCharge(c *Charge) *Charge {
	o := &Charge{Customer: c.Customer, Metric: c.Metric, Subject: c.Subject, Cost: c.Cost,
		Spans: append([]Span(nil), c.Spans...), Globals: append([]GlobalKey(nil), c.Globals...),
		MetricCapacity: c.MetricCapacity}
	for i := range o.Spans {
		r := &o.Spans[i].Rule
		r.Threshold, r.Ceiling, r.Spare = tiers.MaxLimit, tiers.MaxLimit, false
		o.Spans[i].Global = GlobalKey{}
	}
	return o
}

// takeDue takes out up to n charges owed to the ledger (long) or the
// shared store, at now: each with the windows still current only, and
// its Out room made. Charges none of whose windows is current are lost.
func (d *debts) takeDue(long bool, now time.Time, n int) []Charge {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.short
	if long {
		m = d.long
	}
	var out []Charge
	for k, c := range m {
		if len(out) == n {
			break
		}
		delete(m, k)
		cur := current(c, now)
		if len(cur.Spans) == 0 && len(cur.Globals) == 0 {
			d.owed.Add(-c.Cost)
			d.lost.Add(c.Cost)
			continue
		}
		out = append(out, cur)
	}
	return out
}

// current returns c with only the windows that have not ended at now,
// charged at now.
func current(c *Charge, now time.Time) Charge {
	cur := *c
	cur.At = now
	cur.Spans = cur.Spans[:0:0]
	for _, sp := range c.Spans {
		if now.Before(sp.End) {
			cur.Spans = append(cur.Spans, sp)
		}
	}
	cur.Globals = cur.Globals[:0:0]
	for _, g := range c.Globals {
		if _, end := Bounds(g.Window, g.Start, tiers.Anchor{}); now.Before(end) {
			cur.Globals = append(cur.Globals, g)
		}
	}
	cur.Out = make([]Outcome, len(cur.Spans))
	return cur
}

// done records units owed no more: repaid of them charged, the others
// lost.
func (d *debts) done(owed, repaid int64) {
	d.owed.Add(-owed)
	d.repaid.Add(repaid)
	d.lost.Add(owed - repaid)
}

// units returns the units of charges cs.
func units(cs []Charge) int64 {
	var n int64
	for i := range cs {
		n += cs[i].Cost
	}
	return n
}

// doubt keeps repayment r, whose answer was lost, to be tried again.
func (d *debts) doubt(r repayment) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.doubts = append(d.doubts, r)
}

// takeDoubts takes out the repayments in doubt.
func (d *debts) takeDoubts() []repayment {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.doubts
	d.doubts = nil
	return r
}

// settle records the outcome of repaying cs to the shared store: when err
// is nil they are charged; otherwise they are owed again.
func (d *debts) settle(cs []Charge, err error) {
	if err == nil {
		n := units(cs)
		d.done(n, n)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range cs {
		c := &cs[i]
		d.owed.Add(-c.Cost) // addLocked counts it again
		d.addLocked(c, false)
	}
}

// takePending takes out the pending checks.
func (d *debts) takePending() []pendingCheck {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.pending
	d.pending = nil
	return p
}

// putPending owes pending checks again (their customer or metric still
// could not be looked up).
func (d *debts) putPending(p []pendingCheck) {
	if len(p) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pending = append(p, d.pending...)
}

// repay charges what the engine owes the ledger, where it answers:
// pending checks are resolved into charges first. It returns the first
// error of the ledger (or of the catalog, for a pending check); what could
// not be charged stays owed. The short windows' debts to a shared store
// are repayShared's.
func (e *Engine) repay(ctx context.Context) error {
	if e.debts.owed.Load() == 0 {
		return nil
	}
	now := e.clock.Now().UTC()
	var firstErr error
	var again []pendingCheck
	for _, p := range e.debts.takePending() {
		if err := e.resolvePending(ctx, p, now); err != nil {
			again = append(again, p)
			firstErr = cmpErr(firstErr, err)
		}
	}
	e.debts.putPending(again)
	if e.requests != nil {
		for _, r := range e.debts.takeDoubts() {
			if err := e.repayLong(ctx, r, now); err != nil {
				firstErr = cmpErr(firstErr, err)
			}
		}
		for firstErr == nil {
			cs := e.debts.takeDue(true, now, repayBatch)
			if len(cs) == 0 {
				break
			}
			firstErr = e.repayLong(ctx, repayment{id: newRepaymentID(), cs: cs}, now)
		}
	}
	return firstErr
}

// repayShared charges the short windows' debts, due at now, to the
// failover's shared store and returns its error. A shared store that
// cannot be reached is the failover's to track (checks go on degraded
// meanwhile), not health's: it must not make the engine say its ledger is
// down.
func (d *debts) repayShared(ctx context.Context, f *Failover, now time.Time) error {
	if f == nil {
		return nil
	}
	for {
		cs := d.takeDue(false, now, repayBatch)
		if len(cs) == 0 {
			return nil
		}
		_, err := f.shared.Take(ctx, cs)
		d.settle(cs, err)
		if err != nil {
			return err
		}
	}
}

// repayLong charges repayment r to the ledger, exactly once: in one
// transaction with the claim of its id, as a request id of a check of
// its first charge's customer (kept a day, as every request id), so that
// a repayment whose answer was lost, tried again, finds its id and
// charges nothing. The leases of its counters come home first, so that
// none goes on handing out units the debt has taken. A repayment that
// cannot reach the ledger stays in doubt; one the ledger refuses (its
// customer is gone) is lost.
func (e *Engine) repayLong(ctx context.Context, r repayment, now time.Time) error {
	cs := r.cs[:0:0]
	for i := range r.cs {
		if c := current(&r.cs[i], now); len(c.Spans)+len(c.Globals) > 0 {
			cs = append(cs, c)
		}
	}
	owed, due := units(r.cs), units(cs)
	var err error
	if e.leases != nil && len(cs) > 0 {
		err = e.leases.Reclaim(ctx, cs)
	}
	if err == nil && len(cs) > 0 {
		claim := Claim{Customer: cs[0].Customer, Kind: KindCheck, ID: r.id, Metric: cs[0].Metric, Cost: max(due, 1), At: now}
		err = e.requests.Atomically(ctx, func(ctx context.Context, tx Tx) error {
			found, err := tx.Claim(ctx, claim)
			if err != nil || found != nil {
				return err // found: charged before, its answer lost
			}
			_, err = tx.Take(ctx, cs)
			return err
		})
	}
	switch err = e.health.unavailable(err); {
	case err == nil:
		e.debts.done(owed, due)
	case errors.Is(err, tiers.ErrUnavailable):
		e.debts.doubt(r)
	default:
		e.debts.done(owed, 0)
	}
	return err
}

// newRepaymentID returns a repayment's id: a request id no client sends
// (a prefix of quotad's own, 64 random bits).
func newRepaymentID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "quotad-debt-" + hex.EncodeToString(b[:])
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// resolvePending resolves pending check p as of when it was admitted,
// records its history, and owes its charges: the short windows are
// counted now in this process where they are its own, owed to the shared
// store otherwise.
func (e *Engine) resolvePending(ctx context.Context, p pendingCheck, now time.Time) error {
	s := e.sets.Get().(*set)
	defer func() {
		s.release()
		e.sets.Put(s)
	}()
	s.reset(p.at)
	if err := e.resolve(ctx, s, p.customer, p.items, false); err != nil {
		if errors.Is(err, tiers.ErrUnavailable) {
			return err
		}
		// A customer or metric that does not exist, or a subject now
		// required: nothing to charge (the check would have been refused).
		e.debts.owed.Add(-itemUnits(p.items))
		e.debts.lost.Add(itemUnits(p.items))
		return nil
	}
	e.debts.owed.Add(-itemUnits(p.items))
	verdict{s}.record(e.history, true, p.at)
	e.debts.add(s.long, true)
	if e.failover != nil {
		e.debts.add(s.short, false)
		return nil
	}
	var short []Charge
	for i := range s.short {
		if c := current(owedCharge(&s.short[i]), now); len(c.Spans)+len(c.Globals) > 0 {
			short = append(short, c)
		}
	}
	if len(short) > 0 {
		_, _ = e.sliding.Take(ctx, short) // in process: it never fails
	}
	return nil
}

func itemUnits(items []Item) int64 {
	var n int64
	for _, it := range items {
		n += it.Cost
	}
	return n
}
