package quota

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	// Leases serves long windows from blocks of units leased from the
	// ledger (see LeasePool); without, every check with a long window
	// charges the ledger directly.
	Leases bool
	// Shared keeps short windows in a store every quotad process shares
	// (see SharedStore, Failover); without, each process counts its own.
	Shared SharedStore
	// SharedClock: the shared store's clock decides short windows, so that
	// processes whose clocks differ agree on boundaries. Otherwise Clock
	// does (tests that set the time).
	SharedClock bool
	// OnSharedChange hears when a first shard of the shared store stops
	// answering (shared false, with the error) and when none is left down
	// (shared true): once per change of the process's mode, not once per
	// shard (see Failover).
	OnSharedChange func(shared bool, err error)
	// Watcher, if set, sees every long window of every charged check (see
	// Watcher).
	Watcher Watcher
	// Reservations keeps reservations (see Reserve); without, Reserve
	// fails.
	Reservations ReservationStore
	// StoreTimeout bounds how long a check, a refund or a usage read
	// waits for the stores, all its calls and waits together (a check
	// whose client goes away is not cut short before); then it fails as
	// when they cannot be reached. 0 means DefaultStoreTimeout.
	StoreTimeout time.Duration
}

// claimBatch bounds the request-id claims of one round trip, claimsInFlight
// the round trips of claims at once (see batcher).
const (
	claimBatch     = 256
	claimsInFlight = 2
)

// DefaultStoreTimeout is how long a check waits for the stores by
// default: well within what a client of a rate limiter waits for it.
const DefaultStoreTimeout = 250 * time.Millisecond

// Engine answers checks. It is safe for concurrent use.
type Engine struct {
	catalog      Catalog
	ledger       Ledger
	clock        Clock
	failClosed   bool
	storeTimeout time.Duration
	// short counts short windows; sliding is the in-process counter, for
	// the work only it has (eviction, forgetting, its size): the same one,
	// or, with a shared store, what failover falls back on.
	short    Counter
	sliding  *slidingCounters
	failover *Failover // nil without a shared store
	shared   SharedStore
	// long counts long windows: the lease pool, or the ledger itself.
	long   Counter
	leases *LeasePool // nil without leases
	// claims gathers the request-id claims of checks with leases (see
	// checkOnceLeased).
	claims batcher[Claim]
	// reservations keeps reservations; inserts gathers the inserts of
	// reserves made while others are in flight.
	reservations ReservationStore
	inserts      batcher[ReservationInsert]
	transitions  batcher[ReservationTransition]
	history      *historyBuffer
	watcher      Watcher
	storeErrs    atomic.Uint64
	// lastDown is when a check last could not reach the store (Unix ns,
	// the wall clock: it is about real outages): see StoreDown.
	lastDown atomic.Int64
	scopes   sync.Pool
}

// New returns an Engine. Call Run to keep its background work going.
func New(o Options) *Engine {
	if o.Clock == nil {
		o.Clock = SystemClock{}
	}
	if o.StoreTimeout <= 0 {
		o.StoreTimeout = DefaultStoreTimeout
	}
	sliding := newSlidingCounters()
	e := &Engine{
		catalog:      o.Catalog,
		ledger:       o.Ledger,
		clock:        o.Clock,
		failClosed:   o.FailClosed,
		storeTimeout: o.StoreTimeout,
		short:        sliding,
		sliding:      sliding,
		long:         o.Ledger,
		history:      newHistoryBuffer(o.History),
		watcher:      o.Watcher,
		scopes:       sync.Pool{New: func() any { return new(scope) }},
	}
	if o.Leases {
		e.leases = NewLeasePool(o.Ledger, o.Clock)
		e.long = e.leases
	}
	if o.Ledger != nil {
		e.claims = batcher[Claim]{send: o.Ledger.Claim, max: claimBatch, inFlight: claimsInFlight, timeout: backgroundTimeout}
	}
	if o.Reservations != nil {
		e.reservations = o.Reservations
		e.inserts = batcher[ReservationInsert]{send: o.Reservations.InsertReservations, max: insertBatch,
			inFlight: insertsInFlight, timeout: backgroundTimeout}
		e.transitions = batcher[ReservationTransition]{send: o.Reservations.TransitionReservations, max: insertBatch,
			inFlight: insertsInFlight, timeout: backgroundTimeout}
	}
	if o.Shared != nil {
		e.shared = o.Shared
		e.failover = newFailover(NewShared(o.Shared, o.SharedClock), sliding, o.OnSharedChange)
		e.short = e.failover
	}
	return e
}

