package api

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/grants"
	"github.com/quotad/quotad/internal/tiers"
)

// entitlementsAnswer is the body of GET /v1/customers/{id}/entitlements:
// what an application needs to draw a pricing page or a paywall.
type entitlementsAnswer struct {
	Customer string                        `json:"customer"`
	Plan     string                        `json:"plan"`
	Status   string                        `json:"status"`
	Features map[string]tiers.FeatureValue `json:"features"`
	Limits   []entitlementLimit            `json:"limits"`
	Grants   []entitlementGrant            `json:"grants"`
}

// entitlementLimit is one window of an effective limit, with its usage.
type entitlementLimit struct {
	Metric string `json:"metric"`
	// Per and Subject: "subject" and the subject, on the windows of a
	// limit per subject; absent on the customer's.
	Per       *tiers.Per   `json:"per,omitempty"`
	Subject   string       `json:"subject,omitempty"`
	Window    tiers.Window `json:"window"`
	Limit     int64        `json:"limit"`
	Mode      tiers.Mode   `json:"mode"`
	Used      int64        `json:"used"`
	Remaining int64        `json:"remaining"`
	// ResetAt is null for a window that never resets (total).
	ResetAt *time.Time `json:"reset_at"`
}

// entitlementGrant is one live grant: what is left of it.
type entitlementGrant struct {
	ID        string     `json:"id"`
	Metric    string     `json:"metric"`
	Amount    int64      `json:"amount"`
	Remaining int64      `json:"remaining"`
	Priority  int        `json:"priority"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// entitlements answers a customer's features, limits with their usage and
// live grants in one call, as checks see them (see
// quota.Engine.Entitlements): from memory for a customer this process
// checks, grants read only for a customer that has some.
func (s *Server) entitlements(c echo.Context) error {
	q := c.QueryParams()
	subject := q.Get("subject")
	if q.Has("subject") && !tiers.ValidSubject(subject) {
		return invalid("subject", tiers.SubjectRule)
	}
	ctx := c.Request().Context()
	e, err := s.checker.Entitlements(ctx, param(c, "customer"), subject)
	if err != nil {
		return err
	}
	live := []grants.Grant{}
	if s.grants != nil {
		if live, err = s.grants.Live(ctx, e.Account.Customer, e.At); err != nil {
			return err
		}
	}
	a := entitlementsAnswer{Customer: e.Account.Customer.ID, Plan: e.Account.Plan.Key, Status: string(e.Account.Customer.Status),
		Features: e.Features, Limits: make([]entitlementLimit, len(e.Usage)), Grants: make([]entitlementGrant, len(live))}
	if a.Features == nil {
		a.Features = map[string]tiers.FeatureValue{}
	}
	for i, u := range e.Usage {
		l := entitlementLimit{Metric: u.Metric, Subject: u.Subject, Window: u.Window, Limit: u.Limit, Mode: u.Mode,
			Used: u.Used, Remaining: u.Remaining, ResetAt: resetAt(u.ResetAt)}
		if u.Subject != "" {
			per := tiers.PerSubject
			l.Per = &per
		}
		a.Limits[i] = l
	}
	for i, g := range live {
		a.Grants[i] = entitlementGrant{ID: g.ID, Metric: g.Metric, Amount: g.Amount, Remaining: g.Remaining,
			Priority: g.Priority, ExpiresAt: g.ExpiresAt}
	}
	return respond(c, http.StatusOK, a)
}
