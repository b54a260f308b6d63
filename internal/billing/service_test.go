package billing

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// fakeStore is a Store over terms and overage in memory.
type fakeStore struct {
	terms map[string][]Terms
	usage map[string][]Overage
}

func (f fakeStore) FindTerms(_ context.Context, customer string) ([]Terms, error) {
	return f.terms[customer], nil
}

func (f fakeStore) FindOverage(_ context.Context, customer string, from, to time.Time) ([]Overage, error) {
	var out []Overage
	for _, d := range f.usage[customer] {
		if !d.Date.Before(from) && d.Date.Before(to) {
			out = append(out, d)
		}
	}
	return out, nil
}

func (f fakeStore) FindGrantUse(context.Context, string, time.Time, time.Time) ([]GrantUse, error) {
	return nil, nil
}

func (f fakeStore) FindBilledCustomers(_ context.Context, from, to time.Time, page tiers.Page) ([]string, bool, error) {
	var ids []string
	for id, list := range f.terms {
		for _, t := range list {
			if id > page.After && t.From.Before(to) && (t.To.IsZero() || t.To.After(from)) {
				ids = append(ids, id)
				break
			}
		}
	}
	slices.Sort(ids)
	if len(ids) > page.Limit {
		return ids[:page.Limit], true, nil
	}
	return ids, false, nil
}

var _ Store = fakeStore{}

func TestService(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	anchored := func(id string, d int) []Terms {
		return []Terms{with(pro(day(2026, 1, 1), time.Time{}), func(t *Terms) { t.Customer = id; t.AnchorDay = d })}
	}
	store := fakeStore{terms: map[string][]Terms{
		"a":    anchored("a", 0),
		"b":    anchored("b", 25), // its November period starts after now
		"c":    anchored("c", 0),
		"d":    {with(pro(day(2026, 1, 1), day(2026, 10, 1)), func(t *Terms) { t.Customer = "d"; t.Currency = "EUR" })},
		"gone": {with(pro(day(2026, 1, 1), day(2026, 10, 10)), func(t *Terms) { t.Customer = "gone" })},
		"e":    anchored("e", 0),
	}}
	s := NewService(store, func() time.Time { return now })

	t.Run("errors", func(t *testing.T) {
		tests := []struct {
			customer, month string
			want            error
			field           string
		}{
			{"a", "2026-13", nil, "period"},
			{"a", "november", nil, "period"},
			{"-bad", "2026-11", nil, "customer"},
			{"a", "2026-12", nil, "period"}, // the future
			{"ghost", "2026-11", tiers.ErrCustomerNotFound, ""},
		}
		for _, tt := range tests {
			_, err := s.Statement(ctx, tt.customer, tt.month)
			var ve *tiers.ValidationError
			switch {
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Errorf("%s %s: err = %v, want %v", tt.customer, tt.month, err, tt.want)
			case tt.want == nil && (!errors.As(err, &ve) || ve.Fields[0].Field != tt.field):
				t.Errorf("%s %s: err = %v, want a validation error on %s", tt.customer, tt.month, err, tt.field)
			}
		}
	})

	t.Run("known customer without terms in the period", func(t *testing.T) {
		st, err := s.Statement(ctx, "d", "2026-11")
		if err != nil || len(st.Lines) != 0 || st.TotalCents != 0 || st.Currency != "EUR" {
			t.Errorf("statement = %+v, %v; want no lines, 0 EUR", st, err)
		}
	})

	t.Run("list pages", func(t *testing.T) {
		var got []string
		page := tiers.Page{Limit: 2}
		for range 5 {
			list, more, err := s.Statements(ctx, "2026-10", page)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range list {
				got = append(got, st.Customer)
			}
			if !more {
				break
			}
			page.After = list[len(list)-1].Customer
		}
		// October: every customer but d, whose terms ended on October 1st.
		if want := []string{"a", "b", "c", "e", "gone"}; !slices.Equal(got, want) {
			t.Errorf("October's statements are of %v, want %v", got, want)
		}
		list, _, err := s.Statements(ctx, "2026-11", tiers.Page{Limit: 100})
		got = nil
		for _, st := range list {
			got = append(got, st.Customer)
		}
		// November: gone's and d's terms ended; b's period has not
		// begun, but November has: it is billed as if nothing changed.
		if want := []string{"a", "b", "c", "e"}; err != nil || !slices.Equal(got, want) {
			t.Errorf("November's statements are of %v (%v), want %v", got, err, want)
		}
		if _, _, err := s.Statements(ctx, "2026-12", tiers.Page{Limit: 100}); err == nil {
			t.Errorf("December's statements: no error, want the future refused")
		}
	})

	// The list and each customer's route agree: a customer is listed with
	// the statement its own route answers, and a month either answers on
	// both or is refused by both. A customer whose period has not begun
	// (b, anchored on the 25th, on the 20th) is no exception.
	t.Run("list and customer agree", func(t *testing.T) {
		for _, month := range []string{"2026-10", "2026-11", "2026-12"} {
			list, _, listErr := s.Statements(ctx, month, tiers.Page{Limit: 100})
			listed := map[string]Statement{}
			for _, st := range list {
				listed[st.Customer] = st
			}
			for _, c := range []string{"a", "b", "c", "d", "e", "gone"} {
				st, err := s.Statement(ctx, c, month)
				if (err == nil) != (listErr == nil) {
					t.Errorf("%s %s: err = %v, the list's %v", c, month, err, listErr)
					continue
				}
				got, ok := listed[c]
				switch {
				case err != nil:
				case !ok && len(st.Lines) > 0:
					t.Errorf("%s %s: answers %d lines, but the list leaves it out", c, month, len(st.Lines))
				case ok && !reflect.DeepEqual(got, st):
					t.Errorf("%s %s: listed as %+v, answers %+v", c, month, got, st)
				}
			}
		}
		b, err := s.Statement(ctx, "b", "2026-11")
		if err != nil || !b.Period.Start.Equal(day(2026, 11, 25)) || len(b.Lines) != 1 || b.Lines[0].AmountCents != 4900 {
			t.Errorf("b's November, not begun = %+v, %v; want the whole period at Pro's price", b, err)
		}
	})
}
