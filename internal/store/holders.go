package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/tiers"
)

// Holders are registered in lease_holders (see the migrations) when their
// listening session first takes their lock. A holder's leases are taken
// back in batches of reclaimBatch counters, each a transaction that locks
// the counters first (in the order every lease call locks them), then
// finds the holder's lock still gone, then takes the leases and their
// units: a holder that takes its lock again between two batches keeps
// the rest, and its verification of a lease (see lease.Pool.SuspectAll)
// waits for a batch that holds its counter, then finds the lease gone.

const reclaimBatch = 500

// Holders is the registry of lease holders over a DB: who holds leases,
// and taking back the leases of those that died.
type Holders struct{ db *DB }

// NewHolders returns the registry of db's schema, as this process sees it.
func NewHolders(db *DB) *Holders { return &Holders{db: db} }

var _ lease.Holders = (*Holders)(nil)

// holderKey is a holder as the API names it: its lock key, unsigned (as
// pg_locks shows it).
func holderKey(h int64) uint32 { return uint32(h) }

// holderOf is the holder named key, as lease rows store it.
func holderOf(key uint32) int64 { return int64(int32(key)) }

// register records this process's holder key when its listening session
// first takes its lock, and clears any mark of it gone when it takes the
// lock again. It reports false when the key names another process's
// leases (a dead holder's, not yet reclaimed): then this process must
// draw another key.
func register(ctx context.Context, conn *pgx.Conn, holder int64, first bool) (bool, error) {
	if first {
		tag, err := conn.Exec(ctx, `INSERT INTO lease_holders (holder) VALUES ($1) ON CONFLICT DO NOTHING`, holder)
		if err != nil {
			return false, fmt.Errorf("register holder: %w", err)
		}
		return tag.RowsAffected() == 1, nil
	}
	const q = `
		INSERT INTO lease_holders (holder) VALUES ($1)
		ON CONFLICT (holder) DO UPDATE SET gone_since = NULL WHERE lease_holders.gone_since IS NOT NULL`
	if _, err := conn.Exec(ctx, q, holder); err != nil {
		return false, fmt.Errorf("register holder: %w", err)
	}
	return true, nil
}

// List implements lease.Holders.
func (r *Holders) List(ctx context.Context) ([]lease.Holder, error) {
	db := r.db
	const q = `
		WITH held AS (
			SELECT l.holder, count(*) AS leases, sum(l.unused) AS unused
			FROM counter_leases l WHERE l.held GROUP BY l.holder
		)
		SELECT coalesce(h.holder, d.holder), h.started_at, h.gone_since,
		       coalesce(d.leases, 0), coalesce(d.unused, 0)::bigint,
		       (coalesce(h.holder, d.holder) & 4294967295)::oid = ANY (quotad_live_holders())
		FROM lease_holders h FULL JOIN held d ON d.holder = h.holder
		ORDER BY 1`
	rows, err := db.pool.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list holders: %w", mapErr(err))
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (lease.Holder, error) {
		var h lease.Holder
		var id int64
		var started *time.Time
		if err := row.Scan(&id, &started, &h.GoneSince, &h.Leases, &h.Unused, &h.Running); err != nil {
			return h, err
		}
		h.ID, h.Self = holderKey(id), id == db.holderID()
		if started != nil {
			h.StartedAt = started.UTC()
		}
		if h.GoneSince != nil {
			t := h.GoneSince.UTC()
			h.GoneSince = &t
		}
		return h, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list holders: %w", mapErr(err))
	}
	return list, nil
}

// ReclaimDead implements lease.Holders.
func (r *Holders) ReclaimDead(ctx context.Context, now time.Time, after time.Duration) (lease.Reclaimed, error) {
	db := r.db
	const marks = `
		WITH h AS (
			SELECT holder, gone_since, (holder & 4294967295)::oid = ANY (quotad_live_holders()) AS running
			FROM lease_holders
		), seen AS (
			UPDATE lease_holders l SET gone_since = CASE WHEN h.running THEN NULL ELSE $1::timestamptz END
			FROM h
			WHERE l.holder = h.holder AND h.running = (h.gone_since IS NOT NULL)
		)
		SELECT holder FROM h WHERE NOT running AND gone_since <= $1::timestamptz - $2::interval`
	rows, err := db.pool.Query(ctx, marks, now, after)
	if err != nil {
		return lease.Reclaimed{}, fmt.Errorf("find dead holders: %w", mapErr(err))
	}
	dead, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return lease.Reclaimed{}, fmt.Errorf("find dead holders: %w", mapErr(err))
	}
	var total lease.Reclaimed
	for _, h := range dead {
		if h == db.holderID() {
			continue // this process runs, whatever its session says
		}
		got, err := r.reclaim(ctx, h)
		total.Holders += got.Holders
		total.Leases += got.Leases
		total.Units += got.Units
		if err != nil && !errors.Is(err, lease.ErrHolderRunning) {
			return total, err
		}
	}
	return total, nil
}

