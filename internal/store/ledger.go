package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// globalShards is how many rows a metric's global usage per window is
// spread over.
const globalShards = 16

// errRollback ends a transaction whose outcome is already decided (a
// denial or a replay) without committing anything.
var errRollback = errors.New("rollback")

// chargeQ adds $5 units to a counter if, and only if, the result stays
// within the threshold $6. It never reads and then writes: the condition
// and the increment are one atomic upsert. A missing row is created only
// when the cost alone fits.
const chargeQ = `
	INSERT INTO usage_counters AS c (customer_id, metric, quota_window, window_start, used)
	SELECT $1, $2, $3, $4, $5::bigint
	WHERE $5::bigint <= $6::bigint
	ON CONFLICT (customer_id, metric, quota_window, window_start)
	DO UPDATE SET used = c.used + EXCLUDED.used
	WHERE c.used + EXCLUDED.used <= $6::bigint
	RETURNING used`

const counterQ = `
	SELECT coalesce((SELECT used FROM usage_counters
	                 WHERE customer_id = $1 AND metric = $2 AND quota_window = $3 AND window_start = $4), 0)`

const globalQ = `
	SELECT coalesce(sum(used), 0)::bigint FROM metric_usage
	WHERE metric = $1 AND quota_window = $2 AND window_start = $3`

// Charge implements quota.Ledger: every window's conditional upsert runs in
// one transaction, pipelined in one round trip; if any window denies, the
// transaction rolls back and nothing is charged.
func (db *DB) Charge(ctx context.Context, c quota.Charge) (quota.Outcome, error) {
	if len(c.Windows) == 1 && !c.Windows[0].Spare && len(c.Globals) == 0 && c.RequestID == "" {
		return db.chargeOne(ctx, c)
	}
	var out quota.Outcome
	err := db.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		n := len(c.Windows)
		out = quota.Outcome{Used: make([]int64, n), Passed: make([]bool, n), Elastic: make([]bool, n)}
		if c.RequestID != "" {
			rec, err := claimRequestID(ctx, tx, c.Customer, "check", c.RequestID, c.Metric, c.Cost, c.At)
			if err != nil {
				return err
			}
			if rec != nil {
				out.Replay = rec
				return errRollback
			}
		}
		if err := chargeWindows(ctx, tx, c, &out); err != nil {
			return err
		}
		for i := range c.Windows {
			if !out.Passed[i] {
				return errRollback
			}
		}
		out.Allowed = true
		if err := countGlobal(ctx, tx, c.Globals, c.Cost); err != nil {
			return err
		}
		if c.RequestID != "" && c.Answer != nil {
			answer, err := c.Answer(out)
			if err != nil {
				return err
			}
			const q = `UPDATE request_ids SET answer = $4 WHERE customer_id = $1 AND kind = $2 AND request_id = $3`
			if _, err := tx.Exec(ctx, q, c.Customer, "check", c.RequestID, answer); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errRollback):
		return out, nil
	case isCode(err, "23503"): // the customer (or metric) was deleted meanwhile
		return quota.Outcome{}, tiers.ErrCustomerNotFound
	case err != nil:
		return quota.Outcome{}, fmt.Errorf("charge %s/%s: %w", c.Customer, c.Metric, err)
	}
	return out, nil
}

