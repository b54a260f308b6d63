package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/tiers"
)

type metricRow struct {
	Key         string
	Description string
	Capacity    map[string]int64
	Version     int64
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

func toMetric(r metricRow) tiers.Metric {
	m := tiers.Metric{
		Key: r.Key, Description: r.Description, Capacity: make(map[tiers.Window]int64, len(r.Capacity)),
		Version: r.Version, CreatedAt: utc(r.CreatedAt), UpdatedAt: utc(r.UpdatedAt),
	}
	for name, v := range r.Capacity {
		if w, ok := tiers.ParseWindow(name); ok {
			m.Capacity[w] = v
		}
	}
	return m
}

// metricColumns selects a metricRow from metrics m.
const metricColumns = `
	m.key, m.description,
	coalesce((SELECT jsonb_object_agg(c.quota_window, c.capacity)
	          FROM metric_capacities c WHERE c.metric = m.key), '{}') AS capacity,
	m.version, m.created_at, m.updated_at`

func findMetric(ctx context.Context, q querier, key string, lock bool) (tiers.Metric, error) {
	sql := `SELECT ` + metricColumns + ` FROM metrics m WHERE m.key = $1`
	if lock {
		sql += ` FOR UPDATE OF m`
	}
	return findOne(ctx, q, sql, tiers.ErrMetricNotFound, toMetric, key)
}

// FindMetric returns the metric key.
func (db *DB) FindMetric(ctx context.Context, key string) (tiers.Metric, error) {
	m, err := findMetric(ctx, db.pool, key, false)
	if err != nil {
		return tiers.Metric{}, fmt.Errorf("find metric[%s]: %w", key, mapErr(err))
	}
	return m, nil
}

// FindMetrics returns one page of metrics ordered by key.
func (db *DB) FindMetrics(ctx context.Context, page tiers.Page) ([]tiers.Metric, bool, error) {
	const q = `SELECT ` + metricColumns + ` FROM metrics m WHERE m.key > $1 ORDER BY m.key LIMIT $2`
	return findPage(ctx, db.pool, "metrics", page.Limit, toMetric, q, page.After)
}

// PutMetric creates or replaces a metric and its capacities.
func (db *DB) PutMetric(ctx context.Context, w tiers.Write, m tiers.Metric) (tiers.Metric, bool, error) {
	return put(ctx, db, w, putSteps[tiers.Metric]{
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
			return nil
		},
		resource: "metrics/" + m.Key,
		notify:   NotifyMetric,
		key:      m.Key,
	})
}

// DeleteMetric deletes a metric unless a plan or an override uses it.
func (db *DB) DeleteMetric(ctx context.Context, w tiers.Write, key string) error {
	return db.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		old, err := findMetric(ctx, tx, key, true)
		if errors.Is(err, tiers.ErrMetricNotFound) && w.IfMatch.Set {
			return tiers.ErrPreconditionFailed
		}
		if err != nil {
			return err
		}
		if err := w.IfMatch.Check(true, old.Version); err != nil {
			return err
		}
		const inUse = `
			SELECT EXISTS (SELECT 1 FROM plan_limits WHERE metric = $1)
			    OR EXISTS (SELECT 1 FROM overrides WHERE metric = $1)`
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
		if err := recordAudit(ctx, tx, w.At, e); err != nil {
			return err
		}
		return db.notify(ctx, tx, NotifyMetric, key)
	})
}
