// Package grants keeps the units customers bought or were given beyond
// their plan (top-ups, prepaid and promotional units): their creation,
// listing and voiding. Checks draw on them in package quota; the
// PostgreSQL store implements the interfaces of both. It imports only the
// standard library and tiers.
package grants

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// ErrGrantNotFound: no grant has the id, or it is voided.
var ErrGrantNotFound = errors.New("grant not found")

// Shapes and bounds.
const (
	// IDPrefix starts every grant id.
	IDPrefix = "grt_"
	idChars  = 16
	// MaxPriority bounds a grant's priority (0 is drawn first).
	MaxPriority = 1000
	// MaxReasonLen bounds a grant's reason, in characters.
	MaxReasonLen = 500
)

// Grant is a customer's grant of units of one metric, as the admin API
// shows it. Remaining is what may still be drawn (0 once voided).
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
	// VoidedAt is when an admin voided it (nil: never).
	VoidedAt *time.Time `json:"voided_at"`
}

// Live reports whether g may be drawn at at: units left, not voided, not
// expired.
func (g Grant) Live(at time.Time) bool {
	return g.Remaining > 0 && g.VoidedAt == nil && (g.ExpiresAt == nil || g.ExpiresAt.After(at))
}

// Spec is the body of POST /v1/customers/{id}/grants.
type Spec struct {
	Metric    string     `json:"metric"`
	Amount    int64      `json:"amount"`
	ExpiresAt *time.Time `json:"expires_at" nullable:"true"`
	Priority  *int       `json:"priority" nullable:"true"`
	Reason    string     `json:"reason"`
	// RequestID makes the creation idempotent: a repeat with the same id
	// for the same customer returns the grant the first made.
	RequestID string `json:"request_id"`
}

// Validate checks s at now. Errors are *tiers.ValidationError.
func (s Spec) Validate(now time.Time) error {
	var fields []tiers.FieldError
	add := func(field, msg string) { fields = append(fields, tiers.FieldError{Field: field, Message: msg}) }
	if s.Metric == "" {
		add("metric", "is required")
	} else if err := tiers.CheckKey("metric", s.Metric); err != nil {
		fields = append(fields, err.(*tiers.ValidationError).Fields...)
	}
	if s.Amount < 1 || s.Amount > tiers.MaxLimit {
		add("amount", fmt.Sprintf("must be an integer between 1 and %d", tiers.MaxLimit))
	}
	if s.ExpiresAt != nil && !s.ExpiresAt.After(now) {
		add("expires_at", "must be in the future")
	}
	if s.Priority != nil && (*s.Priority < 0 || *s.Priority > MaxPriority) {
		add("priority", fmt.Sprintf("must be an integer between 0 and %d (0 is drawn first)", MaxPriority))
	}
	if msg := tiers.CheckText(s.Reason, MaxReasonLen); msg != "" {
		add("reason", msg)
	}
	if msg := tiers.CheckText(s.RequestID, 200); msg != "" {
		add("request_id", msg)
	}
	if fields != nil {
		return &tiers.ValidationError{Fields: fields}
	}
	return nil
}

// NewID returns a fresh grant id: "grt_" and 16 base62 characters.
func NewID() (string, error) { return tiers.NewRandomID(IDPrefix, idChars, "grant") }

// ValidID reports whether s has the shape of a grant id.
func ValidID(s string) bool { return tiers.ValidRandomID(s, IDPrefix, idChars) }

// Filter selects a customer's grants: the live ones at At, or, with All,
// every one (used up, expired and voided included).
type Filter struct {
	At  time.Time
	All bool
}

