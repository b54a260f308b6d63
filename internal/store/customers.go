package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/tiers"
)

type customerRow struct {
	ID      string
	PlanKey string
	// JoinedVersion is the customers.plan_version column: the version
	// the customer joined its plan at; PlanVersion the version its group
	// is on (see versions.go).
	JoinedVersion     int64
	PlanVersion       int64
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
	Status            string
	StatusReason      string
	ScheduledPlanKey  *string
	ScheduledAt       *time.Time
	TrialPlanKey      *string
	TrialEndsAt       *time.Time
	Version           int64
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

func toCustomer(r customerRow) tiers.Customer {
	c := tiers.Customer{
		ID: r.ID, Plan: r.PlanKey, PlanVersion: r.PlanVersion, JoinedVersion: r.JoinedVersion,
		Name: r.Name, Metadata: json.RawMessage(r.Metadata),
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
	c.Status, c.StatusReason = tiers.Status(r.Status), r.StatusReason
	if r.ScheduledPlanKey != nil && r.ScheduledAt != nil {
		c.ScheduledChange = &tiers.ScheduledChange{Plan: *r.ScheduledPlanKey, At: utc(*r.ScheduledAt)}
	}
	if r.TrialPlanKey != nil && r.TrialEndsAt != nil {
		c.Trial = &tiers.Trial{Plan: *r.TrialPlanKey, EndsAt: utc(*r.TrialEndsAt)}
	}
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

// pendingColumns returns the columns of a customer's scheduled change and
// trial (nil when it has none).
func pendingColumns(c tiers.Customer) (scheduledPlan *string, scheduledAt *time.Time, trialPlan *string, trialEnds *time.Time) {
	if sc := c.ScheduledChange; sc != nil {
		scheduledPlan, scheduledAt = &sc.Plan, &sc.At
	}
	if t := c.Trial; t != nil {
		trialPlan, trialEnds = &t.Plan, &t.EndsAt
	}
	return scheduledPlan, scheduledAt, trialPlan, trialEnds
}

const customerColumns = `
	c.id, c.plan_key, c.plan_version AS joined_version,
	(SELECT g.customers_on FROM plan_versions g
	 WHERE g.plan_key = c.plan_key AND g.version = c.plan_version) AS plan_version,
	c.name, c.billing_anchor_day, c.anchor_pinned_start, c.anchor_pinned_end,
	c.time_zone, c.day_pinned_start, c.day_pinned_end, c.week_pinned_start, c.week_pinned_end,
	c.metadata, c.status, c.status_reason, c.scheduled_plan_key, c.scheduled_at, c.trial_plan_key,
	c.trial_ends_at, c.version, c.created_at, c.updated_at`

func findCustomer(ctx context.Context, q querier, id string, lock bool) (tiers.Customer, error) {
	sql := `SELECT ` + customerColumns + ` FROM customers c WHERE c.id = $1`
	if lock {
		sql += ` FOR UPDATE`
	}
	return findOne(ctx, q, sql, tiers.ErrCustomerNotFound, toCustomer, id)
}

// FindCustomer returns the customer id.
func (cat *Catalog) FindCustomer(ctx context.Context, id string) (tiers.Customer, error) {
	c, err := findCustomer(ctx, cat.core.pool, id, false)
	if err != nil {
		return tiers.Customer{}, fmt.Errorf("find customer[%s]: %w", id, mapErr(err))
	}
	return c, nil
}

// FindCustomers returns one page of customers ordered by id.
func (cat *Catalog) FindCustomers(ctx context.Context, f tiers.CustomerFilter) ([]tiers.Customer, bool, error) {
	const q = `SELECT ` + customerColumns + `
		FROM customers c
		WHERE c.id > $1 AND ($2 = '' OR c.plan_key = $2)
		  -- strpos, not LIKE: the search text is matched literally, its % and _ included
		  AND ($3 = '' OR strpos(lower(c.id), lower($3)) > 0 OR strpos(lower(c.name), lower($3)) > 0)
		ORDER BY c.id
		LIMIT $4`
	return findPage(ctx, cat.core.pool, "customers", f.Page.Limit, toCustomer, q, f.Page.After, f.Plan, f.Query)
}

// PutCustomer creates or replaces a customer. A changed billing anchor day
// applies from the next period and a changed time zone from the next
// window (see tiers.Anchor); a scheduled change at the period's end is
// resolved by the anchor it then has. Its pending changes due by w.At are
// applied first, as ApplyPlanChanges would have, so that the replace
// starts from the customer as it is. A creation beyond the customers' cap
// (SetCaps) is a *tiers.CapError.
func (cat *Catalog) PutCustomer(ctx context.Context, w tiers.Write, c tiers.Customer) (tiers.Customer, bool, error) {
	return put(ctx, cat.core, w, putSteps[tiers.Customer]{
		before: func(ctx context.Context, tx pgx.Tx) error {
			_, err := cat.applyDue(ctx, tx, c.ID, w.At)
			return err
		},
		find: func(ctx context.Context, tx pgx.Tx, lock bool) (tiers.Customer, error) {
			return findCustomer(ctx, tx, c.ID, lock)
		},
		notFound: tiers.ErrCustomerNotFound,
		version:  func(c tiers.Customer) int64 { return c.Version },
		write: func(ctx context.Context, tx pgx.Tx, old tiers.Customer, exists bool) error {
			trialPlan, scheduledPlan := c.PendingPlans()
			for _, p := range []struct{ field, key string }{
				{"plan", c.Plan}, {"trial.plan", trialPlan}, {"scheduled_change.plan", scheduledPlan},
			} {
				if p.key == "" {
					continue
				}
				var planExists bool
				const planQ = `SELECT EXISTS (SELECT 1 FROM plans WHERE key = $1 FOR KEY SHARE)`
				if err := tx.QueryRow(ctx, planQ, p.key).Scan(&planExists); err != nil {
					return err
				}
				if !planExists {
					return tiers.Invalid(p.field, fmt.Sprintf("plan %q does not exist", p.key))
				}
			}
			anchor := c.Anchor
			if exists {
				anchor = old.Anchor.Change(c.Anchor, w.At)
			}
			c.ScheduledChange.Resolve(anchor, w.At)
			scheduledPlanCol, scheduledAt, trialPlanCol, trialEnds := pendingColumns(c)
			if c.Status == "" {
				c.Status = tiers.StatusActive
			}
			var day *int16
			if anchor.Day > 0 {
				d := int16(anchor.Day)
				day = &d
			}
			monthStart, monthEnd := fromPin(anchor.PinnedMonth)
			dayStart, dayEnd := fromPin(anchor.PinnedDay)
			weekStart, weekEnd := fromPin(anchor.PinnedWeek)
			// A customer that joins a plan joins its latest version; one
			// that stays keeps its version.
			const update = `
				UPDATE customers SET plan_key = $2, name = $3, billing_anchor_day = $4,
				       plan_version = CASE WHEN plan_key = $2 THEN plan_version
				                           ELSE (SELECT latest_version FROM plans WHERE key = $2) END,
				       anchor_pinned_start = $5, anchor_pinned_end = $6, metadata = $7,
				       status = $9, status_reason = $10, scheduled_plan_key = $11, scheduled_at = $12,
				       trial_plan_key = $13, trial_ends_at = $14,
				       version = version + 1, updated_at = $8, time_zone = $15,
				       day_pinned_start = $16, day_pinned_end = $17, week_pinned_start = $18, week_pinned_end = $19
				WHERE id = $1`
			const insert = `
				INSERT INTO customers (id, plan_key, name, billing_anchor_day, anchor_pinned_start,
				                       anchor_pinned_end, metadata, created_at, updated_at,
				                       status, status_reason, scheduled_plan_key, scheduled_at,
				                       trial_plan_key, trial_ends_at, time_zone,
				                       day_pinned_start, day_pinned_end, week_pinned_start, week_pinned_end, plan_version)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,
				        (SELECT latest_version FROM plans WHERE key = $2))
				ON CONFLICT (id) DO NOTHING`
			if err := upsert(ctx, tx, exists, update, insert, c.ID, c.Plan, c.Name, day, monthStart, monthEnd,
				[]byte(c.Metadata), w.At, string(c.Status), c.StatusReason, scheduledPlanCol, scheduledAt,
				trialPlanCol, trialEnds, anchor.ZoneName(), dayStart, dayEnd, weekStart, weekEnd); err != nil || exists {
				return err
			}
			return cat.core.checkCount(ctx, tx, tiers.CapCustomers, "customers")
		},
		after: func(ctx context.Context, tx pgx.Tx, saved tiers.Customer, _ bool) error {
			return recordBilledTerms(ctx, tx, saved, w.At)
		},
		resource: "customers/" + c.ID,
		customer: c.ID,
		notify:   NotifyCustomer,
		key:      c.ID,
	})
}

// DeleteCustomer deletes a customer; its overrides and live counters go with
// it (foreign keys cascade), its usage history stays.
func (cat *Catalog) DeleteCustomer(ctx context.Context, w tiers.Write, id string) error {
	return cat.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		old, err := findCustomer(ctx, tx, id, true)
		if err := checkDelete(w, err, tiers.ErrCustomerNotFound, old.Version); err != nil {
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
		if err := cat.core.notify(ctx, tx, NotifyForget, id); err != nil {
			return err
		}
		return cat.core.notify(ctx, tx, NotifyCustomer, id)
	})
}

// FindAccount returns a customer, its plan and all its overrides (of
// limits and of features), read in one snapshot.
func (cat *Catalog) FindAccount(ctx context.Context, id string) (tiers.Account, error) {
	var a tiers.Account
	err := pgx.BeginTxFunc(ctx, cat.core.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			var err error
			if a.Customer, err = findCustomer(ctx, tx, id, false); err != nil {
				return err
			}
			if a.Plan, err = findPlanOfGroup(ctx, tx, a.Customer.Plan, a.Customer.JoinedVersion); err != nil {
				return err
			}
			trial, scheduled := a.Customer.PendingPlans()
			if a.TrialPlan, err = findPendingPlan(ctx, tx, trial); err != nil {
				return err
			}
			if a.ScheduledPlan, err = findPendingPlan(ctx, tx, scheduled); err != nil {
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
	Plan *planRow
	// TrialPlan and ScheduledPlan: the plans of its trial and scheduled
	// change, if any.
	TrialPlan     *planRow
	ScheduledPlan *planRow
	Overrides     []overrideRow
	Features      []featureOverrideRow
	Grants        []tiers.GrantTerm
}

// FindAccounts implements tiers.CacheSource: the accounts of those of ids
// that exist, in one statement, so one snapshot and one round trip
// however many ids (the cache sends at most tiers.DefaultAccountBatch).
func (cat *Catalog) FindAccounts(ctx context.Context, ids []string) (map[string]tiers.Account, error) {
	if len(ids) == 0 {
		return map[string]tiers.Account{}, nil
	}
	const q = `SELECT ` + customerColumns + `,
		       -- Each plan once per group (the version its customers
		       -- joined at), with the first of its customers, as of the
		       -- version the group is on: a batch has many customers and
		       -- few plans.
		       CASE WHEN row_number() OVER (PARTITION BY c.plan_key, c.plan_version ORDER BY c.id) = 1 THEN
		           (SELECT to_jsonb(pr) FROM (SELECT ` + planAtColumns + `
		                                      FROM plans p
		                                      JOIN plan_versions g ON g.plan_key = p.key AND g.version = c.plan_version
		                                      JOIN plan_versions v ON v.plan_key = p.key AND v.version = g.customers_on
		                                      WHERE p.key = c.plan_key) pr)
		       END AS plan,
		       (SELECT to_jsonb(pr) FROM (SELECT ` + planColumns + `
		                                  FROM plans p WHERE p.key = c.trial_plan_key) pr) AS trial_plan,
		       (SELECT to_jsonb(pr) FROM (SELECT ` + planColumns + `
		                                  FROM plans p WHERE p.key = c.scheduled_plan_key) pr) AS scheduled_plan,
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
	rows, err := cat.core.pool.Query(ctx, q, ids)
	if err != nil {
		return nil, fmt.Errorf("find accounts[%d ids]: %w", len(ids), mapErr(err))
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[accountRow])
	if err != nil {
		return nil, fmt.Errorf("find accounts[%d ids]: %w", len(ids), mapErr(err))
	}
	type group struct {
		plan   string
		joined int64
	}
	plans := make(map[group]tiers.Plan)
	for _, r := range list {
		if r.Plan != nil {
			plans[group{r.PlanKey, r.JoinedVersion}] = toPlan(*r.Plan)
		}
	}
	out := make(map[string]tiers.Account, len(list))
	for _, r := range list {
		a := tiers.Account{Customer: toCustomer(r.customerRow), Plan: plans[group{r.PlanKey, r.JoinedVersion}],
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
		if r.TrialPlan != nil {
			p := toPlan(*r.TrialPlan)
			a.TrialPlan = &p
		}
		if r.ScheduledPlan != nil {
			p := toPlan(*r.ScheduledPlan)
			a.ScheduledPlan = &p
		}
		out[r.ID] = a
	}
	return out, nil
}

// findPendingPlan returns the plan key of a trial or a scheduled change,
// nil for "".
func findPendingPlan(ctx context.Context, q querier, key string) (*tiers.Plan, error) {
	if key == "" {
		return nil, nil
	}
	p, err := findPlan(ctx, q, key, false)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

var _ tiers.CacheSource = (*Catalog)(nil)
