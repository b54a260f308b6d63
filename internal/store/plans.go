package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/tiers"
)

// planRow is a plan as planColumns selects it, or as to_jsonb makes a
// JSON object of those columns (see FindAccounts).
type planRow struct {
	Key              string `json:"key"`
	Name             string `json:"name"`
	Description      string `json:"description"`
	Public           bool   `json:"public"`
	PriceAmountCents int64  `json:"price_amount_cents"`
	PriceCurrency    string `json:"price_currency"`
	PriceInterval    string `json:"price_interval"`
	// Limits decodes from the JSON built by planColumns.
	Limits []limitRow `json:"limits"`
	// Features decodes from the jsonb column as it is.
	Features      map[string]tiers.FeatureValue `json:"features"`
	LatestVersion int64                         `json:"latest_version"`
	Version       int64                         `json:"version"`
	CreatedAt     time.Time                     `json:"created_at"`
	UpdatedAt     time.Time                     `json:"updated_at"`
}

// limitRow is a plan limit as planColumns builds it: the columns as they
// are (a null algorithm is the default, a null burst the limit).
type limitRow struct {
	Metric             string           `json:"metric"`
	Window             tiers.Window     `json:"window"`
	Limit              int64            `json:"limit"`
	Mode               tiers.Mode       `json:"mode"`
	OveragePercent     int64            `json:"overage_percent"`
	OveragePriceMicros *int64           `json:"overage_price_micros"`
	Ceiling            *int64           `json:"ceiling"`
	Algorithm          *tiers.Algorithm `json:"algorithm"`
	Burst              *int64           `json:"burst"`
	Per                tiers.Per        `json:"per"`
	RolloverMax        *int64           `json:"rollover_max"`
}

func toPlan(r planRow) tiers.Plan {
	return tiers.Plan{
		Key: r.Key, Name: r.Name, Description: r.Description, Public: r.Public,
		Price:         tiers.Price{AmountCents: r.PriceAmountCents, Currency: r.PriceCurrency, Interval: r.PriceInterval},
		Limits:        toLimits(r.Limits),
		Features:      featuresOrEmpty(r.Features),
		LatestVersion: r.LatestVersion,
		Version:       r.Version, CreatedAt: utc(r.CreatedAt), UpdatedAt: utc(r.UpdatedAt),
	}
}

// toLimits converts limits as planLimitsJSON builds them.
func toLimits(rows []limitRow) []tiers.Limit {
	limits := make([]tiers.Limit, len(rows))
	for i, l := range rows {
		limits[i] = tiers.Limit{
			Metric: l.Metric, Window: l.Window, Limit: l.Limit, Mode: l.Mode,
			OveragePercent: l.OveragePercent, OveragePriceMicros: l.OveragePriceMicros, Ceiling: l.Ceiling,
			Burst: l.Burst, Per: l.Per, Rollover: toRollover(l.RolloverMax),
		}
		if l.Algorithm != nil {
			limits[i].Algorithm = *l.Algorithm
		}
	}
	return limits
}

// featuresOrEmpty returns features, or an empty map for nil: a plan's
// features are an object, never null.
func featuresOrEmpty(features map[string]tiers.FeatureValue) map[string]tiers.FeatureValue {
	if features == nil {
		return map[string]tiers.FeatureValue{}
	}
	return features
}

// toRollover is the rollover a rollover_max column holds (null: none).
func toRollover(max *int64) *tiers.Rollover {
	if max == nil {
		return nil
	}
	return &tiers.Rollover{Max: *max}
}

// rolloverColumn is what the rollover_max column holds for l.
func rolloverColumn(l tiers.Limit) *int64 {
	if l.Rollover == nil {
		return nil
	}
	return &l.Rollover.Max
}

// algorithmColumn is what the algorithm column holds for l: null for the
// default (and so for every long window), else the algorithm's name.
func algorithmColumn(l tiers.Limit) *string {
	if l.Algorithm == tiers.SlidingWindow {
		return nil
	}
	name := l.Algorithm.String()
	return &name
}

