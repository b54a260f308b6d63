package tiers

import (
	"errors"
	"slices"
	"strings"
)

// Sentinel errors. Store implementations return them (wrapped with %w) and
// the API maps each to one status and problem code.
var (
	ErrMetricNotFound = errors.New("metric not found")
	ErrPlanNotFound   = errors.New("plan not found")
	// ErrPlanVersionNotFound: the plan has no version of this number.
	ErrPlanVersionNotFound = errors.New("plan version not found")
	ErrCustomerNotFound    = errors.New("customer not found")
	ErrOverrideNotFound    = errors.New("override not found")
	// ErrFeatureOverrideNotFound: the customer has no override of the
	// feature.
	ErrFeatureOverrideNotFound = errors.New("feature override not found")

	// ErrMetricInUse: a plan, a version of a plan that customers are on,
	// or an override (expired ones too) limits the metric, or a credit
	// pool's schema names it.
	ErrMetricInUse = errors.New("metric is in use")
	// ErrPlanInUse: customers are on the plan, or will be (a trial, a
	// scheduled change).
	ErrPlanInUse = errors.New("plan is in use")
	// ErrConflict: the request contradicts an earlier one (e.g. a reused
	// idempotency key with a different body).
	ErrConflict = errors.New("conflict")
	// ErrPreconditionFailed: If-Match did not match the resource.
	ErrPreconditionFailed = errors.New("precondition failed")
	// ErrInvalidAPIKey: no live API key has this value (unknown, revoked and
	// expired keys alike: the caller is not told which).
	ErrInvalidAPIKey = errors.New("invalid api key")
	// ErrReservationNotFound: no reservation has this id.
	ErrReservationNotFound = errors.New("reservation not found")
	// ErrReservationExpired: the reservation was not committed by its
	// expiry, and quotad released it.
	ErrReservationExpired = errors.New("reservation expired")
	// ErrCheckNotFound: a refund's request_id names no check of its
	// customer that was admitted within the last 24 hours.
	ErrCheckNotFound = errors.New("check not found")
	// ErrSubjectRequired: a check of a metric that has limits per subject
	// names no subject.
	ErrSubjectRequired = errors.New("subject required")
	// ErrNoTotalLimit: a set of a customer's total names a metric on which
	// no limit of window total, customer-wide, is in effect for it.
	ErrNoTotalLimit = errors.New("no total limit")
	// ErrUnavailable: the store cannot be reached; nothing was written.
	ErrUnavailable = errors.New("store unavailable")
)

// FieldError is one problem with one input field, named by its JSON path
// (e.g. "limits[0].window").
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ValidationError is input that breaks the catalog's rules. Its fields are
// meant for the client.
type ValidationError struct {
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("invalid input")
	for i, f := range e.Fields {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		if f.Field != "" {
			b.WriteString(f.Field)
			b.WriteString(": ")
		}
		b.WriteString(f.Message)
	}
	return b.String()
}

// Invalid returns a ValidationError about one field.
func Invalid(field, message string) *ValidationError {
	return &ValidationError{Fields: []FieldError{{Field: field, Message: message}}}
}

// problems collects field errors during validation.
type problems struct{ list []FieldError }

func (p *problems) add(field, message string) {
	p.list = append(p.list, FieldError{Field: field, Message: message})
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &ValidationError{Fields: p.list}
}

// sortFields orders field errors by field, those of one list's entries
// (credit_schema[2] and credit_schema[10]) in the order they came.
func sortFields(list []FieldError) {
	name := func(f FieldError) string {
		n, _, _ := strings.Cut(f.Field, "[")
		return n
	}
	slices.SortStableFunc(list, func(a, b FieldError) int { return strings.Compare(name(a), name(b)) })
}
