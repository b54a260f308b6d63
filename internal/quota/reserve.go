package quota

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/quotad/quotad/internal/batch"
	"github.com/quotad/quotad/internal/tiers"
)

// Reservations hold an estimate now and commit the real cost later (costs
// known only afterwards: an LLM call's tokens): a reserve is an admitted
// check of the estimate plus a row in PostgreSQL, finished once (committed,
// released or expired) by a guarded transition. docs/design.md,
// "Reservations", describes once how they stay exact across processes and
// what a crash does to them.

// Reservation bounds.
const (
	DefaultReservationTTL = 300 * time.Second
	MaxReservationTTL     = 3600 * time.Second
	// reserveStoreTimeout is how long a reserve waits for the stores, at
	// least: a check that cannot reach them in its (shorter) store timeout
	// is answered degraded, but a reservation must be stored, or fail.
	reserveStoreTimeout = 5 * time.Second
	// sweepEvery is how often Run releases held reservations past their
	// expiry: within a second of it, by whichever process runs.
	sweepEvery = 250 * time.Millisecond
	// sweepBatch bounds the reservations one sweep reads.
	sweepBatch = 100
	// insertBatch bounds the reservation inserts of one statement,
	// insertsInFlight the statements at once (see batcher).
	insertBatch     = 256
	insertsInFlight = 2
)

// ReservationState is where a reservation stands.
type ReservationState string

// The reservation states.
const (
	ReservationHeld      ReservationState = "held"
	ReservationCommitted ReservationState = "committed"
	ReservationReleased  ReservationState = "released"
	ReservationExpired   ReservationState = "expired"
)

// ReservedWindow is one window instance that holds a reservation's units:
// a window from Start, ending (a short window's bucket ending) at End, of
// the metric's counter (the reservation's, or the credit pool's it draws
// on), the customer's or (Subject set) the subject's. Windows kept before
// quotad knew pools and subjects name neither: they are the customer's
// count of the reservation's metric.
type ReservedWindow struct {
	Metric  string       `json:"metric,omitempty"`
	Subject string       `json:"subject,omitempty"`
	Window  tiers.Window `json:"window"`
	Start   time.Time    `json:"start"`
	End     time.Time    `json:"end"`
}

// Reservation is a held estimate, as stored.
type Reservation struct {
	ID        string
	Customer  string
	Metric    string
	Subject   string
	Cost      int64 // the estimate
	State     ReservationState
	Committed int64 // the actual cost, once committed
	Over      int64
	ExpiresAt time.Time
	CreatedAt time.Time // when the estimate was counted
	RequestID string
	Windows   []ReservedWindow
	// Answer is the reserve's answer in the wire form of encodeAnswer.
	Answer []byte
}

// ReservationInsert is a reservation being stored: Found is filled in,
// instead, when its request id names a reservation already stored.
type ReservationInsert struct {
	Reservation Reservation
	Found       *Reservation
}

// ReservationFinish is the transition of a reservation from held to
// State (it finishes), with the ledger changes of a commit above its
// estimate.
type ReservationFinish struct {
	ID        string
	State     ReservationState
	Committed int64 // State committed: the actual cost
	Over      int64
	At        time.Time
}

// ReservationTransition moves one held reservation to State at At:
// committed at Committed units only if that is not above its estimate
// (more needs the ledger first: see reservations.finish), committed or
// released only before its expiry. Finished is the reservation as it was
// held, when it moved.
type ReservationTransition struct {
	ID        string
	State     ReservationState
	Committed int64
	At        time.Time

	Finished *Reservation
}