// Stats are the engine's counters for monitoring.
type Stats struct {
	StoreErrors uint64 // ledger or history calls that failed
	ShortKeys   int64  // short-window counters held in memory
	Leases      LeaseStats
	Shared      SharedStats
	// Claims counts the statements request-id claims went in (with
	// leases), and the claims.
	Claims BatchStats
	// ReservationInserts counts the statements reservations were stored
	// in, and the reservations.
	ReservationInserts BatchStats
}

// SharedStats describe the shared store of short windows.
type SharedStats struct {
	Configured bool // the engine has one
	// Up: every short window is counted there now; ShardsDown counts the
	// shards (see SharedStore.Shard) that failed and are counted in
	// process instead, all of them when the store is one server.
	Up         bool
	ShardsDown int64
	Failures   uint64 // calls to it that failed
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	s := Stats{StoreErrors: e.storeErrs.Load(), ShortKeys: e.sliding.Keys(), Claims: e.claims.stats(),
		ReservationInserts: e.inserts.stats()}
	if e.leases != nil {
		s.Leases = e.leases.Stats()
	}
	if f := e.failover; f != nil {
		down := f.ShardsDown()
		s.Shared = SharedStats{Configured: true, Up: down == 0, ShardsDown: down, Failures: f.failures.Load()}
	}
	return s
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

// validateCall checks the fields of a check or refund. An empty customer or
// metric "is required", as in the admin bodies; a present but malformed one
// is told the pattern it must match.
func validateCall(customer, metric string, cost int64, requestID string) error {
	var fields []tiers.FieldError
	if customer == "" {
		fields = append(fields, tiers.FieldError{Field: "customer", Message: "is required"})
	} else if err := tiers.CheckCustomerID("customer", customer); err != nil {
		fields = append(fields, err.(*tiers.ValidationError).Fields...)
	}
	if metric == "" {
		fields = append(fields, tiers.FieldError{Field: "metric", Message: "is required"})
	} else if err := tiers.CheckKey("metric", metric); err != nil {
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

// newScope returns a scope resolved for a check of cost units; give it
// back with freeScope once nothing refers to it.
func (e *Engine) newScope(acct tiers.Account, m tiers.Metric, cost int64, now time.Time) *scope {
	s := e.scopes.Get().(*scope)
	s.resolve(acct, m, cost, now)
	return s
}

func (e *Engine) freeScope(s *scope) {
	b := s.budget
	*s = scope{}
	if b != nil && !b.seen.Load() {
		b.parent = nil // the request's context, no longer needed
		s.budget = b
	}
	e.scopes.Put(s)
}

// errDecided ends a transaction whose outcome is decided and holds nothing
// to keep: a denial, or a request id answered before.
var errDecided = errors.New("quota: decided, nothing to keep")

// Check decides whether r.Customer may use r.Cost units of r.Metric now
// and, unless r.DryRun, charges them. Errors: *tiers.ValidationError,
// tiers.ErrCustomerNotFound, tiers.ErrMetricNotFound, tiers.ErrConflict (a
// reused request id with another metric or cost), tiers.ErrUnavailable
// (only when failing closed).
func (e *Engine) Check(ctx context.Context, r Request) (Decision, error) {
	if err := r.Validate(); err != nil {
		return Decision{}, err
	}
	s := e.scopes.Get().(*scope)
	defer e.freeScope(s)
	b := s.budgetFor(ctx, e.storeTimeout)
	defer b.stop()
	ctx = b
	now := e.clock.Now().UTC()
	acct, m, err := e.lookup(ctx, r.Customer, r.Metric)
	if errors.Is(err, tiers.ErrUnavailable) {
		return e.unconsulted(r, err)
	}
	if err != nil {
		return Decision{}, err
	}
	s.resolve(acct, m, r.Cost, now)
	var (
		d       Decision
		overage int64
	)
	switch {
	case r.DryRun:
		d, err = e.peek(ctx, r, s)
	case r.RequestID != "":
		d, overage, err = e.checkOnce(ctx, r, s)
	default:
		d, overage, err = e.take(ctx, r, s)
	}
	if err != nil {
		return Decision{}, err
	}
	d.StoreTrips = s.short.Trips + s.long.Trips
	e.record(r, d, overage, now)
	if e.watcher != nil {
		e.watch(r, s, &d)
	}
	return d, nil
}

// take charges a check: the short windows first, in memory, then the long
// ones; a long window that denies gives the short units back.
func (e *Engine) take(ctx context.Context, r Request, s *scope) (Decision, int64, error) {
	return e.takeThen(ctx, r, s, e.longFailed)
}

// takeThen is take, with failed answering a check whose long windows
// failed after its short windows took their units (take's is longFailed).
func (e *Engine) takeThen(ctx context.Context, r Request, s *scope,
	failed func(ctx context.Context, r Request, s *scope, err error) (Decision, int64, error)) (Decision, int64, error) {
	ok, err := e.short.Take(ctx, s.shorts())
	if err != nil {
		return Decision{}, 0, err
	}
	if !ok {
		return e.decidePeeking(ctx, r, s)
	}
	if s.hasLong() {
		if ok, err = e.long.Take(ctx, s.longs()); err != nil {
			return failed(ctx, r, s, err)
		}
		if !ok {
			e.undoShort(ctx, s)
		}
	}
	d, overage := e.decide(r, s, ok, false)
	return d, overage, nil
}

// longFailed answers a check whose short windows took its cost when the
// long windows failed with err: when the store cannot be reached and
// checks fail open, allowed, degraded (the long windows left out);
// otherwise with the error, the short units given back.
func (e *Engine) longFailed(ctx context.Context, r Request, s *scope, err error) (Decision, int64, error) {
	if errors.Is(err, tiers.ErrUnavailable) {
		err = e.storeDown(err)
	}
	if err != nil {
		e.undoShort(ctx, s)
		return Decision{}, 0, err
	}
	d, overage := e.decide(r, s, true, true)
	return d, overage, nil
}

// undoShort gives back the units a take counted in the short windows, to
// the buckets it counted them in.
func (e *Engine) undoShort(ctx context.Context, s *scope) {
	var out [maxShort]Outcome
	s.short.Undoing(e.clock.Now())
	_ = e.short.GiveBack(ctx, undoCopy(s.short, out[:]))
	s.short.undoNow = 0
}

// undoCopy returns charge c as a set of one for the give-back of its
// take, with outcomes of its own (out), so that the take's stay as they
// were for the answer.
func undoCopy(c *Charge, out []Outcome) []Charge {
	u := *c
	u.Out = out[:len(c.Spans)]
	return []Charge{u}
}

// checkOnce charges a check that carries a request id: its answer is kept
// under the id, in the transaction that claims the id, and a repeat of it
// within 24 hours gets that answer and charges nothing again.
func (e *Engine) checkOnce(ctx context.Context, r Request, s *scope) (Decision, int64, error) {
	if e.leases != nil {
		return e.checkOnceLeased(ctx, r, s)
	}
	rec, err := e.ledger.Recorded(ctx, r.Customer, r.RequestID, s.short.At)
	s.long.Trips++
	switch {
	case errors.Is(err, tiers.ErrUnavailable):
		if err := e.storeDown(err); err != nil {
			return Decision{}, 0, err
		}
		// Degraded: the id cannot be kept; the check goes on without it.
		return e.take(ctx, r, s)
	case err != nil:
		return Decision{}, 0, err
	case rec != nil:
		d, err := replay(r, rec)
		return d, 0, err
	}
	if ok, err := e.short.Take(ctx, s.shorts()); err != nil {
		return Decision{}, 0, err
	} else if !ok {
		return e.decidePeeking(ctx, r, s)
	}
	claim := Claim{Customer: r.Customer, Kind: KindCheck, ID: r.RequestID, Metric: r.Metric, Cost: r.Cost, At: s.short.At}
	var (
		d        Decision
		overage  int64
		replayed *Recorded
	)
	err = e.ledger.Atomically(ctx, func(ctx context.Context, tx Tx) error {
		rec, err := tx.Claim(ctx, claim)
		if err != nil {
			return err
		}
		if rec != nil {
			replayed = rec
			return errDecided
		}
		ok := true
		if s.hasLong() {
			if ok, err = tx.Take(ctx, s.longs()); err != nil {
				return err
			}
		}
		d, overage = e.decide(r, s, ok, false)
		if !ok {
			return errDecided
		}
		answer, err := encodeAnswer(d)
		if err != nil {
			return err
		}
		return tx.Keep(ctx, claim, answer)
	})
	s.long.Trips++
	switch {
	case replayed != nil:
		e.undoShort(ctx, s)
		d, err := replay(r, replayed)
		return d, 0, err
	case errors.Is(err, errDecided): // denied: not kept
		e.undoShort(ctx, s)
	case err != nil:
		return e.longFailed(ctx, r, s, err)
	}
	return d, overage, nil
}

// checkOnceLeased is checkOnce with leases. The check takes its units
// first, from the short windows and the leases, without asking the store
// whether its id was used before (most ids are new). An allowed answer is
// then kept with the claim of its id, in one statement with the claims
// other checks made meanwhile; a claim that finds the id used gives the
// units back and replays the answer kept under it. A check its windows
// deny looks for a kept answer first (see replayOrDeny).
func (e *Engine) checkOnceLeased(ctx context.Context, r Request, s *scope) (Decision, int64, error) {
	ok, err := e.short.Take(ctx, s.shorts())
	if err != nil {
		return Decision{}, 0, err
	}
	if !ok {
		return e.replayOrDeny(ctx, r, s, func() (Decision, int64, error) { return e.decidePeeking(ctx, r, s) })
	}
	if s.hasLong() {
		if ok, err = e.leases.Take(ctx, s.longs()); err != nil {
			return e.longFailed(ctx, r, s, err)
		}
	}
	d, overage := e.decide(r, s, ok, false)
	if !ok { // denied: not kept
		e.undoShort(ctx, s)
		return e.replayOrDeny(ctx, r, s, func() (Decision, int64, error) { return d, overage, nil })
	}
	claim := Claim{Customer: r.Customer, Kind: KindCheck, ID: r.RequestID, Metric: r.Metric, Cost: r.Cost, At: s.short.At}
	sent := false
	if claim.Answer, err = encodeAnswer(d); err == nil {
		claim, sent, err = e.claims.do(ctx, claim)
		s.long.Trips++
		if err == nil && claim.Found == nil {
			return d, overage, nil
		}
	}
	// The answer is not kept: neither are the units taken for it. But a
	// claim sent whose answer was lost may have been kept (a repeat of the
	// check would then replay it): its units stay counted, as a failure to
	// give them back leaves them, never the other way.
	if s.hasLong() && (err == nil || !sent) {
		_ = e.leases.Undo(ctx, s.longs())
	}
	if err == nil { // the id was used: its answer, not this one
		e.undoShort(ctx, s)
		d, err := replay(r, claim.Found)
		return d, 0, err
	}
	return e.longFailed(ctx, r, s, err)
}

// replayOrDeny answers a check with a request id that its windows denied:
// with the answer kept under the id, if an earlier check used it (a
// repeat of an allowed check is not denied), else with deny's. If the id
// cannot be looked up, the store out of reach, the denial stands, degraded
// (or the check fails, failing closed).
func (e *Engine) replayOrDeny(ctx context.Context, r Request, s *scope, deny func() (Decision, int64, error)) (Decision, int64, error) {
	rec, err := e.ledger.Recorded(ctx, r.Customer, r.RequestID, s.short.At)
	s.long.Trips++
	switch {
	case errors.Is(err, tiers.ErrUnavailable):
		if err := e.storeDown(err); err != nil {
			return Decision{}, 0, err
		}
		d, overage, err := deny()
		d.Degraded = true
		return d, overage, err
	case err != nil:
		return Decision{}, 0, err
	case rec != nil:
		d, err := replay(r, rec)
		return d, 0, err
	}
	return deny()
}

// peek answers a dry run: every window as a check would find it, nothing
// charged, nothing recorded.
func (e *Engine) peek(ctx context.Context, r Request, s *scope) (Decision, error) {
	if err := e.short.Peek(ctx, s.shorts()); err != nil {
		return Decision{}, err
	}
	d, _, err := e.decidePeeking(ctx, r, s)
	return d, err
}

// decidePeeking decides a check that charges nothing (a dry run, or one
// the short windows denied): it reads the long windows and evaluates them
// as a take would. When the ledger cannot be reached, it fails as checks
// do: open, degraded; closed, with tiers.ErrUnavailable.
func (e *Engine) decidePeeking(ctx context.Context, r Request, s *scope) (Decision, int64, error) {
	allowed := passed(s.short.Out)
	if len(s.long.Spans) == 0 {
		d, overage := e.decide(r, s, allowed, false)
		return d, overage, nil
	}
	err := e.long.Peek(ctx, s.longs())
	switch {
	case errors.Is(err, tiers.ErrUnavailable):
		if err := e.storeDown(err); err != nil {
			return Decision{}, 0, err
		}
		d, overage := e.decide(r, s, allowed, true)
		return d, overage, nil
	case err != nil:
		return Decision{}, 0, err
	}
	d, overage := e.decide(r, s, allowed && passed(s.long.Out), false)
	return d, overage, nil
}

func passed(out []Outcome) bool {
	for _, o := range out {
		if !o.Passed {
			return false
		}
	}
	return true
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
	d, err := decodeAnswer(rec.Answer)
	if err != nil {
		return Decision{}, err
	}
	d.Replayed = true
	return d, nil
}

// storeDownFor is how long after a check could not reach the store
// StoreDown still says so.
const storeDownFor = time.Second

// StoreDown reports whether a check could not reach the store within the
// last second: its answer was degraded, or refused when failing closed.
func (e *Engine) StoreDown() bool {
	last := e.lastDown.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < storeDownFor
}

// storeDown counts a store that cannot be reached and returns err when
// checks fail closed, nil when they go on degraded.
func (e *Engine) storeDown(err error) error {
	e.storeErrs.Add(1)
	e.lastDown.Store(time.Now().UnixNano())
	if e.failClosed {
		return err
	}
	return nil
}

// decide assembles the Decision of scope s from what its counters found:
// the short windows, and the long ones unless degraded (the store could
// not be consulted: they are left out). It also returns the check's
// overage units, for history.
func (e *Engine) decide(r Request, s *scope, allowed, degraded bool) (Decision, int64) {
	n := len(s.short.Spans)
	if !degraded {
		n += len(s.long.Spans)
	}
	d := Decision{
		Allowed: allowed, Customer: r.Customer, Metric: r.Metric, Cost: r.Cost, Degraded: degraded || s.short.degraded,
		Limits: make([]WindowResult, 0, n),
	}
	var overage, wait int64
	add := func(sp *Span, o Outcome, length time.Duration) {
		after := addCap(o.Used, r.Cost)
		w := WindowResult{Window: sp.Key.Window, Mode: sp.Rule.Mode, Limit: sp.Rule.Limit, Used: o.Used,
			ResetAt: o.resetAt(sp, allowed), State: sp.Rule.State(after, o.Passed, o.Elastic), Length: length}
		if allowed {
			w.Used = after
			overage = max(overage, sp.Rule.Overage(after, r.Cost))
			d.Elastic = d.Elastic || w.State == StateElastic
		}
		w.Remaining = max(0, sp.Rule.Size-w.Used)
		switch {
		case o.Passed:
		case o.Wait < 0:
			d.Never = true
		default:
			wait = max(wait, o.Wait)
		}
		d.Limits = append(d.Limits, w)
	}
	for i := range s.short.Spans {
		sp := &s.short.Spans[i]
		add(sp, s.short.Out[i], sp.Key.Window.Length())
	}
	if !degraded {
		for i := range s.long.Spans {
			sp := &s.long.Spans[i]
			add(sp, s.long.Out[i], sp.End.Sub(sp.Key.Start))
		}
	}
	switch {
	case allowed:
		d.Overage = overage > 0
		d.Never = false
	case !d.Never:
		d.RetryAfter = retrySeconds(wait)
	}
	return d, overage
}

// record adds a decided check to the usage history: admitted units and
// overage, or one denied check. Dry runs and replays are not history.
func (e *Engine) record(r Request, d Decision, overage int64, now time.Time) {
	if r.DryRun || d.Replayed {
		return
	}
	delta := HistoryDelta{Customer: r.Customer, Metric: r.Metric, Date: day(now)}
	if d.Allowed {
		delta.Used = r.Cost
		delta.Overage = overage
	} else {
		delta.Denied = 1
	}
	e.history.add(delta)
}

func day(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
