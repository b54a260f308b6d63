package quota

import (
	"context"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// Most windows a check has of each kind: one limit per metric and window.
const (
	maxShort = 2 // second, minute
	maxLong  = 4 // hour, day, week, month
)

// scope is everything a check of one customer's metric covers at one
// moment, resolved from cached values: its short spans and long spans,
// each kind with the metric's global windows of that kind, and room for
// what the counters answer. The slices point into the arrays, so a scope
// costs one allocation at most (it is pooled; see Engine.newScope).
type scope struct {
	// short and long point into charges: each kind is a set of one.
	short, long *Charge
	charges     [2]Charge

	shortSpans   [maxShort]Span
	longSpans    [maxLong]Span
	shortGlobals [maxShort]GlobalKey
	longGlobals  [maxLong]GlobalKey
	shortOuts    [maxShort]Outcome
	longOuts     [maxLong]Outcome
	// budget is the context of the check's store calls; it outlives the
	// scope's reuse when no one looked at it (see budget).
	budget *budget
}

// budgetFor returns the budget of a check of ctx that may wait d for the
// stores: the scope's last one if no one looked at it, else a new one.
func (s *scope) budgetFor(ctx context.Context, d time.Duration) *budget {
	if b := s.budget; b != nil && !b.seen.Load() {
		b.parent, b.deadline = ctx, time.Now().Add(d)
		return b
	}
	s.budget = newBudget(ctx, d)
	return s.budget
}

// resolve fills s with the customer's effective limits on metric m at now,
// for a charge of cost units. Spans come shortest window first.
func (s *scope) resolve(acct tiers.Account, m tiers.Metric, cost int64, now time.Time) {
	customer := acct.Customer.ID
	s.short, s.long = &s.charges[0], &s.charges[1]
	*s.short = Charge{Customer: customer, Metric: m.Key, Cost: cost, At: now, Spans: s.shortSpans[:0], Globals: s.shortGlobals[:0]}
	*s.long = Charge{Customer: customer, Metric: m.Key, Cost: cost, At: now, Spans: s.longSpans[:0], Globals: s.longGlobals[:0]}
	var globals [tiers.Month + 1]GlobalKey // by window, where the metric declares a capacity
	for _, w := range tiers.Windows {
		if _, ok := m.Capacity[w]; !ok {
			continue
		}
		start, _ := Bounds(w, now, tiers.Anchor{})
		g := GlobalKey{Metric: m.Key, Window: w, Start: start}
		globals[w] = g
		if w.Short() {
			s.short.Globals = append(s.short.Globals, g)
		} else {
			s.long.Globals = append(s.long.Globals, g)
		}
	}
	s.short.MetricCapacity = len(s.short.Globals) > 0
	s.long.MetricCapacity = len(s.long.Globals) > 0
	var limits [tiers.Month + 1]*tiers.Limit // by window
	for i := range acct.Plan.Limits {
		if l := &acct.Plan.Limits[i]; l.Metric == m.Key {
			limits[l.Window] = l
		}
	}
	for i := range acct.Overrides {
		if o := &acct.Overrides[i]; o.Metric == m.Key && !o.ExpiredAt(now) {
			limits[o.Window] = &o.Limit
		}
	}
	for _, w := range tiers.Windows {
		l := limits[w]
		if l == nil {
			continue
		}
		start, end := Bounds(w, now, acct.Customer.Anchor)
		sp := Span{Key: CounterKey{Customer: customer, Metric: m.Key, Window: w, Start: start}, End: end,
			Rule: RuleFor(*l, m), Global: globals[w]}
		if w.Short() {
			s.short.Spans = append(s.short.Spans, sp)
		} else {
			s.long.Spans = append(s.long.Spans, sp)
		}
	}
	s.trimOuts()
}

// trimOuts makes each charge's Out as long as its spans.
func (s *scope) trimOuts() {
	s.short.Out = s.shortOuts[:len(s.short.Spans)]
	s.long.Out = s.longOuts[:len(s.long.Spans)]
}

// shorts and longs return the scope's short and long charges as sets.
func (s *scope) shorts() []Charge { return s.charges[0:1] }
func (s *scope) longs() []Charge  { return s.charges[1:2] }

// hasLong reports whether a check of this scope concerns the long-window
// store: a long limit, or a long window with declared capacity, where every
// admitted unit counts.
func (s *scope) hasLong() bool { return len(s.long.Spans)+len(s.long.Globals) > 0 }
