package quotad

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Entitlements are what a customer may use now, in one answer: what a
// pricing page or a paywall draws.
type Entitlements struct {
	Customer string `json:"customer"`
	Plan     string `json:"plan"`
	// Status is "active".
	Status string `json:"status"`
	// Features are the customer's effective features (see Features).
	Features Features `json:"features"`
	// Limits are the customer's effective limits with their usage, and,
	// asked with a subject, the subject's windows of limits per subject.
	Limits []EntitlementLimit `json:"limits"`
	// Grants are the customer's live grants, in drawing order.
	Grants []EntitlementGrant `json:"grants"`
}

// EntitlementLimit is one window of an effective limit, with its usage.
type EntitlementLimit struct {
	Metric string `json:"metric"`
	// Per is "subject" on the windows of a limit per subject (Subject
	// names whose); empty on the customer's.
	Per       string `json:"per,omitempty"`
	Subject   string `json:"subject,omitempty"`
	Window    string `json:"window"`
	Limit     int64  `json:"limit"`
	Mode      string `json:"mode"`
	Used      int64  `json:"used"`
	Remaining int64  `json:"remaining"`
	// ResetAt is the zero time for a total, which never resets.
	ResetAt time.Time `json:"reset_at"`
}

// EntitlementGrant is what is left of one live grant.
type EntitlementGrant struct {
	ID        string     `json:"id"`
	Metric    string     `json:"metric"`
	Amount    int64      `json:"amount"`
	Remaining int64      `json:"remaining"`
	Priority  int        `json:"priority"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// Entitlements gets a customer's features, limits with their usage and
// live grants in one call; with a subject (non-empty), the subject's
// windows of limits per subject too. A check token may call it. quotad
// answers it as checks see the customer: from memory where the answering
// process holds the customer's counts.
func (c *Client) Entitlements(ctx context.Context, customer, subject string) (*Entitlements, error) {
	var q url.Values
	if subject != "" {
		q = url.Values{"subject": {subject}}
	}
	var e Entitlements
	if _, err := c.do(ctx, call{method: http.MethodGet, path: pathf("/v1/customers/%s/entitlements", customer),
		query: q, retry: true, out: &e}); err != nil {
		return nil, err
	}
	return &e, nil
}