// chargeOne charges a single window with nothing else to record: the
// conditional upsert alone is atomic, so it runs as one statement, in one
// round trip, holding the row lock only while it executes and commits.
func (db *DB) chargeOne(ctx context.Context, c quota.Charge) (quota.Outcome, error) {
	w := c.Windows[0]
	out := quota.Outcome{Used: make([]int64, 1), Passed: make([]bool, 1), Elastic: make([]bool, 1)}
	var after int64
	err := db.pool.QueryRow(ctx, chargeQ, c.Customer, c.Metric, w.Window.String(), w.Start, c.Cost, w.Threshold).Scan(&after)
	switch {
	case err == nil:
		out.Allowed, out.Passed[0], out.Used[0] = true, true, after-c.Cost
		return out, nil
	case isCode(err, "23503"):
		return quota.Outcome{}, tiers.ErrCustomerNotFound
	case !errors.Is(err, pgx.ErrNoRows):
		return quota.Outcome{}, fmt.Errorf("charge %s/%s: %w", c.Customer, c.Metric, mapErr(err))
	}
	if err := db.pool.QueryRow(ctx, counterQ, c.Customer, c.Metric, w.Window.String(), w.Start).Scan(&out.Used[0]); err != nil {
		return quota.Outcome{}, fmt.Errorf("read counter %s/%s: %w", c.Customer, c.Metric, mapErr(err))
	}
	return out, nil
}

// chargeWindows runs the conditional upserts, then settles the windows
// that denied: elastic ones may still admit on spare capacity; the others
// report their count.
func chargeWindows(ctx context.Context, tx pgx.Tx, c quota.Charge, out *quota.Outcome) error {
	if len(c.Windows) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, w := range c.Windows {
		b.Queue(chargeQ, c.Customer, c.Metric, w.Window.String(), w.Start, c.Cost, w.Threshold)
	}
	res := tx.SendBatch(ctx, b)
	for i := range c.Windows {
		var after int64
		err := res.QueryRow().Scan(&after)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			res.Close()
			return err
		default:
			out.Passed[i] = true
			out.Used[i] = after - c.Cost
		}
	}
	if err := res.Close(); err != nil {
		return err
	}
	for i, w := range c.Windows {
		if out.Passed[i] {
			continue
		}
		if w.Spare {
			ok, err := chargeElastic(ctx, tx, c, w, &out.Used[i])
			if err != nil {
				return err
			}
			out.Passed[i], out.Elastic[i] = ok, ok
			continue
		}
		if err := tx.QueryRow(ctx, counterQ, c.Customer, c.Metric, w.Window.String(), w.Start).Scan(&out.Used[i]); err != nil {
			return err
		}
	}
	return nil
}

// chargeElastic admits cost beyond the threshold when the metric's global
// usage in the window leaves room for all of it and the ceiling allows.
// Elastic admissions of one metric and window are serialized by an
// advisory lock, so that two of them never spend the same spare capacity;
// the count is then charged with the ceiling as the upsert's condition.
func chargeElastic(ctx context.Context, tx pgx.Tx, c quota.Charge, w quota.WindowCharge, used *int64) (bool, error) {
	key := "quotad.elastic:" + w.Global.Metric + ":" + w.Global.Window.String() + ":" +
		strconv.FormatInt(w.Global.Start.Unix(), 10)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, key); err != nil {
		return false, err
	}
	var global int64
	if err := tx.QueryRow(ctx, globalQ, w.Global.Metric, w.Global.Window.String(), w.Global.Start).Scan(&global); err != nil {
		return false, err
	}
	if err := tx.QueryRow(ctx, counterQ, c.Customer, c.Metric, w.Window.String(), w.Start).Scan(used); err != nil {
		return false, err
	}
	if ok, _ := w.Admits(*used, global, c.Cost); !ok {
		return false, nil
	}
	var after int64
	err := tx.QueryRow(ctx, chargeQ, c.Customer, c.Metric, w.Window.String(), w.Start, c.Cost, w.Ceiling).Scan(&after)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil // another check took the room between the read and now
	}
	if err != nil {
		return false, err
	}
	*used = after - c.Cost
	return true, nil
}

// countGlobal adds admitted units to the metric's global usage, each time
// in one random shard.
func countGlobal(ctx context.Context, tx pgx.Tx, globals []quota.GlobalKey, cost int64) error {
	if len(globals) == 0 {
		return nil
	}
	const q = `
		INSERT INTO metric_usage AS g (metric, quota_window, window_start, shard, used)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (metric, quota_window, window_start, shard) DO UPDATE SET used = g.used + EXCLUDED.used`
	b := &pgx.Batch{}
	for _, g := range globals {
		b.Queue(q, g.Metric, g.Window.String(), g.Start, rand.IntN(globalShards), cost)
	}
	return tx.SendBatch(ctx, b).Close()
}

