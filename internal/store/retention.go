package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/quotad/quotad/internal/quota"
)

// Each purge statement deletes at most $n rows (its last parameter) that
// its condition selects, found through an index (see "Indexes" in the
// migrations), by their ctid: one short statement per batch, which
// holds its row locks only while it runs. Rows another transaction has
// locked are skipped, not waited for (the next run takes them): a purge
// never holds up a request, nor is held up by one. A batch that deletes
// fewer than $n rows was the last.
const purgeBatchQ = `DELETE FROM %[1]s WHERE ctid = ANY(ARRAY(
	SELECT ctid FROM %[1]s WHERE %[2]s LIMIT $%[3]d FOR UPDATE SKIP LOCKED))`

// counterPurgeCond selects counters of windows that started long before
// $1: calendar windows last at most 31 days, and no process charges a
// window once it has ended. The first condition, implied by each of the
// others, is the one the index on window_start serves.
const counterPurgeCond = `window_start < $1::timestamptz - interval '2 hours' AND (
	   (quota_window = 'hour'  AND window_start < $1::timestamptz - interval '2 hours')
	OR (quota_window = 'day'   AND window_start < $1::timestamptz - interval '2 days')
	OR (quota_window = 'week'  AND window_start < $1::timestamptz - interval '8 days')
	OR (quota_window = 'month' AND window_start < $1::timestamptz - interval '63 days'))`

// purgeStep is one table's purge: its condition, with $1 the cutoff.
type purgeStep struct {
	table string
	cond  string
	// keep: how long r keeps the rows; nil for what the engine decides
	// (the cutoff is then now itself).
	keep func(r quota.Retention) time.Duration
	// date: the cutoff is a UTC date (the column is one).
	date bool
}

// purgeSteps are the tables purged, in order: webhook deliveries before
// the usage events they name, whose purge waits until none is left.
var purgeSteps = []purgeStep{
	// Counters, and with them (ON DELETE CASCADE) their lease rows, held
	// or settled: a settled lease's row fences late calls until its
	// counter goes (see counter_leases in the migrations).
	{table: "usage_counters", cond: counterPurgeCond},
	{table: "metric_usage", cond: counterPurgeCond},
	// What grants paid for in a window: usage shows it while the window
	// is current.
	{table: "granted_usage", cond: counterPurgeCond},
	// Request ids are kept 24 hours: a repeated id within them gets the
	// first answer (see quota.Tx.Claim).
	{table: "request_ids", cond: `created_at < $1::timestamptz - interval '24 hours'`},
	{table: "usage_history", cond: `day < $1::date`, date: true,
		keep: func(r quota.Retention) time.Duration { return r.History }},
	// A closed billing term: statements of periods still in the history
	// need the terms in effect then, which closed after the cutoff.
	{table: "plan_assignments", cond: `valid_to IS NOT NULL AND valid_to < $1`,
		keep: func(r quota.Retention) time.Duration { return r.History }},
	{table: "audit_events", cond: `at < $1`,
		keep: func(r quota.Retention) time.Duration { return r.Audit }},
	// Finished reservations: settled_at keeps its name from before.
	{table: "reservations", cond: `state <> 'held' AND settled_at < $1`,
		keep: func(r quota.Retention) time.Duration { return r.Reservations }},
	{table: "webhook_deliveries", cond: `status <> 'pending' AND last_attempt_at < $1`,
		keep: func(r quota.Retention) time.Duration { return r.Deliveries }},
	// An event goes once its window has ended (no check can record it
	// again) long enough ago, and no delivery of it is left; a
	// grant.exhausted or trial.ended event, which has no window, once it
	// happened long enough ago (its grant is used up, its trial over: it
	// does not happen again).
	{table: "usage_events", cond: `(window_end < $1 OR grant_id IS NOT NULL AND occurred_at < $1
		OR type = 'trial.ended' AND occurred_at < $1) AND NOT EXISTS (
		SELECT 1 FROM webhook_deliveries d WHERE d.event_id = usage_events.id)`,
		keep: func(r quota.Retention) time.Duration { return r.Deliveries }},
}

// PurgedTables names the tables Purge deletes from, in the order it does.
func PurgedTables() []string {
	out := make([]string, len(purgeSteps))
	for i, s := range purgeSteps {
		out[i] = s.table
	}
	return out
}

// purgeLockQ takes the lock that lets one process purge a schema at a
// time, on the session that runs the purge: it goes with the session.
const purgeLockQ = `SELECT pg_try_advisory_lock(hashtextextended('quotad.purge:' || current_schema(), 0))`

// Purge implements quota.Maintenance: it deletes, in batches of at most
// r.BatchSize() rows, each batch a statement bounded by
// r.StatementTimeout(), the counters of windows long past (their lease
// rows with them), request ids older than 24 hours, and the rows r keeps
// no longer (see quota.Retention), table by table. Only one process purges
// a schema at a time: while another does, Purge deletes nothing. It
// returns what it deleted, by table, also when it fails part-way.
func (l *Ledger) Purge(ctx context.Context, now time.Time, r quota.Retention) (quota.Purged, error) {
	purged := quota.Purged{}
	timeout := r.StatementTimeout()
	acquire, cancel := context.WithTimeout(ctx, timeout)
	c, err := l.core.pool.Acquire(acquire)
	cancel()
	if err != nil {
		return purged, fmt.Errorf("purge: %w", mapErr(err))
	}
	locked := false
	defer func() {
		if locked {
			unlock, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
			_, err := c.Exec(unlock, `SELECT pg_advisory_unlock(hashtextextended('quotad.purge:' || current_schema(), 0))`)
			cancel()
			if err != nil {
				// The session must not go back to the pool holding
				// the lock: closing it releases the lock.
				_ = c.Conn().Close(context.WithoutCancel(ctx))
			}
		}
		c.Release()
	}()
	lockCtx, cancel := context.WithTimeout(ctx, timeout)
	err = c.QueryRow(lockCtx, purgeLockQ).Scan(&locked)
	cancel()
	if err != nil {
		return purged, fmt.Errorf("purge: %w", mapErr(err))
	}
	if !locked {
		return purged, nil // another process purges
	}
	for _, s := range purgeSteps {
		cutoff := now
		if s.keep != nil {
			var ok bool
			if cutoff, ok = quota.Cutoff(now, s.keep(r)); !ok {
				continue // kept forever
			}
		}
		if s.date {
			cutoff = time.Date(cutoff.Year(), cutoff.Month(), cutoff.Day(), 0, 0, 0, 0, time.UTC)
		}
		n, err := purgeBatches(ctx, c, r, s.table, fmt.Sprintf(purgeBatchQ, s.table, s.cond, 2), cutoff)
		if n > 0 {
			purged[s.table] = n
		}
		if err != nil {
			return purged, err
		}
	}
	return purged, nil
}

// purgeBatches runs the batch statement q on c until a batch deletes fewer
// than r.BatchSize() rows, each under its own deadline; it returns how
// many rows went.
func purgeBatches(ctx context.Context, c *pgxpool.Conn, r quota.Retention, table, q string, cutoff time.Time) (int64, error) {
	n := r.BatchSize()
	var total int64
	for {
		batch, cancel := context.WithTimeout(ctx, r.StatementTimeout())
		tag, err := c.Exec(batch, q, cutoff, n)
		cancel()
		if err != nil {
			return total, fmt.Errorf("purge %s: %w", table, mapErr(err))
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(n) {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("purge %s: %w", table, err)
		}
	}
}