// Reclaim implements lease.Holders.
func (r *Holders) Reclaim(ctx context.Context, key uint32, actor string, now time.Time) (lease.Reclaimed, error) {
	db := r.db
	h := holderOf(key)
	if h == db.holderID() {
		return lease.Reclaimed{}, lease.ErrHolderSelf
	}
	var known bool
	const q = `SELECT EXISTS (SELECT 1 FROM lease_holders WHERE holder = $1)
		OR EXISTS (SELECT 1 FROM counter_leases WHERE holder = $1 AND held)`
	if err := db.pool.QueryRow(ctx, q, h).Scan(&known); err != nil {
		return lease.Reclaimed{}, fmt.Errorf("release holder %d: %w", key, mapErr(err))
	}
	if !known {
		return lease.Reclaimed{}, lease.ErrHolderUnknown
	}
	if err := r.endSessions(ctx, h); err != nil {
		return lease.Reclaimed{}, fmt.Errorf("release holder %d: %w", key, err)
	}
	got, err := r.reclaim(ctx, h)
	if err != nil {
		return got, fmt.Errorf("release holder %d: %w", key, err)
	}
	err = db.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		e := auditEntry{actor: actor, action: tiers.ActionRelease, resource: fmt.Sprintf("holders/%d", key),
			before: map[string]any{"holder": key, "leases": got.Leases, "unused": got.Units}}
		return recordAudit(ctx, tx, now, e)
	})
	if err != nil {
		return got, fmt.Errorf("release holder %d: audit: %w", key, err)
	}
	return got, nil
}

// endSessions ends the sessions that hold holder's lock (a process known
// dead whose connection PostgreSQL has not yet seen go), and waits, within
// ctx, for the lock to go.
func (r *Holders) endSessions(ctx context.Context, h int64) error {
	db := r.db
	const end = `
		SELECT count(pg_terminate_backend(k.o_pid)) FROM quotad_holder_sessions() k
		WHERE k.o_holder = ($1::bigint & 4294967295)::oid`
	var ended int
	if err := db.pool.QueryRow(ctx, end, h).Scan(&ended); err != nil {
		return mapErr(err)
	}
	for wait := time.Millisecond; ended > 0; wait = min(2*wait, 100*time.Millisecond) {
		var running bool
		if err := db.pool.QueryRow(ctx, `SELECT quotad_holder_alive($1)`, h).Scan(&running); err != nil {
			return mapErr(err)
		}
		if !running {
			return nil
		}
		select {
		case <-ctx.Done():
			return lease.ErrHolderRunning
		case <-time.After(wait):
		}
	}
	return nil
}

// reclaim takes back every lease holder h holds, in batches, and forgets
// h once none is left. It stops with lease.ErrHolderRunning when h's lock
// is there (again).
func (r *Holders) reclaim(ctx context.Context, h int64) (lease.Reclaimed, error) {
	db := r.db
	const find = `
		SELECT customer_id, metric, subject, quota_window, window_start
		FROM counter_leases WHERE holder = $1 AND held`
	rows, err := db.pool.Query(ctx, find, h)
	if err != nil {
		return lease.Reclaimed{}, mapErr(err)
	}
	var keys counterArrays
	_, err = pgx.ForEachRow(rows, keys.scanTargets(), keys.appendScanned)
	if err != nil {
		return lease.Reclaimed{}, mapErr(err)
	}
	var got lease.Reclaimed
	for off := 0; off < keys.len(); off += reclaimBatch {
		n, units, err := r.reclaimBatch(ctx, h, keys.slice(off, min(off+reclaimBatch, keys.len())))
		got.Leases += n
		got.Units += units
		if err != nil {
			return got, err
		}
	}
	const forget = `DELETE FROM lease_holders WHERE holder = $1 AND NOT quotad_holder_alive($1)
		AND NOT EXISTS (SELECT 1 FROM counter_leases WHERE holder = $1 AND held)`
	tag, err := db.pool.Exec(ctx, forget, h)
	if err != nil {
		return got, mapErr(err)
	}
	if tag.RowsAffected() == 1 {
		got.Holders = 1
	}
	return got, nil
}

