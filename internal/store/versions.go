package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/tiers"
)

// Plan versions live in plan_versions (see its migration): a snapshot of
// each version's price, limits and features, and, per version, the version
// the customers who joined the plan at it are on now (customers_on).

// versionPlan makes the plan's current terms, just written, a new version
// when they differ from its latest (a created plan: its version 1). Unless
// grandfather, the customers on the latest version move to the new one.
func versionPlan(ctx context.Context, tx pgx.Tx, at time.Time, key string, exists, grandfather bool) error {
	if !exists {
		const first = `
			INSERT INTO plan_versions (plan_key, version, price_amount_cents, price_currency, price_interval,
			                           limits, features, customers_on, created_at)
			SELECT p.key, 1, p.price_amount_cents, p.price_currency, p.price_interval, ` + planLimitsJSON + `,
			       p.features, 1, $2
			FROM plans p WHERE p.key = $1`
		_, err := tx.Exec(ctx, first, key, at)
		return err
	}
	const next = `
		INSERT INTO plan_versions (plan_key, version, price_amount_cents, price_currency, price_interval,
		                           limits, features, customers_on, created_at)
		SELECT p.key, p.latest_version + 1, p.price_amount_cents, p.price_currency, p.price_interval, cur.limits,
		       p.features, p.latest_version + 1, $2
		FROM plans p
		CROSS JOIN LATERAL (SELECT ` + planLimitsJSON + ` AS limits) cur
		JOIN plan_versions v ON v.plan_key = p.key AND v.version = p.latest_version
		WHERE p.key = $1
		  -- jsonb compares by value: a name or a description alone makes no version
		  AND (v.price_amount_cents, v.price_currency, v.price_interval, v.limits, v.features)
		      IS DISTINCT FROM (p.price_amount_cents, p.price_currency, p.price_interval, cur.limits, p.features)
		RETURNING version`
	var n int64
	err := tx.QueryRow(ctx, next, key, at).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // the same terms: no new version
	}
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE plans SET latest_version = $2 WHERE key = $1`, key, n); err != nil {
		return err
	}
	if grandfather {
		return nil
	}
	const follow = `UPDATE plan_versions SET customers_on = $2 WHERE plan_key = $1 AND customers_on = $2 - 1`
	_, err = tx.Exec(ctx, follow, key, n)
	return err
}

// planAtColumns selects a planRow of plans p as of version v: the plan's
// own key, name, description, public, numbers and times, the version's price,
// limits and features.
const planAtColumns = `
	p.key, p.name, p.description, p.public, v.price_amount_cents, v.price_currency, v.price_interval,
	v.limits, v.features, p.latest_version, p.version, p.created_at, p.updated_at`

// findPlanOfGroup returns the plan key as the customers who joined it at
// version joined see it: as of the version they are on.
func findPlanOfGroup(ctx context.Context, q querier, key string, joined int64) (tiers.Plan, error) {
	const sql = `SELECT ` + planAtColumns + `
		FROM plans p
		JOIN plan_versions g ON g.plan_key = p.key AND g.version = $2
		JOIN plan_versions v ON v.plan_key = p.key AND v.version = g.customers_on
		WHERE p.key = $1`
	return findOne(ctx, q, sql, tiers.ErrPlanNotFound, toPlan, key, joined)
}

// findPlanAtVersion returns the plan key as of its version n.
func findPlanAtVersion(ctx context.Context, q querier, key string, n int64) (tiers.Plan, error) {
	const sql = `SELECT ` + planAtColumns + `
		FROM plans p JOIN plan_versions v ON v.plan_key = p.key AND v.version = $2
		WHERE p.key = $1`
	return findOne(ctx, q, sql, tiers.ErrPlanVersionNotFound, toPlan, key, n)
}

type planVersionRow struct {
	PlanKey          string
	Version          int64
	PriceAmountCents int64
	PriceCurrency    string
	PriceInterval    string
	Limits           []limitRow
	Features         map[string]tiers.FeatureValue
	Customers        int64
	CreatedAt        time.Time
}

func toPlanVersion(r planVersionRow) tiers.PlanVersion {
	return tiers.PlanVersion{
		Plan: r.PlanKey, Version: r.Version,
		Price:     tiers.Price{AmountCents: r.PriceAmountCents, Currency: r.PriceCurrency, Interval: r.PriceInterval},
		Limits:    toLimits(r.Limits),
		Features:  featuresOrEmpty(r.Features),
		Customers: r.Customers, CreatedAt: utc(r.CreatedAt),
	}
}

// planVersionColumns selects a planVersionRow from plan_versions v.
const planVersionColumns = `
	v.plan_key, v.version, v.price_amount_cents, v.price_currency, v.price_interval, v.limits, v.features,
	(SELECT count(*) FROM customers c
	 JOIN plan_versions g ON g.plan_key = c.plan_key AND g.version = c.plan_version
	 WHERE c.plan_key = v.plan_key AND g.customers_on = v.version) AS customers,
	v.created_at`

// planExists returns ErrPlanNotFound unless the plan key exists.
func planExists(ctx context.Context, q querier, key string) error {
	var ok bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM plans WHERE key = $1)`, key).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return tiers.ErrPlanNotFound
	}
	return nil
}

