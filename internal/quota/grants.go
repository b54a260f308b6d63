package quota

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// Grants: units a customer bought or was given (package grants) that a
// check draws on when a hard long window of its metric denies it. The
// draw is one more charge of the check's set, taken last and all or
// nothing with the others:
//
//   - Only a check a hard window of a day or longer denies draws, and only
//     when its customer has live grants of the metric, as the catalog
//     knows from memory: an admitted check costs nothing more, nor does a
//     denial for a customer without grants.
//   - The check's whole cost comes from the grants; the windows that
//     denied it count none of it (the units beyond the limit are granted,
//     as the window's "granted" reports), the other windows count it as
//     usual. So a window's last units stay for checks small enough to fit
//     them; with checks of one unit, exactly limit + grants are admitted.
//   - The set's long windows are taken again without the windows grants
//     pay for (through the leases, as any check), then the grants are
//     drawn in one PostgreSQL transaction that locks them: a grant is
//     never spent twice, in any process, and a voided one is drawn by no
//     check that reads the store after the void. When the grants have too
//     few units, the long windows' take is given back and the check is
//     denied as it was.
//
// Checks of items, of credit pools and of subjects draw the same way, each
// charge of the set that a hard long window denies from its own metric's
// grants (a pool's for a pool's charge); a subject's windows never draw
// (grants are the customer's). Reservations and dry runs do not draw.
//
// Rollover: a window whose hard limit has a rollover owes the window after
// it a grant of its unused units (see GrantRollover). The first check of
// the customer that the next window denies makes it (once in all
// processes: the grant's request id), and draws on it; the process then
// remembers the window's rollover made (rollovers), so later denials ask
// PostgreSQL nothing more unless the customer has live grants.

// Grants draws units from customers' grants. The PostgreSQL store
// implements it. Implementations are safe for concurrent use. Errors:
// tiers.ErrUnavailable when the store cannot be reached (nothing drawn).
type Grants interface {
	// Draw takes each draw's Units from the live grants of its customer's
	// metric at at (units left, not voided, not expired), lowest priority
	// number first, then the soonest to expire, then the oldest, and adds
	// them to each of its Windows' granted units: all of it, or, when one
	// draw finds too few units, nothing (ok false). It returns what it
	// took from which grant.
	Draw(ctx context.Context, draws []GrantDraw, at time.Time) (taken []GrantTake, ok bool, err error)
	// Return gives back what a Draw of draws took (its check was not
	// admitted after all): to the grants, and off the windows' granted
	// units.
	Return(ctx context.Context, draws []GrantDraw, taken []GrantTake, at time.Time) error
	// Granted returns the units grants paid for in each counter's window.
	Granted(ctx context.Context, counters []CounterKey) ([]int64, error)
}

// GrantDraw asks for Units of a customer's metric from its grants, in
// place of the units Windows denied. Rollovers are the grants the windows
// before some of Windows owe the customer, which the draw makes first if
// no draw made them before.
type GrantDraw struct {
	Customer  string
	Metric    string
	Units     int64
	Windows   []CounterKey
	Rollovers []GrantRollover
}

// GrantRollover is the grant a window with a rollover owes its
// customer when it ends: its unused units (Limit less its count), at most
// Max, granted until Expires (the end of the window after it). Request is
// the grant's request id: one grant per customer, metric and window,
// whatever the processes.
type GrantRollover struct {
	Window  CounterKey // the window that ended
	Next    CounterKey // the window after it, current at the draw
	Limit   int64
	Max     int64
	Expires time.Time
	Request string
}

// rollover returns the rollover owed to the window of span sp, current at
// at, of a customer created at created: the window before it's; false when
// the span's limit has no rollover or the customer did not exist before
// the window.
func rollover(sp *Span, anchor tiers.Anchor, created time.Time) (GrantRollover, bool) {
	if sp.Rule.Rollover <= 0 || !created.Before(sp.Key.Start) {
		return GrantRollover{}, false
	}
	prev := sp.Key
	prev.Start, _ = Bounds(prev.Window, sp.Key.Start.Add(-time.Nanosecond), anchor)
	return GrantRollover{Window: prev, Next: sp.Key, Limit: sp.Rule.Limit, Max: sp.Rule.Rollover, Expires: sp.End,
		Request: fmt.Sprintf("rollover/%s/%s/%d", prev.Metric, prev.Window, prev.Start.Unix())}, true
}

// GrantTake is what a draw took from one grant.
type GrantTake struct {
	Grant    string
	Customer string
	Metric   string
	Units    int64
}

// grantWindow reports whether a window may draw on grants: a hard limit
// of a day or longer.
func grantWindow(sp *Span) bool {
	w := sp.Key.Window
	return sp.Rule.Mode == tiers.Hard && !sp.Rule.Spare && (w == tiers.Day || w == tiers.Week || w == tiers.Month)
}

