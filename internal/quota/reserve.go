package quota

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// Reservations hold an estimate now and settle the real cost later (costs
// known only afterwards: an LLM call's tokens).
//
// A reserve is an admitted check of the estimate, through the check's own
// path (all or nothing over the windows, soft and elastic rules, leases
// for long windows, the shared store for short ones), plus a row in
// PostgreSQL that says the units are held and in which window instances.
// A commit keeps the actual cost in those windows: it gives back what the
// estimate held beyond it, to the windows still current, or counts what
// went beyond the estimate, even past a hard limit (the work is done),
// reporting it as over. A release (or the expiry sweep) gives everything
// back.
//
// Crash safety. Every unit a reserve admits is counted in the shared
// stores before the reservation row exists: a unit taken from a lease was
// counted in PostgreSQL when the lease was granted (lease.go: a counter's
// used counts admitted and leased units alike), a unit of a short window in
// Redis when it was taken. So the row is the only record of the hold,
// never a second count of it:
//
//   - A process that dies before its insert committed answered no client
//     (or answered an error): its units stay counted, as a dead process's
//     leased units do, until the window ends. Never twice, never lost to
//     another customer.
//   - Once the insert committed, the reservation outlives the process: it
//     is in PostgreSQL, and any process commits, releases or expires it.
//     Nothing of a held reservation lives only in a process's memory, so a
//     restart neither loses one nor counts one again (a restarted process
//     takes nothing for reservations it finds).
//   - Units go back only after the one guarded transition held → committed,
//     released or expired (UPDATE ... WHERE state = 'held'): a reservation
//     is settled exactly once, whichever processes race for it, and a
//     crash before the transition commits leaves it held (settled later, by
//     the sweep at the latest). The give-back follows the transition: to
//     this process's lease of a long window where it holds one (its units
//     are already counted in PostgreSQL, as the lease's), else to the
//     ledger; the short windows where they were counted. A crash between
//     the transition and the give-back leaves those units counted until
//     their window ends: too few given back, never too many. A commit above
//     its estimate counts the extra in the ledger in the transaction of its
//     transition: counted once or not at all.
//   - An insert whose answer was lost may have been applied: its units are
//     not undone then (the row, if it exists, gives them back at expiry),
//     only when the insert was never sent.

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
// a window from Start, ending (a short window's bucket ending) at End.
type ReservedWindow struct {
	Window tiers.Window `json:"window"`
	Start  time.Time    `json:"start"`
	End    time.Time    `json:"end"`
}

