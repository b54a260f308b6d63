package quota

import (
	"context"
	"sync"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// A check is a set of charges, decided together. Each item of a check
// (a metric, its cost, its subject) charges up to four owners of
// counters: the customer's count of the metric, the subject's (where the
// metric has limits per subject), and, for a metric that draws on a
// credit pool, the customer's and the subject's counts of the pool, at the
// pool's rate. Owners that several items charge (two metrics drawing on
// one pool) are charged once, with the sum of their costs. Each owner is
// a group of the set, whose short windows and long windows are a charge
// of the short-window counter and one of the long-window counter: every
// counter takes its charges all or nothing (Counter), and the engine
// takes the short ones first, giving them back if a long one denies (see
// Engine.take). So a check of one metric, of items, of a pool, of
// subjects, an Envoy request of several descriptors, a reservation and a
// refund all run through the same set.

// Limits of a set's arrays: a check of one metric, with a subject and a
// credit pool, fits them; a larger set grows its slices (once per pooled
// set: they keep their room).
const (
	setGroups  = 4
	setSpans   = 12
	setGlobals = 8
)

// group is one owner of counters a set charges: a customer's metric, for
// the customer or for one of its subjects, with the units the set takes
// there and where its charges are.
type group struct {
	customer string
	metric   string
	subject  string
	cost     int64
	// credits and per: the units a unit of the item that charged the
	// group costs it, credits/per (1/1 but for a credit pool's group).
	credits, per int64
	// short and long index the group's charges in the set's; -1: none
	// (the group counts nowhere of that kind).
	short, long int
}

// itemOf is one item of a set: what it asks, and the groups it charges
// (its metric's for the customer and for the subject, then the pool's for
// the customer and for the subject; -1 where there is none).
type itemOf struct {
	Item
	groups [4]int
	// draws: the item's metric draws on a pool, at credits/per.
	draws *tiers.Draw
}

// set is one check's charges, with room for what the counters answer. It
// is pooled (see Engine.sets); its slices point into its own arrays, so a
// check of one metric allocates nothing here.
type set struct {
	at     time.Time
	short  []Charge
	long   []Charge
	groups []group
	items  []itemOf
	spans  []Span
	outs   []Outcome
	globs  []GlobalKey
	// accts and mets are the accounts and metrics the items name, as the
	// catalog held them when the set was resolved.
	accts []tiers.Account
	mets  []tiers.Metric
	// calls counts round trips made for the set beyond its charges' (a
	// request id's claim).
	calls int
	// unconsulted: the set was answered without its long windows, the
	// store out of reach (see answer).
	unconsulted bool
	// look: the set is answered as its windows stand, without its units
	// (Request.Look); forced: its units were counted, though it is denied
	// (Request.Force). See answer.
	look, forced bool
	// draws and taken are what the set drew on grants (see
	// counters.draw), rest the long charges it counted then: the set's
	// long charges without the windows the grants paid for.
	draws []GrantDraw
	taken []GrantTake
	rest  []Charge

	shortBuf [setGroups]Charge
	longBuf  [setGroups]Charge
	groupBuf [setGroups]group
	itemBuf  [1]itemOf
	spanBuf  [setSpans]Span
	outBuf   [setSpans]Outcome
	globBuf  [setGlobals]GlobalKey
	acctBuf  [1]tiers.Account
	metBuf   [2]tiers.Metric

	// budget is the context of the check's store calls; it outlives the
	// set's reuse when no one looked at it (see budget).
	budget *budget
}

// reset empties s for a check at at, keeping the room its slices grew.
func (s *set) reset(at time.Time) {
	s.at = at
	s.short = reuse(s.short, s.shortBuf[:])
	s.long = reuse(s.long, s.longBuf[:])
	s.groups = reuse(s.groups, s.groupBuf[:])
	s.items = reuse(s.items, s.itemBuf[:])
	s.spans = reuse(s.spans, s.spanBuf[:])
	s.outs = reuse(s.outs, s.outBuf[:])
	s.globs = reuse(s.globs, s.globBuf[:])
	s.accts = reuse(s.accts, s.acctBuf[:])
	s.mets = reuse(s.mets, s.metBuf[:])
	s.calls, s.unconsulted, s.look, s.forced = 0, false, false, false
	s.draws, s.taken, s.rest = nil, nil, nil
}

// account returns the account of customer the set looked up, or nil.
func (s *set) account(customer string) *tiers.Account {
	for i := range s.accts {
		if s.accts[i].Customer.ID == customer {
			return &s.accts[i]
		}
	}
	return nil
}

// metric returns the metric key the set looked up, or nil.
func (s *set) metric(key string) *tiers.Metric {
	for i := range s.mets {
		if s.mets[i].Key == key {
			return &s.mets[i]
		}
	}
	return nil
}

// trip counts a round trip made for the set beyond its charges'.
func (s *set) trip() { s.calls++ }

// reuse returns x emptied (what it held cleared, for the collector), or
// buf's room when x has none yet.
func reuse[T any](x, buf []T) []T {
	if cap(x) == 0 {
		return buf[:0]
	}
	clear(x)
	return x[:0]
}

// free gives s, whose call is answered, back to pool: its budget stays
// for the next call if no one looked at it.
func (s *set) free(pool *sync.Pool) {
	s.budget.stop()
	s.release()
	pool.Put(s)
}

// release empties s once its call is answered: its budget stays for the
// next call if no one looked at it.
func (s *set) release() {
	s.reset(time.Time{})
	if b := s.budget; b != nil && !b.seen.Load() {
		b.parent = nil // the call's context, no longer needed
	} else {
		s.budget = nil
	}
}

// budgetFor returns the budget of a check of ctx that may wait d for the
// stores, or until alive ends (see newBudget): the set's last one if no
// one looked at it, else a new one.
func (s *set) budgetFor(ctx context.Context, d time.Duration, alive context.Context) *budget {
	if b := s.budget; b != nil && !b.seen.Load() {
		b.parent, b.deadline, b.alive = ctx, time.Now().Add(d), alive
		return b
	}
	s.budget = newBudget(ctx, d, alive)
	return s.budget
}

// resolve fills s with the charges of items at s.at, from the accounts and
// metrics the set looked up (see Engine.resolve). A metric with limits per
// subject charged without a subject is tiers.ErrSubjectRequired (wrapped
// in an *ItemError).
func (s *set) resolve(customer string, items []Item) error {
	for _, it := range items {
		if it.Customer == "" {
			it.Customer = customer
		}
		m := s.metric(it.Metric)
		ref := itemOf{Item: it, groups: [4]int{-1, -1, -1, -1}}
		ref.groups[0] = s.group(it.Customer, it.Metric, "", it.Cost, 1, 1)
		ref.groups[1] = s.subjectGroup(it, it.Metric, it.Cost, 1, 1)
		if d := m.Draws; d != nil {
			ref.draws = d
			cost := poolCost(it.Cost, d.Credits, d.Per)
			ref.groups[2] = s.group(it.Customer, d.Pool, "", cost, d.Credits, d.Per)
			ref.groups[3] = s.subjectGroup(it, d.Pool, cost, d.Credits, d.Per)
		}
		s.items = append(s.items, ref)
	}
	for g := range s.groups {
		if i := s.spansOf(g); i >= 0 {
			return &ItemError{Index: i, Err: tiers.ErrSubjectRequired}
		}
	}
	return nil
}

// group returns the index of the group of customer's metric (subject's,
// if any), made with cost, or with cost added when the set has it.
func (s *set) group(customer, metric, subject string, cost, credits, per int64) int {
	for i := range s.groups {
		if g := &s.groups[i]; g.customer == customer && g.metric == metric && g.subject == subject {
			g.cost = min(g.cost+cost, tiers.MaxLimit+1)
			return i
		}
	}
	s.groups = append(s.groups, group{customer: customer, metric: metric, subject: subject, cost: cost,
		credits: credits, per: per, short: -1, long: -1})
	return len(s.groups) - 1
}

// subjectGroup returns the group of item it's subject for metric, or -1
// when the item names none (see spansOf: a metric with limits per subject
// needs one).
func (s *set) subjectGroup(it Item, metric string, cost, credits, per int64) int {
	if it.Subject != "" {
		return s.group(it.Customer, metric, it.Subject, cost, credits, per)
	}
	return -1
}

// poolCost is what cost units of a metric cost its pool at credits per
// per units: ceil(cost * credits / per), in 128 bits; beyond any limit
// (tiers.MaxLimit + 1) where it is larger.
func poolCost(cost, credits, per int64) int64 {
	return mulDivCeil(cost, credits, max(per, 1), tiers.MaxLimit+1)
}

// spansOf makes the charges of group g: the spans of its effective limits
// at s.at (its customer's plan and overrides, those for a subject when it
// has one), shortest window first, and, for the customer's own group, the
// metric's global windows (those with a capacity), where every admitted
// unit counts whatever the limits. It returns the index of an item that
// charges a metric with limits per subject without naming a subject, or
// -1.
func (s *set) spansOf(g int) int {
	gr := &s.groups[g]
	acct := s.account(gr.customer)
	m := s.metric(gr.metric)
	per := tiers.PerCustomer
	if gr.subject != "" {
		per = tiers.PerSubject
	}
	var limits [tiers.Total + 1]*tiers.Limit // by window
	perSubject := false
	for i := range acct.Plan.Limits {
		if l := &acct.Plan.Limits[i]; l.Metric == m.Key {
			perSubject = perSubject || l.Per == tiers.PerSubject
			if l.Per == per {
				limits[l.Window] = l
			}
		}
	}
	for i := range acct.Overrides {
		if o := &acct.Overrides[i]; o.Metric == m.Key && !o.ExpiredAt(s.at) {
			perSubject = perSubject || o.Per == tiers.PerSubject
			if o.Per == per {
				limits[o.Window] = &o.Limit
			}
		}
	}
	if per == tiers.PerCustomer && perSubject {
		if i := s.unnamed(g); i >= 0 {
			return i
		}
	}
	var globals [tiers.Total + 1]GlobalKey // by window, where the metric declares a capacity
	var shortG, longG []GlobalKey
	for _, w := range tiers.Windows {
		if _, ok := m.Capacity[w]; ok {
			ws, _ := Bounds(w, s.at, tiers.Anchor{})
			globals[w] = GlobalKey{Metric: m.Key, Window: w, Start: ws}
		}
	}
	if gr.subject == "" {
		first := len(s.globs)
		for _, w := range tiers.Windows {
			if globals[w].Metric != "" {
				s.globs = append(s.globs, globals[w])
			}
		}
		shortG, longG = splitGlobals(s.globs[first:])
	}
	for _, short := range [2]bool{true, false} {
		first := len(s.spans)
		for _, w := range tiers.Windows {
			if l := limits[w]; l != nil && w.Short() == short {
				ws, we := Bounds(w, s.at, acct.Customer.Anchor)
				s.spans = append(s.spans, Span{Key: CounterKey{Customer: gr.customer, Metric: m.Key, Subject: gr.subject,
					Window: w, Start: ws}, End: we, Rule: RuleFor(*l, *m), Global: globals[w]})
			}
		}
		spans := s.spans[first:len(s.spans):len(s.spans)]
		globs := longG
		if short {
			globs = shortG
		}
		if len(spans)+len(globs) == 0 {
			continue
		}
		first = len(s.outs)
		for range spans {
			s.outs = append(s.outs, Outcome{})
		}
		c := Charge{Customer: gr.customer, Metric: m.Key, Subject: gr.subject, Cost: gr.cost, At: s.at,
			Spans: spans, Out: s.outs[first:len(s.outs):len(s.outs)], Globals: globs, MetricCapacity: hasCapacity(m, short)}
		if short {
			gr.short = len(s.short)
			s.short = append(s.short, c)
		} else {
			gr.long = len(s.long)
			s.long = append(s.long, c)
		}
	}
	return -1
}

// unnamed returns the index of an item of the set that charges group g
// (a customer's own) and names no subject, or -1.
func (s *set) unnamed(g int) int {
	for i := range s.items {
		if it := &s.items[i]; (it.groups[0] == g || it.groups[2] == g) && it.Subject == "" {
			return i
		}
	}
	return -1
}

// splitGlobals returns the short and the long windows of gs, which lists
// short windows first (tiers.Windows' order).
func splitGlobals(gs []GlobalKey) (short, long []GlobalKey) {
	n := 0
	for n < len(gs) && gs[n].Window.Short() {
		n++
	}
	return gs[:n:n], gs[n:len(gs):len(gs)]
}

// hasCapacity reports whether m declares a capacity for a window of the
// kind, short or long.
func hasCapacity(m *tiers.Metric, short bool) bool {
	for w := range m.Capacity {
		if w.Short() == short {
			return true
		}
	}
	return false
}

// hasLong reports whether the set concerns the long-window store: a long
// limit, or a long window with declared capacity, where every admitted
// unit counts.
func (s *set) hasLong() bool { return len(s.long) > 0 }

// trips returns the round trips the set's charges made.
func (s *set) trips() int {
	n := s.calls
	for i := range s.short {
		n += s.short[i].Trips
	}
	for i := range s.long {
		n += s.long[i].Trips
	}
	return n
}

// ItemError is an error of one item of a check: Index is its place in
// the request's items (0 for a check of one metric).
type ItemError struct {
	Index int
	Err   error
}

func (e *ItemError) Error() string { return e.Err.Error() }

// Unwrap returns the item's error.
func (e *ItemError) Unwrap() error { return e.Err }
