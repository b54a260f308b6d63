package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/quota"
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
func (a *Audit) FindAuditEvents(ctx context.Context, f tiers.AuditFilter) ([]tiers.AuditEvent, bool, error) {
	const q = `
		SELECT id, at, actor, action, resource, customer_id AS customer, before, after
		FROM audit_events
		WHERE ($1 = 0 OR id < $1)
		  AND ($2 = '' OR customer_id = $2)
		ORDER BY id DESC
		LIMIT $3`
	return findPage(ctx, a.core.pool, "audit events", f.Limit, toAuditEvent, q, f.Before, f.Customer)
}

// usageResource is the audit log's name of a customer's usage of metric:
// what resets and refunds change.
func usageResource(customer, metric string) string {
	return "customers/" + customer + "/usage/" + metric
}

// refundImage is a refund's audit image (its event's after).
type refundImage struct {
	Metric    string `json:"metric"`
	Subject   string `json:"subject,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	Cost      int64  `json:"cost"`
	Refunded  int64  `json:"refunded"`
}

// RecordRefunds implements quota.Audits: the events in one statement.
func (a *Audit) RecordRefunds(ctx context.Context, events []quota.RefundEvent) error {
	n := len(events)
	ats, actors, resources, customers := make([]time.Time, n), make([]string, n), make([]string, n), make([]string, n)
	afters := make([][]byte, n)
	for i, ev := range events {
		after, err := jsonOrNull(refundImage{Metric: ev.Metric, Subject: ev.Subject, RequestID: ev.RequestID,
			Cost: ev.Cost, Refunded: ev.Refunded})
		if err != nil {
			return err
		}
		ats[i], actors[i], resources[i], customers[i], afters[i] = ev.At, ev.Actor, usageResource(ev.Customer, ev.Metric), ev.Customer, after
	}
	const q = `
		INSERT INTO audit_events (at, actor, action, resource, customer_id, after)
		SELECT at, actor, $6, resource, customer, after
		FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::jsonb[]) AS e(at, actor, resource, customer, after)`
	if _, err := a.core.pool.Exec(ctx, q, ats, actors, resources, customers, afters, tiers.ActionRefund); err != nil {
		return fmt.Errorf("record %d refunds' audit events: %w", n, mapErr(err))
	}
	return nil
}
