package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/tiers"
)

// overrideRow is an override as overrideColumns selects it, or as
// to_jsonb makes a JSON object of those columns (see FindAccounts).
type overrideRow struct {
	CustomerID         string     `json:"customer_id"`
	Metric             string     `json:"metric"`
	QuotaWindow        string     `json:"quota_window"`
	LimitValue         int64      `json:"limit_value"`
	Mode               string     `json:"mode"`
	OveragePercent     int32      `json:"overage_percent"`
	OveragePriceMicros *int64     `json:"overage_price_micros"`
	Ceiling            *int64     `json:"ceiling"`
	Algorithm          *string    `json:"algorithm"`
	Burst              *int64     `json:"burst"`
	ExpiresAt          *time.Time `json:"expires_at"`
	Reason             string     `json:"reason"`
	Version            int64      `json:"version"`
	CreatedAt          time.Time  `json:"created_at"`
	UpdatedAt          time.Time  `json:"updated_at"`
}

func toOverride(r overrideRow) tiers.Override {
	w, _ := tiers.ParseWindow(r.QuotaWindow) // the schema admits only valid windows
	m, _ := tiers.ParseMode(r.Mode)
	var a tiers.Algorithm // null: the default
	if r.Algorithm != nil {
		a, _ = tiers.ParseAlgorithm(*r.Algorithm)
	}
	return tiers.Override{
		Customer: r.CustomerID,
		Limit: tiers.Limit{
			Metric: r.Metric, Window: w, Limit: r.LimitValue, Mode: m,
			OveragePercent: int64(r.OveragePercent), OveragePriceMicros: r.OveragePriceMicros, Ceiling: r.Ceiling,
			Algorithm: a, Burst: r.Burst,
		},
		ExpiresAt: utcPtr(r.ExpiresAt), Reason: r.Reason,
		Version: r.Version, CreatedAt: utc(r.CreatedAt), UpdatedAt: utc(r.UpdatedAt),
	}
}

const overrideColumns = `
	o.customer_id, o.metric, o.quota_window, o.limit_value, o.mode, o.overage_percent,
	o.overage_price_micros, o.ceiling, o.algorithm, o.burst, o.expires_at, o.reason, o.version, o.created_at, o.updated_at`

// findOverrides lists a customer's overrides by metric, then window, after
// (afterMetric, afterRank); limit 0 means all.
func findOverrides(ctx context.Context, q querier, customer, afterMetric string, afterRank, limit int) ([]tiers.Override, error) {
	const sql = `SELECT ` + overrideColumns + `
		FROM overrides o
		WHERE o.customer_id = $1 AND (o.metric, window_rank(o.quota_window)) > ($2, $3)
		ORDER BY o.metric, window_rank(o.quota_window)
		LIMIT $4`
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := q.Query(ctx, sql, customer, afterMetric, afterRank, lim)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[overrideRow])
	if err != nil {
		return nil, err
	}
	out := make([]tiers.Override, len(list))
	for i, r := range list {
		out[i] = toOverride(r)
	}
	return out, nil
}

func findOverride(ctx context.Context, q querier, customer string, k tiers.LimitKey, lock bool) (tiers.Override, error) {
	sql := `SELECT ` + overrideColumns + ` FROM overrides o
		WHERE o.customer_id = $1 AND o.metric = $2 AND o.quota_window = $3`
	if lock {
		sql += ` FOR UPDATE`
	}
	return findOne(ctx, q, sql, tiers.ErrOverrideNotFound, toOverride, customer, k.Metric, k.Window.String())
}

// OverrideCursor is the page position after an override: its metric and
// window.
func OverrideCursor(o tiers.Override) string { return o.Metric + "/" + o.Window.String() }

func parseOverrideCursor(s string) (metric string, rank int) {
	if s == "" {
		return "", 0
	}
	m, w, _ := strings.Cut(s, "/")
	win, _ := tiers.ParseWindow(w)
	return m, int(win)
}

// requireCustomer returns tiers.ErrCustomerNotFound unless the customer
// exists; with lock, it keeps the customer from being deleted until tx
// ends (writes only: read-only transactions cannot lock).
func requireCustomer(ctx context.Context, q querier, id string, lock bool) error {
	sql := `SELECT EXISTS (SELECT 1 FROM customers WHERE id = $1)`
	if lock {
		sql = `SELECT EXISTS (SELECT 1 FROM customers WHERE id = $1 FOR KEY SHARE)`
	}
	var ok bool
	if err := q.QueryRow(ctx, sql, id).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return tiers.ErrCustomerNotFound
	}
	return nil
}

// requireMetric returns tiers.ErrMetricNotFound unless the metric is
// declared; with lock, it keeps the metric from being deleted until tx
// ends.
func requireMetric(ctx context.Context, q querier, key string, lock bool) error {
	sql := `SELECT EXISTS (SELECT 1 FROM metrics WHERE key = $1)`
	if lock {
		sql = `SELECT EXISTS (SELECT 1 FROM metrics WHERE key = $1 FOR KEY SHARE)`
	}
	var ok bool
	if err := q.QueryRow(ctx, sql, key).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return tiers.ErrMetricNotFound
	}
	return nil
}