// claimRequestID records a request id for the customer, or returns what was
// recorded under it within the last 24 hours. An expired record is taken
// over. A concurrent claim of the same id waits for the first to commit or
// roll back.
func claimRequestID(ctx context.Context, tx pgx.Tx, customer, kind, id, metric string, cost int64, at time.Time) (*quota.Recorded, error) {
	const claimQ = `
		INSERT INTO request_ids AS r (customer_id, kind, request_id, metric, cost, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (customer_id, kind, request_id) DO UPDATE
		SET metric = EXCLUDED.metric, cost = EXCLUDED.cost, answer = NULL, created_at = EXCLUDED.created_at
		WHERE r.created_at <= EXCLUDED.created_at - interval '24 hours'
		RETURNING true`
	var claimed bool
	err := tx.QueryRow(ctx, claimQ, customer, kind, id, metric, cost, at).Scan(&claimed)
	if err == nil {
		return nil, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	const findQ = `SELECT metric, cost, answer FROM request_ids WHERE customer_id = $1 AND kind = $2 AND request_id = $3`
	var rec quota.Recorded
	if err := tx.QueryRow(ctx, findQ, customer, kind, id).Scan(&rec.Metric, &rec.Cost, &rec.Answer); err != nil {
		return nil, err
	}
	return &rec, nil
}

// Recorded implements quota.Ledger.
func (db *DB) Recorded(ctx context.Context, customer, requestID string, now time.Time) (*quota.Recorded, error) {
	const q = `
		SELECT metric, cost, answer FROM request_ids
		WHERE customer_id = $1 AND kind = 'check' AND request_id = $2
		  AND created_at > $3::timestamptz - interval '24 hours' AND answer IS NOT NULL`
	var rec quota.Recorded
	err := db.pool.QueryRow(ctx, q, customer, requestID, now).Scan(&rec.Metric, &rec.Cost, &rec.Answer)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find request id: %w", mapErr(err))
	}
	return &rec, nil
}

// Peek implements quota.Ledger.
func (db *DB) Peek(ctx context.Context, counters []quota.CounterKey, globals []quota.GlobalKey) ([]int64, []int64, error) {
	used := make([]int64, len(counters))
	global := make([]int64, len(globals))
	if len(counters)+len(globals) == 0 {
		return used, global, nil
	}
	b := &pgx.Batch{}
	for _, k := range counters {
		b.Queue(counterQ, k.Customer, k.Metric, k.Window.String(), k.Start)
	}
	for _, g := range globals {
		b.Queue(globalQ, g.Metric, g.Window.String(), g.Start)
	}
	res := db.pool.SendBatch(ctx, b)
	defer res.Close()
	for i := range used {
		if err := res.QueryRow().Scan(&used[i]); err != nil {
			return nil, nil, fmt.Errorf("read counters: %w", mapErr(err))
		}
	}
	for i := range global {
		if err := res.QueryRow().Scan(&global[i]); err != nil {
			return nil, nil, fmt.Errorf("read global usage: %w", mapErr(err))
		}
	}
	return used, global, nil
}

