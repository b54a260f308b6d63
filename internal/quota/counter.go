package quota

import (
	"context"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// Most windows a charge has of each kind: one limit per window.
const (
	maxShort = 2 // second, minute
	MaxLong  = 5 // hour, day, week, month, total
)

// CounterKey names one counter: a customer's count of a metric in one
// window, the one that starts at Start, for the customer as a whole or
// (Subject set) for one of its subjects. Start is in UTC without a
// monotonic reading, so that keys compare with ==.
type CounterKey struct {
	Customer string
	Metric   string
	Subject  string
	Window   tiers.Window
	Start    time.Time
}

// GlobalKey names a metric's global usage in one window: every admitted
// unit of the metric, all customers, limited or not. Global windows are
// calendar windows without a customer's anchor.
type GlobalKey struct {
	Metric string
	Window tiers.Window
	Start  time.Time
}

// Span is one window of a check: the counter it counts in, when that
// window (or, for short windows, its current bucket) ends, and the rule
// that decides it.
type Span struct {
	Key  CounterKey
	End  time.Time
	Rule Rule
	// Global is the metric's global usage in this window, where the
	// metric declares a capacity for it (else its Metric is ""): what
	// spare capacity is measured against.
	Global GlobalKey
}

// Charge asks a Counter about Cost units of one customer's metric (for
// the customer as a whole, or for one of its subjects) in each of Spans,
// all of them at once. A check is a set of charges: its metric's, its
// subject's, the credit pool's it draws on (see Counter).
type Charge struct {
	Customer string
	Metric   string
	// Subject is the subject whose counters the spans are ("" for the
	// customer's own).
	Subject string
	Cost    int64
	// At is when the check happens (for GiveBack: when the units given
	// back were counted).
	At    time.Time
	Spans []Span
	// Out is what the counter found for each span: one Outcome per span,
	// filled in by every call.
	Out []Outcome
	// Globals are the metric's windows with declared capacity (of the
	// counter's kind, short or long): every unit a Take admits counts
	// there, whatever the customer's limits.
	Globals []GlobalKey
	// Trips counts the round trips to a shared store the counters made
	// for this charge; counters add to it (one call for several charges
	// of a set counts on the first).
	Trips int
	// MetricCapacity: the metric declares a capacity for a window of the
	// charge's kind, even where Globals leaves it out (a refund lists only
	// some). A shared store keeps such a metric's keys together, so that
	// one atomic call reaches its global windows too.
	MetricCapacity bool
	// degraded: the short windows were counted in this process, the
	// shared store out of reach (see Failover).
	degraded bool
	// Admitted: a GiveBack of the charge returns units a take admitted
	// earlier in its windows (what a reservation held beyond its cost, the
	// units of the check a refund names), not a refund's of units that may
	// never have been admitted: the lease pool may put them back in its
	// lease of the counter, where they are counted already, without a
	// round trip, and the ledger takes them off the count even where
	// leases hold units unused (units admitted from another process's
	// lease it has not yet reported are counted there as unused).
	Admitted bool
	// tookMs is, after a take from a shared store, the store's time of it
	// (Unix ms): where an undo gives its units back.
	tookMs int64
	// Memo is the counter's own record of its last take of the charge,
	// span by span, for an undo of it (the lease pool: the lease each
	// span's units came from; nil where the ledger decided the span).
	// Only the counter that took the charge reads it.
	Memo [MaxLong]any
	// undoNow is, when the engine gives back the units of a take it undoes
	// (not a refund), the time of the undo, Unix ms; tookDebt is what each
	// token bucket span owed right after that take. A bucket gives back
	// only what of the take it still owes: tokens refilled since are not
	// taken off another check's debt.
	undoNow  int64
	tookDebt [maxShort]u128
	// tookLogMs is, for each sliding log span, the millisecond of the log
	// entry the last take counted its units in: the take's own, or the
	// log's newest when that is later (a check whose clock was read
	// before that of one that counted first). An undo takes them from
	// there.
	tookLogMs [maxShort]int64
}

// Undoing marks c, which a Take just admitted, as that take being undone
// at now (never before c.At): a GiveBack of c then gives back the take's
// own units, where and when it counted them, as no refund does (see
// undoNow). The engine undoes so the short windows' take of a check that
// a long window denied; tests of counters do it through here.
func (c *Charge) Undoing(now time.Time) {
	c.undoNow = max(now.UnixMilli(), c.At.UnixMilli())
}

// Undone reports whether c is a take being undone (see Undoing), rather
// than units a refund gives back.
func (c *Charge) Undone() bool { return c.undoNow != 0 }

// Outcome is what a Counter found for one span of a Charge.
type Outcome struct {
	// Used is the span's count before the charge: units admitted, as this
	// process knows them.
	Used int64
	// Passed: the span admits the cost. Elastic: only spare capacity
	// admits it.
	Passed  bool
	Elastic bool
	// Wait, for a span that did not pass, is how many milliseconds pass
	// before the same charge would, or -1 for never.
	Wait int64
	// ResetMs, where not 0, is when the span's count as Used reports it is
	// back to zero (Unix ms); ResetAfterMs when it is with the charge's
	// units added (a take that passed added them). A check reports the
	// first when denied, the second when allowed. Short windows whose
	// algorithm does not count in clock-aligned buckets set them;
	// otherwise that is the span's End.
	ResetMs      int64
	ResetAfterMs int64
	// Granted: grants paid for the charge's units in this window, which
	// counted none of them (see counters.draw).
	Granted bool
}

// Counter counts units of customers' metrics in windows. The in-process
// sliding window, the shared store of short windows, the PostgreSQL
// ledger and the lease pool over it all implement it, so the engine
// decides every window the same way through Rule.
//
// Every call is about a set of charges, cs, decided together: a check of
// a metric with limits for the customer and for the subject, and a credit
// pool it draws on, is three charges, admitted on all or none. The
// charges of a set name distinct counters. Each fills in every span's Out.
// Implementations are safe for concurrent use. Errors:
// tiers.ErrUnavailable when a shared store cannot be reached (nothing was
// counted), tiers.ErrCustomerNotFound when the customer went away.
type Counter interface {
	// Take counts every charge of cs — its Cost in every span and in every
	// global window of it — if, and only if, every span of every charge
	// admits its cost, and reports whether it did. A span that does not
	// pass reports its Wait. A counter that cannot decide the whole set at
	// once (the charges live on different servers) counts them one after
	// the other and gives back what it counted when one is denied: a
	// denied set keeps nothing, and no limit is ever passed, though a
	// check racing it may be denied units given back a moment later.
	Take(ctx context.Context, cs []Charge) (bool, error)
	// GiveBack takes up to c.Cost units off every span's counter of every
	// charge c of cs, never below zero: from the window (or bucket) that
	// contains c.At first, then from the one before it (a sliding log from
	// c.At's millisecond, then its newest; a token bucket pays its debt
	// down; an undone take gives back only its own units, see
	// meter.giveBackOther). Each global window of c gets back what c's
	// span of the same window and start gave back (those units were
	// counted there too) or, without such a span, up to c.Cost as a span
	// would. So a refund lists only the global windows where the
	// customer's share is known, and undoing a take lists all it counted
	// in. Out reports the counts before.
	GiveBack(ctx context.Context, cs []Charge) error
	// Peek reports every span as Take would, counting nothing.
	Peek(ctx context.Context, cs []Charge) error
}

// CalendarWait returns the milliseconds until a calendar window that
// denied cost at count used admits it, or -1 for never: counts only fall
// when the window ends (spare capacity when the metric's global window
// ends). Long-window counters report it as their Wait. A total never
// ends: only a refund or an admin brings its count down, which no wait
// foretells, so it never admits by waiting.
func (s Span) CalendarWait(used, cost int64, at time.Time) int64 {
	if !s.Key.Window.Resets() {
		return -1
	}
	toEnd := msUntil(at, s.End)
	toThreshold, toCeiling, toCapacity := int64(-1), int64(-1), int64(-1)
	if cost <= s.Rule.Threshold {
		toThreshold = toEnd
	}
	if s.Rule.Spare {
		switch {
		case used+cost <= s.Rule.Ceiling:
			toCeiling = 0
		case cost <= s.Rule.Ceiling:
			toCeiling = toEnd
		}
		if cost <= s.Rule.Capacity {
			_, globalEnd := Bounds(s.Key.Window, at, tiers.Anchor{})
			toCapacity = msUntil(at, globalEnd)
		}
	}
	return s.Rule.Retry(toThreshold, toCeiling, toCapacity)
}

// maxResetMs is the latest reset an answer reports, 9999-12-31T23:59:59.999Z
// (RFC 3339 has four-digit years): a token bucket that never refills, or
// whose debt takes longer, reports it.
const maxResetMs = 253402300799999

// resetAt returns when span sp's count is back to zero, as o reports it:
// with the charge's units added when charged (the check passed, or a dry
// run would have). It is the zero time for a window that never resets.
func (o *Outcome) resetAt(sp *Span, charged bool) time.Time {
	if !sp.Key.Window.Resets() {
		return time.Time{}
	}
	ms := o.ResetMs
	if charged {
		ms = o.ResetAfterMs
	}
	if ms == 0 {
		return sp.End
	}
	return time.UnixMilli(min(ms, maxResetMs)).UTC()
}

// msUntil returns the whole milliseconds from at to t, rounded up, at
// least 1.
func msUntil(at, t time.Time) int64 {
	d := t.Sub(at)
	if d <= 0 {
		return 1
	}
	return max(1, ceilDiv(int64(d), int64(time.Millisecond)))
}

// SpanOf returns the index of the span of c that counts in global window
// g (the same window, from the same start), or -1.
func (c *Charge) SpanOf(g GlobalKey) int { return spanOf(c.Spans, g) }

// Judge returns the outcome of span i of c, a calendar window whose count
// is used while the metric's global usage in it is global: what a take
// would decide, counting nothing. Long-window counters decide through it.
func (c *Charge) Judge(i int, used, global int64) Outcome {
	sp := &c.Spans[i]
	ok, elastic := sp.Rule.Admits(used, global, c.Cost)
	o := Outcome{Used: used, Passed: ok, Elastic: elastic}
	if !ok {
		o.Wait = sp.CalendarWait(used, c.Cost, c.At)
	}
	return o
}

// PeekWith fills in Out for every span of every charge of cs, calendar
// windows, from counts read by read in one call (of the spans' counters,
// and of the global usage of those that may borrow spare capacity),
// judged as a take would: what long-window counters' Peek does. It counts
// the read as a round trip, on the first charge.
func PeekWith(cs []Charge, read func(counters []CounterKey, globals []GlobalKey) (used, global []int64, err error)) error {
	var keys []CounterKey
	var globals []GlobalKey
	for ci := range cs {
		for _, sp := range cs[ci].Spans {
			keys = append(keys, sp.Key)
			if sp.Rule.Spare {
				globals = append(globals, sp.Global)
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	cs[0].Trips++
	used, global, err := read(keys, globals)
	if err != nil {
		return err
	}
	for ci := range cs {
		c := &cs[ci]
		for i := range c.Spans {
			var g int64
			if c.Spans[i].Rule.Spare {
				g, global = global[0], global[1:]
			}
			c.Out[i] = c.Judge(i, used[0], g)
			used = used[1:]
		}
	}
	return nil
}