// FindOverride returns one override of a customer.
func (db *DB) FindOverride(ctx context.Context, customer string, k tiers.LimitKey) (tiers.Override, error) {
	var o tiers.Override
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := requireCustomer(ctx, tx, customer, false); err != nil {
			return err
		}
		if err := requireMetric(ctx, tx, k.Metric, false); err != nil {
			return err
		}
		var err error
		o, err = findOverride(ctx, tx, customer, k, false)
		return err
	})
	if err != nil {
		return tiers.Override{}, fmt.Errorf("find override[%s/%s/%s]: %w", customer, k.Metric, k.Window, mapErr(err))
	}
	return o, nil
}

// FindOverrides returns one page of a customer's overrides, by metric then
// window; page.After is an OverrideCursor.
func (db *DB) FindOverrides(ctx context.Context, customer string, page tiers.Page) ([]tiers.Override, bool, error) {
	var list []tiers.Override
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := requireCustomer(ctx, tx, customer, false); err != nil {
			return err
		}
		metric, rank := parseOverrideCursor(page.After)
		var err error
		list, err = findOverrides(ctx, tx, customer, metric, rank, page.Limit+1)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("find overrides[%s]: %w", customer, mapErr(err))
	}
	more := len(list) > page.Limit
	if more {
		list = list[:page.Limit]
	}
	return list, more, nil
}

// PutOverride creates or replaces a customer's override.
func (db *DB) PutOverride(ctx context.Context, w tiers.Write, o tiers.Override) (tiers.Override, bool, error) {
	return put(ctx, db, w, putSteps[tiers.Override]{
		before: func(ctx context.Context, tx pgx.Tx) error {
			if err := requireCustomer(ctx, tx, o.Customer, true); err != nil {
				return err
			}
			return requireMetric(ctx, tx, o.Metric, true)
		},
		find: func(ctx context.Context, tx pgx.Tx, lock bool) (tiers.Override, error) {
			return findOverride(ctx, tx, o.Customer, o.Key(), lock)
		},
		notFound: tiers.ErrOverrideNotFound,
		version:  func(o tiers.Override) int64 { return o.Version },
		write: func(ctx context.Context, tx pgx.Tx, _ tiers.Override, exists bool) error {
			const update = `
				UPDATE overrides SET limit_value = $4, mode = $5, overage_percent = $6, overage_price_micros = $7,
				       ceiling = $8, algorithm = $12, burst = $13, expires_at = $9, reason = $10,
				       version = version + 1, updated_at = $11
				WHERE customer_id = $1 AND metric = $2 AND quota_window = $3`
			const insert = `
				INSERT INTO overrides (customer_id, metric, quota_window, limit_value, mode, overage_percent,
				                       overage_price_micros, ceiling, expires_at, reason, created_at, updated_at,
				                       algorithm, burst)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12, $13)
				ON CONFLICT (customer_id, metric, quota_window) DO NOTHING`
			return upsert(ctx, tx, exists, update, insert, o.Customer, o.Metric, o.Window.String(), o.Limit.Limit,
				o.Mode.String(), o.OveragePercent, o.OveragePriceMicros, o.Ceiling, o.ExpiresAt, o.Reason, w.At,
				algorithmColumn(o.Limit), o.Burst)
		},
		resource: fmt.Sprintf("customers/%s/overrides/%s/%s", o.Customer, o.Metric, o.Window),
		customer: o.Customer,
		notify:   NotifyCustomer,
		key:      o.Customer,
	})
}

// DeleteOverride deletes a customer's override.
func (db *DB) DeleteOverride(ctx context.Context, w tiers.Write, customer string, k tiers.LimitKey) error {
	resource := fmt.Sprintf("customers/%s/overrides/%s/%s", customer, k.Metric, k.Window)
	return db.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if err := requireCustomer(ctx, tx, customer, true); err != nil {
			return err
		}
		if err := requireMetric(ctx, tx, k.Metric, true); err != nil {
			return err
		}
		old, err := findOverride(ctx, tx, customer, k, true)
		if errors.Is(err, tiers.ErrOverrideNotFound) && w.IfMatch.Set {
			return tiers.ErrPreconditionFailed
		}
		if err != nil {
			return err
		}
		if err := w.IfMatch.Check(true, old.Version); err != nil {
			return err
		}
		const q = `DELETE FROM overrides WHERE customer_id = $1 AND metric = $2 AND quota_window = $3`
		if _, err := tx.Exec(ctx, q, customer, k.Metric, k.Window.String()); err != nil {
			return err
		}
		e := auditEntry{actor: w.Actor, action: tiers.ActionDelete, resource: resource, customer: customer, before: old}
		if err := recordAudit(ctx, tx, w.At, e); err != nil {
			return err
		}
		return db.notify(ctx, tx, NotifyCustomer, customer)
	})
}

var _ tiers.Store = (*DB)(nil)
