package api

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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

// pagedBilling is fakeBilling that tells onPage of every page of
// statements asked for, before answering it with onPage's error, if any.
type pagedBilling struct {
	fakeBilling
	onPage func(tiers.Page) error
}

func (f pagedBilling) Statements(ctx context.Context, month string, page tiers.Page) ([]billing.Statement, bool, error) {
	if err := f.onPage(page); err != nil {
		return nil, false, err
	}
	return f.fakeBilling.Statements(ctx, month, page)
}

// manyStatements is n customers' statements, with the quoting CSV needs.
func manyStatements(n int) fakeBilling {
	nov := billing.Period{Start: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	metric := "api_calls"
	f := fakeBilling{month: "2026-11"}
	for i := range n {
		st := billing.Statement{Customer: fmt.Sprintf("c%05d", i), Period: nov, Currency: "USD", Lines: []billing.Line{
			{Kind: "base", Plan: "pro", Quantity: 2592000, UnitPriceMicros: 49000000, AmountCents: 4900, Description: "Pro, \"monthly\""}}}
		if i%3 == 0 {
			st.Lines = append(st.Lines, billing.Line{Kind: "overage", Plan: "pro", Metric: &metric, Quantity: int64(i),
				UnitPriceMicros: 1000, AmountCents: int64(i / 10), Description: fmt.Sprintf("%d overage units,\nof api_calls", i)})
		}
		f.statements = append(f.statements, st)
	}
	return f
}

// The CSV of every customer is the same file, byte for byte, as when it
// was made whole before it was sent; but it is written as it is computed:
// when a page of customers is asked for, the rows of the pages before it
// have been sent already.
func TestStatementsCSVStreamed(t *testing.T) {
	const customers = 3*csvPageSize + 7
	f := manyStatements(customers)
	var want bytes.Buffer
	w := csv.NewWriter(&want)
	w.UseCRLF = true
	_ = w.Write(csvHeader)
	for _, st := range f.statements {
		if err := writeCSVRows(w, st); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()

	rec := httptest.NewRecorder()
	pages := 0
	billing := pagedBilling{fakeBilling: f, onPage: func(p tiers.Page) error {
		pages++
		if p.After != "" && !strings.Contains(rec.Body.String(), "\r\n"+p.After+",") {
			t.Errorf("page after %s asked for before that customer's rows were sent (%d bytes sent)", p.After, rec.Body.Len())
		}
		return nil
	}}
	req := newRequest(http.MethodGet, "/v1/statements?period=2026-11", nil)
	req.Header.Set("Accept", "text/csv")
	New(Config{Billing: billing}).ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != contentTypeCSV {
		t.Fatalf("answered %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	if got := rec.Body.String(); got != want.String() {
		t.Errorf("the CSV differs from the whole file: %d bytes, want %d", len(got), want.Len())
	}
	if want := customers/csvPageSize + 1; pages != want {
		t.Errorf("%d pages asked for, want %d of at most %d customers", pages, want, csvPageSize)
	}
}

// A page that fails after the first cuts the transfer short: the client
// gets an error, never a file that looks whole. One that fails first is a
// problem document.
func TestStatementsCSVCutShort(t *testing.T) {
	tests := []struct {
		name     string
		failPage int
	}{
		{"the first page", 1},
		{"a later page", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pages := 0
			b := pagedBilling{fakeBilling: manyStatements(5 * csvPageSize), onPage: func(tiers.Page) error {
				if pages++; pages == tt.failPage {
					return tiers.ErrUnavailable
				}
				return nil
			}}
			srv := httptest.NewServer(New(Config{Billing: b}))
			defer srv.Close()
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v1/statements?period=2026-11", nil)
			req.Header.Set("Accept", "text/csv")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if tt.failPage == 1 {
				if resp.StatusCode != http.StatusServiceUnavailable || err != nil {
					t.Errorf("answered %d (%v): %s, want a 503 problem", resp.StatusCode, err, body)
				}
				return
			}
			if resp.StatusCode != http.StatusOK || err == nil {
				t.Errorf("answered %d, read %d bytes and %v; want a 200 cut short by an error", resp.StatusCode, len(body), err)
			}
			if !strings.Contains(string(body), "\r\nc00199,") {
				t.Errorf("the first two pages were not sent before the cut: %d bytes", len(body))
			}
		})
	}
}