// FindPlanVersion implements tiers.Store.
func (cat *Catalog) FindPlanVersion(ctx context.Context, key string, n int64) (tiers.PlanVersion, error) {
	const q = `SELECT ` + planVersionColumns + ` FROM plan_versions v WHERE v.plan_key = $1 AND v.version = $2`
	v, err := findOne(ctx, cat.core.pool, q, tiers.ErrPlanVersionNotFound, toPlanVersion, key, n)
	if errors.Is(err, tiers.ErrPlanVersionNotFound) {
		if perr := planExists(ctx, cat.core.pool, key); perr != nil {
			err = perr
		}
	}
	if err != nil {
		return tiers.PlanVersion{}, fmt.Errorf("find plan version[%s/%d]: %w", key, n, mapErr(err))
	}
	return v, nil
}

// FindPlanVersions implements tiers.Store.
func (cat *Catalog) FindPlanVersions(ctx context.Context, key string, page tiers.Page) ([]tiers.PlanVersion, bool, error) {
	var after int64
	if page.After != "" {
		n, err := strconv.ParseInt(page.After, 10, 64)
		if err != nil {
			return nil, false, tiers.Invalid("cursor", "is not a cursor this service returned")
		}
		after = n
	}
	if err := planExists(ctx, cat.core.pool, key); err != nil {
		return nil, false, fmt.Errorf("find plan versions[%s]: %w", key, mapErr(err))
	}
	const q = `SELECT ` + planVersionColumns + ` FROM plan_versions v
		WHERE v.plan_key = $1 AND v.version > $2 ORDER BY v.version LIMIT $3`
	return findPage(ctx, cat.core.pool, "plan versions", page.Limit, toPlanVersion, q, key, after)
}

// migratingColumns selects the customers of plan $1 a migration from
// version $2 (null: every version older than $3) to version $3 moves,
// each with the version it is on, from customers c and their groups g.
const migratingCustomers = `
	SELECT c.id, g.customers_on AS version
	FROM customers c JOIN plan_versions g ON g.plan_key = c.plan_key AND g.version = c.plan_version
	WHERE c.plan_key = $1 AND g.customers_on < $3 AND ($2::bigint IS NULL OR g.customers_on = $2)
	ORDER BY c.id`

func findMigrating(ctx context.Context, q querier, key string, from *int64, to int64) ([]tiers.VersionedCustomer, error) {
	return findAll(ctx, q, func(c tiers.VersionedCustomer) tiers.VersionedCustomer { return c },
		migratingCustomers, key, from, to)
}

