package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/billing"
	"github.com/quotad/quotad/internal/tiers"
)

type customerRow struct {
	ID                string
	PlanKey           string
	Name              string
	BillingAnchorDay  *int16
	AnchorPinnedStart *time.Time
	AnchorPinnedEnd   *time.Time
	TimeZone          string
	DayPinnedStart    *time.Time
	DayPinnedEnd      *time.Time
	WeekPinnedStart   *time.Time
	WeekPinnedEnd     *time.Time
	Metadata          []byte
	Version           int64
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

func toCustomer(r customerRow) tiers.Customer {
	c := tiers.Customer{
		ID: r.ID, Plan: r.PlanKey, Name: r.Name, Metadata: json.RawMessage(r.Metadata),
		Version: r.Version, CreatedAt: utc(r.CreatedAt), UpdatedAt: utc(r.UpdatedAt),
	}
	if r.BillingAnchorDay != nil {
		d := int(*r.BillingAnchorDay)
		c.BillingAnchorDay = &d
		c.Anchor.Day = d
	}
	c.Anchor.PinnedMonth = toPin(r.AnchorPinnedStart, r.AnchorPinnedEnd)
	c.Anchor.PinnedDay = toPin(r.DayPinnedStart, r.DayPinnedEnd)
	c.Anchor.PinnedWeek = toPin(r.WeekPinnedStart, r.WeekPinnedEnd)
	// The zone is resolved here, once per load: the check path reads
	// Anchor.Loc and never resolves a name.
	c.TimeZone, c.Anchor.Loc = r.TimeZone, tiers.ZoneOf(r.TimeZone)
	return c
}

// toPin returns the pin of a pair of nullable columns.
func toPin(start, end *time.Time) tiers.Pin {
	if start == nil || end == nil {
		return tiers.Pin{}
	}
	return tiers.Pin{Start: utc(*start), End: utc(*end)}
}

// fromPin returns the nullable columns of p.
func fromPin(p tiers.Pin) (start, end *time.Time) {
	if !p.Set() {
		return nil, nil
	}
	return &p.Start, &p.End
}

const customerColumns = `
	c.id, c.plan_key, c.name, c.billing_anchor_day, c.anchor_pinned_start, c.anchor_pinned_end,
	c.time_zone, c.day_pinned_start, c.day_pinned_end, c.week_pinned_start, c.week_pinned_end,
	c.metadata, c.version, c.created_at, c.updated_at`

func findCustomer(ctx context.Context, q querier, id string, lock bool) (tiers.Customer, error) {
	sql := `SELECT ` + customerColumns + ` FROM customers c WHERE c.id = $1`
	if lock {
		sql += ` FOR UPDATE`
	}
	return findOne(ctx, q, sql, tiers.ErrCustomerNotFound, toCustomer, id)
}

// FindCustomer returns the customer id.
func (db *DB) FindCustomer(ctx context.Context, id string) (tiers.Customer, error) {
	c, err := findCustomer(ctx, db.pool, id, false)
	if err != nil {
		return tiers.Customer{}, fmt.Errorf("find customer[%s]: %w", id, mapErr(err))
	}
	return c, nil
}

// FindCustomers returns one page of customers ordered by id.
func (db *DB) FindCustomers(ctx context.Context, f tiers.CustomerFilter) ([]tiers.Customer, bool, error) {
	const q = `SELECT ` + customerColumns + `
		FROM customers c
		WHERE c.id > $1 AND ($2 = '' OR c.plan_key = $2)
		  -- strpos, not LIKE: the search text is matched literally, its % and _ included
		  AND ($3 = '' OR strpos(lower(c.id), lower($3)) > 0 OR strpos(lower(c.name), lower($3)) > 0)
		ORDER BY c.id
		LIMIT $4`
	return findPage(ctx, db.pool, "customers", f.Page.Limit, toCustomer, q, f.Page.After, f.Plan, f.Query)
}

// PutCustomer creates or replaces a customer. A changed billing anchor day
// or time zone applies from the next window (see tiers.Anchor). A creation beyond the
// customers' cap (SetCaps) is a *tiers.CapError.
func (db *DB) PutCustomer(ctx context.Context, w tiers.Write, c tiers.Customer) (tiers.Customer, bool, error) {
	return put(ctx, db, w, putSteps[tiers.Customer]{
		find: func(ctx context.Context, tx pgx.Tx, lock bool) (tiers.Customer, error) {
			return findCustomer(ctx, tx, c.ID, lock)
		},
		notFound: tiers.ErrCustomerNotFound,
		version:  func(c tiers.Customer) int64 { return c.Version },
		write: func(ctx context.Context, tx pgx.Tx, old tiers.Customer, exists bool) error {
			var planExists bool
			const planQ = `SELECT EXISTS (SELECT 1 FROM plans WHERE key = $1 FOR KEY SHARE)`
			if err := tx.QueryRow(ctx, planQ, c.Plan).Scan(&planExists); err != nil {
				return err
			}
			if !planExists {
				return tiers.Invalid("plan", fmt.Sprintf("plan %q does not exist", c.Plan))
			}
			anchor := c.Anchor
			if exists {
				anchor = old.Anchor.Change(c.Anchor, w.At)
			}
			var day *int16
			if anchor.Day > 0 {
				d := int16(anchor.Day)
				day = &d
			}
			monthStart, monthEnd := fromPin(anchor.PinnedMonth)
			dayStart, dayEnd := fromPin(anchor.PinnedDay)
			weekStart, weekEnd := fromPin(anchor.PinnedWeek)
			const update = `
				UPDATE customers SET plan_key = $2, name = $3, billing_anchor_day = $4,
				       anchor_pinned_start = $5, anchor_pinned_end = $6, metadata = $7,
				       version = version + 1, updated_at = $8, time_zone = $9,
				       day_pinned_start = $10, day_pinned_end = $11, week_pinned_start = $12, week_pinned_end = $13
				WHERE id = $1`
			const insert = `
				INSERT INTO customers (id, plan_key, name, billing_anchor_day, anchor_pinned_start,
				                       anchor_pinned_end, metadata, created_at, updated_at, time_zone,
				                       day_pinned_start, day_pinned_end, week_pinned_start, week_pinned_end)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10, $11, $12, $13)
				ON CONFLICT (id) DO NOTHING`
			if err := upsert(ctx, tx, exists, update, insert, c.ID, c.Plan, c.Name, day, monthStart, monthEnd,
				[]byte(c.Metadata), w.At, anchor.ZoneName(), dayStart, dayEnd, weekStart, weekEnd); err != nil || exists {
				return err
			}
			return db.checkCount(ctx, tx, tiers.CapCustomers, "customers")
		},
		after: func(ctx context.Context, tx pgx.Tx, saved tiers.Customer, _ bool) error {
			plan, err := findPlan(ctx, tx, c.Plan, false)
			if err != nil {
				return err
			}
			return recordTerms(ctx, tx, w.At, billing.TermsOf(saved, plan))
		},
		resource: "customers/" + c.ID,
		customer: c.ID,
		notify:   NotifyCustomer,
		key:      c.ID,
	})
}

// DeleteCustomer deletes a customer; its overrides and live counters go with
// it (foreign keys cascade), its usage history stays.
func (db *DB) DeleteCustomer(ctx context.Context, w tiers.Write, id string) error {
	return db.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		old, err := findCustomer(ctx, tx, id, true)
		if errors.Is(err, tiers.ErrCustomerNotFound) && w.IfMatch.Set {
			return tiers.ErrPreconditionFailed
		}
		if err != nil {
			return err
		}
		if err := w.IfMatch.Check(true, old.Version); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM customers WHERE id = $1`, id); err != nil {
			return err
		}
		if err := closeTerms(ctx, tx, w.At, id); err != nil {
			return err
		}
		e := auditEntry{actor: w.Actor, action: tiers.ActionDelete, resource: "customers/" + id,
			customer: id, before: old}
		if err := recordAudit(ctx, tx, w.At, e); err != nil {
			return err
		}
		if err := db.notify(ctx, tx, NotifyForget, id); err != nil {
			return err
		}
		return db.notify(ctx, tx, NotifyCustomer, id)
	})
}

// FindAccount returns a customer, its plan and all its overrides (of
// limits and of features), read in one snapshot.
func (db *DB) FindAccount(ctx context.Context, id string) (tiers.Account, error) {
	var a tiers.Account
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			var err error
			if a.Customer, err = findCustomer(ctx, tx, id, false); err != nil {
				return err
			}
			if a.Plan, err = findPlan(ctx, tx, a.Customer.Plan, false); err != nil {
				return err
			}
			if a.Overrides, err = findOverrides(ctx, tx, id, tiers.LimitKey{}, 0); err != nil {
				return err
			}
			a.FeatureOverrides, err = findFeatureOverrides(ctx, tx, id)
			return err
		})
	if err != nil {
		return tiers.Account{}, fmt.Errorf("find account[%s]: %w", id, mapErr(err))
	}
	return a, nil
}

// accountRow is a customer with its plan (on the first of the plan's
// customers only) and its overrides, as FindAccounts selects them.
type accountRow struct {
	customerRow
	Plan      *planRow
	Overrides []overrideRow
	Features  []featureOverrideRow
	Grants    []tiers.GrantTerm
}

// FindAccounts implements tiers.CacheSource: the accounts of those of ids
// that exist, in one statement, so one snapshot and one round trip
// however many ids (the cache sends at most tiers.DefaultAccountBatch).
func (db *DB) FindAccounts(ctx context.Context, ids []string) (map[string]tiers.Account, error) {
	if len(ids) == 0 {
		return map[string]tiers.Account{}, nil
	}
	const q = `SELECT ` + customerColumns + `,
		       -- Each plan once, with the first of its customers: a batch
		       -- has many customers and few plans.
		       CASE WHEN row_number() OVER (PARTITION BY c.plan_key ORDER BY c.id) = 1 THEN
		           (SELECT to_jsonb(pr) FROM (SELECT ` + planColumns + `
		                                      FROM plans p WHERE p.key = c.plan_key) pr)
		       END AS plan,
		       -- All of them, expired ones too, in findOverrides' order.
		       (SELECT coalesce(jsonb_agg(to_jsonb(orow) ORDER BY orow.metric, window_rank(orow.quota_window)), '[]')
		        FROM (SELECT ` + overrideColumns + `
		              FROM overrides o WHERE o.customer_id = c.id) orow) AS overrides,
		       (SELECT coalesce(jsonb_agg(to_jsonb(frow) ORDER BY frow.feature), '[]')
		        FROM (SELECT ` + featureOverrideColumns + `
		              FROM feature_overrides f WHERE f.customer_id = c.id) frow) AS features,
		       -- The metrics and expiries of its grants with units left.
		       (SELECT coalesce(jsonb_agg(jsonb_build_object('metric', g.metric, 'expires_at', g.expires_at)), '[]')
		        FROM grants g WHERE g.customer_id = c.id AND g.remaining > 0 AND g.voided_at IS NULL) AS grants
		FROM customers c
		WHERE c.id = ANY($1)`
	rows, err := db.pool.Query(ctx, q, ids)
	if err != nil {
		return nil, fmt.Errorf("find accounts[%d ids]: %w", len(ids), mapErr(err))
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[accountRow])
	if err != nil {
		return nil, fmt.Errorf("find accounts[%d ids]: %w", len(ids), mapErr(err))
	}
	plans := make(map[string]tiers.Plan)
	for _, r := range list {
		if r.Plan != nil {
			plans[r.Plan.Key] = toPlan(*r.Plan)
		}
	}
	out := make(map[string]tiers.Account, len(list))
	for _, r := range list {
		a := tiers.Account{Customer: toCustomer(r.customerRow), Plan: plans[r.PlanKey],
			Overrides: make([]tiers.Override, len(r.Overrides))}
		for i, o := range r.Overrides {
			a.Overrides[i] = toOverride(o)
		}
		a.FeatureOverrides = make([]tiers.FeatureOverride, len(r.Features))
		for i, f := range r.Features {
			a.FeatureOverrides[i] = toFeatureOverride(f)
		}
		if len(r.Grants) > 0 {
			a.Customer.Grants = r.Grants
		}
		out[r.ID] = a
	}
	return out, nil
}

var _ tiers.CacheSource = (*DB)(nil)