// reclaimBatch takes back h's leases of the counters k, in one
// transaction.
func (r *Holders) reclaimBatch(ctx context.Context, h int64, k counterArrays) (leases, units int64, err error) {
	db := r.db
	const lock = `
		SELECT 1 FROM usage_counters c
		JOIN unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[])
		    AS s(customer_id, metric, subject, quota_window, window_start)
		  ON c.customer_id = s.customer_id AND c.metric = s.metric AND c.subject = s.subject
		 AND c.quota_window = s.quota_window AND c.window_start = s.window_start
		ORDER BY c.customer_id, c.metric, c.subject, window_rank(c.quota_window), c.window_start
		FOR UPDATE OF c`
	const take = `
		WITH held AS MATERIALIZED (
			SELECT l.customer_id, l.metric, l.subject, l.quota_window, l.window_start, l.unused
			FROM counter_leases l
			JOIN unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[])
			    AS s(customer_id, metric, subject, quota_window, window_start)
			  ON l.customer_id = s.customer_id AND l.metric = s.metric AND l.subject = s.subject
			 AND l.quota_window = s.quota_window AND l.window_start = s.window_start
			WHERE l.holder = $6 AND l.held
		), taken AS (
			UPDATE counter_leases l SET held = false, unused = 0, granted = 0
			FROM held h
			WHERE l.customer_id = h.customer_id AND l.metric = h.metric AND l.subject = h.subject
			  AND l.quota_window = h.quota_window AND l.window_start = h.window_start
			  AND l.holder = $6 AND l.held
			RETURNING h.customer_id, h.metric, h.subject, h.quota_window, h.window_start, h.unused AS was
		), back AS MATERIALIZED (
			SELECT t.customer_id, t.metric, t.subject, t.quota_window, t.window_start,
			       LEAST(t.was, c.used) AS units, c.watched
			FROM taken t
			JOIN usage_counters c
			  ON c.customer_id = t.customer_id AND c.metric = t.metric AND c.subject = t.subject
			 AND c.quota_window = t.quota_window AND c.window_start = t.window_start
		), given AS (
			UPDATE usage_counters c SET used = c.used - b.units, watched = c.watched AND b.units = 0
			FROM back b
			WHERE c.customer_id = b.customer_id AND c.metric = b.metric AND c.subject = b.subject
			  AND c.quota_window = b.quota_window AND c.window_start = b.window_start AND b.units > 0
		)
		SELECT b.customer_id, b.metric, b.subject, b.quota_window, b.window_start, b.units, b.watched
		FROM back b`
	err = db.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		leases, units = 0, 0
		if _, err := tx.Exec(ctx, lock, k.customers, k.metrics, k.subjects, k.windows, k.starts); err != nil {
			return err
		}
		var running bool
		if err := tx.QueryRow(ctx, `SELECT quotad_holder_alive($1)`, h).Scan(&running); err != nil {
			return err
		}
		if running {
			return lease.ErrHolderRunning
		}
		rows, err := tx.Query(ctx, take, k.customers, k.metrics, k.subjects, k.windows, k.starts, h)
		if err != nil {
			return err
		}
		var freed []quota.CounterKey
		var key quota.CounterKey
		var window string
		var n int64
		var watched bool
		_, err = pgx.ForEachRow(rows, []any{&key.Customer, &key.Metric, &key.Subject, &window, &key.Start, &n, &watched}, func() error {
			leases++
			units += n
			if watched && n > 0 {
				k := key
				k.Window, _ = tiers.ParseWindow(window) // the schema admits only valid windows
				k.Start = k.Start.UTC()
				freed = append(freed, k)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range freed {
			if err := db.notify(ctx, tx, NotifyFreed, CounterKeyString(k)); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, lease.ErrHolderRunning) {
		return 0, 0, err
	}
	if err != nil {
		return 0, 0, mapErr(err)
	}
	return leases, units, nil
}

// counterArrays are counters' keys as the columns of an unnest.
type counterArrays struct {
	customers, metrics, subjects, windows []string
	starts                                []time.Time

	row struct {
		customer, metric, subject, window string
		start                             time.Time
	}
}

func (a *counterArrays) scanTargets() []any {
	return []any{&a.row.customer, &a.row.metric, &a.row.subject, &a.row.window, &a.row.start}
}

func (a *counterArrays) appendScanned() error {
	a.customers = append(a.customers, a.row.customer)
	a.metrics = append(a.metrics, a.row.metric)
	a.subjects = append(a.subjects, a.row.subject)
	a.windows = append(a.windows, a.row.window)
	a.starts = append(a.starts, a.row.start)
	return nil
}

func (a *counterArrays) len() int { return len(a.customers) }

func (a *counterArrays) slice(from, to int) counterArrays {
	return counterArrays{customers: a.customers[from:to], metrics: a.metrics[from:to],
		subjects: a.subjects[from:to], windows: a.windows[from:to], starts: a.starts[from:to]}
}