// planLimitsJSON is the limits of plan p as a JSON array of limitRow
// objects, in the plan's order: as planColumns reads them and as
// plan_versions keeps them.
const planLimitsJSON = `
	coalesce((SELECT jsonb_agg(jsonb_build_object(
	              'metric', l.metric, 'window', l.quota_window, 'limit', l.limit_value,
	              'mode', l.mode, 'overage_percent', l.overage_percent,
	              'overage_price_micros', l.overage_price_micros, 'ceiling', l.ceiling,
	              'algorithm', l.algorithm, 'burst', l.burst, 'per', l.per,
	              'rollover_max', l.rollover_max)
	              ORDER BY l.position)
	          FROM plan_limits l WHERE l.plan_key = p.key), '[]')`

// planColumns selects a planRow from plans p.
const planColumns = `
	p.key, p.name, p.description, p.public, p.price_amount_cents, p.price_currency, p.price_interval,
	` + planLimitsJSON + ` AS limits,
	p.features, p.latest_version, p.version, p.created_at, p.updated_at`

func findPlan(ctx context.Context, q querier, key string, lock bool) (tiers.Plan, error) {
	sql := `SELECT ` + planColumns + ` FROM plans p WHERE p.key = $1`
	if lock {
		sql += ` FOR UPDATE OF p`
	}
	return findOne(ctx, q, sql, tiers.ErrPlanNotFound, toPlan, key)
}

// FindPlan returns the plan key with its limits.
func (cat *Catalog) FindPlan(ctx context.Context, key string) (tiers.Plan, error) {
	p, err := findPlan(ctx, cat.core.pool, key, false)
	if err != nil {
		return tiers.Plan{}, fmt.Errorf("find plan[%s]: %w", key, mapErr(err))
	}
	return p, nil
}

// FindPlans returns one page of plans ordered by key.
func (cat *Catalog) FindPlans(ctx context.Context, page tiers.Page) ([]tiers.Plan, bool, error) {
	const q = `SELECT ` + planColumns + ` FROM plans p WHERE p.key > $1 ORDER BY p.key LIMIT $2`
	return findPage(ctx, cat.core.pool, "plans", page.Limit, toPlan, q, page.After)
}

// FindPublicPlans implements tiers.CacheSource: every public plan as of
// its latest version, ordered by key.
func (cat *Catalog) FindPublicPlans(ctx context.Context) ([]tiers.Plan, error) {
	const q = `SELECT ` + planColumns + ` FROM plans p WHERE p.public ORDER BY p.key`
	plans, err := findAll(ctx, cat.core.pool, toPlan, q)
	if err != nil {
		return nil, fmt.Errorf("find public plans: %w", mapErr(err))
	}
	return plans, nil
}

