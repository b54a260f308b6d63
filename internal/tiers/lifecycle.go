package tiers

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A customer's state over time: suspended or active, a plan change
// scheduled for an instant, a trial of another plan until an instant.
//
// A scheduled change and a trial's end take effect at their instant
// exactly: a check resolves the plan in effect at its own time from the
// account it holds (Account.At), whether or not quotad has applied them
// yet; quotad applies them in the background (the store's
// ApplyPlanChanges), once, so that the customer's row, the audit log, the
// billing terms and the webhooks say so too.

// Status is whether a customer's checks are answered.
type Status string

// The statuses. The zero value reads as StatusActive.
const (
	StatusActive    Status = "active"
	StatusSuspended Status = "suspended"
)

// PeriodEnd is what "at" of a scheduled change says for the end of the
// customer's current billing period.
const PeriodEnd = "period_end"

// Trial puts a customer on Plan until EndsAt, billed nothing for it; then
// the customer is back on its own plan.
type Trial struct {
	Plan   string    `json:"plan"`
	EndsAt time.Time `json:"ends_at"`
}

// ScheduledChange moves a customer to Plan at At.
type ScheduledChange struct {
	Plan string    `json:"plan"`
	At   time.Time `json:"at"`
	// AtPeriodEnd: At is to be the end of the customer's billing period in
	// progress when the change is written (see Resolve); At is unset
	// until then.
	AtPeriodEnd bool `json:"-"`
}

// Resolve sets At of a change asked for at the period's end: the end of
// the billing period in progress at now, by anchor.
func (s *ScheduledChange) Resolve(anchor Anchor, now time.Time) {
	if s == nil || !s.AtPeriodEnd {
		return
	}
	_, s.At = anchor.MonthPeriod(now)
	s.AtPeriodEnd = false
}

// TrialSpec is the body's "trial" of PUT /v1/customers/{customer}.
type TrialSpec struct {
	Plan   *string    `json:"plan"`
	EndsAt *time.Time `json:"ends_at"`
}

// ScheduledChangeSpec is the body's "scheduled_change" of PUT
// /v1/customers/{customer}: "at" is an RFC 3339 instant or "period_end".
type ScheduledChangeSpec struct {
	Plan *string `json:"plan"`
	At   *string `json:"at"`
}

// Suspended reports whether the customer's checks are refused.
func (c *Customer) Suspended() bool { return c.Status == StatusSuspended }

// PlanAt returns the key of the plan in effect for the customer at now:
// its trial's plan until the trial ends, then the scheduled change's plan
// from its instant on, else its plan.
func (c *Customer) PlanAt(now time.Time) string {
	if c.Trial != nil && now.Before(c.Trial.EndsAt) {
		return c.Trial.Plan
	}
	if c.ScheduledChange != nil && !now.Before(c.ScheduledChange.At) {
		return c.ScheduledChange.Plan
	}
	return c.Plan
}

// Billed returns what the customer is billed for plan p at now: p, or,
// while a trial of p lasts, p at no price.
func (c *Customer) Billed(p Plan, now time.Time) Plan {
	if c.Trial != nil && now.Before(c.Trial.EndsAt) && c.Trial.Plan == p.Key {
		p.Price.AmountCents = 0
	}
	return p
}

// Due returns the customer after the first of its pending changes due at
// now (a trial's end or a scheduled change, the earliest first), that
// change's instant and whether the trial ended; ok is false when none is
// due.
func (c Customer) Due(now time.Time) (next Customer, at time.Time, trialEnded, ok bool) {
	trial := c.Trial != nil && !now.Before(c.Trial.EndsAt)
	change := c.ScheduledChange != nil && !now.Before(c.ScheduledChange.At)
	switch {
	case trial && (!change || !c.ScheduledChange.At.Before(c.Trial.EndsAt)):
		at = c.Trial.EndsAt
		c.Trial = nil
		return c, at, true, true
	case change:
		at = c.ScheduledChange.At
		c.Plan, c.ScheduledChange = c.ScheduledChange.Plan, nil
		return c, at, false, true
	}
	return c, time.Time{}, false, false
}

// PendingPlans returns the keys of the plans the customer's trial and
// scheduled change name ("" for none).
func (c *Customer) PendingPlans() (trial, scheduled string) {
	if c.Trial != nil {
		trial = c.Trial.Plan
	}
	if c.ScheduledChange != nil {
		scheduled = c.ScheduledChange.Plan
	}
	return trial, scheduled
}

// At returns the account as it is at now: its Plan the plan in effect
// then (see Customer.PlanAt). An account without a trial or a scheduled
// change is returned as it is.
func (a Account) At(now time.Time) Account {
	switch key := a.Customer.PlanAt(now); {
	case key == a.Plan.Key:
	case a.TrialPlan != nil && key == a.TrialPlan.Key:
		a.Plan = *a.TrialPlan
	case a.ScheduledPlan != nil && key == a.ScheduledPlan.Key:
		a.Plan = *a.ScheduledPlan
	}
	return a
}

