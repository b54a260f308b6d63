package whatif

import (
	"context"
	"fmt"
	"time"

	"github.com/quotad/quotad/internal/quota"
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

// Query is whose history a replay reads.
type Query struct {
	// Plan's customers are read, or else Customers when not empty.
	Plan      string
	Customers []string
	Metrics   []string
}

// HistoryStore streams history. *store.History implements it.
type HistoryStore interface {
	// StreamDay calls fn with each history row of q's customers and
	// metrics on day (00:00 UTC of the date), in any order; it stops at
	// fn's first error and returns it. fn must not keep the row's byte
	// slices.
	StreamDay(ctx context.Context, q Query, day time.Time, fn func(Row)) error
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
	// DayTimeout, when not zero, bounds how long each day's read of
	// history may take, as a page of a streamed list is bounded: a replay
	// of many days takes as long as it needs, but never waits long for
	// one.
	DayTimeout time.Duration
}

// MaxCustomers is how many customers a what-if may name.
const MaxCustomers = 1000

// MaxDays is how many days a what-if may replay: as many as one history
// query may read.
const MaxDays = quota.MaxHistoryDays

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
	switch {
	case ferr != nil || terr != nil:
	case from.After(to):
		fields = append(fields, tiers.FieldError{Field: "from", Message: "must not be after to"})
	case to.Sub(from) > (MaxDays-1)*24*time.Hour:
		fields = append(fields, tiers.FieldError{Field: "to", Message: fmt.Sprintf("must be at most %d days after from", MaxDays-1)})
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
	q := Query{Plan: spec.Plan, Customers: spec.Customers, Metrics: r.Metrics()}
	// A day at a time, in date order, as Replay wants its rows: each
	// day's rows lie together in history, which is written a day at a
	// time.
	for d := from; len(q.Metrics) > 0 && !d.After(to); d = d.AddDate(0, 0, 1) {
		if err := s.day(ctx, q, d, r); err != nil {
			return Answer{}, err
		}
	}
	return Answer{Plan: spec.Plan, From: spec.From, To: spec.To, Price: plan.Price, Result: r.Result()}, nil
}

// day replays the rows of one day, within DayTimeout.
func (s *Service) day(ctx context.Context, q Query, day time.Time, r *Replay) error {
	if s.DayTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.DayTimeout)
		defer cancel()
	}
	return s.History.StreamDay(ctx, q, day, r.Add)
}

// Days returns how many days spec replays, 0 when its dates are not
// valid: a bound on how long Run may take, DayTimeout each.
func Days(spec Spec) int {
	from, ferr := time.Parse(time.DateOnly, spec.From)
	to, terr := time.Parse(time.DateOnly, spec.To)
	if ferr != nil || terr != nil || from.After(to) {
		return 0
	}
	return min(int(to.Sub(from)/(24*time.Hour))+1, MaxDays)
}