// checkMetricsDeclared returns a *tiers.ValidationError naming every limit
// whose metric is not declared. It locks the metrics it finds against
// deletion until tx ends.
func checkMetricsDeclared(ctx context.Context, tx pgx.Tx, limits []tiers.Limit) error {
	if len(limits) == 0 {
		return nil
	}
	names := make([]string, 0, len(limits))
	for _, l := range limits {
		names = append(names, l.Metric)
	}
	const q = `SELECT key FROM metrics WHERE key = ANY($1) FOR KEY SHARE`
	rows, err := tx.Query(ctx, q, names)
	if err != nil {
		return err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	var fields []tiers.FieldError
	for i, l := range limits {
		if !slices.Contains(found, l.Metric) {
			fields = append(fields, tiers.FieldError{
				Field:   fmt.Sprintf("limits[%d].metric", i),
				Message: fmt.Sprintf("metric %q is not declared", l.Metric),
			})
		}
	}
	if fields != nil {
		return &tiers.ValidationError{Fields: fields}
	}
	return nil
}

// PutPlan creates or replaces a plan and its limits, and makes a new
// version of it when its price, limits or features change (see
// tiers.Store).
func (cat *Catalog) PutPlan(ctx context.Context, w tiers.Write, p tiers.Plan, grandfather bool) (tiers.Plan, bool, error) {
	return put(ctx, cat.core, w, putSteps[tiers.Plan]{
		find: func(ctx context.Context, tx pgx.Tx, lock bool) (tiers.Plan, error) {
			return findPlan(ctx, tx, p.Key, lock)
		},
		notFound: tiers.ErrPlanNotFound,
		version:  func(p tiers.Plan) int64 { return p.Version },
		write: func(ctx context.Context, tx pgx.Tx, _ tiers.Plan, exists bool) error {
			if err := checkMetricsDeclared(ctx, tx, p.Limits); err != nil {
				return err
			}
			const update = `
				UPDATE plans SET name = $2, description = $3, price_amount_cents = $4, price_currency = $5,
				       price_interval = $6, features = $8, public = $9, version = version + 1, updated_at = $7
				WHERE key = $1`
			const insert = `
				INSERT INTO plans (key, name, description, price_amount_cents, price_currency, price_interval,
				                   created_at, updated_at, features, public)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, $9)
				ON CONFLICT (key) DO NOTHING`
			err := upsert(ctx, tx, exists, update, insert, p.Key, p.Name, p.Description, p.Price.AmountCents,
				p.Price.Currency, p.Price.Interval, w.At, featuresOrEmpty(p.Features), p.Public)
			if err != nil {
				return err
			}
			if err := replacePlanLimits(ctx, tx, p); err != nil {
				return err
			}
			return versionPlan(ctx, tx, w.At, p.Key, exists, grandfather)
		},
		after: func(ctx context.Context, tx pgx.Tx, saved tiers.Plan, exists bool) error {
			if !exists {
				return nil
			}
			return splitPlanTerms(ctx, tx, w.At, saved.Key)
		},
		resource: "plans/" + p.Key,
		notify:   NotifyPlan,
		key:      p.Key,
	})
}

func replacePlanLimits(ctx context.Context, tx pgx.Tx, p tiers.Plan) error {
	if _, err := tx.Exec(ctx, `DELETE FROM plan_limits WHERE plan_key = $1`, p.Key); err != nil {
		return err
	}
	if len(p.Limits) == 0 {
		return nil
	}
	n := len(p.Limits)
	var (
		metrics    = make([]string, n)
		windows    = make([]string, n)
		positions  = make([]int16, n)
		values     = make([]int64, n)
		modes      = make([]string, n)
		percents   = make([]int64, n)
		prices     = make([]*int64, n)
		ceilings   = make([]*int64, n)
		algorithms = make([]*string, n)
		bursts     = make([]*int64, n)
		pers       = make([]string, n)
		rollovers  = make([]*int64, n)
	)
	for i, l := range p.Limits {
		metrics[i], windows[i], positions[i] = l.Metric, l.Window.String(), int16(i)
		values[i], modes[i], percents[i] = l.Limit, l.Mode.String(), l.OveragePercent
		prices[i], ceilings[i] = l.OveragePriceMicros, l.Ceiling
		algorithms[i], bursts[i], pers[i] = algorithmColumn(l), l.Burst, l.Per.String()
		rollovers[i] = rolloverColumn(l)
	}
	const q = `
		INSERT INTO plan_limits (plan_key, metric, quota_window, position, limit_value, mode,
		                         overage_percent, overage_price_micros, ceiling, algorithm, burst, per, rollover_max)
		SELECT $1, * FROM unnest($2::text[], $3::text[], $4::smallint[], $5::bigint[], $6::text[],
		                         $7::int[], $8::bigint[], $9::bigint[], $10::text[], $11::bigint[], $12::text[],
		                         $13::bigint[])`
	_, err := tx.Exec(ctx, q, p.Key, metrics, windows, positions, values, modes, percents, prices, ceilings,
		algorithms, bursts, pers, rollovers)
	if isCode(err, "23503") { // foreign_key_violation: a metric went away meanwhile
		return errRetry
	}
	return err
}

// DeletePlan deletes a plan unless customers are on it.
func (cat *Catalog) DeletePlan(ctx context.Context, w tiers.Write, key string) error {
	return cat.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		old, err := findPlan(ctx, tx, key, true)
		if err := checkDelete(w, err, tiers.ErrPlanNotFound, old.Version); err != nil {
			return err
		}
		var used bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM customers
			WHERE plan_key = $1 OR trial_plan_key = $1 OR scheduled_plan_key = $1)`, key).Scan(&used); err != nil {
			return err
		}
		if used {
			return tiers.ErrPlanInUse
		}
		if _, err := tx.Exec(ctx, `DELETE FROM plans WHERE key = $1`, key); err != nil {
			if isCode(err, "23503") { // a customer joined meanwhile
				return tiers.ErrPlanInUse
			}
			return err
		}
		e := auditEntry{actor: w.Actor, action: tiers.ActionDelete, resource: "plans/" + key, before: old}
		return cat.core.auditAndNotify(ctx, tx, w.At, e, NotifyPlan, key)
	})
}
