package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/tiers"
)

// auditEntry is one audit event about to be written.
type auditEntry struct {
	actor    string
	action   string
	resource string
	customer string // "" when the event concerns no customer
	before   any    // nil when the resource did not exist
	after    any    // nil when the resource no longer exists
}

// recordAudit writes e in tx, the transaction of the change it records.
func recordAudit(ctx context.Context, tx pgx.Tx, at time.Time, e auditEntry) error {
	const q = `
		INSERT INTO audit_events (at, actor, action, resource, customer_id, before, after)
		VALUES ($1, $2, $3, $4, NULLIF($5, ''), $6, $7)`
	before, err := jsonOrNull(e.before)
	if err != nil {
		return err
	}
	after, err := jsonOrNull(e.after)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, q, at, e.actor, e.action, e.resource, e.customer, before, after); err != nil {
		return fmt.Errorf("record audit event: %w", err)
	}
	return nil
}

func jsonOrNull(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode audit image: %w", err)
	}
	return b, nil
}

type auditRow struct {
	ID       int64
	At       time.Time
	Actor    string
	Action   string
	Resource string
	Customer *string
	Before   []byte
	After    []byte
}

func toAuditEvent(r auditRow) tiers.AuditEvent {
	e := tiers.AuditEvent{
		ID: r.ID, At: utc(r.At), Actor: r.Actor, Action: r.Action, Resource: r.Resource,
		Before: rawOrNull(r.Before), After: rawOrNull(r.After),
	}
	if r.Customer != nil {
		e.Customer = *r.Customer
	}
	return e
}

func rawOrNull(b []byte) json.RawMessage {
	if b == nil {
		return json.RawMessage("null")
	}
	return json.RawMessage(b)
}

// FindAuditEvents returns audit events newest first.
func (db *DB) FindAuditEvents(ctx context.Context, f tiers.AuditFilter) ([]tiers.AuditEvent, bool, error) {
	const q = `
		SELECT id, at, actor, action, resource, customer_id AS customer, before, after
		FROM audit_events
		WHERE ($1 = 0 OR id < $1)
		  AND ($2 = '' OR customer_id = $2)
		ORDER BY id DESC
		LIMIT $3`
	return findPage(ctx, db.pool, "audit events", f.Limit, toAuditEvent, q, f.Before, f.Customer)
}
