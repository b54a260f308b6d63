package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// Store reads what statements are made of. Errors: tiers.ErrUnavailable
// when PostgreSQL cannot be reached. Implementations are safe for
// concurrent use.
type Store interface {
	// FindTerms returns every terms row of the customer, deleted or not,
	// ordered by From and then as written; none if it was never known.
	FindTerms(ctx context.Context, customer string) ([]Terms, error)
	// FindOverage returns the customer's days (its local dates, as 00:00
	// UTC of each) in [from, to) with overage units, by day and metric.
	FindOverage(ctx context.Context, customer string, from, to time.Time) ([]Overage, error)
	// FindBilledCustomers returns one page of the ids, ascending, of the
	// customers (deleted ones too) with terms overlapping [from, to), and
	// whether more follow.
	FindBilledCustomers(ctx context.Context, from, to time.Time, page tiers.Page) ([]string, bool, error)
	// FindGrantUse returns, per grant of the customer, the units checks
	// drew on it in [from, to) (draws given back taken off; grants with
	// none left out), by metric then grant.
	FindGrantUse(ctx context.Context, customer string, from, to time.Time) ([]GrantUse, error)
}

// Service makes statements.
type Service struct {
	store Store
	now   func() time.Time
}

// NewService returns a Service over store. now is its clock, the one the
// catalog stamps writes with: it decides which periods are in the future.
func NewService(store Store, now func() time.Time) *Service {
	return &Service{store: store, now: now}
}

// Statement returns the statement of customer for the period that starts
// in month (YYYY-MM). A period in progress, or one of a month begun that
// has not begun itself (its anchor day is still to come), is billed as if
// nothing changed until its end, with the overage recorded so far:
// Statements lists the same statements.
//
// Errors: *tiers.ValidationError for a bad id or month, or a month that
// starts after now; tiers.ErrCustomerNotFound for a customer never known;
// *ConflictError (matching tiers.ErrConflict) for mixed currencies or
// amounts beyond 64 bits.
func (s *Service) Statement(ctx context.Context, customer, month string) (Statement, error) {
	m, err := checkInput(customer, month)
	if err != nil {
		return Statement{}, err
	}
	if err := begun(m, s.now()); err != nil {
		return Statement{}, err
	}
	terms, err := s.store.FindTerms(ctx, customer)
	if err != nil {
		return Statement{}, fmt.Errorf("statement[%s %s]: %w", customer, month, err)
	}
	if len(terms) == 0 {
		return Statement{}, tiers.ErrCustomerNotFound
	}
	return s.build(ctx, customer, PeriodOf(m, terms), terms)
}

// begun is the one rule of which months have statements, for a customer
// and for the list alike: those begun at now somewhere, the month starting
// up to 14 hours before UTC's in the zones east of it (a customer's
// billing period starts at local midnight). Every period of a month begun
// answers, whether it has begun itself or not (a customer's anchor day
// may be still to come in the month): billed as if nothing changed.
func begun(m Month, now time.Time) error {
	if start := m.Start().Add(-earliestOffset); start.After(now) {
		return tiers.Invalid("period", fmt.Sprintf("is in the future: the month starts at %s", start.Format(time.RFC3339)))
	}
	return nil
}

// earliestOffset is how far ahead of UTC the easternmost time zone is
// (UTC+14, Kiribati's Line Islands).
const earliestOffset = 14 * time.Hour

func (s *Service) build(ctx context.Context, customer string, p Period, terms []Terms) (Statement, error) {
	from, to := Dates(p, terms)
	usage, err := s.store.FindOverage(ctx, customer, from, to)
	if err != nil {
		return Statement{}, fmt.Errorf("statement[%s]: %w", customer, err)
	}
	st, err := Build(customer, p, terms, usage)
	if err != nil {
		return Statement{}, err
	}
	use, err := s.store.FindGrantUse(ctx, customer, p.Start, p.End)
	if err != nil {
		return Statement{}, fmt.Errorf("statement[%s]: %w", customer, err)
	}
	st.Lines = append(st.Lines, grantLines(st, use)...)
	return st, nil
}

func checkInput(customer, month string) (Month, error) {
	var fields []tiers.FieldError
	if err := tiers.CheckCustomerID("customer", customer); err != nil {
		fields = append(fields, err.(*tiers.ValidationError).Fields...)
	}
	m, err := ParseMonth("period", month)
	if err != nil {
		fields = append(fields, err.(*tiers.ValidationError).Fields...)
	}
	if fields != nil {
		return Month{}, &tiers.ValidationError{Fields: fields}
	}
	return m, nil
}

// Statements returns one page of the statements of month (YYYY-MM), by
// customer id: every customer, deleted ones too, with terms overlapping
// its period, each as Statement answers it (a period of the month not
// begun yet included, as Statement bills it).
//
// Errors: *tiers.ValidationError for a bad month or one that starts after
// now; *ConflictError as Statement, naming the customer.
func (s *Service) Statements(ctx context.Context, month string, page tiers.Page) ([]Statement, bool, error) {
	m, err := ParseMonth("period", month)
	if err != nil {
		return nil, false, err
	}
	if err := begun(m, s.now()); err != nil {
		return nil, false, err
	}
	// Every period of the month lies within [1st, 28th of the next month)
	// at local midnight: within a day of it in UTC, whatever the zone.
	from, to := m.Start().AddDate(0, 0, -1), time.Date(m.Year, m.Month+1, 29, 0, 0, 0, 0, time.UTC)
	var out []Statement
	after := page.After
	for {
		ids, more, err := s.store.FindBilledCustomers(ctx, from, to, tiers.Page{Limit: page.Limit, After: after})
		if err != nil {
			return nil, false, fmt.Errorf("statements[%s]: %w", month, err)
		}
		for i, id := range ids {
			terms, err := s.store.FindTerms(ctx, id)
			if err != nil {
				return nil, false, fmt.Errorf("statements[%s]: %w", month, err)
			}
			if len(terms) == 0 {
				continue
			}
			p := PeriodOf(m, terms)
			if !Overlaps(terms, p) {
				continue
			}
			st, err := s.build(ctx, id, p, terms)
			if err != nil {
				return nil, false, err
			}
			out = append(out, st)
			if len(out) == page.Limit {
				return out, more || i < len(ids)-1, nil
			}
		}
		if !more || len(ids) == 0 {
			return out, false, nil
		}
		after = ids[len(ids)-1]
	}
}
