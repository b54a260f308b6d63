package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

var _ quota.ReservationStore = (*Reservations)(nil)

const reservationColumns = `id, customer_id, metric, subject, cost, state, committed, over, expires_at, created_at,
	coalesce(request_id, '') AS request_id, windows, answer`

// reservationRow is a row of reservations.
type reservationRow struct {
	ID         string    `db:"id"`
	CustomerID string    `db:"customer_id"`
	Metric     string    `db:"metric"`
	Subject    string    `db:"subject"`
	Cost       int64     `db:"cost"`
	State      string    `db:"state"`
	Committed  *int64    `db:"committed"`
	Over       int64     `db:"over"`
	ExpiresAt  time.Time `db:"expires_at"`
	CreatedAt  time.Time `db:"created_at"`
	RequestID  string    `db:"request_id"`
	Windows    []byte    `db:"windows"`
	Answer     []byte    `db:"answer"`
}

func (r reservationRow) reservation() (quota.Reservation, error) {
	rsv := quota.Reservation{ID: r.ID, Customer: r.CustomerID, Metric: r.Metric, Subject: r.Subject, Cost: r.Cost,
		State: quota.ReservationState(r.State), Over: r.Over, ExpiresAt: utc(r.ExpiresAt), CreatedAt: utc(r.CreatedAt),
		RequestID: r.RequestID, Answer: r.Answer}
	if r.Committed != nil {
		rsv.Committed = *r.Committed
	}
	if err := json.Unmarshal(r.Windows, &rsv.Windows); err != nil {
		return quota.Reservation{}, fmt.Errorf("reservation %s: windows: %w", r.ID, err)
	}
	for i := range rsv.Windows {
		w := &rsv.Windows[i]
		w.Start, w.End = utc(w.Start), utc(w.End)
	}
	return rsv, nil
}

