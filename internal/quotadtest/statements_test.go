package quotadtest_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	quotad "github.com/quotad/quotad/client"
	"github.com/quotad/quotad/internal/quotadtest"
)

// The client reads statements from a real quotad, in JSON and CSV, and
// its errors are the API's.
func TestClientStatements(t *testing.T) {
	s := quotadtest.MustStart(t, nil)
	c := quotad.New(s.URL, quotad.WithToken(s.AdminToken))
	ctx := t.Context()
	mustCatalog(t, c) // acme on pro (free of charge), created now
	month := time.Now().UTC().Format("2006-01")

	st, err := c.Statements.Get(ctx, "acme", month)
	if err != nil {
		t.Fatal(err)
	}
	if st.Customer != "acme" || st.Currency != "USD" || len(st.Lines) != 1 || st.Lines[0].Kind != "base" ||
		st.Lines[0].Plan != "pro" || st.Lines[0].Metric != nil || st.TotalCents != 0 {
		t.Errorf("statement = %+v, want one base line of pro, 0 USD", st)
	}
	list := collect(t, c.Statements.List(ctx, month))
	if len(list) != 1 || list[0].Customer != "acme" {
		t.Errorf("statements = %+v, want acme's", list)
	}
	const header = "customer,period_start,period_end,currency,kind,plan,metric,quantity,unit_price_micros,amount_cents,description\r\n"
	for name, write := range map[string]func(*bytes.Buffer) error{
		"StatementCSV":  func(b *bytes.Buffer) error { return c.Statements.GetCSV(ctx, "acme", month, b) },
		"StatementsCSV": func(b *bytes.Buffer) error { return c.Statements.ListCSV(ctx, month, b) },
	} {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rows := strings.Split(strings.TrimSuffix(b.String(), "\r\n"), "\r\n")
		if !strings.HasPrefix(b.String(), header) || len(rows) != 2 || !strings.HasPrefix(rows[1], "acme,") {
			t.Errorf("%s wrote %q, want the header and one row of acme", name, b.String())
		}
	}

	if _, err := c.Statements.Get(ctx, "ghost", month); !errors.Is(err, quotad.ErrCustomerNotFound) {
		t.Errorf("unknown customer: err = %v, want ErrCustomerNotFound", err)
	}
	if err := c.Statements.ListCSV(ctx, "2999-01", &bytes.Buffer{}); !errors.Is(err, quotad.ErrValidation) {
		t.Errorf("future period: err = %v, want ErrValidation", err)
	}
}
