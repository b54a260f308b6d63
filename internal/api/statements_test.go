package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/billing"
	"github.com/quotad/quotad/internal/tiers"
)

// fakeBilling answers from fixed statements, by customer, for one month.
type fakeBilling struct {
	month      string
	statements []billing.Statement
	err        error
}

func (f fakeBilling) Statement(_ context.Context, customer, month string) (billing.Statement, error) {
	if f.err != nil {
		return billing.Statement{}, f.err
	}
	if _, err := billing.ParseMonth("period", month); err != nil {
		return billing.Statement{}, err
	}
	for _, st := range f.statements {
		if st.Customer == customer && month == f.month {
			return st, nil
		}
	}
	return billing.Statement{}, tiers.ErrCustomerNotFound
}

func (f fakeBilling) Statements(_ context.Context, month string, page tiers.Page) ([]billing.Statement, bool, error) {
	if f.err != nil {
		return nil, false, f.err
	}
	var out []billing.Statement
	for _, st := range f.statements {
		if st.Customer > page.After {
			out = append(out, st)
		}
	}
	if len(out) > page.Limit {
		return out[:page.Limit], true, nil
	}
	return out, false, nil
}

var _ Billing = fakeBilling{}

func statementsFixture() fakeBilling {
	nov := billing.Period{Start: time.Date(2026, 11, 15, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 15, 0, 0, 0, 0, time.UTC)}
	metric := "api_calls"
	return fakeBilling{month: "2026-11", statements: []billing.Statement{
		{Customer: "acme", Period: nov, Currency: "USD", TotalCents: 2951, Lines: []billing.Line{
			{Kind: "base", Plan: "pro", Quantity: 1296000, UnitPriceMicros: 49000000, AmountCents: 2450,
				Description: "Pro, 49.00 USD per month, for 1296000 s of the period's 2592000 s"},
			{Kind: "overage", Plan: "pro", Metric: &metric, Quantity: 1501, UnitPriceMicros: 1000, AmountCents: 150,
				Description: `1501 overage units of api_calls on "Pro"`},
			{Kind: "base", Plan: "basic", Quantity: 1296000, UnitPriceMicros: 7020000, AmountCents: 351,
				Description: "Basic\nsecond line"},
		}},
		{Customer: "empty", Period: nov, Currency: "EUR", Lines: []billing.Line{}},
		{Customer: "zed", Period: nov, Currency: "USD", TotalCents: 0, Lines: []billing.Line{
			{Kind: "base", Plan: "free", Quantity: 2592000, Description: "Free, 0.00 USD per month, for 2592000 s of the period's 2592000 s"},
		}},
	}}
}

const wantHeader = "customer,period_start,period_end,currency,kind,plan,metric,quantity,unit_price_micros,amount_cents,description\r\n"

const acmeRows = "" +
	"acme,2026-11-15T00:00:00Z,2026-12-15T00:00:00Z,USD,base,pro,,1296000,49000000,2450,\"Pro, 49.00 USD per month, for 1296000 s of the period's 2592000 s\"\r\n" +
	"acme,2026-11-15T00:00:00Z,2026-12-15T00:00:00Z,USD,overage,pro,api_calls,1501,1000,150,\"1501 overage units of api_calls on \"\"Pro\"\"\"\r\n" +
	"acme,2026-11-15T00:00:00Z,2026-12-15T00:00:00Z,USD,base,basic,,1296000,7020000,351,\"Basic\r\nsecond line\"\r\n"

const zedRows = "zed,2026-11-15T00:00:00Z,2026-12-15T00:00:00Z,USD,base,free,,2592000,0,0,\"Free, 0.00 USD per month, for 2592000 s of the period's 2592000 s\"\r\n"