// ReservationStore keeps reservations; the PostgreSQL store implements it.
// Errors: tiers.ErrReservationNotFound, tiers.ErrUnavailable.
type ReservationStore interface {
	// InsertReservations stores every reservation of r, in as few round
	// trips as it can; where one's request id names a reservation stored
	// before, it stores nothing and fills in Found. An error fails every
	// insert of r, each perhaps applied.
	InsertReservations(ctx context.Context, r []ReservationInsert) error
	// Reservation returns the reservation id.
	Reservation(ctx context.Context, id string) (Reservation, error)
	// ReservationByRequestID returns the customer's reservation made with
	// request id, or nil.
	ReservationByRequestID(ctx context.Context, customer, requestID string) (*Reservation, error)
	// FinishReservation moves reservation s.ID from held to s.State, and,
	// if it did, runs fn on the ledger in the same transaction (which
	// commits only if fn returns nil). It reports whether the reservation
	// was held: false, it changed nothing and did not run fn.
	FinishReservation(ctx context.Context, s ReservationFinish, fn func(ctx context.Context, tx Tx) error) (bool, error)
	// TransitionReservations moves each reservation of t from held to its
	// State, in as few round trips as it can, where its guards hold (see
	// ReservationTransition), and fills in Finished with the reservation as
	// it was held; where it did not move one, it leaves Finished nil. An
	// error fails every transition of t, each perhaps applied.
	TransitionReservations(ctx context.Context, t []ReservationTransition) error
	// RecordOver records the over of a committed reservation.
	RecordOver(ctx context.Context, id string, over int64) error
	// DueReservations returns the ids of up to limit held reservations
	// whose expiry is not after now, the oldest first.
	DueReservations(ctx context.Context, now time.Time, limit int) ([]string, error)
}

// ReserveRequest asks to hold Cost units of Metric for Customer for TTL.
type ReserveRequest struct {
	Customer  string
	Metric    string
	Cost      int64
	Subject   string
	TTL       time.Duration
	RequestID string
}

// Validate checks a reserve's fields.
func (r ReserveRequest) Validate() error {
	err := validateCall(r.Customer, r.Metric, r.Cost, r.Subject, r.RequestID)
	var fields []tiers.FieldError
	if ve, ok := err.(*tiers.ValidationError); ok {
		fields = ve.Fields
	}
	if r.TTL < time.Second || r.TTL > MaxReservationTTL || r.TTL%time.Second != 0 {
		fields = append(fields, tiers.FieldError{Field: "ttl_seconds",
			Message: fmt.Sprintf("must be an integer between 1 and %d", int64(MaxReservationTTL/time.Second))})
	}
	if fields != nil {
		return &tiers.ValidationError{Fields: fields}
	}
	return nil
}

// ReserveResult is a reserve's answer: the check's decision and, when
// allowed, the reservation.
type ReserveResult struct {
	Decision
	ID        string
	ExpiresAt time.Time
}

// CommitResult is a commit's answer.
type CommitResult struct {
	ID        string
	Reserved  int64 // the estimate
	Committed int64 // the actual cost
	// Released is how many reserved units went back (reserved − actual,
	// when smaller); Over how many units, in the window that had most,
	// went beyond what a check could have been admitted up to.
	Released int64
	Over     int64
	// Usage is the metric's usage after the commit.
	Usage []Usage
}

