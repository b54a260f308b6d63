package quota

import (
	"context"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// counters is the one primitive every check, reservation and refund runs
// through: a set of charges taken, looked at, undone and given back,
// through the short-window counter and the long-window counter, all or
// nothing, with the stores' reach recorded in one place (health).
type counters struct {
	// short counts short windows: in process, or shared (Failover).
	short Counter
	// long counts long windows: the lease pool, or the ledger itself.
	long Counter
	// read reads long-window counters as admitted units (with this
	// process's leases, where it has them).
	read   func(ctx context.Context, counters []CounterKey, globals []GlobalKey) (used, global []int64, err error)
	health *health
	clock  Clock
	// debts owes what checks admitted degraded did not count.
	debts *debts
	// grants, if set, admits checks that hard long windows deny on the
	// customers' grants (see draw); rollovers are the windows whose
	// rollover grants it made.
	grants    Grants
	rollovers rollovers
}

// take counts set s for request r, all or nothing: the short windows
// first, in memory (or in the shared store), then the long ones; a long
// window that denies gives the short units back, and a set the short
// windows deny only looks at the long ones (to report them). The Decision
// is allowed when s was counted.
//
// When the long-window store cannot be reached: with degradable (a check)
// and checks failing open, the set is admitted degraded, counted in its
// short windows alone (the long ones left out of the answer), and owes
// its long windows' units (see debts); otherwise the short units go back
// and the error is returned. A check whose short windows were counted in
// this process, the shared store out of reach, owes them there.
func (c *counters) take(ctx context.Context, s *set, r *Request, degradable bool) (Decision, error) {
	ok, err := c.short.Take(ctx, s.short)
	if err != nil {
		return Decision{}, err
	}
	if !ok {
		degraded, err := c.lookLong(ctx, s)
		if err != nil {
			return Decision{}, err
		}
		return verdict{s}.answer(r, false, degraded), nil
	}
	if !s.hasLong() {
		c.owe(s, degradable, false)
		return verdict{s}.answer(r, true, false), nil
	}
	ok, err = c.long.Take(ctx, s.long)
	if err != nil {
		if degradable && c.health.degrade(err) {
			c.owe(s, true, true)
			return verdict{s}.answer(r, true, true), nil
		}
		if !degradable {
			c.health.unavailable(err)
		}
		c.undo(ctx, s, true, false)
		return Decision{}, err
	}
	d := verdict{s}.answer(r, ok, false)
	if !ok && degradable && c.grants != nil {
		if granted, ok := c.draw(ctx, s, r); ok {
			c.owe(s, true, false)
			return granted, nil
		}
	}
	if !ok {
		c.undo(ctx, s, true, false)
	} else {
		c.owe(s, degradable, false)
	}
	return d, nil
}

// force counts set s, which take just denied for r (r.Force: the work
// is done), whatever its windows' limits, through the same counters: the
// spans admit any count (set.force, as a reservation's commit counts its
// units beyond the estimate), so that leases and the shared store count
// them exactly, in every process. The denial stands: each window is
// answered as take judged it (passed or not, and its wait), with the
// units counted.
func (c *counters) force(ctx context.Context, s *set, r *Request) (Decision, error) {
	var judged []Outcome
	for _, cs := range [2][]Charge{s.short, s.long} {
		for i := range cs {
			judged = append(judged, cs[i].Out...)
		}
	}
	rules := s.force()
	_, err := c.take(ctx, s, r, true)
	s.unforce(rules)
	if err != nil {
		return Decision{}, err
	}
	for _, cs := range [2][]Charge{s.short, s.long} {
		for i := range cs {
			for j := range cs[i].Out {
				o, was := &cs[i].Out[j], &judged[0]
				o.Passed, o.Elastic, o.Wait, o.Granted = was.Passed, was.Elastic, was.Wait, false
				judged = judged[1:]
			}
		}
	}
	s.forced = true
	return verdict{s}.answer(r, false, s.unconsulted), nil
}

// owe records, for a check (degradable) set s admitted, the units its
// stores did not count: its short windows' where they were counted in
// this process for want of the shared store, and, with long, its long
// windows'.
func (c *counters) owe(s *set, degradable, long bool) {
	if !degradable {
		return
	}
	for i := range s.short {
		if s.short[i].degraded {
			c.debts.add(s.short[i:i+1], false)
		}
	}
	if long {
		c.debts.add(s.long, true)
	}
}

// look answers a dry run of set s: every window as a take would find it,
// nothing counted.
func (c *counters) look(ctx context.Context, s *set, r *Request) (Decision, error) {
	if err := c.short.Peek(ctx, s.short); err != nil {
		return Decision{}, err
	}
	allowed := passedSet(s.short)
	degraded, err := c.lookLong(ctx, s)
	if err != nil {
		return Decision{}, err
	}
	return verdict{s}.answer(r, allowed && (degraded || passedSet(s.long)), degraded), nil
}

// lookLong reads set s's long windows, judged as a take would judge them,
// counting nothing. When the store cannot be reached, it reports the set
// degraded (checks failing open) or fails.
func (c *counters) lookLong(ctx context.Context, s *set) (degraded bool, err error) {
	if !s.hasLong() {
		return false, nil
	}
	if err := c.long.Peek(ctx, s.long); err != nil {
		if c.health.degrade(err) {
			return true, nil
		}
		return false, err
	}
	return false, nil
}

// passedSet reports whether every span of every charge of cs passed.
func passedSet(cs []Charge) bool {
	for i := range cs {
		for _, o := range cs[i].Out {
			if !o.Passed {
				return false
			}
		}
	}
	return true
}

// undo gives back what a take of set s counted, where and when it counted
// it: with short, the short windows' units; with long, the long windows'
// (to the leases they came from). The outcomes it gives back are
// overwritten: answer the take first. A give-back that fails leaves its
// units counted: too few admitted, never too many.
func (c *counters) undo(ctx context.Context, s *set, short, long bool) {
	now := c.clock.Now()
	if short {
		undoing(s.short, now)
		_ = c.short.GiveBack(ctx, s.short)
		undoing(s.short, time.Time{})
	}
	if long && s.hasLong() {
		cs := c.undoDraw(ctx, s)
		undoing(cs, now)
		c.health.unavailable(c.long.GiveBack(ctx, cs))
		undoing(cs, time.Time{})
	}
}

// undoing marks every charge of cs as a take being undone at now (see
// Charge.Undoing), or, now zero, as no longer.
func undoing(cs []Charge, now time.Time) {
	for i := range cs {
		if now.IsZero() {
			cs[i].undoNow = 0
		} else {
			cs[i].Undoing(now)
		}
	}
}

// giveBack gives back the units of set s's charges (a refund, or what a
// reservation held beyond its cost) to their windows: up to each charge's
// cost, never below zero. Out reports each window's count before.
func (c *counters) giveBack(ctx context.Context, s *set) error {
	if err := c.short.GiveBack(ctx, s.short); err != nil {
		return err
	}
	if !s.hasLong() {
		return nil
	}
	return c.health.unavailable(c.long.GiveBack(ctx, s.long))
}

// usage returns the usage of the customer's effective limits at now, of
// the metrics named (all when none is), for the customer and, where a
// subject is named, for it: each limit's count, what remains, its
// overage and when it resets, ordered by metric, then the customer's
// windows before the subject's, shortest first.
func (c *counters) usage(ctx context.Context, catalog Catalog, acct tiers.Account, subject string, now time.Time, metrics ...string) ([]Usage, error) {
	var limits []tiers.EffectiveLimit
	for _, el := range tiers.Effective(acct.Plan, acct.Overrides, now) {
		if len(metrics) > 0 && !contains(metrics, el.Metric) || el.Per == tiers.PerSubject && subject == "" {
			continue
		}
		limits = append(limits, el)
	}
	out := make([]Usage, 0, len(limits))
	var keys []CounterKey
	var long []int // indexes into out of the long windows, as keys
	for _, el := range limits {
		start, end := Bounds(el.Window, now, acct.Customer.Anchor)
		key := CounterKey{Customer: acct.Customer.ID, Metric: el.Metric, Window: el.Window, Start: start}
		if el.Per == tiers.PerSubject {
			key.Subject = subject
		}
		u := Usage{Metric: el.Metric, Subject: key.Subject, Window: el.Window, Mode: el.Mode, Algorithm: el.Algorithm, Burst: el.Burst,
			Limit: el.Limit.Limit}
		if el.Window.Resets() {
			u.ResetAt = end
		}
		if el.Window.Short() {
			m, err := catalog.Metric(ctx, el.Metric)
			if err != nil {
				return nil, err
			}
			cs := []Charge{{Customer: key.Customer, Metric: key.Metric, Subject: key.Subject, Cost: 1, At: now,
				MetricCapacity: hasCapacity(&m, true),
				Spans: []Span{{Key: key, End: end, Rule: Rule{Algorithm: el.Algorithm, Limit: el.Limit.Limit,
					Size: el.Size(), Threshold: tiers.MaxLimit}}}, Out: make([]Outcome, 1)}}
			if err := c.short.Peek(ctx, cs); err != nil {
				return nil, err
			}
			u.Used, u.ResetAt = cs[0].Out[0].Used, cs[0].Out[0].resetAt(&cs[0].Spans[0], false)
		} else {
			keys = append(keys, key)
			long = append(long, len(out))
		}
		out = append(out, u)
	}
	if len(keys) > 0 {
		used, _, err := c.read(ctx, keys, nil)
		if err != nil {
			return nil, c.health.unavailable(err)
		}
		for i, j := range long {
			out[j].Used = used[i]
		}
		if err := c.granted(ctx, keys, long, out); err != nil {
			return nil, err
		}
	}
	for i := range out {
		u := &out[i]
		size := limits[i].Size()
		u.Remaining = max(0, size-u.Used)
		if limits[i].Mode == tiers.Soft {
			u.Overage = max(0, u.Used-size)
		}
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
