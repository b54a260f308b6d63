package quota

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/quotad/quotad/internal/batch"
	"github.com/quotad/quotad/internal/tiers"
)

// Options configure an Engine.
type Options struct {
	Catalog Catalog
	// Counts, Requests, Maintenance and Audits are the roles of the
	// ledger, the store every quotad process shares (see Counts); a store
	// that plays several roles is given for each.
	Counts      Counts
	Requests    Requests
	Maintenance Maintenance
	Audits      Audits
	History     HistoryStore
	Clock       Clock
	// FailClosed makes checks answer ErrUnavailable when the ledger cannot
	// be reached; by default they fail open: allowed, marked degraded, with
	// the long windows left out.
	FailClosed bool
	// Leases serves long windows from blocks of units leased from the
	// ledger (package lease's Pool); without, every check with a long
	// window charges the ledger directly.
	Leases Leases
	// Shared keeps short windows in a store every quotad process shares
	// (see SharedStore, Failover); without, each process counts its own.
	Shared SharedStore
	// SharedClock: the shared store's clock decides short windows, so that
	// processes whose clocks differ agree on boundaries. Otherwise Clock
	// does (tests that set the time).
	SharedClock bool
	// OnSharedChange hears when a first shard of the shared store stops
	// answering (shared false, with the error) and when none is left down
	// (shared true; err is nil when the store answered, ErrSharedIdle
	// when the shards down were only forgotten): once per change of the
	// process's mode, not once per shard (see Failover).
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
	// Liveness, if set, tells a slow PostgreSQL from a silent one: while
	// it judges the store alive, a call waits for it up to WaitTimeout
	// (at least StoreTimeout), and no longer than until it judges it
	// silent; while the store is judged silent, StoreTimeout bounds the
	// calls that try it all the same.
	Liveness Liveness
	// WaitTimeout: see Liveness.
	WaitTimeout time.Duration
	// Retention says how long the ledger keeps what grows (see Retention);
	// the zero value keeps it forever, but for the counters and request
	// ids the engine no longer needs, which are purged whatever it says.
	Retention Retention
	// OnPurge, if set, hears what each purge deleted (see Run), also when
	// it failed part-way.
	OnPurge func(Purged)
	// Grants, if set, admits checks that a hard window of a day or longer
	// denies on the customer's grants (see Grants).
	Grants Grants
}

// Liveness tells a store that answers slowly (a busy machine, queues,
// connections all in use) from one that does not answer at all (no byte
// back for a while, connections refused or reset).
type Liveness interface {
	// Alive returns a context that ends once the store is judged silent,
	// and whether the store is judged alive now (if not, the context has
	// ended).
	Alive() (context.Context, bool)
}

// claimBatch bounds the request-id claims of one round trip, claimsInFlight
// the round trips of claims at once (see batcher).
const (
	claimBatch     = 256
	claimsInFlight = 2
)

// auditBatch bounds the refunds' audit events of one round trip,
// auditsInFlight the round trips of them at once.
const (
	auditBatch     = 256
	auditsInFlight = 1
)

// DefaultStoreTimeout is how long a check waits for the stores by
// default: well within what a client of a rate limiter waits for it.
const DefaultStoreTimeout = 250 * time.Millisecond

// Engine answers checks, reservations and refunds, each as a set of
// charges decided by one primitive (counters). It is safe for concurrent
// use.
type Engine struct {
	catalog Catalog
	clock   Clock
	timeout time.Duration
	// liveness, when set, lets calls wait up to waitTimeout for a store
	// it judges alive (see Options.Liveness).
	liveness    Liveness
	waitTimeout time.Duration
	health      health
	counters    counters
	// sliding is the in-process counter of short windows, for the work
	// only it has (eviction, forgetting, its size): counters.short, or,
	// with a shared store, what failover falls back on.
	sliding  *localCounters
	failover *Failover // nil without a shared store
	leases   Leases    // nil without leases
	// requests and maintenance: see Options.
	requests    Requests
	maintenance Maintenance
	// claims gathers the request-id claims of checks (see keep).
	claims       *batch.Group[Claim]
	audits       *refundAudits
	reservations *reservations
	history      *historyBuffer
	watcher      Watcher
	sets         sync.Pool
	// debts are the units of checks admitted degraded, charged once their
	// stores answer again.
	debts debts
	// retention and onPurge: see Options.
	retention Retention
	onPurge   func(Purged)
}