// Refund implements quota.Ledger.
func (db *DB) Refund(ctx context.Context, r quota.RefundCharge) ([]int64, bool, error) {
	before := make([]int64, len(r.Counters))
	replayed := false
	err := db.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if r.RequestID != "" {
			rec, err := claimRequestID(ctx, tx, r.Customer, "refund", r.RequestID, r.Metric, r.Cost, r.At)
			if err != nil {
				return err
			}
			if rec != nil {
				if rec.Metric != r.Metric || rec.Cost != r.Cost {
					return fmt.Errorf("%w: request_id %q was used for a refund of %d %s",
						tiers.ErrConflict, r.RequestID, rec.Cost, rec.Metric)
				}
				replayed = true
				return errRollback
			}
		}
		const q = `
			WITH old AS (
			    SELECT used FROM usage_counters
			    WHERE customer_id = $1 AND metric = $2 AND quota_window = $3 AND window_start = $4
			    FOR UPDATE
			)
			UPDATE usage_counters c SET used = c.used - LEAST(c.used, $5)
			FROM old
			WHERE c.customer_id = $1 AND c.metric = $2 AND c.quota_window = $3 AND c.window_start = $4
			RETURNING old.used`
		for i, k := range r.Counters {
			err := tx.QueryRow(ctx, q, k.Customer, k.Metric, k.Window.String(), k.Start, r.Cost).Scan(&before[i])
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		for i, n := range r.GlobalGiveBack(before) {
			if err := uncountGlobal(ctx, tx, r.Globals[i], n); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errRollback):
		return nil, replayed, nil
	case isCode(err, "23503"):
		return nil, false, tiers.ErrCustomerNotFound
	case err != nil:
		return nil, false, fmt.Errorf("refund %s/%s: %w", r.Customer, r.Metric, err)
	}
	return before, false, nil
}

// uncountGlobal takes n units off a metric's global usage in one window,
// which is a sum over shards: from the fullest shard first, never taking a
// shard below zero.
func uncountGlobal(ctx context.Context, tx pgx.Tx, g quota.GlobalKey, n int64) error {
	// The shard is chosen in a CTE, evaluated once: as a subquery in FROM,
	// PostgreSQL may scan it again per row and update more than one shard.
	const q = `
		WITH s AS MATERIALIZED (
		    SELECT shard, used FROM metric_usage
		    WHERE metric = $1 AND quota_window = $2 AND window_start = $3 AND used > 0
		    ORDER BY used DESC LIMIT 1
		    FOR UPDATE)
		UPDATE metric_usage u SET used = u.used - LEAST(u.used, $4)
		FROM s
		WHERE u.metric = $1 AND u.quota_window = $2 AND u.window_start = $3 AND u.shard = s.shard
		RETURNING LEAST(s.used, $4)`
	for n > 0 {
		var took int64
		err := tx.QueryRow(ctx, q, g.Metric, g.Window.String(), g.Start, n).Scan(&took)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // nothing left to take
		}
		if err != nil {
			return err
		}
		n -= took
	}
	return nil
}

// Reset implements quota.Ledger: it deletes the customer's counters of
// metric, records the reset in the audit log and tells every process.
func (db *DB) Reset(ctx context.Context, actor, customer, metric string, at time.Time) error {
	type zeroed struct {
		Window string    `json:"window"`
		Start  time.Time `json:"window_start"`
		Used   int64     `json:"used"`
	}
	err := db.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if err := requireCustomer(ctx, tx, customer, true); err != nil {
			return err
		}
		const q = `
			DELETE FROM usage_counters WHERE customer_id = $1 AND metric = $2
			RETURNING quota_window, window_start, used`
		rows, err := tx.Query(ctx, q, customer, metric)
		if err != nil {
			return err
		}
		list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (zeroed, error) {
			var z zeroed
			err := row.Scan(&z.Window, &z.Start, &z.Used)
			z.Start = z.Start.UTC()
			return z, err
		})
		if err != nil {
			return err
		}
		if list == nil {
			list = []zeroed{}
		}
		e := auditEntry{actor: actor, action: tiers.ActionReset, customer: customer,
			resource: "customers/" + customer + "/usage/" + metric,
			before:   map[string]any{"metric": metric, "counters": list}}
		if err := recordAudit(ctx, tx, at, e); err != nil {
			return err
		}
		return db.notify(ctx, tx, NotifyReset, customer+"/"+metric)
	})
	if err != nil {
		return fmt.Errorf("reset usage %s/%s: %w", customer, metric, err)
	}
	return nil
}

