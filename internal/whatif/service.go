package whatif

import (
	"context"
	"fmt"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// Spec is the body of POST /v1/what-if.
type Spec struct {
	Plan string `json:"plan"`
	// Limits are the proposed limits, as a plan's.
	Limits []tiers.LimitSpec `json:"limits"`
	// Price is the proposed price; it is validated and answered back.
	Price *tiers.PriceSpec `json:"price" nullable:"true"`
	// From and To are the first and last dates replayed, YYYY-MM-DD.
	From string `json:"from"`
	To   string `json:"to"`
	// Customers, when not empty, are replayed instead of the plan's.
	Customers []string `json:"customers" nullable:"true"`
}

// Query is what a replay reads from history.
type Query struct {
	// Plan's customers are read, or else Customers when not empty.
	Plan      string
	Customers []string
	Metrics   []string
	From, To  time.Time
}

// HistoryStore streams history. *store.History implements it.
type HistoryStore interface {
	// StreamHistory calls fn with each history row of q, grouped by
	// customer and in date order, from one query; it stops at fn's
	// first error and returns it.
	StreamHistory(ctx context.Context, q Query, fn func(Row) error) error
}

// Catalog is what a what-if reads of the catalog. *tiers.Service
// implements it.
type Catalog interface {
	Plan(ctx context.Context, key string) (tiers.Plan, error)
	Customer(ctx context.Context, id string) (tiers.Customer, error)
}

// Service answers what-ifs.
type Service struct {
	Catalog Catalog
	History HistoryStore
}

// MaxCustomers is how many customers a what-if may name.
const MaxCustomers = 1000

// Answer is a what-if's answer: its replay and the proposed price.
type Answer struct {
	Plan  string      `json:"plan"`
	From  string      `json:"from"`
	To    string      `json:"to"`
	Price tiers.Price `json:"price"`
	Result
}

// Run validates spec and replays history against its limits. Errors:
// *tiers.ValidationError, tiers.ErrPlanNotFound, tiers.ErrCustomerNotFound,
// tiers.ErrUnavailable.
func (s *Service) Run(ctx context.Context, spec Spec) (Answer, error) {
	plan, err := tiers.PlanSpec{Limits: spec.Limits, Price: spec.Price}.Validate(spec.Plan)
	var fields []tiers.FieldError
	if ve, ok := err.(*tiers.ValidationError); ok {
		fields = ve.Fields
	} else if err != nil {
		return Answer{}, err
	}
	from, ferr := time.Parse(time.DateOnly, spec.From)
	if ferr != nil {
		fields = append(fields, tiers.FieldError{Field: "from", Message: "must be a date, YYYY-MM-DD"})
	}
	to, terr := time.Parse(time.DateOnly, spec.To)
	if terr != nil {
		fields = append(fields, tiers.FieldError{Field: "to", Message: "must be a date, YYYY-MM-DD"})
	}
	if ferr == nil && terr == nil && from.After(to) {
		fields = append(fields, tiers.FieldError{Field: "from", Message: "must not be after to"})
	}
	if len(spec.Customers) > MaxCustomers {
		fields = append(fields, tiers.FieldError{Field: "customers", Message: fmt.Sprintf("must have at most %d entries", MaxCustomers)})
	}
	if len(fields) > 0 {
		return Answer{}, &tiers.ValidationError{Fields: fields}
	}
	if _, err := s.Catalog.Plan(ctx, spec.Plan); err != nil {
		return Answer{}, err
	}
	for _, id := range spec.Customers {
		if _, err := s.Catalog.Customer(ctx, id); err != nil {
			return Answer{}, fmt.Errorf("customer %s: %w", id, err)
		}
	}
	r := New(plan.Limits)
	q := Query{Plan: spec.Plan, Customers: spec.Customers, Metrics: r.Metrics(), From: from, To: to}
	if len(q.Metrics) > 0 {
		err = s.History.StreamHistory(ctx, q, func(row Row) error { r.Add(row); return nil })
		if err != nil {
			return Answer{}, err
		}
	}
	return Answer{Plan: spec.Plan, From: spec.From, To: spec.To, Price: plan.Price, Result: r.Result()}, nil
}
