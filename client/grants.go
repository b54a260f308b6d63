package quotad

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// GrantSpec is the body of GrantsService.Create: units of a metric a customer
// bought or was given beyond its plan.
type GrantSpec struct {
	Metric string `json:"metric"`
	Amount int64  `json:"amount"`
	// ExpiresAt, in the future, is when what remains stops being drawn;
	// nil: never.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Priority: grants with the lowest number are drawn first (nil: 0).
	Priority *int   `json:"priority,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// RequestID makes the creation safe to retry: a repeat returns the
	// grant the first made.
	RequestID string `json:"request_id,omitempty"`
}

// Grant is a customer's grant of units of one metric.
type Grant struct {
	ID        string     `json:"id"`
	Customer  string     `json:"customer"`
	Metric    string     `json:"metric"`
	Amount    int64      `json:"amount"`
	Remaining int64      `json:"remaining"`
	ExpiresAt *time.Time `json:"expires_at"`
	Priority  int        `json:"priority"`
	Reason    string     `json:"reason"`
	CreatedAt time.Time  `json:"created_at"`
	VoidedAt  *time.Time `json:"voided_at"`
}

// GrantsService manages grants, extra units a customer may spend.
type GrantsService service

// Create grants a customer units of a metric, drawn by checks that a
// hard window of a day or longer would deny. ErrCustomerNotFound or
// ErrMetricNotFound for what does not exist. It is retried only with a
// RequestID (a retry without one could grant twice).
func (s *GrantsService) Create(ctx context.Context, customer string, spec GrantSpec) (*Grant, error) {
	var g Grant
	if _, err := s.client.do(ctx, call{method: http.MethodPost, path: pathf("/v1/customers/%s/grants", customer), body: spec,
		ok: []int{http.StatusCreated, http.StatusOK}, retry: spec.RequestID != "", out: &g}); err != nil {
		return nil, err
	}
	return &g, nil
}

// List lists a customer's grants in drawing order: the live ones, or,
// with all, every one (used up, expired and voided included).
func (s *GrantsService) List(ctx context.Context, customer string, all bool) ([]Grant, error) {
	var out struct {
		Grants []Grant `json:"grants"`
	}
	var q url.Values
	if all {
		q = url.Values{"all": {"true"}}
	}
	if _, err := s.client.do(ctx, call{method: http.MethodGet, path: pathf("/v1/customers/%s/grants", customer), query: q,
		retry: true, out: &out}); err != nil {
		return nil, err
	}
	return out.Grants, nil
}

// Void voids what remains of a grant: no check draws on it from then
// on, in any quotad process. ErrGrantNotFound if no grant that is not
// voided has the id.
func (s *GrantsService) Void(ctx context.Context, id string) error {
	return s.client.del(ctx, pathf("/v1/grants/%s", id), nil)
}
