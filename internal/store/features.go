package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/tiers"
)

// featureOverrideRow is a feature override as featureOverrideColumns
// selects it, or as to_jsonb makes a JSON object of those columns (see
// FindAccounts).
type featureOverrideRow struct {
	CustomerID string             `json:"customer_id"`
	Feature    string             `json:"feature"`
	Value      tiers.FeatureValue `json:"value"`
	ExpiresAt  *time.Time         `json:"expires_at"`
	Reason     string             `json:"reason"`
	Version    int64              `json:"version"`
	CreatedAt  time.Time          `json:"created_at"`
	UpdatedAt  time.Time          `json:"updated_at"`
}

func toFeatureOverride(r featureOverrideRow) tiers.FeatureOverride {
	return tiers.FeatureOverride{
		Customer: r.CustomerID, Feature: r.Feature, Value: r.Value,
		ExpiresAt: utcPtr(r.ExpiresAt), Reason: r.Reason,
		Version: r.Version, CreatedAt: utc(r.CreatedAt), UpdatedAt: utc(r.UpdatedAt),
	}
}

const featureOverrideColumns = `
	f.customer_id, f.feature, f.value, f.expires_at, f.reason, f.version, f.created_at, f.updated_at`

// findFeatureOverrides lists a customer's feature overrides by feature.
func findFeatureOverrides(ctx context.Context, q querier, customer string) ([]tiers.FeatureOverride, error) {
	const sql = `SELECT ` + featureOverrideColumns + `
		FROM feature_overrides f WHERE f.customer_id = $1 ORDER BY f.feature`
	return findAll(ctx, q, toFeatureOverride, sql, customer)
}

func findFeatureOverride(ctx context.Context, q querier, customer, feature string, lock bool) (tiers.FeatureOverride, error) {
	sql := `SELECT ` + featureOverrideColumns + ` FROM feature_overrides f
		WHERE f.customer_id = $1 AND f.feature = $2`
	if lock {
		sql += ` FOR UPDATE`
	}
	return findOne(ctx, q, sql, tiers.ErrFeatureOverrideNotFound, toFeatureOverride, customer, feature)
}

// featureOverrideResource names a feature override in the audit log as
// its URL does.
func featureOverrideResource(customer, feature string) string {
	return fmt.Sprintf("customers/%s/features/%s", customer, feature)
}

// PutFeatureOverride creates or replaces a customer's override of a
// feature.
func (cat *Catalog) PutFeatureOverride(ctx context.Context, w tiers.Write, o tiers.FeatureOverride) (tiers.FeatureOverride, bool, error) {
	return put(ctx, cat.core, w, putSteps[tiers.FeatureOverride]{
		before: func(ctx context.Context, tx pgx.Tx) error {
			return requireCustomer(ctx, tx, o.Customer, true)
		},
		find: func(ctx context.Context, tx pgx.Tx, lock bool) (tiers.FeatureOverride, error) {
			return findFeatureOverride(ctx, tx, o.Customer, o.Feature, lock)
		},
		notFound: tiers.ErrFeatureOverrideNotFound,
		version:  func(o tiers.FeatureOverride) int64 { return o.Version },
		write: func(ctx context.Context, tx pgx.Tx, _ tiers.FeatureOverride, exists bool) error {
			const update = `
				UPDATE feature_overrides SET value = $3, expires_at = $4, reason = $5,
				       version = version + 1, updated_at = $6
				WHERE customer_id = $1 AND feature = $2`
			const insert = `
				INSERT INTO feature_overrides (customer_id, feature, value, expires_at, reason, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, $6, $6)
				ON CONFLICT (customer_id, feature) DO NOTHING`
			return upsert(ctx, tx, exists, update, insert, o.Customer, o.Feature, o.Value, o.ExpiresAt, o.Reason, w.At)
		},
		resource: featureOverrideResource(o.Customer, o.Feature),
		customer: o.Customer,
		notify:   NotifyCustomer,
		key:      o.Customer,
	})
}

// DeleteFeatureOverride deletes a customer's override of a feature.
func (cat *Catalog) DeleteFeatureOverride(ctx context.Context, w tiers.Write, customer, feature string) error {
	return cat.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if err := requireCustomer(ctx, tx, customer, true); err != nil {
			return err
		}
		old, err := findFeatureOverride(ctx, tx, customer, feature, true)
		if err := checkDelete(w, err, tiers.ErrFeatureOverrideNotFound, old.Version); err != nil {
			return err
		}
		const q = `DELETE FROM feature_overrides WHERE customer_id = $1 AND feature = $2`
		if _, err := tx.Exec(ctx, q, customer, feature); err != nil {
			return err
		}
		e := auditEntry{actor: w.Actor, action: tiers.ActionDelete, resource: featureOverrideResource(customer, feature),
			customer: customer, before: old}
		return cat.core.auditAndNotify(ctx, tx, w.At, e, NotifyCustomer, customer)
	})
}