// FindPlanMigration implements tiers.Store.
func (cat *Catalog) FindPlanMigration(ctx context.Context, key string, from, to *int64) (tiers.PlanMigration, error) {
	var m tiers.PlanMigration
	err := pgx.BeginTxFunc(ctx, cat.core.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			var latest int64
			err := tx.QueryRow(ctx, `SELECT latest_version FROM plans WHERE key = $1`, key).Scan(&latest)
			if errors.Is(err, pgx.ErrNoRows) {
				return tiers.ErrPlanNotFound
			}
			if err != nil {
				return err
			}
			for _, n := range []*int64{from, to} {
				if n != nil && (*n < 1 || *n > latest) {
					return fmt.Errorf("%w: plan %s has versions 1 to %d, not %d", tiers.ErrPlanVersionNotFound, key, latest, *n)
				}
			}
			m.ToVersion = latest
			if to != nil {
				m.ToVersion = *to
			}
			if from != nil && m.ToVersion <= *from {
				return tiers.Invalid("to_version", fmt.Sprintf("version %d is not newer than from_version (%d)", m.ToVersion, *from))
			}
			if m.To, err = findPlanAtVersion(ctx, tx, key, m.ToVersion); err != nil {
				return err
			}
			if m.Customers, err = findMigrating(ctx, tx, key, from, m.ToVersion); err != nil {
				return err
			}
			m.From = fromVersions(from, m.Customers)
			return nil
		})
	if err != nil {
		return tiers.PlanMigration{}, fmt.Errorf("find plan migration[%s]: %w", key, mapErr(err))
	}
	return m, nil
}

// fromVersions is what a migration moves customers from: version from,
// or, for every older version, those the customers are on.
func fromVersions(from *int64, customers []tiers.VersionedCustomer) []int64 {
	if from != nil {
		return []int64{*from}
	}
	out := []int64{}
	for _, c := range customers {
		if !slices.Contains(out, c.Version) {
			out = append(out, c.Version)
		}
	}
	slices.Sort(out)
	return out
}

// MigratePlan implements tiers.Store.
func (cat *Catalog) MigratePlan(ctx context.Context, w tiers.Write, key string, from *int64, to int64) ([]tiers.VersionedCustomer, error) {
	var moved []tiers.VersionedCustomer
	err := cat.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		// The plan's lock: a change of the plan waits for the migration.
		var latest int64
		err := tx.QueryRow(ctx, `SELECT latest_version FROM plans WHERE key = $1 FOR UPDATE`, key).Scan(&latest)
		if errors.Is(err, pgx.ErrNoRows) {
			return tiers.ErrPlanNotFound
		}
		if err != nil {
			return err
		}
		if to < 1 || to > latest {
			return tiers.ErrPlanVersionNotFound
		}
		if moved, err = findMigrating(ctx, tx, key, from, to); err != nil {
			return err
		}
		if len(moved) == 0 {
			return nil
		}
		const move = `
			UPDATE plan_versions SET customers_on = $3
			WHERE plan_key = $1 AND customers_on < $3 AND ($2::bigint IS NULL OR customers_on = $2)`
		if _, err := tx.Exec(ctx, move, key, from, to); err != nil {
			return err
		}
		ids, versions := make([]string, len(moved)), make([]int64, len(moved))
		for i, c := range moved {
			ids[i], versions[i] = c.ID, c.Version
		}
		// One event per customer moved, so that its own trail shows it.
		const audit = `
			INSERT INTO audit_events (at, actor, action, resource, customer_id, before, after)
			SELECT $1, $2, 'update', 'customers/' || m.id, m.id,
			       jsonb_build_object('plan', $3::text, 'plan_version', m.version),
			       jsonb_build_object('plan', $3::text, 'plan_version', $4::bigint)
			FROM unnest($5::text[], $6::bigint[]) AS m(id, version)`
		if _, err := tx.Exec(ctx, audit, w.At, w.Actor, key, to, ids, versions); err != nil {
			return fmt.Errorf("record audit events: %w", err)
		}
		if err := splitPlanTerms(ctx, tx, w.At, key); err != nil {
			return err
		}
		return cat.core.notify(ctx, tx, NotifyPlan, key)
	})
	if err != nil {
		return nil, fmt.Errorf("migrate plan[%s] to version %d: %w", key, to, mapErr(err))
	}
	return moved, nil
}
