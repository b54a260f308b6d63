package store

import (
	"context"
	"fmt"
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
	Per                string     `json:"per"`
	RolloverMax        *int64     `json:"rollover_max"`
	ExpiresAt          *time.Time `json:"expires_at"`
	Reason             string     `json:"reason"`
	Version            int64      `json:"version"`
	CreatedAt          time.Time  `json:"created_at"`
	UpdatedAt          time.Time  `json:"updated_at"`
}

func toOverride(r overrideRow) tiers.Override {
	w, _ := tiers.ParseWindow(r.QuotaWindow) // the schema admits only valid windows
	m, _ := tiers.ParseMode(r.Mode)
	per, _ := tiers.ParsePer(r.Per)
	var a tiers.Algorithm // null: the default
	if r.Algorithm != nil {
		a, _ = tiers.ParseAlgorithm(*r.Algorithm)
	}
	return tiers.Override{
		Customer: r.CustomerID,
		Limit: tiers.Limit{
			Metric: r.Metric, Window: w, Limit: r.LimitValue, Mode: m,
			OveragePercent: int64(r.OveragePercent), OveragePriceMicros: r.OveragePriceMicros, Ceiling: r.Ceiling,
			Algorithm: a, Burst: r.Burst, Per: per, Rollover: toRollover(r.RolloverMax),
		},
		ExpiresAt: utcPtr(r.ExpiresAt), Reason: r.Reason,
		Version: r.Version, CreatedAt: utc(r.CreatedAt), UpdatedAt: utc(r.UpdatedAt),
	}
}

const overrideColumns = `
	o.customer_id, o.metric, o.quota_window, o.limit_value, o.mode, o.overage_percent,
	o.overage_price_micros, o.ceiling, o.algorithm, o.burst, o.per, o.rollover_max, o.expires_at, o.reason, o.version,
	o.created_at, o.updated_at`

// findOverrides lists a customer's overrides by metric, then window, then
// per (the customer's before the one per subject: 'customer' < 'subject'),
// after the override on after (the zero key: from the first); limit 0
// means all.
func findOverrides(ctx context.Context, q querier, customer string, after tiers.LimitKey, limit int) ([]tiers.Override, error) {
	const sql = `SELECT ` + overrideColumns + `
		FROM overrides o
		WHERE o.customer_id = $1 AND (o.metric, window_rank(o.quota_window), o.per) > ($2, $3, $4)
		ORDER BY o.metric, window_rank(o.quota_window), o.per
		LIMIT $5`
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	// The zero key sorts before every override: no metric is "".
	return findAll(ctx, q, toOverride, sql, customer, after.Metric, int(after.Window), after.Per.String(), lim)
}

func findOverride(ctx context.Context, q querier, customer string, k tiers.LimitKey, lock bool) (tiers.Override, error) {
	sql := `SELECT ` + overrideColumns + ` FROM overrides o
		WHERE o.customer_id = $1 AND o.metric = $2 AND o.quota_window = $3 AND o.per = $4`
	if lock {
		sql += ` FOR UPDATE`
	}
	return findOne(ctx, q, sql, tiers.ErrOverrideNotFound, toOverride, customer, k.Metric, k.Window.String(), k.Per.String())
}

// overrideResource names an override in the audit log as its URL does.
func overrideResource(customer string, k tiers.LimitKey) string {
	r := fmt.Sprintf("customers/%s/overrides/%s/%s", customer, k.Metric, k.Window)
	if k.Per != tiers.PerCustomer {
		r += "?per=" + k.Per.String()
	}
	return r
}

// requireCustomer returns tiers.ErrCustomerNotFound unless the customer
// exists; with lock, it keeps the customer from being deleted until tx
// ends (writes only: read-only transactions cannot lock).
func requireCustomer(ctx context.Context, q querier, id string, lock bool) error {
	return requireRow(ctx, q, lock, `SELECT EXISTS (SELECT 1 FROM customers WHERE id = $1)`,
		`SELECT EXISTS (SELECT 1 FROM customers WHERE id = $1 FOR KEY SHARE)`, id, tiers.ErrCustomerNotFound)
}

