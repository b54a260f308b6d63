package quota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/quotad/quotad/internal/tiers"
)

// Options configure an Engine.
type Options struct {
	Catalog Catalog
	Ledger  Ledger
	History HistoryStore
	Clock   Clock
	// FailClosed makes checks answer ErrUnavailable when the ledger cannot
	// be reached; by default they fail open: allowed, marked degraded, with
	// the long windows left out.
	FailClosed bool
}

// Engine answers checks. It is safe for concurrent use.
type Engine struct {
	catalog    Catalog
	ledger     Ledger
	clock      Clock
	failClosed bool
	short      *slidingCounters
	history    *historyBuffer
	storeErrs  atomic.Uint64
}

// New returns an Engine. Call Run to keep its background work going.
func New(o Options) *Engine {
	if o.Clock == nil {
		o.Clock = SystemClock{}
	}
	return &Engine{
		catalog:    o.Catalog,
		ledger:     o.Ledger,
		clock:      o.Clock,
		failClosed: o.FailClosed,
		short:      newSlidingCounters(),
		history:    newHistoryBuffer(o.History),
	}
}

// Stats are the engine's counters for monitoring.
type Stats struct {
	StoreErrors uint64 // ledger or history calls that failed
	ShortKeys   int64  // short-window counters held in memory
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	return Stats{StoreErrors: e.storeErrs.Load(), ShortKeys: e.short.Keys()}
}

// Validate checks a request's fields.
func (r Request) Validate() error {
	return validateCall(r.Customer, r.Metric, r.Cost, r.RequestID)
}

// Validate checks a refund's fields.
func (r RefundRequest) Validate() error {
	return validateCall(r.Customer, r.Metric, r.Cost, r.RequestID)
}

// MaxRequestIDLen bounds idempotency keys.
const MaxRequestIDLen = 200

func validateCall(customer, metric string, cost int64, requestID string) error {
	var fields []tiers.FieldError
	if err := tiers.CheckCustomerID("customer", customer); err != nil {
		fields = append(fields, err.(*tiers.ValidationError).Fields...)
	}
	if err := tiers.CheckKey("metric", metric); err != nil {
		fields = append(fields, err.(*tiers.ValidationError).Fields...)
	}
	if cost < 1 || cost > MaxCost {
		fields = append(fields, tiers.FieldError{Field: "cost", Message: fmt.Sprintf("must be an integer between 1 and %d", MaxCost)})
	}
	if requestID != "" && !validRequestID(requestID) {
		fields = append(fields, tiers.FieldError{Field: "request_id",
			Message: fmt.Sprintf("must be printable text of at most %d bytes", MaxRequestIDLen)})
	}
	if fields != nil {
		return &tiers.ValidationError{Fields: fields}
	}
	return nil
}