// ErrCustomerSuspended: the customer is suspended; its checks are refused.
var ErrCustomerSuspended = errors.New("customer suspended")

// SuspendedError is a suspended customer's answer to a check: the reason
// it was suspended for. It is ErrCustomerSuspended.
type SuspendedError struct {
	Customer string
	Reason   string
}

func (e *SuspendedError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("customer %q is suspended", e.Customer)
	}
	return fmt.Sprintf("customer %q is suspended: %s", e.Customer, e.Reason)
}

// Is makes a SuspendedError ErrCustomerSuspended.
func (e *SuspendedError) Is(target error) bool { return target == ErrCustomerSuspended }

// CheckActive returns a *SuspendedError for a suspended customer, nil
// otherwise.
func (c *Customer) CheckActive() error {
	if c.Status != StatusSuspended {
		return nil
	}
	return &SuspendedError{Customer: c.ID, Reason: c.StatusReason}
}

// validateLifecycle checks the status, the trial and the scheduled change
// of a customer spec into c (whose Plan is set when valid), at now.
func (s CustomerSpec) validateLifecycle(p *problems, c *Customer, now time.Time) {
	c.Status = StatusActive
	if s.Status != nil {
		switch st := Status(*s.Status); st {
		case StatusActive, StatusSuspended:
			c.Status = st
		default:
			p.add("status", "must be one of active, suspended")
		}
	}
	if s.StatusReason != nil && *s.StatusReason != "" {
		p.checkText("status_reason", *s.StatusReason, maxReasonLen)
		if c.Status != StatusSuspended {
			p.add("status_reason", "only with status suspended")
		}
		c.StatusReason = *s.StatusReason
	}
	if t := s.Trial; t != nil {
		c.Trial = &Trial{}
		c.Trial.Plan = p.pendingPlan("trial.plan", t.Plan, c.Plan)
		switch {
		case t.EndsAt == nil:
			p.add("trial.ends_at", "is required")
		default:
			c.Trial.EndsAt = p.checkFuture("trial.ends_at", *t.EndsAt, now)
		}
	}
	if sc := s.ScheduledChange; sc != nil {
		c.ScheduledChange = &ScheduledChange{}
		c.ScheduledChange.Plan = p.pendingPlan("scheduled_change.plan", sc.Plan, c.Plan)
		switch {
		case sc.At == nil:
			p.add("scheduled_change.at", "is required")
		case *sc.At == PeriodEnd:
			c.ScheduledChange.AtPeriodEnd = true
		default:
			at, err := time.Parse(time.RFC3339, *sc.At)
			if err != nil {
				p.add("scheduled_change.at", `must be an RFC 3339 time or "period_end"`)
				break
			}
			c.ScheduledChange.At = p.checkFuture("scheduled_change.at", at, now)
		}
	}
}

// pendingPlan checks the plan of a trial or a scheduled change: a key,
// other than the customer's plan.
func (p *problems) pendingPlan(field string, key *string, plan string) string {
	switch {
	case key == nil || *key == "":
		p.add(field, "is required")
	case !ValidKey(*key):
		p.add(field, keyRule)
	case *key == plan:
		p.add(field, "must differ from plan")
	default:
		return *key
	}
	return ""
}

// checkFuture checks that t lies after now (and before year 10000), and
// returns it in UTC, to the second: billing terms change at whole seconds.
func (p *problems) checkFuture(field string, t, now time.Time) time.Time {
	t = t.UTC()
	switch {
	case t.Year() > maxYear:
		p.add(field, "must lie before 10000-01-01T00:00:00Z")
	case !t.After(now):
		p.add(field, "must lie in the future")
	case t.Truncate(time.Second) != t:
		p.add(field, "must be a whole second")
	}
	return t
}

// PlanChanger applies customers' pending changes due at now (the store
// does, see its ApplyPlanChanges): each exactly once, whatever the
// processes, returning the customers it changed, a batch at a time (none
// once nothing is due, or what is due is being applied by another
// process).
type PlanChanger interface {
	ApplyPlanChanges(ctx context.Context, now time.Time) ([]string, error)
}

// ApplyDue applies every change due at now, batch after batch, and tells
// changed of each customer changed (this process's cache: others hear
// of it from the store).
func ApplyDue(ctx context.Context, pc PlanChanger, now time.Time, changed func(Change)) error {
	for {
		ids, err := pc.ApplyPlanChanges(ctx, now)
		for _, id := range ids {
			changed(Change{Kind: CustomerChanged, Key: id})
		}
		if err != nil || len(ids) == 0 {
			return err
		}
	}
}