// The CSV's exact bytes: RFC 4180 (CRLF, quotes doubled, fields with
// commas, quotes or line breaks quoted), one row per line, none for a
// statement without lines, every customer in one file for the list.
func TestStatementsCSV(t *testing.T) {
	srv := New(Config{Billing: statementsFixture()})
	tests := []struct {
		name, path, accept string
		want               string
	}{
		{"one customer", "/v1/customers/acme/statement?period=2026-11", "text/csv", wantHeader + acmeRows},
		{"among other types", "/v1/customers/acme/statement?period=2026-11", "application/json;q=0.5, text/csv", wantHeader + acmeRows},
		{"no lines: the header only", "/v1/customers/empty/statement?period=2026-11", "text/csv", wantHeader},
		{"every customer, no pages", "/v1/statements?period=2026-11&limit=1", "text/csv; q=1", wantHeader + acmeRows + zedRows},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest(http.MethodGet, tt.path, nil)
			req.Header.Set("Accept", tt.accept)
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/csv; charset=utf-8" {
				t.Fatalf("answered %d %s: %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
			}
			if got := rec.Body.String(); got != tt.want {
				t.Errorf("body\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestStatementsJSON(t *testing.T) {
	srv := New(Config{Billing: statementsFixture()})
	get := func(path, accept string) *httptest.ResponseRecorder {
		req := newRequest(http.MethodGet, path, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec
	}
	rec := get("/v1/customers/acme/statement?period=2026-11", "text/csv;q=0, application/json")
	const want = `{"customer":"acme","period":{"start":"2026-11-15T00:00:00Z","end":"2026-12-15T00:00:00Z"},"currency":"USD","lines":[` +
		`{"kind":"base","plan":"pro","metric":null,"quantity":1296000,"unit_price_micros":49000000,"amount_cents":2450,"description":"Pro, 49.00 USD per month, for 1296000 s of the period's 2592000 s"},` +
		`{"kind":"overage","plan":"pro","metric":"api_calls","quantity":1501,"unit_price_micros":1000,"amount_cents":150,"description":"1501 overage units of api_calls on \"Pro\""},` +
		`{"kind":"base","plan":"basic","metric":null,"quantity":1296000,"unit_price_micros":7020000,"amount_cents":351,"description":"Basic\nsecond line"}],"total_cents":2951}` + "\n"
	if rec.Code != http.StatusOK || rec.Body.String() != want {
		t.Errorf("answered %d\n%s\nwant\n%s", rec.Code, rec.Body, want)
	}

	var page struct {
		Statements []billing.Statement `json:"statements"`
		Next       string              `json:"next_cursor"`
	}
	rec = get("/v1/statements?period=2026-11&limit=2", "")
	if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || len(page.Statements) != 2 || page.Next == "" {
		t.Fatalf("first page: %d %s", rec.Code, rec.Body)
	}
	rec = get("/v1/statements?period=2026-11&limit=2&cursor="+page.Next, "")
	page.Next = ""
	if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || len(page.Statements) != 1 || page.Statements[0].Customer != "zed" || page.Next != "" {
		t.Errorf("second page: %d %s", rec.Code, rec.Body)
	}

	problems := []struct {
		name, path string
		billing    fakeBilling
		status     int
		code       string
	}{
		{"bad period", "/v1/customers/acme/statement?period=2026-13", statementsFixture(), 400, codeValidation},
		{"no period", "/v1/customers/acme/statement", statementsFixture(), 400, codeValidation},
		{"unknown customer", "/v1/customers/ghost/statement?period=2026-11", statementsFixture(), 404, codeCustomerNotFound},
		{"mixed currencies", "/v1/customers/acme/statement?period=2026-11", fakeBilling{err: &billing.ConflictError{Detail: "mixes EUR and USD"}}, 409, codeConflict},
		{"mixed currencies in the list", "/v1/statements?period=2026-11", fakeBilling{err: &billing.ConflictError{Detail: "mixes EUR and USD"}}, 409, codeConflict},
		{"bad cursor", "/v1/statements?period=2026-11&cursor=nope", statementsFixture(), 400, codeValidation},
	}
	for _, tt := range problems {
		for _, accept := range []string{"", "text/csv"} {
			req := newRequest(http.MethodGet, tt.path, nil)
			req.Header.Set("Accept", accept)
			rec := httptest.NewRecorder()
			New(Config{Billing: tt.billing}).ServeHTTP(rec, req)
			var p Problem
			_ = json.Unmarshal(rec.Body.Bytes(), &p)
			if tt.name == "bad cursor" && accept != "" {
				continue // the CSV has no pages
			}
			if rec.Code != tt.status || p.Code != tt.code || rec.Header().Get("Content-Type") != contentTypeProblemJSON {
				t.Errorf("%s (Accept %q): answered %d %s, want %d %s", tt.name, accept, rec.Code, rec.Body, tt.status, tt.code)
			}
			if tt.code == codeConflict && p.Detail != "mixes EUR and USD" {
				t.Errorf("%s: detail %q", tt.name, p.Detail)
			}
		}
	}
}