// ValidReservationID reports whether id has the form of the ids Reserve
// makes; no other names a reservation.
func ValidReservationID(id string) bool {
	const prefix = "rsv_"
	if len(id) != len(prefix)+24 || id[:len(prefix)] != prefix {
		return false
	}
	for _, c := range id[len(prefix):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func newReservationID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "rsv_" + hex.EncodeToString(b[:])
}

// reservations keeps reservations for an engine: a reserve is the
// engine's take of a set, its finish the give-back (or, above the
// estimate, a forced take), on the same primitive (counters).
type reservations struct {
	e     *Engine
	store ReservationStore
	// inserts gathers the inserts of reserves made while others are in
	// flight; transitions, the transitions that finish them.
	inserts     *batch.Group[ReservationInsert]
	transitions *batch.Group[ReservationTransition]
}

func newReservations(e *Engine, store ReservationStore) *reservations {
	return &reservations{e: e, store: store,
		inserts:     batch.New(store.InsertReservations, insertBatch, insertsInFlight, backgroundTimeout),
		transitions: batch.New(store.TransitionReservations, insertBatch, insertsInFlight, backgroundTimeout)}
}

// errNoReservations: the engine has no reservation store.
var errNoReservations = errors.New("quota: reservations need a reservation store")

// Reserve holds r.Cost units as an admitted check of them would count
// them (its metric's windows, its subject's, the credit pool's it draws
// on), and stores the reservation. A denied reserve holds nothing and
// answers as the check did (ID empty). A repeated request id returns the
// first answer. Errors: those of Check, and tiers.ErrUnavailable when the
// store cannot keep the reservation (a reservation is never degraded).
func (e *Engine) Reserve(ctx context.Context, r ReserveRequest) (ReserveResult, error) {
	if err := r.Validate(); err != nil {
		return ReserveResult{}, err
	}
	if e.reservations == nil {
		return ReserveResult{}, errNoReservations
	}
	return e.reservations.reserve(ctx, r)
}

func (rs *reservations) reserve(ctx context.Context, r ReserveRequest) (ReserveResult, error) {
	e := rs.e
	s, ctx := e.set(ctx, max(e.timeout, reserveStoreTimeout))
	defer s.free(&e.sets)
	req := Request{Customer: r.Customer, Metric: r.Metric, Cost: r.Cost, Subject: r.Subject}
	if err := e.resolve(ctx, s, r.Customer, []Item{{Customer: r.Customer, Metric: r.Metric, Cost: r.Cost, Subject: r.Subject}}, true); err != nil {
		return ReserveResult{}, e.health.unavailable(err)
	}
	d, err := e.counters.take(ctx, s, &req, false)
	if err != nil {
		return ReserveResult{}, err
	}
	if !d.Allowed {
		if r.RequestID != "" {
			if found, err := rs.store.ReservationByRequestID(ctx, r.Customer, r.RequestID); err != nil {
				return ReserveResult{}, e.health.unavailable(err)
			} else if found != nil {
				return replayReservation(r, found)
			}
		}
		verdict{s}.record(e.history, false, s.at)
		return ReserveResult{Decision: d}, nil
	}
	rsv := Reservation{ID: newReservationID(), Customer: r.Customer, Metric: r.Metric, Subject: r.Subject, Cost: r.Cost,
		State: ReservationHeld, ExpiresAt: tiers.Instant(s.at.Add(r.TTL)), CreatedAt: s.at, RequestID: r.RequestID, Windows: s.reserved()}
	if rsv.Answer, err = encodeAnswer(d); err != nil {
		e.counters.undo(ctx, s, true, true)
		return ReserveResult{}, err
	}
	ins, sent, err := rs.inserts.Do(ctx, ReservationInsert{Reservation: rsv})
	s.trip()
	if err != nil {
		// An insert sent may have been applied: its units stay counted
		// (the sweep gives them back if it was). One never sent is undone.
		if !sent {
			e.counters.undo(ctx, s, true, true)
		}
		return ReserveResult{}, e.health.unavailable(err)
	}
	if ins.Found != nil {
		e.counters.undo(ctx, s, true, true)
		return replayReservation(r, ins.Found)
	}
	d.StoreTrips = s.trips()
	verdict{s}.record(e.history, true, s.at)
	if e.watcher != nil {
		s.watch(e.watcher, true)
	}
	return ReserveResult{Decision: d, ID: rsv.ID, ExpiresAt: rsv.ExpiresAt}, nil
}

// reserved returns the window instances set s counted in: every span of
// every charge.
func (s *set) reserved() []ReservedWindow {
	var out []ReservedWindow
	for _, cs := range [2][]Charge{s.short, s.long} {
		for i := range cs {
			for _, sp := range cs[i].Spans {
				out = append(out, ReservedWindow{Metric: sp.Key.Metric, Subject: sp.Key.Subject, Window: sp.Key.Window,
					Start: sp.Key.Start, End: sp.End})
			}
		}
	}
	return out
}

// replayReservation answers a reserve whose request id names rsv.
func replayReservation(r ReserveRequest, rsv *Reservation) (ReserveResult, error) {
	if rsv.Metric != r.Metric || rsv.Cost != r.Cost || rsv.Subject != r.Subject {
		return ReserveResult{}, fmt.Errorf("%w: request_id %q was used for a reservation of %d %s",
			tiers.ErrConflict, r.RequestID, rsv.Cost, rsv.Metric)
	}
	d, err := decodeAnswer(rsv.Answer)
	if err != nil {
		return ReserveResult{}, err
	}
	d.Replayed = true
	return ReserveResult{Decision: d, ID: rsv.ID, ExpiresAt: rsv.ExpiresAt}, nil
}

// Reservation returns reservation id as stored. A held reservation past
// its expiry that the sweep has not reached yet is shown expired.
func (e *Engine) Reservation(ctx context.Context, id string) (Reservation, error) {
	if !ValidReservationID(id) {
		return Reservation{}, tiers.ErrReservationNotFound
	}
	if e.reservations == nil {
		return Reservation{}, errNoReservations
	}
	return e.reservations.get(ctx, id)
}

func (rs *reservations) get(ctx context.Context, id string) (Reservation, error) {
	rsv, err := rs.store.Reservation(ctx, id)
	if err != nil {
		return Reservation{}, rs.e.health.unavailable(err)
	}
	if rsv.State == ReservationHeld && !rs.e.clock.Now().Before(rsv.ExpiresAt) {
		rsv.State = ReservationExpired
	}
	return rsv, nil
}

// Commit finishes reservation id at actual units: the windows keep actual.
// Errors: *tiers.ValidationError, tiers.ErrReservationNotFound,
// tiers.ErrReservationExpired, tiers.ErrConflict (committed with another
// cost, or released), tiers.ErrUnavailable.
//
// A commit at most its estimate, the usual one, is one guarded update,
// sent with the other transitions made meanwhile (see transition), then a
// give-back where the units are (see finished). A commit above its
// estimate counts the extra in the ledger, in the transaction of its
// transition (see finish).
func (e *Engine) Commit(ctx context.Context, id string, actual int64) (CommitResult, error) {
	if actual < 0 || actual > MaxCost {
		return CommitResult{}, tiers.Invalid("cost", fmt.Sprintf("must be an integer between 0 and %d", MaxCost))
	}
	if !ValidReservationID(id) {
		return CommitResult{}, tiers.ErrReservationNotFound
	}
	if e.reservations == nil {
		return CommitResult{}, errNoReservations
	}
	return e.reservations.commit(ctx, id, actual)
}

func (rs *reservations) commit(ctx context.Context, id string, actual int64) (CommitResult, error) {
	now := rs.e.clock.Now().UTC()
	rsv, err := rs.transition(ctx, id, ReservationCommitted, actual, now)
	if err != nil {
		return CommitResult{}, err
	}
	if rsv != nil {
		return rs.finished(ctx, *rsv, actual, now, true)
	}
	// Not moved: no longer held, expired, or committed above its estimate.
	for range 2 {
		held, err := rs.get(ctx, id)
		if err != nil {
			return CommitResult{}, err
		}
		switch held.State {
		case ReservationHeld:
			res, won, err := rs.finish(ctx, held, ReservationCommitted, actual)
			if err != nil || won {
				return res, err
			}
			continue // another request finished it first: answer as it stands
		case ReservationCommitted:
			if held.Committed != actual {
				return CommitResult{}, fmt.Errorf("%w: reservation %s was committed at %d units", tiers.ErrConflict, id, held.Committed)
			}
			return rs.commitAnswer(ctx, held)
		case ReservationExpired:
			if _, err := rs.expire(ctx, id); err != nil {
				return CommitResult{}, err
			}
			return CommitResult{}, tiers.ErrReservationExpired
		case ReservationReleased:
			return CommitResult{}, fmt.Errorf("%w: reservation %s was released", tiers.ErrConflict, id)
		}
		return CommitResult{}, fmt.Errorf("reservation %s: unknown state %q", id, held.State)
	}
	return CommitResult{}, fmt.Errorf("%w: reservation %s is being settled by another request", tiers.ErrConflict, id)
}

// transition moves reservation id from held to state (see
// ReservationTransition) with the transitions other requests make
// meanwhile, and returns it as it was held, or nil if it did not move.
func (rs *reservations) transition(ctx context.Context, id string, state ReservationState, committed int64, now time.Time) (*Reservation, error) {
	t, _, err := rs.transitions.Do(ctx, ReservationTransition{ID: id, State: state, Committed: committed, At: now})
	if err != nil {
		// Sent, it may have been applied: the reservation is then finished
		// and its units stay counted (too few given back, never too many).
		return nil, rs.e.health.unavailable(err)
	}
	return t.Finished, nil
}

// finished completes a commit, release or expiry of rsv, moved from held at
// now, at actual units: the estimate beyond actual goes back where the
// units are (counters.giveBack), and, with answer, the answer is made.
func (rs *reservations) finished(ctx context.Context, rsv Reservation, actual int64, now time.Time, answer bool) (CommitResult, error) {
	res := CommitResult{ID: rsv.ID, Reserved: rsv.Cost, Committed: actual, Released: rsv.Cost - actual}
	e := rs.e
	s, ctx := e.set(ctx, e.timeout)
	defer s.free(&e.sets)
	err := rs.heldSet(ctx, s, rsv, rsv.CreatedAt, now, func(g *group) int64 {
		return poolCost(rsv.Cost, g.credits, g.per) - poolCost(actual, g.credits, g.per)
	})
	switch {
	case errors.Is(err, tiers.ErrCustomerNotFound) || errors.Is(err, tiers.ErrMetricNotFound):
		res.Usage = []Usage{} // its counters went with it
		return res, nil
	case err != nil:
		return CommitResult{}, e.health.unavailable(err)
	}
	for _, cs := range [2][]Charge{s.short, s.long} {
		for i := range cs {
			cs[i].Admitted = true
		}
	}
	if err := e.counters.giveBack(ctx, s); err != nil {
		return res, err
	}
	// The reserve counted the estimate in today's history: it now counts
	// what was kept. (Overage units given back to a lease are not known:
	// they stay billed, never the other way.)
	s.refunded(e.history)
	if !answer {
		return res, nil
	}
	if res.Usage, err = rs.usage(ctx, rsv); err != nil {
		return CommitResult{}, err
	}
	return res, nil
}

// heldSet resolves into s (a set from Engine.set) the charges of
// reservation rsv at at (its creation, for what it held; now, for what a
// commit counts beyond it), keeping the window instances that hold it and
// are still current at now, each charge costing what cost says of its
// group (none, where that is not above 0).
func (rs *reservations) heldSet(ctx context.Context, s *set, rsv Reservation, at, now time.Time, cost func(g *group) int64) error {
	s.at = at
	items := []Item{{Customer: rsv.Customer, Metric: rsv.Metric, Cost: rsv.Cost, Subject: rsv.Subject}}
	if err := rs.e.resolve(ctx, s, rsv.Customer, items, false); err != nil {
		var ie *ItemError
		if errors.As(err, &ie) {
			return ie.Err
		}
		return err
	}
	for g := range s.groups {
		s.groups[g].cost = max(0, cost(&s.groups[g]))
	}
	s.keep(func(c *Charge, g *group) bool {
		c.Cost = g.cost
		keepReserved(c, rsv, now)
		return c.Cost > 0 && len(c.Spans)+len(c.Globals) > 0
	})
	return nil
}

// keep keeps the charges of s that f (which may change them) keeps, each
// with its group, and has every group find its charges again.
func (s *set) keep(f func(c *Charge, g *group) bool) {
	for g := range s.groups {
		gr := &s.groups[g]
		if gr.short >= 0 && !f(&s.short[gr.short], gr) {
			s.short[gr.short].Spans = nil
		}
		if gr.long >= 0 && !f(&s.long[gr.long], gr) {
			s.long[gr.long].Spans = nil
		}
	}
	s.short, s.long = kept(s.short), kept(s.long)
	for g := range s.groups {
		gr := &s.groups[g]
		gr.short, gr.long = index(s.short, gr), index(s.long, gr)
	}
}

// kept drops the charges of cs left without spans nor global windows.
func kept(cs []Charge) []Charge {
	out := cs[:0]
	for _, c := range cs {
		if len(c.Spans)+len(c.Globals) > 0 && c.Cost > 0 {
			out = append(out, c)
		}
	}
	return out
}

// index returns the index of g's charge in cs, or -1.
func index(cs []Charge, g *group) int {
	for i := range cs {
		if c := &cs[i]; c.Customer == g.customer && c.Metric == g.metric && c.Subject == g.subject {
			return i
		}
	}
	return -1
}

// keepReserved keeps, of c's spans (resolved from rsv's customer, metric
// and subject), those that hold rsv and are still current at now: the
// same counter and window instance, not yet ended. Its global windows are
// kept while current.
func keepReserved(c *Charge, rsv Reservation, now time.Time) {
	spans, outs := c.Spans[:0], c.Out[:0]
	for i, sp := range c.Spans {
		for _, w := range rsv.Windows {
			metric := w.Metric
			if metric == "" {
				metric = rsv.Metric // kept before windows named their metric
			}
			if metric == sp.Key.Metric && w.Subject == sp.Key.Subject && w.Window == sp.Key.Window &&
				w.Start.Equal(sp.Key.Start) && now.Before(w.End) && now.Before(sp.End) {
				spans, outs = append(spans, sp), append(outs, c.Out[i])
				break
			}
		}
	}
	c.Spans, c.Out = spans, outs
	globals := c.Globals[:0]
	for _, g := range c.Globals {
		if start, _ := Bounds(g.Window, now, tiers.Anchor{}); start.Equal(g.Start) {
			globals = append(globals, g)
		}
	}
	c.Globals = globals
}

// usage returns the usage of rsv's windows (its metric's and the pool's,
// the customer's and the subject's) as a dry run would find them: from
// memory where this process holds leases.
func (rs *reservations) usage(ctx context.Context, rsv Reservation) ([]Usage, error) {
	e := rs.e
	s, ctx := e.set(ctx, e.timeout)
	defer s.free(&e.sets)
	req := Request{Customer: rsv.Customer, Metric: rsv.Metric, Cost: 1, Subject: rsv.Subject}
	err := e.resolve(ctx, s, rsv.Customer, []Item{{Customer: rsv.Customer, Metric: rsv.Metric, Cost: 1, Subject: rsv.Subject}}, false)
	if err != nil {
		if errors.Is(err, tiers.ErrCustomerNotFound) || errors.Is(err, tiers.ErrMetricNotFound) {
			return []Usage{}, nil // its counters went with it
		}
		return nil, e.health.unavailable(err)
	}
	if _, err := e.counters.look(ctx, s, &req); err != nil {
		return nil, err
	}
	return s.usage(), nil
}

// usage returns the count of every span of set s, looked at with a cost
// of 1, as Usage.
func (s *set) usage() []Usage {
	out := make([]Usage, 0, len(s.spans))
	for g := range s.groups {
		for _, c := range s.chargesOf(g) {
			if c == nil {
				continue
			}
			for i := range c.Spans {
				sp, o := &c.Spans[i], &c.Out[i]
				u := Usage{Metric: c.Metric, Subject: c.Subject, Window: sp.Key.Window, Mode: sp.Rule.Mode, Algorithm: sp.Rule.Algorithm,
					Limit: sp.Rule.Limit, Used: o.Used, Remaining: max(0, sp.Rule.Size-o.Used), ResetAt: o.resetAt(sp, false)}
				if sp.Key.Window.Short() && sp.Rule.Algorithm == tiers.TokenBucket {
					burst := sp.Rule.Size
					u.Burst = &burst
				}
				if sp.Rule.Mode == tiers.Soft {
					u.Overage = max(0, o.Used-sp.Rule.Size)
				}
				out = append(out, u)
			}
		}
	}
	return out
}

// commitAnswer answers a commit of rsv, committed before: the same
// figures, the usage as it is now.
func (rs *reservations) commitAnswer(ctx context.Context, rsv Reservation) (CommitResult, error) {
	res := CommitResult{ID: rsv.ID, Reserved: rsv.Cost, Committed: rsv.Committed,
		Released: max(0, rsv.Cost-rsv.Committed), Over: rsv.Over}
	usage, err := rs.usage(ctx, rsv)
	if err != nil {
		return CommitResult{}, err
	}
	res.Usage = usage
	return res, nil
}

// ReleaseReservation gives every unit of reservation id back. Releasing a
// released or expired reservation does nothing; a committed one is
// tiers.ErrConflict.
func (e *Engine) ReleaseReservation(ctx context.Context, id string) error {
	if !ValidReservationID(id) {
		return tiers.ErrReservationNotFound
	}
	if e.reservations == nil {
		return errNoReservations
	}
	return e.reservations.release(ctx, id)
}

func (rs *reservations) release(ctx context.Context, id string) error {
	now := rs.e.clock.Now().UTC()
	rsv, err := rs.transition(ctx, id, ReservationReleased, 0, now)
	if err != nil {
		return err
	}
	if rsv != nil {
		_, err := rs.finished(ctx, *rsv, 0, now, false)
		return err
	}
	held, err := rs.get(ctx, id)
	if err != nil {
		return err
	}
	switch held.State {
	case ReservationExpired:
		_, err := rs.expire(ctx, id)
		return err
	case ReservationReleased:
		return nil
	case ReservationCommitted:
		return fmt.Errorf("%w: reservation %s was committed", tiers.ErrConflict, id)
	}
	return fmt.Errorf("%w: reservation %s is being settled by another request", tiers.ErrConflict, id)
}

// ExpireReservations releases every held reservation past its expiry (on
// the engine's clock), and returns how many this call released. Run calls
// it every sweepEvery; any number of processes may run it at once: each
// reservation is moved by one of them.
func (e *Engine) ExpireReservations(ctx context.Context) (int, error) {
	if e.reservations == nil {
		return 0, nil
	}
	return e.reservations.expireDue(ctx)
}

func (rs *reservations) expireDue(ctx context.Context) (int, error) {
	ids, err := rs.store.DueReservations(ctx, rs.e.clock.Now().UTC(), sweepBatch)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, id := range ids {
		moved, err := rs.expire(ctx, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("expire reservation %s: %w", id, err))
		}
		if moved {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// expire moves reservation id, held past its expiry, to expired (if no
// other request did meanwhile) and gives its units back; it reports
// whether this call moved it.
func (rs *reservations) expire(ctx context.Context, id string) (bool, error) {
	now := rs.e.clock.Now().UTC()
	rsv, err := rs.transition(ctx, id, ReservationExpired, 0, now)
	if err != nil || rsv == nil {
		return false, err
	}
	_, err = rs.finished(ctx, *rsv, 0, now, false)
	return true, err
}

// finish moves held reservation rsv to state to, its windows keeping
// actual units (0 for a release or an expiry): the difference with the
// estimate goes back to, or is counted in, the windows that hold the
// estimate and are still current, in the transaction of the transition.
// won is false when another request finished it first: then nothing
// changed.
func (rs *reservations) finish(ctx context.Context, rsv Reservation, to ReservationState, actual int64) (CommitResult, bool, error) {
	e := rs.e
	now := e.clock.Now().UTC()
	res := CommitResult{ID: rsv.ID, Reserved: rsv.Cost, Committed: actual, Released: max(0, rsv.Cost-actual)}
	fin := ReservationFinish{ID: rsv.ID, State: to, Committed: actual, At: now}
	// back: the estimate's windows as they were counted, still current.
	gb, ctx := e.set(ctx, e.timeout)
	defer gb.free(&e.sets)
	err := rs.heldSet(ctx, gb, rsv, rsv.CreatedAt, now, func(g *group) int64 {
		return poolCost(rsv.Cost, g.credits, g.per) - poolCost(actual, g.credits, g.per)
	})
	if errors.Is(err, tiers.ErrCustomerNotFound) || errors.Is(err, tiers.ErrMetricNotFound) {
		// Its counters went with it: nothing to give back or count.
		won, err := rs.store.FinishReservation(ctx, fin, func(context.Context, Tx) error { return nil })
		res.Usage = []Usage{}
		return res, won, e.health.unavailable(err)
	}
	if err != nil {
		return CommitResult{}, false, e.health.unavailable(err)
	}
	// extra: counted now, in those of the same windows still current,
	// whatever their limit (the work is done).
	ex, _ := e.set(ctx, e.timeout)
	defer ex.free(&e.sets)
	if err := rs.heldSet(ctx, ex, rsv, now, now, func(g *group) int64 {
		return poolCost(actual, g.credits, g.per) - poolCost(rsv.Cost, g.credits, g.per)
	}); err != nil {
		return CommitResult{}, false, e.health.unavailable(err)
	}
	limits := ex.force()
	if e.leases != nil {
		// The ledger gives back and judges admitted units only: the leases
		// of these counters come home first (see LeasePool.Reclaim), so
		// that what this process and others hold unused, reported late, is
		// not taken for admitted units, nor for units over the limit.
		for _, cs := range [2][]Charge{gb.long, ex.long} {
			if len(cs) > 0 {
				if err := e.leases.Reclaim(ctx, cs); err != nil {
					return CommitResult{}, false, e.health.unavailable(err)
				}
			}
		}
	}
	won, err := rs.store.FinishReservation(ctx, fin, func(ctx context.Context, tx Tx) error {
		if len(gb.long) > 0 {
			if err := tx.GiveBack(ctx, gb.long); err != nil {
				return err
			}
		}
		if len(ex.long) > 0 {
			ok, err := tx.Take(ctx, ex.long)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("reservation %s: a forced count was refused", rsv.ID)
			}
		}
		return nil
	})
	if err != nil {
		return CommitResult{}, false, e.health.unavailable(err)
	}
	if !won {
		return CommitResult{}, false, nil
	}
	// The transition is committed: the short windows follow. A failure
	// here leaves units counted until the short window ends.
	if len(gb.short) > 0 {
		_ = e.counters.short.GiveBack(ctx, gb.short)
	}
	if len(ex.short) > 0 {
		_, _ = e.counters.short.Take(ctx, ex.short)
	}
	ex.unforce(limits)
	if e.watcher != nil {
		// Webhooks hear of the thresholds the extra units crossed.
		ex.watch(e.watcher, true)
	}
	// The reserve counted the estimate in today's history: it now counts
	// what was committed.
	if actual > rsv.Cost {
		res.Over = ex.over(rsv.Metric)
		verdict{ex}.record(e.history, true, now)
	} else {
		gb.refunded(e.history)
	}
	if res.Over > 0 {
		if err := rs.store.RecordOver(ctx, rsv.ID, res.Over); err != nil {
			return CommitResult{}, true, e.health.unavailable(err)
		}
	}
	if to != ReservationCommitted {
		return res, true, nil
	}
	if res.Usage, err = rs.usage(ctx, rsv); err != nil {
		return CommitResult{}, true, err
	}
	return res, true, nil
}

// force makes every span of set s admit any count (a commit's units
// beyond its estimate are counted, the work being done) and returns the
// rules they had, for unforce.
func (s *set) force() []Rule {
	var rules []Rule
	for _, cs := range [2][]Charge{s.short, s.long} {
		for i := range cs {
			for j := range cs[i].Spans {
				r := &cs[i].Spans[j].Rule
				rules = append(rules, *r)
				r.Threshold, r.Spare = tiers.MaxLimit, false
			}
		}
	}
	return rules
}

// unforce gives set s's spans back the rules force returned.
func (s *set) unforce(rules []Rule) {
	for _, cs := range [2][]Charge{s.short, s.long} {
		for i := range cs {
			for j := range cs[i].Spans {
				cs[i].Spans[j].Rule, rules = rules[0], rules[1:]
			}
		}
	}
}

// over returns how many units of metric of a forced take of set s (its
// rules given back), in the window that had most, went beyond what a check
// could have been admitted up to: a hard limit, or a soft limit with its
// allowance.
func (s *set) over(metric string) int64 {
	var over int64
	for _, cs := range [2][]Charge{s.short, s.long} {
		for i := range cs {
			c := &cs[i]
			if c.Metric != metric {
				continue
			}
			for j := range c.Spans {
				over = max(over, min(c.Cost, max(0, c.Out[j].Used+c.Cost-c.Spans[j].Rule.Threshold)))
			}
		}
	}
	return over
}