// New returns an Engine. Call Run to keep its background work going.
func New(o Options) *Engine {
	if o.Clock == nil {
		o.Clock = SystemClock{}
	}
	if o.StoreTimeout <= 0 {
		o.StoreTimeout = DefaultStoreTimeout
	}
	sliding := newLocalCounters()
	e := &Engine{
		catalog:     o.Catalog,
		clock:       o.Clock,
		timeout:     o.StoreTimeout,
		liveness:    o.Liveness,
		waitTimeout: max(o.WaitTimeout, o.StoreTimeout),
		sliding:     sliding,
		requests:    o.Requests,
		maintenance: o.Maintenance,
		history:     newHistoryBuffer(o.History),
		watcher:     o.Watcher,
		sets:        sync.Pool{New: func() any { return new(set) }},
		retention:   o.Retention,
		onPurge:     o.OnPurge,
	}
	e.health.failClosed = o.FailClosed
	e.counters = counters{short: sliding, health: &e.health, clock: o.Clock, debts: &e.debts, grants: o.Grants}
	if o.Counts != nil {
		e.counters.long, e.counters.read = o.Counts, o.Counts.Read
	}
	if o.Requests != nil {
		e.claims = batch.New(o.Requests.Claim, claimBatch, claimsInFlight, backgroundTimeout)
	}
	if o.Audits != nil {
		e.audits = newRefundAudits(o.Audits)
	}
	if o.Leases != nil {
		e.leases = o.Leases
		e.counters.long, e.counters.read = o.Leases, o.Leases.Read
	}
	if o.Reservations != nil {
		e.reservations = newReservations(e, o.Reservations)
	}
	if o.Shared != nil {
		e.failover = newFailover(NewShared(o.Shared, o.SharedClock), sliding, o.OnSharedChange)
		e.counters.short = e.failover
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
	Claims batch.Stats
	// ReservationInserts counts the statements reservations were stored
	// in, and the reservations.
	ReservationInserts batch.Stats
	// Debts are the units of checks admitted degraded (see debts).
	Debts DebtStats
	// Audits are the refunds' audit events not written yet.
	Audits AuditStats
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
	s := Stats{StoreErrors: e.health.errs.Load(), ShortKeys: e.sliding.Keys(), Claims: e.claims.Stats(),
		Debts: e.debts.stats(), Audits: e.audits.stats()}
	if e.reservations != nil {
		s.ReservationInserts = e.reservations.inserts.Stats()
	}
	if e.leases != nil {
		s.Leases = e.leases.Stats()
	}
	if f := e.failover; f != nil {
		down := f.ShardsDown()
		s.Shared = SharedStats{Configured: true, Up: down == 0, ShardsDown: down, Failures: f.failures.Load()}
	}
	return s
}

// StoreDown reports whether a call could not reach the store within the
// last second: a check's answer was degraded, or refused when failing
// closed, or background work failed for it.
func (e *Engine) StoreDown() bool { return e.health.down() }

// Validate checks a request's fields.
func (r Request) Validate() error {
	var one [1]Item
	_, err := r.items(&one)
	return err
}

// items checks r's fields and returns its items: Items, or the one item
// Metric, Cost and Subject make, in one.
func (r *Request) items(one *[1]Item) ([]Item, error) {
	if r.Items == nil {
		if err := validateCall(r.Customer, r.Metric, r.Cost, r.Subject, r.RequestID); err != nil {
			return nil, err
		}
		if r.Force && (r.DryRun || r.Look || r.RequestID != "") {
			return nil, &tiers.ValidationError{Fields: []tiers.FieldError{forceError()}}
		}
		one[0] = Item{Customer: r.Customer, Metric: r.Metric, Cost: r.Cost, Subject: r.Subject}
		return one[:], nil
	}
	var p []tiers.FieldError
	if r.Force && (r.DryRun || r.Look || r.RequestID != "") {
		p = append(p, forceError())
	}
	if r.Metric != "" || r.Cost != 0 || r.Subject != "" {
		p = append(p, tiers.FieldError{Field: "items", Message: "take the place of metric, cost and subject: send one or the other"})
	}
	if len(r.Items) == 0 || len(r.Items) > MaxItems {
		p = append(p, tiers.FieldError{Field: "items", Message: fmt.Sprintf("must hold 1 to %d items", MaxItems)})
	}
	if r.Customer != "" {
		p = append(p, customerErrors("customer", r.Customer)...)
	}
	if r.RequestID != "" && !validRequestID(r.RequestID) {
		p = append(p, requestIDError())
	}
	for i, it := range r.Items {
		switch {
		case it.Customer != "":
			if !tiers.ValidCustomerID(it.Customer) {
				p = append(p, customerErrors(fmt.Sprintf("items[%d].customer", i), it.Customer)...)
			}
		case r.Customer == "":
			p = append(p, tiers.FieldError{Field: "customer", Message: "is required"})
		}
		if !validItem(it.Metric, it.Cost, it.Subject) {
			p = append(p, itemErrors(fmt.Sprintf("items[%d].", i), it.Metric, it.Cost, it.Subject)...)
		}
		for j := range i {
			if o := r.Items[j]; o.Metric == it.Metric && o.Subject == it.Subject && o.Customer == it.Customer {
				p = append(p, tiers.FieldError{Field: fmt.Sprintf("items[%d]", i),
					Message: fmt.Sprintf("names the metric and subject of items[%d]", j)})
				break
			}
		}
	}
	if p != nil {
		return nil, &tiers.ValidationError{Fields: p}
	}
	return r.Items, nil
}

// Validate checks a refund's fields.
func (r RefundRequest) Validate() error {
	return validateCall(r.Customer, r.Metric, r.Cost, r.Subject, r.RequestID)
}

// MaxRequestIDLen bounds idempotency keys.
const MaxRequestIDLen = 200

// validateCall checks the fields of a check or refund. An empty customer or
// metric "is required", as in the admin bodies; a present but malformed one
// is told the pattern it must match.
func validateCall(customer, metric string, cost int64, subject, requestID string) error {
	var fields []tiers.FieldError
	if customer == "" {
		fields = append(fields, tiers.FieldError{Field: "customer", Message: "is required"})
	} else if !tiers.ValidCustomerID(customer) {
		fields = append(fields, customerErrors("customer", customer)...)
	}
	if !validItem(metric, cost, subject) {
		fields = append(fields, itemErrors("", metric, cost, subject)...)
	}
	if requestID != "" && !validRequestID(requestID) {
		fields = append(fields, requestIDError())
	}
	if fields != nil {
		return &tiers.ValidationError{Fields: fields}
	}
	return nil
}

// customerErrors returns what is wrong with a customer id.
func customerErrors(field, id string) []tiers.FieldError {
	if err := tiers.CheckCustomerID(field, id); err != nil {
		return err.(*tiers.ValidationError).Fields
	}
	return nil
}

// validItem reports whether the metric, cost and subject of one charge
// are valid (see itemErrors), naming nothing: the check of every valid
// request.
func validItem(metric string, cost int64, subject string) bool {
	return tiers.ValidKey(metric) && cost >= 1 && cost <= MaxCost && (subject == "" || tiers.ValidSubject(subject))
}

// itemErrors returns what is wrong with the metric, cost and subject of
// one charge, their fields named after prefix.
func itemErrors(prefix, metric string, cost int64, subject string) []tiers.FieldError {
	var fields []tiers.FieldError
	if metric == "" {
		fields = append(fields, tiers.FieldError{Field: prefix + "metric", Message: "is required"})
	} else if err := tiers.CheckKey(prefix+"metric", metric); err != nil {
		fields = append(fields, err.(*tiers.ValidationError).Fields...)
	}
	if cost < 1 || cost > MaxCost {
		fields = append(fields, tiers.FieldError{Field: prefix + "cost", Message: fmt.Sprintf("must be an integer between 1 and %d", MaxCost)})
	}
	if subject != "" && !tiers.ValidSubject(subject) {
		fields = append(fields, tiers.FieldError{Field: prefix + "subject", Message: tiers.SubjectRule})
	}
	return fields
}

// forceError refuses a forced check that counts nothing or is kept under
// a request id: a repeat of it would be counted again.
func forceError() tiers.FieldError {
	return tiers.FieldError{Field: "force", Message: "counts the units: not with a dry run, a look or a request_id"}
}

func requestIDError() tiers.FieldError {
	return tiers.FieldError{Field: "request_id", Message: fmt.Sprintf("must be printable text of at most %d bytes", MaxRequestIDLen)}
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

// Check decides whether the request's customer may use its units now
// and, unless r.DryRun or r.Look, charges them: every window of every
// item, all or nothing (with r.Force, whatever it decides). Errors: *tiers.ValidationError, tiers.ErrCustomerNotFound,
// tiers.ErrMetricNotFound and tiers.ErrSubjectRequired (wrapped in an
// *ItemError naming the item), tiers.ErrConflict (a reused request id
// with another check), tiers.ErrUnavailable (only when failing closed).
func (e *Engine) Check(ctx context.Context, r Request) (Decision, error) {
	var one [1]Item
	items, err := r.items(&one)
	if err != nil {
		return Decision{}, err
	}
	s, ctx := e.set(ctx, e.timeout)
	defer s.free(&e.sets)
	if err := e.resolve(ctx, s, r.Customer, items, true); err != nil {
		if errors.Is(err, tiers.ErrUnavailable) && e.health.degrade(err) {
			if !r.DryRun {
				e.debts.addPending(r.Customer, items, s.at)
			}
			return unconsulted(r, items), nil
		}
		return Decision{}, err
	}
	var d Decision
	switch {
	case r.DryRun || r.Look:
		s.look = r.Look
		d, err = e.counters.look(ctx, s, &r)
	default:
		d, err = e.counters.take(ctx, s, &r, true)
		switch {
		case err == nil && r.Force && !d.Allowed:
			d, err = e.counters.force(ctx, s, &r)
		case err == nil && r.RequestID != "":
			d, err = e.keep(ctx, s, &r, d)
		}
	}
	if err != nil {
		return Decision{}, err
	}
	d.StoreTrips = s.trips()
	if !d.Allowed && d.Items == nil {
		d.Upgrade = upgrade(ctx, e.catalog, s, &d)
	}
	if !r.DryRun && !r.Look && !d.Replayed {
		counted := d.Allowed || s.forced
		verdict{s}.record(e.history, counted, s.at)
		if e.watcher != nil && !s.unconsulted {
			s.watch(e.watcher, counted)
		}
	}
	return d, nil
}

// set returns a set from the pool for a call that may wait d for the
// stores (with Liveness, as long as they are judged alive, up to the wait
// timeout), and the call's context bounded by it. Give it back with
// s.free(&e.sets) once the call is answered.
func (e *Engine) set(ctx context.Context, d time.Duration) (*set, context.Context) {
	s := e.sets.Get().(*set)
	var alive context.Context
	if e.liveness != nil {
		if a, ok := e.liveness.Alive(); ok {
			alive, d = a, max(d, e.waitTimeout)
		}
	}
	b := s.budgetFor(ctx, d, alive)
	s.reset(e.clock.Now().UTC())
	return s, b
}

// resolve fills s with the charges of items (of customer where they name
// none), from the catalog: every customer's account, on the plan in
// effect at s.at (see tiers.Account.At), and every metric (with the pools
// they draw on), looked up once. With refuseSuspended, a suspended
// customer's item is a *tiers.SuspendedError, before anything is looked up
// further: what a new check or reservation answers; what charges or gives
// back units already admitted does not refuse them. A missing customer is
// reported before a missing metric; errors name their item (*ItemError).
func (e *Engine) resolve(ctx context.Context, s *set, customer string, items []Item, refuseSuspended bool) error {
	for i, it := range items {
		if it.Customer == "" {
			it.Customer = customer
		}
		if s.account(it.Customer) == nil {
			acct, err := e.catalog.Account(ctx, it.Customer)
			if err == nil && refuseSuspended {
				err = acct.Customer.CheckActive()
			}
			if err != nil {
				return &ItemError{Index: i, Err: err}
			}
			s.accts = append(s.accts, acct.At(s.at))
		}
		for key := it.Metric; key != ""; {
			m := s.metric(key)
			if m == nil {
				mv, err := e.catalog.Metric(ctx, key)
				if err != nil {
					return &ItemError{Index: i, Err: err}
				}
				s.mets = append(s.mets, mv)
				m = &s.mets[len(s.mets)-1]
			}
			key = ""
			if m.Draws != nil {
				key = m.Draws.Pool
				if s.metric(key) != nil {
					key = ""
				}
			}
		}
	}
	return s.resolve(customer, items)
}

// unconsulted answers a check whose customers and metrics could not be
// looked up because the store is unreachable, checks failing open:
// allowed, degraded, nothing counted yet (its items are owed: see debts).
func unconsulted(r Request, items []Item) Decision {
	d := Decision{Allowed: true, Customer: r.Customer, Degraded: true, Limits: []WindowResult{}}
	if r.Items == nil {
		d.Metric, d.Cost = r.Metric, r.Cost
		return d
	}
	d.Items = make([]ItemResult, len(items))
	for i, it := range items {
		if it.Customer == "" {
			it.Customer = r.Customer
		}
		d.Items[i] = ItemResult{Customer: it.Customer, Metric: it.Metric, Subject: it.Subject, Cost: it.Cost,
			Allowed: true, Limits: []WindowResult{}}
	}
	return d
}

// keep keeps the answer d of a check that carries a request id under the
// id, so that a repeat of it within 24 hours gets that answer and charges
// nothing again. The check took its units first, without asking the store
// whether its id was used before (most ids are new); the claim of the id
// then goes with the claims other checks made meanwhile, in one statement.
// A claim that finds the id used gives the units back and replays the
// answer kept under it. A denied check looks for a kept answer (a repeat
// of an allowed check is not denied); a degraded one keeps nothing.
func (e *Engine) keep(ctx context.Context, s *set, r *Request, d Decision) (Decision, error) {
	if d.Degraded {
		return d, nil
	}
	if !d.Allowed {
		rec, err := e.requests.Recorded(ctx, r.Customer, r.RequestID, s.at)
		s.trip()
		switch {
		case err == nil && rec != nil:
			return replay(r, rec)
		case err == nil:
			return d, nil
		case e.health.degrade(err):
			d.Degraded = true
			return d, nil
		}
		return Decision{}, err
	}
	claim := Claim{Customer: r.Customer, Kind: KindCheck, ID: r.RequestID, At: s.at}
	claim.Metric, claim.Cost = r.fingerprint()
	sent := false
	answer, err := encodeAnswer(d)
	if err == nil {
		claim.Answer = answer
		claim, sent, err = e.claims.Do(ctx, claim)
		s.trip()
		if err == nil && claim.Found == nil {
			return d, nil
		}
	}
	// The answer is not kept: neither are the units taken for it. But a
	// claim sent whose answer was lost may have been kept (a repeat of the
	// check would then replay it): its units stay counted, as a failure to
	// give them back leaves them, never the other way.
	if err == nil { // the id was used: its answer, not this one
		e.counters.undo(ctx, s, true, true)
		return replay(r, claim.Found)
	}
	degraded := e.health.degrade(err)
	// Degraded, the short windows keep the check's units (the store could
	// not be reached, as for a take).
	e.counters.undo(ctx, s, !degraded, !sent)
	if degraded {
		return verdict{s}.answer(r, true, true), nil
	}
	return Decision{}, err
}

// fingerprint returns what a check's request id is kept with, to tell a
// repeat of it from another check under the same id: its metric (and
// subject, after a "/", which no metric key holds) and cost, or, for a
// check of items, its items written out and their total cost.
func (r *Request) fingerprint() (string, int64) {
	if r.Items == nil {
		return keyed(r.Metric, r.Subject), r.Cost
	}
	b := []byte("items:")
	var total int64
	for i, it := range r.Items {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, "%s/%s*%d", it.Metric, it.Subject, it.Cost)
		total = min(total+it.Cost, tiers.MaxLimit)
	}
	return string(b), total
}

// keyed returns metric, with "/" and the subject when there is one: a
// request id's record of the metric and subject it was used for.
func keyed(metric, subject string) string {
	if subject == "" {
		return metric
	}
	return metric + "/" + subject
}

// replay returns a recorded answer, or ErrConflict when the request id was
// used for another check.
func replay(r *Request, rec *Recorded) (Decision, error) {
	if metric, cost := r.fingerprint(); rec.Metric != metric || rec.Cost != cost {
		return Decision{}, fmt.Errorf("%w: request_id %q was used for another check", tiers.ErrConflict, r.RequestID)
	}
	d, err := decodeAnswer(rec.Answer)
	if err != nil {
		return Decision{}, err
	}
	d.Replayed = true
	return d, nil
}