func validRequestID(s string) bool {
	if len(s) > MaxRequestIDLen || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// slot is one effective limit of a check, resolved for now.
type slot struct {
	limit      tiers.Limit
	start, end time.Time
	threshold  int64
	spare      bool // elastic with capacity declared for the window
	capacity   int64
	ceiling    int64
	global     GlobalKey
}

// plan is everything a check of one customer's metric needs, from memory.
type plan struct {
	customer   string
	metric     string
	short      []slot
	long       []slot
	shortGlob  []tiers.Window // short windows with declared capacity
	longGlob   []GlobalKey    // long windows with declared capacity
	shortSlots []shortSlot
}

// planFor resolves the customer's effective limits on metric at now.
func planFor(acct tiers.Account, m tiers.Metric, now time.Time) plan {
	p := plan{customer: acct.Customer.ID, metric: m.Key}
	for _, w := range tiers.Windows {
		if _, ok := m.Capacity[w]; !ok {
			continue
		}
		if w.Short() {
			p.shortGlob = append(p.shortGlob, w)
		} else {
			start, _ := Bounds(w, now, tiers.Anchor{})
			p.longGlob = append(p.longGlob, GlobalKey{Metric: m.Key, Window: w, Start: start})
		}
	}
	for _, l := range effectiveFor(acct, m.Key, now) {
		s := slot{limit: l, threshold: min(threshold(l), tiers.MaxLimit), ceiling: ceilingOf(l)}
		s.start, s.end = Bounds(l.Window, now, acct.Customer.Anchor)
		if capacity, ok := m.Capacity[l.Window]; ok && l.Mode == tiers.Elastic {
			s.spare, s.capacity = true, capacity
			gs, _ := Bounds(l.Window, now, tiers.Anchor{})
			s.global = GlobalKey{Metric: m.Key, Window: l.Window, Start: gs}
		}
		if l.Window.Short() {
			p.short = append(p.short, s)
			p.shortSlots = append(p.shortSlots, shortSlot{window: l.Window, threshold: s.threshold,
				spare: s.spare, capacity: s.capacity, ceiling: s.ceiling})
		} else {
			p.long = append(p.long, s)
		}
	}
	return p
}

// effectiveFor returns the customer's effective limits on one metric.
func effectiveFor(acct tiers.Account, metric string, now time.Time) []tiers.Limit {
	var out []tiers.Limit
	for _, l := range acct.Plan.Limits {
		if l.Metric == metric {
			out = append(out, l)
		}
	}
	for _, o := range acct.Overrides {
		if o.Metric != metric || o.ExpiredAt(now) {
			continue
		}
		if i := slices.IndexFunc(out, func(l tiers.Limit) bool { return l.Window == o.Window }); i >= 0 {
			out[i] = o.Limit
		} else {
			out = append(out, o.Limit)
		}
	}
	slices.SortFunc(out, func(a, b tiers.Limit) int { return int(a.Window) - int(b.Window) })
	return out
}

// charges returns the plan's long windows as a Ledger wants them.
func (p plan) charges() []WindowCharge {
	out := make([]WindowCharge, len(p.long))
	for i, s := range p.long {
		out[i] = WindowCharge{Window: s.limit.Window, Start: s.start, Threshold: s.threshold,
			Spare: s.spare, Capacity: s.capacity, Ceiling: s.ceiling, Global: s.global}
	}
	return out
}

func (p plan) counterKeys() []CounterKey {
	out := make([]CounterKey, len(p.long))
	for i, s := range p.long {
		out[i] = CounterKey{Customer: p.customer, Metric: p.metric, Window: s.limit.Window, Start: s.start}
	}
	return out
}

func (p plan) shortWindows() []tiers.Window {
	out := make([]tiers.Window, len(p.short))
	for i, s := range p.short {
		out[i] = s.limit.Window
	}
	return out
}

// lookup finds the customer's account and the metric. A missing customer
// is reported before a missing metric.
func (e *Engine) lookup(ctx context.Context, customer, metric string) (tiers.Account, tiers.Metric, error) {
	acct, err := e.catalog.Account(ctx, customer)
	if err != nil {
		return tiers.Account{}, tiers.Metric{}, err
	}
	m, err := e.catalog.Metric(ctx, metric)
	if err != nil {
		return tiers.Account{}, tiers.Metric{}, err
	}
	return acct, m, nil
}

// Check decides whether r.Customer may use r.Cost units of r.Metric now
// and, unless r.DryRun, charges them. Errors: *tiers.ValidationError,
// tiers.ErrCustomerNotFound, tiers.ErrMetricNotFound, tiers.ErrConflict (a
// reused request id with another metric or cost), tiers.ErrUnavailable
// (only when failing closed).
func (e *Engine) Check(ctx context.Context, r Request) (Decision, error) {
	if err := r.Validate(); err != nil {
		return Decision{}, err
	}
	now := e.clock.Now().UTC()
	acct, m, err := e.lookup(ctx, r.Customer, r.Metric)
	if errors.Is(err, tiers.ErrUnavailable) {
		return e.unconsulted(r, err)
	}
	if err != nil {
		return Decision{}, err
	}
	p := planFor(acct, m, now)
	idempotent := r.RequestID != "" && !r.DryRun

	if idempotent {
		rec, err := e.ledger.Recorded(ctx, r.Customer, r.RequestID, now)
		switch {
		case errors.Is(err, tiers.ErrUnavailable):
			if err := e.storeDown(err); err != nil {
				return Decision{}, err
			}
			idempotent = false // degraded: the id cannot be kept
		case err != nil:
			return Decision{}, err
		case rec != nil:
			return replay(r, rec)
		}
	}

	nowMs := now.UnixMilli()
	sr := e.short.take(r.Customer, r.Metric, p.shortSlots, p.shortGlob, r.Cost, nowMs, !r.DryRun)
	if !sr.allowed {
		d, err := e.decidePeeking(ctx, r, p, now, sr)
		if err != nil {
			return Decision{}, err
		}
		e.record(r, d, now)
		return d, nil
	}

	needLedger := len(p.long) > 0 || (len(p.longGlob) > 0 && !r.DryRun) || idempotent
	if !needLedger {
		d := e.decide(r, p, now, sr, nil, nil, nil, false)
		e.record(r, d, now)
		return d, nil
	}
	if r.DryRun {
		return e.decidePeeking(ctx, r, p, now, sr)
	}

	c := Charge{
		Customer: r.Customer, Metric: r.Metric, Cost: r.Cost,
		Windows: p.charges(), Globals: p.longGlob, At: now,
	}
	if idempotent {
		c.RequestID = r.RequestID
		c.Answer = func(o Outcome) ([]byte, error) {
			return json.Marshal(e.decide(r, p, now, sr, o.Used, o.Passed, o.Elastic, false))
		}
	}
	out, err := e.ledger.Charge(ctx, c)
	switch {
	case err != nil && errors.Is(err, tiers.ErrUnavailable):
		if err := e.storeDown(err); err != nil {
			e.short.giveBack(r.Customer, r.Metric, p.shortSlots, p.shortGlob, r.Cost, sr)
			return Decision{}, err
		}
		d := e.decide(r, p, now, sr, nil, nil, nil, true)
		e.record(r, d, now)
		return d, nil
	case err != nil:
		e.short.giveBack(r.Customer, r.Metric, p.shortSlots, p.shortGlob, r.Cost, sr)
		return Decision{}, err
	case out.Replay != nil:
		e.short.giveBack(r.Customer, r.Metric, p.shortSlots, p.shortGlob, r.Cost, sr)
		return replay(r, out.Replay)
	case !out.Allowed:
		e.short.giveBack(r.Customer, r.Metric, p.shortSlots, p.shortGlob, r.Cost, sr)
		// The short windows admitted the check; report them as they stand.
		sr.allowed = false
	}
	d := e.decide(r, p, now, sr, out.Used, out.Passed, out.Elastic, false)
	e.record(r, d, now)
	return d, nil
}

// unconsulted answers a check whose customer and metric could not be
// looked up because the store is unreachable.
func (e *Engine) unconsulted(r Request, err error) (Decision, error) {
	if err := e.storeDown(err); err != nil {
		return Decision{}, err
	}
	return Decision{Allowed: true, Customer: r.Customer, Metric: r.Metric, Cost: r.Cost,
		Degraded: true, Limits: []WindowResult{}}, nil
}

// replay returns a recorded answer, or ErrConflict when the request id was
// used for another check.
func replay(r Request, rec *Recorded) (Decision, error) {
	if rec.Metric != r.Metric || rec.Cost != r.Cost {
		return Decision{}, fmt.Errorf("%w: request_id %q was used for a check of %d %s",
			tiers.ErrConflict, r.RequestID, rec.Cost, rec.Metric)
	}
	var d Decision
	if err := json.Unmarshal(rec.Answer, &d); err != nil {
		return Decision{}, fmt.Errorf("decode recorded answer: %w", err)
	}
	d.Replayed = true
	return d, nil
}

// storeDown counts a store that cannot be reached and returns err when
// checks fail closed, nil when they go on degraded.
func (e *Engine) storeDown(err error) error {
	e.storeErrs.Add(1)
	if e.failClosed {
		return err
	}
	return nil
}

// decidePeeking decides a check that charges nothing (a dry run, or one
// the short windows denied): it reads the long windows and evaluates them
// as a charge would. When the ledger cannot be reached, it fails as checks
// do: open, degraded; closed, with tiers.ErrUnavailable.
func (e *Engine) decidePeeking(ctx context.Context, r Request, p plan, now time.Time, sr shortResult) (Decision, error) {
	if len(p.long) == 0 {
		return e.decide(r, p, now, sr, nil, nil, nil, false), nil
	}
	globals := make([]GlobalKey, 0, len(p.long))
	for _, s := range p.long {
		if s.spare {
			globals = append(globals, s.global)
		}
	}
	used, global, err := e.ledger.Peek(ctx, p.counterKeys(), globals)
	switch {
	case errors.Is(err, tiers.ErrUnavailable):
		if err := e.storeDown(err); err != nil {
			return Decision{}, err
		}
		return e.decide(r, p, now, sr, nil, nil, nil, true), nil
	case err != nil:
		return Decision{}, err
	}
	passed := make([]bool, len(p.long))
	elastic := make([]bool, len(p.long))
	gi := 0
	for i, wc := range p.charges() {
		var g int64
		if wc.Spare {
			g = global[gi]
			gi++
		}
		passed[i], elastic[i] = wc.Admits(used[i], g, r.Cost)
	}
	return e.decide(r, p, now, sr, used, passed, elastic, false), nil
}

// decide assembles a Decision from what the short windows (sr) and the
// long windows (used, passed, elastic; nil when degraded) found. The check
// is allowed when every window admitted it.
func (e *Engine) decide(r Request, p plan, now time.Time, sr shortResult,
	used []int64, passed, elastic []bool, degraded bool) Decision {
	allowed := sr.allowed && (degraded || !slices.Contains(passed, false))
	d := Decision{
		Allowed: allowed, Customer: r.Customer, Metric: r.Metric, Cost: r.Cost, Degraded: degraded,
		Limits: make([]WindowResult, 0, len(p.short)+len(p.long)),
	}
	var overageUnits int64
	var retry int64
	add := func(s slot, u int64, ok, el bool, wait func() int64) {
		wr := WindowResult{Window: s.limit.Window, Mode: s.limit.Mode, Limit: s.limit.Limit,
			ResetAt: s.end, Length: s.end.Sub(s.start)}
		if s.limit.Window.Short() {
			wr.Length = s.limit.Window.Length()
		}
		after := addCap(u, r.Cost)
		wr.Used = u
		if allowed {
			wr.Used = after
		}
		switch {
		case !ok:
			wr.State = StateExceeded
			if w := wait(); w < 0 {
				d.Never = true
			} else {
				retry = max(retry, w)
			}
		case s.limit.Mode == tiers.Soft && after > s.limit.Limit:
			wr.State = StateOverage
			overageUnits = max(overageUnits, min(r.Cost, after-s.limit.Limit))
		case el || (s.limit.Mode == tiers.Elastic && after > s.limit.Limit):
			wr.State = StateElastic
		default:
			wr.State = StateOK
		}
		wr.Remaining = max(0, s.limit.Limit-wr.Used)
		d.Limits = append(d.Limits, wr)
	}
	nowMs := now.UnixMilli()
	for i, s := range p.short {
		add(s, sr.used[i], sr.passed[i], sr.elastic[i], func() int64 {
			return e.shortRetry(p, s, r.Cost, nowMs)
		})
	}
	if used != nil {
		for i, s := range p.long {
			add(s, used[i], passed[i], elastic[i], func() int64 {
				return longRetry(s, used[i], r.Cost, now)
			})
		}
	}
	slices.SortStableFunc(d.Limits, func(a, b WindowResult) int { return int(a.Window) - int(b.Window) })
	if allowed {
		d.Overage = overageUnits > 0
		d.Elastic = slices.ContainsFunc(d.Limits, func(w WindowResult) bool { return w.State == StateElastic })
		return d
	}
	if d.Never {
		d.RetryAfter = 0
	} else {
		d.RetryAfter = max(1, retry)
	}
	return d
}

// shortRetry returns the whole seconds (>= 1) until a denying short window
// admits the cost, from the sliding window formula, or -1 for never.
func (e *Engine) shortRetry(p plan, s slot, cost, nowMs int64) int64 {
	length := s.limit.Window.Length().Milliseconds()
	b := e.short.state(p.customer, p.metric, s.limit.Window, nowMs)
	wait := shortWait(b, nowMs, length, cost, s.threshold)
	if s.spare {
		// Beyond the limit, the window admits once both the customer's
		// count is within the ceiling and the global count within capacity.
		g := e.short.state("", p.metric, s.limit.Window, nowMs)
		wc := shortWait(b, nowMs, length, cost, s.ceiling)
		wg := shortWait(g, nowMs, length, cost, s.capacity)
		if wc >= 0 && wg >= 0 {
			spare := max(wc, wg)
			if wait < 0 || spare < wait {
				wait = spare
			}
		}
	}
	if wait < 0 {
		return -1
	}
	return max(1, ceilDiv(wait, 1000))
}

// longRetry returns the whole seconds (>= 1) until a denying long window
// admits the cost, or -1 for never. Counts only fall when a window ends.
func longRetry(s slot, used, cost int64, now time.Time) int64 {
	best := int64(-1)
	consider := func(at time.Time) {
		w := secondsUntil(now, at)
		if best < 0 || w < best {
			best = w
		}
	}
	if cost <= s.threshold {
		consider(s.end)
	}
	if s.spare && cost <= s.capacity && cost <= s.ceiling {
		// Spare capacity returns when the global window ends; the ceiling
		// check passes now or after the customer's window ends.
		_, gend := Bounds(s.limit.Window, now, tiers.Anchor{})
		at := gend
		if used+cost > s.ceiling && s.end.After(at) {
			at = s.end
		}
		consider(at)
	}
	return best
}

// record adds a decided check to the usage history: admitted units and
// overage, or one denied check. Dry runs and replays are not history.
func (e *Engine) record(r Request, d Decision, now time.Time) {
	if r.DryRun || d.Replayed {
		return
	}
	delta := HistoryDelta{Customer: r.Customer, Metric: r.Metric, Date: day(now)}
	if d.Allowed {
		delta.Used = r.Cost
		for _, w := range d.Limits {
			if w.Mode == tiers.Soft && w.Used > w.Limit {
				delta.Overage = max(delta.Overage, min(r.Cost, w.Used-w.Limit))
			}
		}
	} else {
		delta.Denied = 1
	}
	e.history.add(delta)
}

func day(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