// requireMetric returns tiers.ErrMetricNotFound unless the metric is
// declared; with lock, it keeps the metric from being deleted until tx
// ends.
func requireMetric(ctx context.Context, q querier, key string, lock bool) error {
	return requireRow(ctx, q, lock, `SELECT EXISTS (SELECT 1 FROM metrics WHERE key = $1)`,
		`SELECT EXISTS (SELECT 1 FROM metrics WHERE key = $1 FOR KEY SHARE)`, key, tiers.ErrMetricNotFound)
}

// requireRow returns notFound unless the row that sql (with lock, locked)
// selects with arg exists.
func requireRow(ctx context.Context, q querier, lock bool, sql, locked, arg string, notFound error) error {
	if lock {
		sql = locked
	}
	var ok bool
	if err := q.QueryRow(ctx, sql, arg).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return notFound
	}
	return nil
}

// FindOverride returns one override of a customer.
func (cat *Catalog) FindOverride(ctx context.Context, customer string, k tiers.LimitKey) (tiers.Override, error) {
	var o tiers.Override
	err := pgx.BeginTxFunc(ctx, cat.core.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
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
		return tiers.Override{}, fmt.Errorf("find override[%s/%s]: %w", customer, k, mapErr(err))
	}
	return o, nil
}

// FindOverrides returns one page of a customer's overrides, by metric, then
// window, then per; page.After is the tiers.LimitKey (as its String) of
// the last override of the page before.
func (cat *Catalog) FindOverrides(ctx context.Context, customer string, page tiers.Page) ([]tiers.Override, bool, error) {
	var list []tiers.Override
	err := pgx.BeginTxFunc(ctx, cat.core.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := requireCustomer(ctx, tx, customer, false); err != nil {
			return err
		}
		var after tiers.LimitKey
		if page.After != "" {
			var ok bool
			if after, ok = tiers.ParseLimitKey(page.After); !ok {
				return tiers.Invalid("cursor", "is not a cursor this service returned")
			}
		}
		var err error
		list, err = findOverrides(ctx, tx, customer, after, page.Limit+1)
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
func (cat *Catalog) PutOverride(ctx context.Context, w tiers.Write, o tiers.Override) (tiers.Override, bool, error) {
	return put(ctx, cat.core, w, putSteps[tiers.Override]{
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
				       rollover_max = $15, version = version + 1, updated_at = $11
				WHERE customer_id = $1 AND metric = $2 AND quota_window = $3 AND per = $14`
			const insert = `
				INSERT INTO overrides (customer_id, metric, quota_window, limit_value, mode, overage_percent,
				                       overage_price_micros, ceiling, expires_at, reason, created_at, updated_at,
				                       algorithm, burst, per, rollover_max)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12, $13, $14, $15)
				ON CONFLICT (customer_id, metric, quota_window, per) DO NOTHING`
			return upsert(ctx, tx, exists, update, insert, o.Customer, o.Metric, o.Window.String(), o.Limit.Limit,
				o.Mode.String(), o.OveragePercent, o.OveragePriceMicros, o.Ceiling, o.ExpiresAt, o.Reason, w.At,
				algorithmColumn(o.Limit), o.Burst, o.Per.String(), rolloverColumn(o.Limit))
		},
		resource: overrideResource(o.Customer, o.Key()),
		customer: o.Customer,
		notify:   NotifyCustomer,
		key:      o.Customer,
	})
}

// DeleteOverride deletes a customer's override.
func (cat *Catalog) DeleteOverride(ctx context.Context, w tiers.Write, customer string, k tiers.LimitKey) error {
	resource := overrideResource(customer, k)
	return cat.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if err := requireCustomer(ctx, tx, customer, true); err != nil {
			return err
		}
		if err := requireMetric(ctx, tx, k.Metric, true); err != nil {
			return err
		}
		old, err := findOverride(ctx, tx, customer, k, true)
		if err := checkDelete(w, err, tiers.ErrOverrideNotFound, old.Version); err != nil {
			return err
		}
		const q = `DELETE FROM overrides WHERE customer_id = $1 AND metric = $2 AND quota_window = $3 AND per = $4`
		if _, err := tx.Exec(ctx, q, customer, k.Metric, k.Window.String(), k.Per.String()); err != nil {
			return err
		}
		e := auditEntry{actor: w.Actor, action: tiers.ActionDelete, resource: resource, customer: customer, before: old}
		return cat.core.auditAndNotify(ctx, tx, w.At, e, NotifyCustomer, customer)
	})
}

var _ tiers.Store = (*Catalog)(nil)
