package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/tiers"
)

type metricRow struct {
	Key         string
	Description string
	Capacity    map[string]int64
	// CreditSchema and Draws decode from the JSON built by metricColumns.
	CreditSchema []creditRateRow
	Draws        *creditRateRow
	Version      int64
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// creditRateRow is a row of credit_rates as metricColumns builds it.
type creditRateRow struct {
	Pool    string `json:"pool"`
	Metric  string `json:"metric"`
	Credits int64  `json:"credits"`
	Per     int64  `json:"per"`
}

func toMetric(r metricRow) tiers.Metric {
	m := tiers.Metric{
		Key: r.Key, Description: r.Description, Capacity: make(map[tiers.Window]int64, len(r.Capacity)),
		CreditSchema: make([]tiers.CreditRate, len(r.CreditSchema)),
		Version:      r.Version, CreatedAt: utc(r.CreatedAt), UpdatedAt: utc(r.UpdatedAt),
	}
	for name, v := range r.Capacity {
		if w, ok := tiers.ParseWindow(name); ok {
			m.Capacity[w] = v
		}
	}
	for i, c := range r.CreditSchema {
		m.CreditSchema[i] = tiers.CreditRate{Metric: c.Metric, Credits: c.Credits, Per: c.Per}
	}
	if r.Draws != nil {
		m.Draws = &tiers.Draw{Pool: r.Draws.Pool, Credits: r.Draws.Credits, Per: r.Draws.Per}
	}
	return m
}

// metricColumns selects a metricRow from metrics m: its own credit schema,
// if it is a pool, and the rate of the pool it draws on, if any.
const metricColumns = `
	m.key, m.description,
	coalesce((SELECT jsonb_object_agg(c.quota_window, c.capacity)
	          FROM metric_capacities c WHERE c.metric = m.key), '{}') AS capacity,
	coalesce((SELECT jsonb_agg(jsonb_build_object('metric', r.metric, 'credits', r.credits, 'per', r.per)
	                           ORDER BY r.position)
	          FROM credit_rates r WHERE r.pool = m.key), '[]') AS credit_schema,
	-- At most one: credit_rates_one_pool.
	(SELECT jsonb_build_object('pool', r.pool, 'credits', r.credits, 'per', r.per)
	 FROM credit_rates r WHERE r.metric = m.key) AS draws,
	m.version, m.created_at, m.updated_at`

func findMetric(ctx context.Context, q querier, key string, lock bool) (tiers.Metric, error) {
	sql := `SELECT ` + metricColumns + ` FROM metrics m WHERE m.key = $1`
	if lock {
		sql += ` FOR UPDATE OF m`
	}
	return findOne(ctx, q, sql, tiers.ErrMetricNotFound, toMetric, key)
}

// FindMetric returns the metric key, with the pool it draws on (Draws).
func (cat *Catalog) FindMetric(ctx context.Context, key string) (tiers.Metric, error) {
	m, err := findMetric(ctx, cat.core.pool, key, false)
	if err != nil {
		return tiers.Metric{}, fmt.Errorf("find metric[%s]: %w", key, mapErr(err))
	}
	return m, nil
}

// FindMetrics returns one page of metrics ordered by key.
func (cat *Catalog) FindMetrics(ctx context.Context, page tiers.Page) ([]tiers.Metric, bool, error) {
	const q = `SELECT ` + metricColumns + ` FROM metrics m WHERE m.key > $1 ORDER BY m.key LIMIT $2`
	return findPage(ctx, cat.core.pool, "metrics", page.Limit, toMetric, q, page.After)
}

// PutMetric creates or replaces a metric, its capacities and its credit
// schema. A schema that breaks the rules of credit pools with the other
// metrics (tiers.CheckCreditPools) is a *tiers.ValidationError.
func (cat *Catalog) PutMetric(ctx context.Context, w tiers.Write, m tiers.Metric) (tiers.Metric, bool, error) {
	return put(ctx, cat.core, w, putSteps[tiers.Metric]{
		find: func(ctx context.Context, tx pgx.Tx, lock bool) (tiers.Metric, error) {
			return findMetric(ctx, tx, m.Key, lock)
		},
		notFound: tiers.ErrMetricNotFound,
		version:  func(m tiers.Metric) int64 { return m.Version },
		write: func(ctx context.Context, tx pgx.Tx, _ tiers.Metric, exists bool) error {
			const update = `UPDATE metrics SET description = $2, version = version + 1, updated_at = $3 WHERE key = $1`
			const insert = `
				INSERT INTO metrics (key, description, created_at, updated_at) VALUES ($1, $2, $3, $3)
				ON CONFLICT (key) DO NOTHING`
			if err := upsert(ctx, tx, exists, update, insert, m.Key, m.Description, w.At); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM metric_capacities WHERE metric = $1`, m.Key); err != nil {
				return err
			}
			for win, capacity := range m.Capacity {
				const q = `INSERT INTO metric_capacities (metric, quota_window, capacity) VALUES ($1, $2, $3)`
				if _, err := tx.Exec(ctx, q, m.Key, win.String(), capacity); err != nil {
					return err
				}
			}
			if err := checkCreditPools(ctx, tx, m); err != nil {
				return err
			}
			return replaceCreditSchema(ctx, tx, m)
		},
		resource: "metrics/" + m.Key,
		notify:   NotifyMetric,
		key:      m.Key,
	})
}

// checkCreditPools returns a *tiers.ValidationError unless m's credit
// schema keeps the rules of credit pools with the metrics as tx sees them.
// m is locked already (FOR UPDATE), so no pool can name it meanwhile; the
// metrics its schema names are locked against becoming pools (FOR KEY
// SHARE conflicts with their writers' FOR UPDATE) or going away. Two pools
// that name one metric at once meet at credit_rates_one_pool.
func checkCreditPools(ctx context.Context, tx pgx.Tx, m tiers.Metric) error {
	if len(m.CreditSchema) == 0 {
		return nil
	}
	names := make([]string, len(m.CreditSchema))
	for i, r := range m.CreditSchema {
		names[i] = r.Metric
	}
	const lock = `SELECT 1 FROM metrics WHERE key = ANY($1) FOR KEY SHARE`
	if _, err := tx.Exec(ctx, lock, names); err != nil {
		return err
	}
	// Metrics are few: the rules read them all.
	const q = `SELECT ` + metricColumns + ` FROM metrics m`
	rows, err := tx.Query(ctx, q)
	if err != nil {
		return err
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[metricRow])
	if err != nil {
		return err
	}
	metrics := make(map[string]tiers.Metric, len(list))
	for _, r := range list {
		metrics[r.Key] = toMetric(r)
	}
	return tiers.CheckCreditPools(m, metrics)
}

// replaceCreditSchema writes m's credit schema in place of the one it had.
func replaceCreditSchema(ctx context.Context, tx pgx.Tx, m tiers.Metric) error {
	const deleteRates = `DELETE FROM credit_rates WHERE pool = $1`
	if _, err := tx.Exec(ctx, deleteRates, m.Key); err != nil {
		return err
	}
	if len(m.CreditSchema) == 0 {
		return nil
	}
	n := len(m.CreditSchema)
	var (
		metrics   = make([]string, n)
		credits   = make([]int64, n)
		pers      = make([]int64, n)
		positions = make([]int16, n)
	)
	for i, r := range m.CreditSchema {
		metrics[i], credits[i], pers[i], positions[i] = r.Metric, r.Credits, r.Per, int16(i)
	}
	const q = `
		INSERT INTO credit_rates (pool, metric, credits, per, position)
		SELECT $1, * FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::smallint[])`
	_, err := tx.Exec(ctx, q, m.Key, metrics, credits, pers, positions)
	if isCode(err, "23505") || isCode(err, "23503") {
		// unique_violation: another pool named one of the metrics
		// meanwhile; foreign_key_violation: one went away. Run again:
		// checkCreditPools then says which.
		return errRetry
	}
	return err
}

// DeleteMetric deletes a metric unless a plan or an override uses it, or a
// credit pool's schema names it; a pool's schema goes with it.
func (cat *Catalog) DeleteMetric(ctx context.Context, w tiers.Write, key string) error {
	return cat.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		old, err := findMetric(ctx, tx, key, true)
		if err := checkDelete(w, err, tiers.ErrMetricNotFound, old.Version); err != nil {
			return err
		}
		const inUse = `
			SELECT EXISTS (SELECT 1 FROM plan_limits WHERE metric = $1)
			    OR EXISTS (SELECT 1 FROM overrides WHERE metric = $1)
			    OR EXISTS (SELECT 1 FROM credit_rates WHERE metric = $1)
			    -- an older version of a plan that customers are still on
			    OR EXISTS (SELECT 1 FROM plan_versions v
			               JOIN plan_versions g ON g.plan_key = v.plan_key AND g.customers_on = v.version
			               JOIN customers c ON c.plan_key = g.plan_key AND c.plan_version = g.version
			               WHERE v.limits @> jsonb_build_array(jsonb_build_object('metric', $1::text)))`
		var used bool
		if err := tx.QueryRow(ctx, inUse, key).Scan(&used); err != nil {
			return err
		}
		if used {
			return tiers.ErrMetricInUse
		}
		if _, err := tx.Exec(ctx, `DELETE FROM metrics WHERE key = $1`, key); err != nil {
			if isCode(err, "23503") { // foreign_key_violation: a limit appeared meanwhile
				return tiers.ErrMetricInUse
			}
			return err
		}
		e := auditEntry{actor: w.Actor, action: tiers.ActionDelete, resource: "metrics/" + key, before: old}
		return cat.core.auditAndNotify(ctx, tx, w.At, e, NotifyMetric, key)
	})
}