// Store keeps grants. CreateGrant and VoidGrant each run in one
// transaction that records an audit event and tells every quotad process
// (their cached customer knows whether it has live grants). Errors:
// ErrGrantNotFound, tiers.ErrCustomerNotFound, tiers.ErrMetricNotFound,
// tiers.ErrConflict, tiers.ErrUnavailable. Implementations are safe for
// concurrent use.
type Store interface {
	// CreateGrant stores g (Remaining = Amount), or, where the customer
	// made one under requestID before, returns that one (created false);
	// tiers.ErrConflict when that one differs from g.
	CreateGrant(ctx context.Context, w tiers.Write, g Grant, requestID string) (_ Grant, created bool, _ error)
	// FindGrants returns the customer's grants as f selects them, in
	// drawing order: priority, then the soonest to expire (never last),
	// then the oldest.
	FindGrants(ctx context.Context, customer string, f Filter) ([]Grant, error)
	// VoidGrant voids what remains of grant id (not voided yet) and
	// returns it as it was.
	VoidGrant(ctx context.Context, w tiers.Write, id string) (Grant, error)
}

// Service is the admin side of grants: validation, ids, the time of
// writes. Changed, if set, hears of every customer whose grants it
// changed, once the change committed (the process's own cache; the
// others hear of it from the store).
type Service struct {
	store   Store
	now     func() time.Time
	Changed func(customer string)
}

// NewService returns a Service over store; now stamps writes and judges
// expiry.
func NewService(store Store, now func() time.Time) *Service {
	return &Service{store: store, now: now}
}

// CreateGrant validates spec and grants its units to customer. It
// reports whether it created one (false: a repeat of spec's request id).
// Errors: *tiers.ValidationError and the Store's.
func (s *Service) CreateGrant(ctx context.Context, w tiers.Write, customer string, spec Spec) (Grant, bool, error) {
	now := tiers.Instant(s.now())
	w.At = now
	if err := tiers.CheckCustomerID("customer", customer); err != nil {
		return Grant{}, false, err
	}
	if err := spec.Validate(now); err != nil {
		return Grant{}, false, err
	}
	id, err := NewID()
	if err != nil {
		return Grant{}, false, err
	}
	g := Grant{ID: id, Customer: customer, Metric: spec.Metric, Amount: spec.Amount, Remaining: spec.Amount,
		Reason: spec.Reason, CreatedAt: now}
	if spec.ExpiresAt != nil {
		at := tiers.Instant(*spec.ExpiresAt)
		g.ExpiresAt = &at
	}
	if spec.Priority != nil {
		g.Priority = *spec.Priority
	}
	g, created, err := s.store.CreateGrant(ctx, w, g, spec.RequestID)
	if err != nil {
		return Grant{}, false, err
	}
	if created {
		s.changed(customer)
	}
	return g, created, nil
}

// Grants returns the customer's grants: the live ones, or, with all,
// every one.
func (s *Service) Grants(ctx context.Context, customer string, all bool) ([]Grant, error) {
	if err := tiers.CheckCustomerID("customer", customer); err != nil {
		return nil, err
	}
	return s.store.FindGrants(ctx, customer, Filter{At: s.now().UTC(), All: all})
}

// Live returns the live grants at at of customer c as the catalog loaded
// it, in drawing order. It asks the store only when c has some
// (tiers.Customer.HasGrants): a customer without grants costs no round
// trip.
func (s *Service) Live(ctx context.Context, c tiers.Customer, at time.Time) ([]Grant, error) {
	if !c.HasGrants("", at) {
		return []Grant{}, nil
	}
	return s.store.FindGrants(ctx, c.ID, Filter{At: at})
}

// VoidGrant voids what remains of grant id: no check draws on it once
// this returns, in any process (every draw reads the store).
func (s *Service) VoidGrant(ctx context.Context, w tiers.Write, id string) error {
	if !ValidID(id) {
		return ErrGrantNotFound
	}
	w.At = tiers.Instant(s.now())
	g, err := s.store.VoidGrant(ctx, w, id)
	if err != nil {
		return err
	}
	s.changed(g.Customer)
	return nil
}

func (s *Service) changed(customer string) {
	if s.Changed != nil {
		s.Changed(customer)
	}
}