// Reservation is a held estimate, as stored.
type Reservation struct {
	ID        string
	Customer  string
	Metric    string
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

// ReservationSettlement is the transition of a reservation from held to
// State, with the ledger changes of a commit above its estimate.
type ReservationSettlement struct {
	ID        string
	State     ReservationState
	Committed int64 // State committed: the actual cost
	Over      int64
	At        time.Time
}

// ReservationTransition moves one held reservation to State at At:
// committed at Committed units only if that is not above its estimate
// (more needs the ledger first: see Engine.settle), committed or released
// only before its expiry. Settled is the reservation as it was held, when
// it moved.
type ReservationTransition struct {
	ID        string
	State     ReservationState
	Committed int64
	At        time.Time

	Settled *Reservation
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
	// SettleReservation moves reservation s.ID from held to s.State, and,
	// if it did, runs fn on the ledger in the same transaction (which
	// commits only if fn returns nil). It reports whether the reservation
	// was held: false, it changed nothing and did not run fn.
	SettleReservation(ctx context.Context, s ReservationSettlement, fn func(ctx context.Context, tx Tx) error) (bool, error)
	// TransitionReservations moves each reservation of t from held to its
	// State, in as few round trips as it can, where its guards hold (see
	// ReservationTransition), and fills in Settled with the reservation as
	// it was held; where it did not move one, it leaves Settled nil. An
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
	err := validateCall(r.Customer, r.Metric, r.Cost, r.RequestID)
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

// errNoReservations: the engine has no reservation store.
var errNoReservations = errors.New("quota: reservations need a reservation store")

// Reserve holds r.Cost units as an admitted check of them would count
// them, and stores the reservation. A denied reserve holds nothing and
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
	s := e.scopes.Get().(*scope)
	defer e.freeScope(s)
	b := s.budgetFor(ctx, max(e.storeTimeout, reserveStoreTimeout))
	defer b.stop()
	ctx = b
	now := e.clock.Now().UTC()
	acct, m, err := e.lookup(ctx, r.Customer, r.Metric)
	if err != nil {
		if errors.Is(err, tiers.ErrUnavailable) {
			e.storeErrs.Add(1)
		}
		return ReserveResult{}, err
	}
	s.resolve(acct, m, r.Cost, now)
	req := Request{Customer: r.Customer, Metric: r.Metric, Cost: r.Cost}
	d, overage, err := e.reserveTake(ctx, req, s)
	if err != nil {
		return ReserveResult{}, err
	}
	if !d.Allowed {
		if r.RequestID != "" {
			if found, err := e.reservations.ReservationByRequestID(ctx, r.Customer, r.RequestID); err != nil {
				return ReserveResult{}, err
			} else if found != nil {
				return replayReservation(r, found)
			}
		}
		e.record(req, d, overage, now)
		return ReserveResult{Decision: d}, nil
	}
	rsv := Reservation{ID: newReservationID(), Customer: r.Customer, Metric: r.Metric, Cost: r.Cost,
		State: ReservationHeld, ExpiresAt: now.Add(r.TTL), CreatedAt: s.short.At, RequestID: r.RequestID}
	rsv.Windows = make([]ReservedWindow, 0, len(s.short.Spans)+len(s.long.Spans))
	for _, c := range []*Charge{s.short, s.long} {
		for _, sp := range c.Spans {
			rsv.Windows = append(rsv.Windows, ReservedWindow{Window: sp.Key.Window, Start: sp.Key.Start, End: sp.End})
		}
	}
	if rsv.Answer, err = encodeAnswer(d); err != nil {
		e.undoTake(ctx, s)
		return ReserveResult{}, err
	}
	ins, sent, err := e.inserts.do(ctx, ReservationInsert{Reservation: rsv})
	s.long.Trips++
	if err != nil {
		// An insert sent may have been applied: its units stay counted
		// (the sweep gives them back if it was). One never sent is undone.
		if !sent {
			e.undoTake(ctx, s)
		}
		if errors.Is(err, tiers.ErrUnavailable) {
			e.storeErrs.Add(1)
		}
		return ReserveResult{}, err
	}
	if ins.Found != nil {
		e.undoTake(ctx, s)
		return replayReservation(r, ins.Found)
	}
	d.StoreTrips = s.short.Trips + s.long.Trips
	e.record(req, d, overage, now)
	if e.watcher != nil {
		e.watch(req, s, &d)
	}
	return ReserveResult{Decision: d, ID: rsv.ID, ExpiresAt: rsv.ExpiresAt}, nil
}

// reserveTake takes a reserve's estimate as take takes a check's cost,
// but never degraded: a long window that cannot be reached fails the
// reserve, the short units given back.
func (e *Engine) reserveTake(ctx context.Context, r Request, s *scope) (Decision, int64, error) {
	return e.takeThen(ctx, r, s, func(ctx context.Context, _ Request, s *scope, err error) (Decision, int64, error) {
		e.undoShort(ctx, s)
		if errors.Is(err, tiers.ErrUnavailable) {
			e.storeErrs.Add(1)
		}
		return Decision{}, 0, err
	})
}

// undoTake gives back the units a reserve took and does not keep.
func (e *Engine) undoTake(ctx context.Context, s *scope) {
	if s.hasLong() {
		if e.leases != nil {
			_ = e.leases.Undo(ctx, s.longs())
		} else {
			var out [maxLong]Outcome
			_ = e.ledger.GiveBack(ctx, undoCopy(s.long, out[:]))
		}
	}
	e.undoShort(ctx, s)
}

// replayReservation answers a reserve whose request id names rsv.
func replayReservation(r ReserveRequest, rsv *Reservation) (ReserveResult, error) {
	if rsv.Metric != r.Metric || rsv.Cost != r.Cost {
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
	rsv, err := e.reservations.Reservation(ctx, id)
	if err != nil {
		return Reservation{}, err
	}
	if rsv.State == ReservationHeld && !e.clock.Now().Before(rsv.ExpiresAt) {
		rsv.State = ReservationExpired
	}
	return rsv, nil
}

// Commit settles reservation id at actual units: the windows keep actual.
// Errors: *tiers.ValidationError, tiers.ErrReservationNotFound,
// tiers.ErrReservationExpired, tiers.ErrConflict (committed with another
// cost, or released), tiers.ErrUnavailable.
//
// A commit at most its estimate, the usual one, is one guarded update,
// sent with the other settlements made meanwhile (see transition), then a
// give-back where the units are (see giveBackHeld). A commit above its
// estimate counts the extra in the ledger, in the transaction of its
// transition (see settle).
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
	now := e.clock.Now().UTC()
	rsv, err := e.transition(ctx, id, ReservationCommitted, actual, now)
	if err != nil {
		return CommitResult{}, err
	}
	if rsv != nil {
		return e.settled(ctx, *rsv, actual, now, true)
	}
	// Not moved: no longer held, expired, or committed above its estimate.
	for range 2 {
		held, err := e.Reservation(ctx, id)
		if err != nil {
			return CommitResult{}, err
		}
		switch held.State {
		case ReservationHeld:
			res, won, err := e.settle(ctx, held, ReservationCommitted, actual)
			if err != nil || won {
				return res, err
			}
			continue // another request settled it first: answer as it stands
		case ReservationCommitted:
			if held.Committed != actual {
				return CommitResult{}, fmt.Errorf("%w: reservation %s was committed at %d units", tiers.ErrConflict, id, held.Committed)
			}
			return e.commitAnswer(ctx, held)
		case ReservationExpired:
			if err := e.expire(ctx, id); err != nil {
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
func (e *Engine) transition(ctx context.Context, id string, state ReservationState, committed int64, now time.Time) (*Reservation, error) {
	t, _, err := e.transitions.do(ctx, ReservationTransition{ID: id, State: state, Committed: committed, At: now})
	if err != nil {
		// Sent, it may have been applied: the reservation is then settled
		// and its units stay counted (too few given back, never too many).
		if errors.Is(err, tiers.ErrUnavailable) {
			e.storeErrs.Add(1)
		}
		return nil, err
	}
	return t.Settled, nil
}

// settled finishes a commit, release or expiry of rsv, moved from held at
// now: the estimate beyond actual goes back, and, with answer, the answer
// is made.
func (e *Engine) settled(ctx context.Context, rsv Reservation, actual int64, now time.Time, answer bool) (CommitResult, error) {
	res := CommitResult{ID: rsv.ID, Reserved: rsv.Cost, Committed: actual, Released: rsv.Cost - actual}
	acct, m, err := e.lookup(ctx, rsv.Customer, rsv.Metric)
	switch {
	case errors.Is(err, tiers.ErrCustomerNotFound) || errors.Is(err, tiers.ErrMetricNotFound):
		res.Usage = []Usage{} // its counters went with it
		return res, nil
	case err != nil:
		return CommitResult{}, err
	}
	if err := e.giveBackHeld(ctx, rsv, acct, m, rsv.Cost-actual, now); err != nil || !answer {
		return res, err
	}
	if res.Usage, err = e.peekUsage(ctx, acct, m, now); err != nil {
		return CommitResult{}, err
	}
	return res, nil
}

// giveBackHeld gives back units of rsv, moved from held, to the window
// instances that hold them and are still current: the short windows where
// they were counted; a long window to this process's lease of it, when it
// holds one (its units are counted in the store as the lease's: no round
// trip, and its next report tells the store), else to the ledger (after
// the leases of its counter come home: see LeasePool.GiveBack).
func (e *Engine) giveBackHeld(ctx context.Context, rsv Reservation, acct tiers.Account, m tiers.Metric, back int64, now time.Time) error {
	if back <= 0 {
		e.history.add(HistoryDelta{Customer: rsv.Customer, Metric: rsv.Metric, Date: day(now)})
		return nil
	}
	gb := e.newScope(acct, m, back, rsv.CreatedAt)
	defer e.freeScope(gb)
	keepReserved(gb.short, rsv.Windows, now, gb.short.Spans)
	keepReserved(gb.long, rsv.Windows, now, gb.long.Spans)
	gb.trimOuts()
	var overage int64
	if len(gb.short.Spans)+len(gb.short.Globals) > 0 {
		if err := e.short.GiveBack(ctx, gb.shorts()); err != nil {
			return err
		}
		for i := range gb.short.Spans {
			overage = max(overage, gb.short.Spans[i].Rule.Overage(gb.short.Out[i].Used, back))
		}
	}
	// Long windows: to this process's leases where it holds them; the
	// rest, with the global windows no lease counted, to the ledger.
	rest := *gb.long
	rest.Spans = gb.long.Spans[:0:0]
	var restOut [maxLong]Outcome
	for i := range gb.long.Spans {
		sp := &gb.long.Spans[i]
		if e.leases != nil && e.leases.giveToLease(ctx, sp, back) {
			continue
		}
		rest.Spans = append(rest.Spans, *sp)
	}
	if len(rest.Spans) < len(gb.long.Spans) {
		// A lease counted its units in its span's global window when it was
		// granted: they stay counted there, as the lease's.
		var globals []GlobalKey
		for _, g := range gb.long.Globals {
			if spanOf(gb.long.Spans, g) < 0 || spanOf(rest.Spans, g) >= 0 {
				globals = append(globals, g)
			}
		}
		rest.Globals = globals
	}
	if len(rest.Spans)+len(rest.Globals) > 0 {
		rest.Out = restOut[:len(rest.Spans)]
		if err := e.long.GiveBack(ctx, []Charge{rest}); err != nil {
			if errors.Is(err, tiers.ErrUnavailable) {
				e.storeErrs.Add(1)
			}
			return err
		}
		for i := range rest.Spans {
			overage = max(overage, rest.Spans[i].Rule.Overage(restOut[i].Used, back))
		}
	}
	// The reserve counted the estimate in today's history: it now counts
	// what was kept. (Overage units given back to a lease are not known:
	// they stay billed, never the other way.)
	e.history.add(HistoryDelta{Customer: rsv.Customer, Metric: rsv.Metric, Date: day(now),
		Used: -back, Overage: -min(overage, back)})
	return nil
}

// peekUsage returns the usage of the customer's windows of metric m as a
// dry run would find it: from memory where this process holds leases.
func (e *Engine) peekUsage(ctx context.Context, acct tiers.Account, m tiers.Metric, now time.Time) ([]Usage, error) {
	s := e.newScope(acct, m, 1, now)
	defer e.freeScope(s)
	if err := e.short.Peek(ctx, s.shorts()); err != nil {
		return nil, err
	}
	if len(s.long.Spans) > 0 {
		if err := e.long.Peek(ctx, s.longs()); err != nil {
			if errors.Is(err, tiers.ErrUnavailable) {
				e.storeErrs.Add(1)
			}
			return nil, err
		}
	}
	out := make([]Usage, 0, len(s.short.Spans)+len(s.long.Spans))
	add := func(sp *Span, o *Outcome) {
		u := Usage{Metric: m.Key, Window: sp.Key.Window, Algorithm: sp.Rule.Algorithm, Limit: sp.Rule.Limit,
			Used: o.Used, Remaining: max(0, sp.Rule.Size-o.Used), ResetAt: o.resetAt(sp, false)}
		if sp.Key.Window.Short() && sp.Rule.Algorithm == tiers.TokenBucket {
			burst := sp.Rule.Size
			u.Burst = &burst
		}
		if sp.Rule.Mode == tiers.Soft {
			u.Overage = max(0, o.Used-sp.Rule.Size)
		}
		out = append(out, u)
	}
	for i := range s.short.Spans {
		add(&s.short.Spans[i], &s.short.Out[i])
	}
	for i := range s.long.Spans {
		add(&s.long.Spans[i], &s.long.Out[i])
	}
	return out, nil
}

// commitAnswer answers a commit of rsv, committed before: the same
// figures, the usage as it is now.
func (e *Engine) commitAnswer(ctx context.Context, rsv Reservation) (CommitResult, error) {
	res := CommitResult{ID: rsv.ID, Reserved: rsv.Cost, Committed: rsv.Committed,
		Released: max(0, rsv.Cost-rsv.Committed), Over: rsv.Over}
	acct, m, err := e.lookup(ctx, rsv.Customer, rsv.Metric)
	switch {
	case errors.Is(err, tiers.ErrCustomerNotFound) || errors.Is(err, tiers.ErrMetricNotFound):
		res.Usage = []Usage{}
		return res, nil
	case err != nil:
		return CommitResult{}, err
	}
	if res.Usage, err = e.peekUsage(ctx, acct, m, e.clock.Now().UTC()); err != nil {
		return CommitResult{}, err
	}
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
	now := e.clock.Now().UTC()
	rsv, err := e.transition(ctx, id, ReservationReleased, 0, now)
	if err != nil {
		return err
	}
	if rsv != nil {
		_, err := e.settled(ctx, *rsv, 0, now, false)
		return err
	}
	held, err := e.Reservation(ctx, id)
	if err != nil {
		return err
	}
	switch held.State {
	case ReservationExpired:
		return e.expire(ctx, id)
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
	ids, err := e.reservations.DueReservations(ctx, e.clock.Now().UTC(), sweepBatch)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, id := range ids {
		moved, err := e.expireOne(ctx, id)
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
// other request did meanwhile) and gives its units back.
func (e *Engine) expire(ctx context.Context, id string) error {
	_, err := e.expireOne(ctx, id)
	return err
}

func (e *Engine) expireOne(ctx context.Context, id string) (bool, error) {
	now := e.clock.Now().UTC()
	rsv, err := e.transition(ctx, id, ReservationExpired, 0, now)
	if err != nil || rsv == nil {
		return false, err
	}
	_, err = e.settled(ctx, *rsv, 0, now, false)
	return true, err
}

// settle moves held reservation rsv to state to, its windows keeping
// actual units (0 for a release or an expiry): the difference with the
// estimate goes back to, or is counted in, the windows that hold the
// estimate and are still current. won is false when another request
// settled it first: then nothing changed.
func (e *Engine) settle(ctx context.Context, rsv Reservation, to ReservationState, actual int64) (CommitResult, bool, error) {
	now := e.clock.Now().UTC()
	res := CommitResult{ID: rsv.ID, Reserved: rsv.Cost, Committed: actual, Released: max(0, rsv.Cost-actual)}
	set := ReservationSettlement{ID: rsv.ID, State: to, Committed: actual, At: now}
	acct, m, err := e.lookup(ctx, rsv.Customer, rsv.Metric)
	if errors.Is(err, tiers.ErrCustomerNotFound) || errors.Is(err, tiers.ErrMetricNotFound) {
		// Its counters went with it: nothing to give back or count.
		won, err := e.reservations.SettleReservation(ctx, set, func(context.Context, Tx) error { return nil })
		res.Usage = []Usage{}
		return res, won, err
	}
	if err != nil {
		return CommitResult{}, false, err
	}
	back, extra := max(0, rsv.Cost-actual), max(0, actual-rsv.Cost)
	// back: the estimate's windows as they were counted, still current.
	gb := e.newScope(acct, m, max(1, back), rsv.CreatedAt)
	defer e.freeScope(gb)
	// extra: counted now, in those of the same windows still current,
	// whatever their limit.
	ex := e.newScope(acct, m, max(1, extra), now)
	defer e.freeScope(ex)
	keepReserved(gb.short, rsv.Windows, now, gb.short.Spans)
	keepReserved(gb.long, rsv.Windows, now, gb.long.Spans)
	keepReserved(ex.short, rsv.Windows, now, ex.short.Spans)
	keepReserved(ex.long, rsv.Windows, now, ex.long.Spans)
	gb.trimOuts()
	ex.trimOuts()
	limits := [2][maxLong]Rule{}
	for i := range ex.short.Spans {
		limits[0][i] = ex.short.Spans[i].Rule
		ex.short.Spans[i].Rule = forced(ex.short.Spans[i].Rule)
	}
	for i := range ex.long.Spans {
		limits[1][i] = ex.long.Spans[i].Rule
		ex.long.Spans[i].Rule = forced(ex.long.Spans[i].Rule)
	}
	giveLong := back > 0 && len(gb.long.Spans)+len(gb.long.Globals) > 0
	takeLong := extra > 0 && len(ex.long.Spans)+len(ex.long.Globals) > 0
	if e.leases != nil {
		// The ledger gives back and judges admitted units only: the leases
		// of these counters come home first (see LeasePool.Reclaim), so
		// that what this process and others hold unused, reported late, is
		// not taken for admitted units, nor for units over the limit.
		if giveLong {
			if err := e.leases.Reclaim(ctx, gb.longs()); err != nil {
				return CommitResult{}, false, err
			}
		}
		if takeLong {
			if err := e.leases.Reclaim(ctx, ex.longs()); err != nil {
				return CommitResult{}, false, err
			}
		}
	}
	won, err := e.reservations.SettleReservation(ctx, set, func(ctx context.Context, tx Tx) error {
		if giveLong {
			if err := tx.GiveBack(ctx, gb.longs()); err != nil {
				return err
			}
		}
		if takeLong {
			ok, err := tx.Take(ctx, ex.longs())
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
		if errors.Is(err, tiers.ErrUnavailable) {
			e.storeErrs.Add(1)
		}
		return CommitResult{}, false, err
	}
	if !won {
		return CommitResult{}, false, nil
	}
	// The transition is committed: the short windows follow. A failure
	// here leaves units counted until the short window ends.
	if back > 0 && len(gb.short.Spans)+len(gb.short.Globals) > 0 {
		_ = e.short.GiveBack(ctx, gb.shorts())
	}
	if extra > 0 && len(ex.short.Spans)+len(ex.short.Globals) > 0 {
		_, _ = e.short.Take(ctx, ex.shorts())
	}
	if e.watcher != nil && takeLong {
		// Webhooks hear of the thresholds the extra units crossed.
		for i := range ex.long.Spans {
			sp, r := &ex.long.Spans[i], limits[1][i]
			after := ex.long.Out[i].Used + extra
			e.watcher.Observe(Observation{Key: sp.Key, End: sp.End, Mode: r.Mode, Limit: r.Limit, Used: after,
				State: r.State(after, true, false), At: now})
		}
	}
	var overage int64
	if extra > 0 {
		for i := range ex.short.Spans {
			res.Over = max(res.Over, beyond(limits[0][i], ex.short.Out[i].Used, extra))
			overage = max(overage, limits[0][i].Overage(ex.short.Out[i].Used+extra, extra))
		}
		for i := range ex.long.Spans {
			res.Over = max(res.Over, beyond(limits[1][i], ex.long.Out[i].Used, extra))
			overage = max(overage, limits[1][i].Overage(ex.long.Out[i].Used+extra, extra))
		}
	} else {
		for i := range gb.short.Spans {
			overage = max(overage, gb.short.Spans[i].Rule.Overage(gb.short.Out[i].Used, back))
		}
		for i := range gb.long.Spans {
			overage = max(overage, gb.long.Spans[i].Rule.Overage(gb.long.Out[i].Used, back))
		}
		overage = -min(overage, back)
	}
	if res.Over > 0 {
		if err := e.reservations.RecordOver(ctx, rsv.ID, res.Over); err != nil {
			return CommitResult{}, true, err
		}
	}
	// The reserve counted the estimate in today's history: it now counts
	// what was committed.
	e.history.add(HistoryDelta{Customer: rsv.Customer, Metric: rsv.Metric, Date: day(now),
		Used: actual - rsv.Cost, Overage: overage})
	if to != ReservationCommitted {
		return res, true, nil
	}
	if res.Usage, err = e.usage(ctx, acct, now, rsv.Metric); err != nil {
		return CommitResult{}, true, err
	}
	return res, true, nil
}

// keepReserved keeps, of c's spans (resolved from the reservation's
// customer and metric), those that hold the reservation and are still
// current at now: the same window instance, not yet ended. Its global
// windows are kept while current.
func keepReserved(c *Charge, ws []ReservedWindow, now time.Time, spans []Span) {
	kept := c.Spans[:0]
	for _, sp := range spans {
		for _, w := range ws {
			if w.Window == sp.Key.Window && w.Start.Equal(sp.Key.Start) && now.Before(w.End) && now.Before(sp.End) {
				kept = append(kept, sp)
				break
			}
		}
	}
	c.Spans = kept
	globals := c.Globals[:0]
	for _, g := range c.Globals {
		if start, _ := Bounds(g.Window, now, tiers.Anchor{}); start.Equal(g.Start) {
			globals = append(globals, g)
		}
	}
	c.Globals = globals
}

// forced is rule r admitting any count: a commit's units beyond its
// estimate are counted, the work being done.
func forced(r Rule) Rule {
	r.Threshold, r.Spare = tiers.MaxLimit, false
	return r
}

// beyond returns how many of extra units added to count lie beyond what
// rule r admits a check up to (its threshold: a hard limit, or a soft
// limit with its overage allowance).
func beyond(r Rule, count, extra int64) int64 {
	return min(extra, max(0, count+extra-r.Threshold))
}

// giveToLease gives n units of span sp's counter, admitted before, to this
// process's lease of it, if it holds one that is sound (held, not in
// doubt, not being verified, its limit unchanged): they become units the
// lease holds unused, counted in the store as before. It reports whether
// it did.
func (p *LeasePool) giveToLease(ctx context.Context, sp *Span, n int64) bool {
	l := p.existing(sp.Key)
	if l == nil {
		return false
	}
	l.mu.Lock()
	ok := l.held && !l.gone && !l.verify && l.doubt.kind == noCall && !l.changed(sp)
	l.mu.Unlock()
	if !ok {
		return false
	}
	// A lease settled meanwhile sends them to the store (putBack).
	_ = p.putBack(ctx, l, n)
	return true
}