// grantDraws returns what set s, whose long windows denied it, would draw
// on grants to be admitted, and the set's long charges without the
// windows those draws pay for (rest; a charge left without windows is
// left out); nil when s cannot be admitted on grants: a window that may
// not draw denied it, or a customer has no live grants of the metric.
func (s *set) grantDraws(made *rollovers) (draws []GrantDraw, rest []Charge) {
	for i := range s.long {
		c := &s.long[i]
		acct := s.account(c.Customer)
		if acct == nil {
			return nil, nil
		}
		d := GrantDraw{Customer: c.Customer, Metric: c.Metric, Units: c.Cost}
		for j := range c.Spans {
			sp := &c.Spans[j]
			if c.Out[j].Passed {
				continue
			}
			if !grantWindow(sp) {
				return nil, nil
			}
			d.Windows = append(d.Windows, sp.Key)
			if r, ok := rollover(sp, acct.Customer.Anchor, acct.Customer.CreatedAt); ok && !made.has(sp.Key) {
				d.Rollovers = append(d.Rollovers, r)
			}
		}
		if d.Windows == nil {
			continue
		}
		if c.Subject != "" || len(c.Globals) > 0 || d.Rollovers == nil && !acct.Customer.HasGrants(c.Metric, s.at) {
			return nil, nil
		}
		draws = append(draws, d)
	}
	if draws == nil {
		return nil, nil
	}
	for i := range s.long {
		c := &s.long[i]
		r := Charge{Customer: c.Customer, Metric: c.Metric, Subject: c.Subject, Cost: c.Cost, At: c.At,
			Globals: c.Globals, MetricCapacity: c.MetricCapacity}
		for j := range c.Spans {
			if c.Out[j].Passed {
				r.Spans = append(r.Spans, c.Spans[j])
			}
		}
		if len(r.Spans)+len(r.Globals) == 0 {
			continue
		}
		r.Out = make([]Outcome, len(r.Spans))
		rest = append(rest, r)
	}
	return draws, rest
}

// draw admits set s, which its long windows denied, on the customers'
// grants (see Grants above): its long windows but those the grants pay
// for, then the grants, all or nothing. It returns the answer, or false
// when the set is not admitted so (nothing taken then; the short windows
// are the caller's to give back).
func (c *counters) draw(ctx context.Context, s *set, r *Request) (Decision, bool) {
	draws, rest := s.grantDraws(&c.rollovers)
	if draws == nil {
		return Decision{}, false
	}
	if len(rest) > 0 {
		ok, err := c.long.Take(ctx, rest)
		if err != nil || !ok {
			c.health.unavailable(err)
			return Decision{}, false
		}
	}
	taken, ok, err := c.grants.Draw(ctx, draws, s.at)
	s.trip()
	if err == nil {
		c.rollovers.made(draws)
	}
	if err != nil || !ok {
		c.health.unavailable(err)
		if len(rest) > 0 {
			undoing(rest, c.clock.Now())
			c.health.unavailable(c.long.GiveBack(ctx, rest))
		}
		return Decision{}, false
	}
	// The answer reports every window: those the grants paid for with
	// their count unchanged, the others as the second take found them.
	k := 0
	for i := range s.long {
		ch := &s.long[i]
		var from *Charge
		if k < len(rest) && rest[k].Customer == ch.Customer && rest[k].Metric == ch.Metric && rest[k].Subject == ch.Subject {
			from = &rest[k]
			k++
		}
		n := 0
		for j := range ch.Spans {
			if !ch.Out[j].Passed {
				ch.Out[j] = Outcome{Used: ch.Out[j].Used, Passed: true, Granted: true}
				continue
			}
			ch.Out[j] = from.Out[n]
			n++
		}
	}
	s.rest, s.draws, s.taken = rest, draws, taken
	d := verdict{s}.answer(r, true, false)
	for _, dr := range draws {
		d.Granted = addCap(d.Granted, dr.Units)
	}
	return d, true
}

// rollovers are the current windows whose rollover this process made (or
// found made), each with when it ends.
type rollovers struct{ m sync.Map }

func (r *rollovers) has(k CounterKey) bool {
	_, ok := r.m.Load(k)
	return ok
}

// made records the windows whose rollovers draws made.
func (r *rollovers) made(draws []GrantDraw) {
	for _, d := range draws {
		for _, ro := range d.Rollovers {
			r.m.Store(ro.Next, ro.Expires)
		}
	}
}

// forget drops the windows that ended by now.
func (r *rollovers) forget(now time.Time) {
	r.m.Range(func(k, end any) bool {
		if !end.(time.Time).After(now) {
			r.m.Delete(k)
		}
		return true
	})
}

// undoDraw gives back what set s drew on grants, and returns the long
// charges its take counted (those without the windows grants paid for), or
// s.long when it drew nothing.
func (c *counters) undoDraw(ctx context.Context, s *set) []Charge {
	if s.draws == nil {
		return s.long
	}
	c.health.unavailable(c.grants.Return(ctx, s.draws, s.taken, s.at))
	return s.rest
}

// granted fills in, where c has grants, the units grants paid for in each
// long window of out (usage), keys[i] being out[long[i]]'s counter.
func (c *counters) granted(ctx context.Context, keys []CounterKey, long []int, out []Usage) error {
	if c.grants == nil {
		return nil
	}
	var ks []CounterKey
	var at []int
	for i, k := range keys {
		if k.Subject == "" && (k.Window == tiers.Day || k.Window == tiers.Week || k.Window == tiers.Month) {
			ks = append(ks, k)
			at = append(at, long[i])
		}
	}
	if len(ks) == 0 {
		return nil
	}
	granted, err := c.grants.Granted(ctx, ks)
	if err != nil {
		return c.health.unavailable(err)
	}
	for i, j := range at {
		out[j].Granted = granted[i]
	}
	return nil
}