// readReservations reads the reservations sql selects with args.
func readReservations(ctx context.Context, q querier, sql string, args ...any) ([]quota.Reservation, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	rs, err := pgx.CollectRows(rows, pgx.RowToStructByName[reservationRow])
	if err != nil {
		return nil, err
	}
	out := make([]quota.Reservation, len(rs))
	for i, r := range rs {
		if out[i], err = r.reservation(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// reservationKey names a reservation by its request id.
type reservationKey struct{ customer, requestID string }

// InsertReservations implements quota.ReservationStore: one statement
// stores every reservation of r (in the order of their request ids, so that
// two processes' statements lock them in one order); a second reads those
// whose request id was used before. A request id given twice in r is
// stored once: the second finds the first.
func (res *Reservations) InsertReservations(ctx context.Context, r []quota.ReservationInsert) error {
	order := make([]int, len(r))
	for i := range r {
		order[i] = i
		r[i].Found = nil
	}
	slices.SortFunc(order, func(a, b int) int {
		x, y := &r[a].Reservation, &r[b].Reservation
		return cmp.Or(cmp.Compare(x.Customer, y.Customer), cmp.Compare(x.RequestID, y.RequestID), cmp.Compare(a, b))
	})
	n := len(r)
	ids, customers, metrics, subjects := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	costs, expires, created := make([]int64, n), make([]time.Time, n), make([]time.Time, n)
	requestIDs, windows, answers := make([]*string, n), make([][]byte, n), make([][]byte, n)
	for j, i := range order {
		x := &r[i].Reservation
		ids[j], customers[j], metrics[j], subjects[j] = x.ID, x.Customer, x.Metric, x.Subject
		costs[j], expires[j], created[j] = x.Cost, x.ExpiresAt, x.CreatedAt
		if x.RequestID != "" {
			requestIDs[j] = &x.RequestID
		}
		w, err := json.Marshal(x.Windows)
		if err != nil {
			return err
		}
		windows[j], answers[j] = w, x.Answer
	}
	const insertQ = `
		INSERT INTO reservations (id, customer_id, metric, subject, cost, expires_at, created_at, request_id, windows,
		                          answer)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::timestamptz[],
		                     $7::timestamptz[], $8::text[], $9::jsonb[], $10::jsonb[])
		ON CONFLICT (customer_id, request_id) WHERE request_id IS NOT NULL DO NOTHING
		RETURNING id`
	var inserted map[string]bool
	err := retry(func() error {
		rows, err := res.core.pool.Query(ctx, insertQ, ids, customers, metrics, subjects, costs, expires, created, requestIDs,
			windows, answers)
		if err != nil {
			return err
		}
		inserted = make(map[string]bool, n)
		var id string
		_, err = pgx.ForEachRow(rows, []any{&id}, func() error {
			inserted[id] = true
			return nil
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("insert %d reservations: %w", n, mapErr(err))
	}
	if len(inserted) == n {
		return nil
	}
	// Request ids used before: what they name, read after the insert
	// committed (an insert of the same id in flight made it wait).
	found := map[reservationKey]*quota.Reservation{}
	for i := range r {
		x := &r[i].Reservation
		if inserted[x.ID] {
			continue
		}
		k := reservationKey{x.Customer, x.RequestID}
		f, ok := found[k]
		if !ok {
			var err error
			if f, err = res.ReservationByRequestID(ctx, x.Customer, x.RequestID); err != nil {
				return err
			}
			if f == nil {
				return fmt.Errorf("reservation with request id %q: neither stored nor found", x.RequestID)
			}
			found[k] = f
		}
		r[i].Found = f
	}
	return nil
}

// Reservation implements quota.ReservationStore.
func (res *Reservations) Reservation(ctx context.Context, id string) (quota.Reservation, error) {
	rs, err := readReservations(ctx, res.core.pool, `SELECT `+reservationColumns+` FROM reservations WHERE id = $1`, id)
	if err != nil {
		return quota.Reservation{}, fmt.Errorf("read reservation %s: %w", id, mapErr(err))
	}
	if len(rs) == 0 {
		return quota.Reservation{}, tiers.ErrReservationNotFound
	}
	return rs[0], nil
}

// ReservationByRequestID implements quota.ReservationStore.
func (res *Reservations) ReservationByRequestID(ctx context.Context, customer, requestID string) (*quota.Reservation, error) {
	rs, err := readReservations(ctx, res.core.pool, `SELECT `+reservationColumns+` FROM reservations
		WHERE customer_id = $1 AND request_id = $2`, customer, requestID)
	if err != nil {
		return nil, fmt.Errorf("read reservation %s/%s: %w", customer, requestID, mapErr(err))
	}
	if len(rs) == 0 {
		return nil, nil
	}
	return &rs[0], nil
}

// errNotHeld ends a finish's transaction: the reservation was not
// held.
var errNotHeld = errors.New("reservation not held")

// FinishReservation implements quota.ReservationStore: the guarded update
// and fn in one transaction.
func (res *Reservations) FinishReservation(ctx context.Context, s quota.ReservationFinish,
	fn func(ctx context.Context, tx quota.Tx) error) (bool, error) {
	var committed *int64
	if s.State == quota.ReservationCommitted {
		committed = &s.Committed
	}
	// settled_at keeps its name from before: it is when the reservation
	// finished.
	const finishQ = `
		UPDATE reservations SET state = $2, committed = $3, over = $4, settled_at = $5
		WHERE id = $1 AND state = 'held'`
	err := res.ledger.Atomically(ctx, func(ctx context.Context, tx quota.Tx) error {
		tag, err := tx.(txLedger).tx.Exec(ctx, finishQ, s.ID, string(s.State), committed, s.Over, s.At)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errNotHeld
		}
		return fn(ctx, tx)
	})
	switch {
	case errors.Is(err, errNotHeld):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("finish reservation %s: %w", s.ID, mapErr(err))
	}
	return true, nil
}

// RecordOver implements quota.ReservationStore.
func (res *Reservations) RecordOver(ctx context.Context, id string, over int64) error {
	if _, err := res.core.pool.Exec(ctx, `UPDATE reservations SET over = $2 WHERE id = $1`, id, over); err != nil {
		return fmt.Errorf("record over of reservation %s: %w", id, mapErr(err))
	}
	return nil
}

// DueReservations implements quota.ReservationStore.
func (res *Reservations) DueReservations(ctx context.Context, now time.Time, limit int) ([]string, error) {
	rows, err := res.core.pool.Query(ctx, `SELECT id FROM reservations WHERE state = 'held' AND expires_at <= $1
		ORDER BY expires_at LIMIT $2`, now, limit)
	if err != nil {
		return nil, fmt.Errorf("due reservations: %w", mapErr(err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("due reservations: %w", mapErr(err))
	}
	return ids, nil
}

// transitionRow is a reservation as it was held, and what it became.
type transitionRow struct {
	reservationRow
	NewState     string `db:"new_state"`
	NewCommitted *int64 `db:"new_committed"`
}

// TransitionReservations implements quota.ReservationStore: one statement
// moves every reservation of t whose guards hold, and returns them as they
// were held. Two transitions of one reservation in t: one moves it.
func (res *Reservations) TransitionReservations(ctx context.Context, t []quota.ReservationTransition) error {
	n := len(t)
	ids, states, ats := make([]string, n), make([]string, n), make([]time.Time, n)
	committed := make([]*int64, n)
	for i := range t {
		x := &t[i]
		x.Finished = nil
		ids[i], states[i], ats[i] = x.ID, string(x.State), x.At
		if x.State == quota.ReservationCommitted {
			committed[i] = &x.Committed
		}
	}
	// The old row's columns: FOR UPDATE in a subquery locks the rows the
	// update then changes, in one order (by id).
	const transitionQ = `
		WITH u AS (
		    SELECT DISTINCT ON (id) * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[])
		        AS u(id, state, committed, at)
		    ORDER BY id
		), old AS (
		    SELECT r.* FROM reservations r JOIN u ON u.id = r.id
		    WHERE r.state = 'held'
		      AND (u.state = 'expired' OR r.expires_at > u.at)
		      AND (u.committed IS NULL OR u.committed <= r.cost)
		    ORDER BY r.id
		    FOR UPDATE OF r
		)
		UPDATE reservations r SET state = u.state, committed = u.committed, settled_at = u.at
		FROM u, old
		WHERE r.id = u.id AND old.id = r.id AND r.state = 'held'
		RETURNING old.id, old.customer_id, old.metric, old.subject, old.cost, old.state, old.committed, old.over,
		    old.expires_at, old.created_at, coalesce(old.request_id, '') AS request_id, old.windows, old.answer,
		    u.state AS new_state, u.committed AS new_committed`
	// Planned at every call (QueryExecModeCacheDescribe, no prepared
	// statement's generic plan): a generic plan made while the table was
	// small, as after a deploy, hash-joins u with every held reservation
	// (and every dead index entry of one) for as long as the connection
	// lives; planned with the table as it is, u's ids are looked up in the
	// primary key.
	var moved []transitionRow
	err := retry(func() error {
		rows, err := res.core.pool.Query(ctx, transitionQ, pgx.QueryExecModeCacheDescribe, ids, states, committed, ats)
		if err != nil {
			return err
		}
		moved, err = pgx.CollectRows(rows, pgx.RowToStructByName[transitionRow])
		return err
	})
	if err != nil {
		return fmt.Errorf("finish %d reservations: %w", n, mapErr(err))
	}
	for _, m := range moved {
		rsv, err := m.reservation()
		if err != nil {
			return err
		}
		// The transition that moved it: the same id, state and cost.
		for i := range t {
			x := &t[i]
			if x.Finished == nil && x.ID == m.ID && string(x.State) == m.NewState &&
				(m.NewCommitted == nil) == (x.State != quota.ReservationCommitted) &&
				(m.NewCommitted == nil || *m.NewCommitted == x.Committed) {
				x.Finished = &rsv
				break
			}
		}
	}
	return nil
}
