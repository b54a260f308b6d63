package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// Request ids make checks and refunds idempotent for 24 hours: the first
// use of an id is claimed in the transaction that charges (or refunds), so
// the claim and the charge commit or vanish together; a check's answer is
// kept with its claim.

// claim records a request id (with its answer, if known), or returns what
// was recorded under it within the last 24 hours. An expired record is taken over. A concurrent claim of
// the same id waits for the first to commit or roll back.
func claim(ctx context.Context, q querier, c quota.Claim) (*quota.Recorded, error) {
	const claimQ = `
		INSERT INTO request_ids AS r (customer_id, kind, request_id, metric, cost, created_at, answer)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (customer_id, kind, request_id) DO UPDATE
		SET metric = EXCLUDED.metric, cost = EXCLUDED.cost, answer = EXCLUDED.answer, created_at = EXCLUDED.created_at
		WHERE r.created_at <= EXCLUDED.created_at - interval '24 hours'
		RETURNING true`
	var claimed bool
	err := q.QueryRow(ctx, claimQ, c.Customer, string(c.Kind), c.ID, c.Metric, c.Cost, c.At, c.Answer).Scan(&claimed)
	if err == nil {
		return nil, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	const findQ = `SELECT metric, cost, answer FROM request_ids WHERE customer_id = $1 AND kind = $2 AND request_id = $3`
	var rec quota.Recorded
	if err := q.QueryRow(ctx, findQ, c.Customer, string(c.Kind), c.ID).Scan(&rec.Metric, &rec.Cost, &rec.Answer); err != nil {
		return nil, err
	}
	return &rec, nil
}

// keep stores the answer of a claimed check.
func keep(ctx context.Context, q querier, c quota.Claim, answer []byte) error {
	const q1 = `UPDATE request_ids SET answer = $4 WHERE customer_id = $1 AND kind = $2 AND request_id = $3`
	_, err := q.Exec(ctx, q1, c.Customer, string(c.Kind), c.ID, answer)
	return err
}

// Claim implements quota.Ledger.
func (db *DB) Claim(ctx context.Context, c quota.Claim) (*quota.Recorded, error) {
	rec, err := claim(ctx, db.pool, c)
	switch {
	case isCode(err, "23503"): // the customer went away meanwhile
		return nil, tiers.ErrCustomerNotFound
	case err != nil:
		return nil, fmt.Errorf("claim request id: %w", mapErr(err))
	}
	return rec, nil
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