// Purge implements quota.Ledger. Calendar windows last at most 31 days, so
// counters of windows that started long before now can no longer count.
func (db *DB) Purge(ctx context.Context, now time.Time) error {
	const counters = `
		DELETE FROM %s
		WHERE (quota_window = 'hour'  AND window_start < $1::timestamptz - interval '2 hours')
		   OR (quota_window = 'day'   AND window_start < $1::timestamptz - interval '2 days')
		   OR (quota_window = 'week'  AND window_start < $1::timestamptz - interval '8 days')
		   OR (quota_window = 'month' AND window_start < $1::timestamptz - interval '63 days')`
	for _, table := range []string{"usage_counters", "metric_usage"} {
		if _, err := db.pool.Exec(ctx, fmt.Sprintf(counters, table), now); err != nil {
			return fmt.Errorf("purge %s: %w", table, mapErr(err))
		}
	}
	const ids = `DELETE FROM request_ids WHERE created_at < $1::timestamptz - interval '24 hours'`
	if _, err := db.pool.Exec(ctx, ids, now); err != nil {
		return fmt.Errorf("purge request ids: %w", mapErr(err))
	}
	return nil
}

// AddHistory implements quota.HistoryStore. Deltas are applied in key
// order, so that concurrent flushes from several processes cannot
// deadlock; days never go below zero.
func (db *DB) AddHistory(ctx context.Context, deltas []quota.HistoryDelta) error {
	sorted := make([]quota.HistoryDelta, len(deltas))
	copy(sorted, deltas)
	sortDeltas(sorted)
	const q = `
		INSERT INTO usage_history AS h (customer_id, metric, day, used, overage, denied)
		VALUES ($1, $2, $3, GREATEST($4::bigint, 0), GREATEST($5::bigint, 0), GREATEST($6::bigint, 0))
		ON CONFLICT (customer_id, day, metric) DO UPDATE
		SET used    = GREATEST(h.used + $4::bigint, 0),
		    overage = GREATEST(h.overage + $5::bigint, 0),
		    denied  = GREATEST(h.denied + $6::bigint, 0)`
	b := &pgx.Batch{}
	for _, d := range sorted {
		b.Queue(q, d.Customer, d.Metric, d.Date, d.Used, d.Overage, d.Denied)
	}
	if err := db.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("add history: %w", mapErr(err))
	}
	return nil
}

// FindHistory implements quota.HistoryStore.
func (db *DB) FindHistory(ctx context.Context, customer, metric string, from, to time.Time) ([]quota.Day, error) {
	const q = `
		SELECT day, metric, used, overage, denied FROM usage_history
		WHERE customer_id = $1 AND ($2 = '' OR metric = $2) AND day BETWEEN $3 AND $4
		ORDER BY day, metric`
	rows, err := db.pool.Query(ctx, q, customer, metric, from, to)
	if err != nil {
		return nil, fmt.Errorf("find history: %w", mapErr(err))
	}
	days, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (quota.Day, error) {
		var d quota.Day
		err := row.Scan(&d.Date, &d.Metric, &d.Used, &d.Overage, &d.Denied)
		d.Date = time.Date(d.Date.Year(), d.Date.Month(), d.Date.Day(), 0, 0, 0, 0, time.UTC)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("scan history: %w", mapErr(err))
	}
	return days, nil
}

func sortDeltas(d []quota.HistoryDelta) {
	slices.SortFunc(d, func(a, b quota.HistoryDelta) int {
		return cmp.Or(cmp.Compare(a.Customer, b.Customer), a.Date.Compare(b.Date), cmp.Compare(a.Metric, b.Metric))
	})
}

var (
	_ quota.Ledger       = (*DB)(nil)
	_ quota.HistoryStore = (*DB)(nil)
)
