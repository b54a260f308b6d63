package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/billing"
	"github.com/quotad/quotad/internal/tiers"
	"github.com/quotad/quotad/internal/webhooks"
)

// ActorQuotad is the actor of the audit events of what quotad does by
// itself: a scheduled plan change or a trial's end applied at its instant.
const ActorQuotad = "quotad"

// applyBatch bounds the customers one ApplyPlanChanges call applies the
// changes of.
const applyBatch = 100

// ApplyPlanChanges applies the scheduled plan changes and trial ends due
// at now (see tiers.Customer.Due), each at its own instant: the
// customer's row, an audit event of actor quotad, its billing terms from
// that instant and, for a trial's end, a trial.ended webhook event. It
// returns the customers it changed (at most applyBatch of them: call it
// again while it returns that many).
//
// Each change is applied exactly once, whatever the processes: a
// customer's changes are applied in the transaction that locks its row
// and clears them; another process skips the locked row (SKIP LOCKED) and
// finds nothing due once it is committed. Other processes hear of the
// change through NOTIFY; the caller tells its own cache.
func (cat *Catalog) ApplyPlanChanges(ctx context.Context, now time.Time) ([]string, error) {
	var changed []string
	err := cat.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		changed = changed[:0]
		const q = `
			SELECT id FROM customers
			WHERE scheduled_at <= $1 OR trial_ends_at <= $1
			ORDER BY id
			LIMIT $2
			FOR UPDATE SKIP LOCKED`
		rows, err := tx.Query(ctx, q, now, applyBatch)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, id := range ids {
			n, err := cat.applyDue(ctx, tx, id, now)
			if err != nil {
				return fmt.Errorf("customer[%s]: %w", id, err)
			}
			if n > 0 {
				changed = append(changed, id)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("apply plan changes: %w", mapErr(err))
	}
	return changed, nil
}

// applyDue applies, in tx, the customer's pending changes due at now, the
// earliest first, and returns how many it applied (0 for a customer that
// does not exist). It locks the customer's row.
func (cat *Catalog) applyDue(ctx context.Context, tx pgx.Tx, id string, now time.Time) (int, error) {
	c, err := findCustomer(ctx, tx, id, true)
	if errors.Is(err, tiers.ErrCustomerNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	applied := 0
	for {
		next, at, trialEnded, ok := c.Due(now)
		if !ok {
			break
		}
		scheduledPlan, scheduledAt, trialPlan, trialEnds := pendingColumns(next)
		// A customer that moves to another plan joins its latest version.
		const update = `
			UPDATE customers SET plan_key = $2, scheduled_plan_key = $3, scheduled_at = $4,
			       trial_plan_key = $5, trial_ends_at = $6, version = version + 1, updated_at = $7,
			       plan_version = CASE WHEN plan_key = $2 THEN plan_version
			                           ELSE (SELECT latest_version FROM plans WHERE key = $2) END
			WHERE id = $1`
		if _, err := tx.Exec(ctx, update, id, next.Plan, scheduledPlan, scheduledAt, trialPlan, trialEnds, at); err != nil {
			return applied, fmt.Errorf("apply change at %s: %w", at.Format(time.RFC3339), err)
		}
		saved, err := findCustomer(ctx, tx, id, false)
		if err != nil {
			return applied, err
		}
		if err := recordBilledTerms(ctx, tx, saved, at); err != nil {
			return applied, err
		}
		e := auditEntry{actor: ActorQuotad, action: tiers.ActionUpdate, resource: "customers/" + id,
			customer: id, before: c, after: saved}
		if err := recordAudit(ctx, tx, at, e); err != nil {
			return applied, err
		}
		if trialEnded {
			ev := webhooks.Event{Type: webhooks.TrialEnded, Customer: id, Plan: c.Trial.Plan,
				NextPlan: saved.PlanAt(at), At: at}
			if _, err := cat.core.recordEvents(ctx, tx, []webhooks.Event{ev}); err != nil {
				return applied, err
			}
		}
		c = saved
		applied++
	}
	if applied == 0 {
		return 0, nil
	}
	return applied, cat.core.notify(ctx, tx, NotifyCustomer, id)
}

// recordBilledTerms makes the terms customer c is billed at at its terms
// from at on: those of the plan in effect then, at no price while a trial
// of it lasts.
func recordBilledTerms(ctx context.Context, tx pgx.Tx, c tiers.Customer, at time.Time) error {
	var plan tiers.Plan
	var err error
	if key := c.PlanAt(at); key == c.Plan {
		plan, err = findPlanOfGroup(ctx, tx, key, c.JoinedVersion) // the version the customer is on
	} else {
		plan, err = findPlan(ctx, tx, key, false) // a trial's plan: its latest version
	}
	if err != nil {
		return err
	}
	return recordTerms(ctx, tx, at, billing.TermsOf(c, c.Billed(plan, at)))
}
