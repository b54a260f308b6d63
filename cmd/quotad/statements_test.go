package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota/quotafake"
)

// MustStatementStack is quotad in process with its billing and what-if
// services, on a manual clock set to start.
func MustStatementStack(t *testing.T, start time.Time) *inProcess {
	t.Helper()
	return mustInProcess(t, stackOptions{clock: quotafake.NewClock(start), billing: true, whatIf: true})
}

// at moves the clock to t and makes each write there, failing the test on
// any answer but 200, 201 and 204.
func (s *inProcess) at(t time.Time, writes ...string) {
	s.t.Helper()
	s.clock.Set(t)
	s.write(writes...)
}

// checks makes n checks of a unit of api_calls for customer at t; they must
// all be allowed.
func (s *inProcess) checks(t time.Time, customer string, n int) {
	s.t.Helper()
	s.clock.Set(t)
	for range n {
		rec := s.do(http.MethodPost, "/v1/check", `{"customer":"`+customer+`","metric":"api_calls","cost":1}`, "")
		if rec.Code != http.StatusOK {
			s.t.Fatalf("check at %s: %d %s", t, rec.Code, rec.Body)
		}
	}
}

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// A statement end to end: plans with soft day limits and overage prices,
// checks that go over them on several days, a plan change mid-period, the
// clock moved past the period's end; then every line and the total, in
// JSON and CSV, and the errors around them.
func TestStatementEndToEnd(t *testing.T) {
	t.Parallel()
	s := MustStatementStack(t, ts("2026-11-14T09:00:00Z"))
	soft := func(micros string) string {
		return `[{"metric":"api_calls","window":"day","limit":10,"mode":"soft","overage_percent":100,"overage_price_micros":` + micros + `}]`
	}
	s.at(ts("2026-11-14T09:00:00Z"),
		`/v1/metrics/api_calls {}`,
		`/v1/plans/pro {"name":"Pro","price":{"amount_cents":4900,"currency":"USD","interval":"month"},"limits":`+soft("12500")+`}`,
		`/v1/plans/max {"name":"Max","price":{"amount_cents":9900,"currency":"USD","interval":"month"},"limits":`+soft("1000")+`}`,
		`/v1/plans/eu {"name":"EU","price":{"amount_cents":4500,"currency":"EUR","interval":"month"}}`,
		`/v1/customers/acme {"plan":"pro","billing_anchor_day":15}`,
		`/v1/customers/zoe {"plan":"pro"}`)

	s.checks(ts("2026-11-14T10:00:00Z"), "acme", 12) // 2 over, before acme's period
	s.checks(ts("2026-11-16T10:00:00Z"), "acme", 13) // 3 over, at Pro's price
	s.checks(ts("2026-11-17T23:59:59Z"), "acme", 11) // 1 over
	s.checks(ts("2026-11-20T05:00:00Z"), "acme", 12) // 2 over, on a day that ends on Max
	s.at(ts("2026-11-20T06:00:00Z"), `/v1/customers/acme {"plan":"max","billing_anchor_day":15}`)
	s.checks(ts("2026-11-20T07:00:00Z"), "acme", 3)  // 3 over: the day's counter is kept
	s.checks(ts("2026-12-01T12:00:00Z"), "acme", 14) // 4 over
	s.checks(ts("2026-12-15T00:00:00Z"), "acme", 11) // the next period's
	s.clock.Set(ts("2026-12-20T00:00:00Z"))
	if err := s.engine.FlushHistory(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Pro from 15 Nov 00:00 to 20 Nov 06:00, 453600 s: 4900 × 0.175 =
	// 857.5 cents; Max for the rest, 2138400 s: 9900 × 0.825 = 8167.5;
	// both round up. Overage: 4 units at 12500 micros is 5 cents; 9 at
	// 1000, 0.9 cent, rounds to 1.
	const acme = `{"customer":"acme","period":{"start":"2026-11-15T00:00:00Z","end":"2026-12-15T00:00:00Z"},"currency":"USD","lines":[` +
		`{"kind":"base","plan":"pro","metric":null,"quantity":453600,"unit_price_micros":49000000,"amount_cents":858,"description":"Pro, 49.00 USD per month, for 453600 s of the period's 2592000 s"},` +
		`{"kind":"base","plan":"max","metric":null,"quantity":2138400,"unit_price_micros":99000000,"amount_cents":8168,"description":"Max, 99.00 USD per month, for 2138400 s of the period's 2592000 s"},` +
		`{"kind":"overage","plan":"pro","metric":"api_calls","quantity":4,"unit_price_micros":12500,"amount_cents":5,"description":"4 overage units of api_calls on Pro at 12500 micros (0.0125 USD) each"},` +
		`{"kind":"overage","plan":"max","metric":"api_calls","quantity":9,"unit_price_micros":1000,"amount_cents":1,"description":"9 overage units of api_calls on Max at 1000 micros (0.001 USD) each"}` +
		`],"total_cents":9032}`
	// Zoe, on calendar months, on Pro since 14 Nov 09:00: 1436400 s,
	// 2715.42 cents.
	const zoe = `{"customer":"zoe","period":{"start":"2026-11-01T00:00:00Z","end":"2026-12-01T00:00:00Z"},"currency":"USD","lines":[` +
		`{"kind":"base","plan":"pro","metric":null,"quantity":1436400,"unit_price_micros":49000000,"amount_cents":2715,"description":"Pro, 49.00 USD per month, for 1436400 s of the period's 2592000 s"}` +
		`],"total_cents":2715}`
	const csvHeader = "customer,period_start,period_end,currency,kind,plan,metric,quantity,unit_price_micros,amount_cents,description\r\n"
	const acmeCSV = "" +
		"acme,2026-11-15T00:00:00Z,2026-12-15T00:00:00Z,USD,base,pro,,453600,49000000,858,\"Pro, 49.00 USD per month, for 453600 s of the period's 2592000 s\"\r\n" +
		"acme,2026-11-15T00:00:00Z,2026-12-15T00:00:00Z,USD,base,max,,2138400,99000000,8168,\"Max, 99.00 USD per month, for 2138400 s of the period's 2592000 s\"\r\n" +
		"acme,2026-11-15T00:00:00Z,2026-12-15T00:00:00Z,USD,overage,pro,api_calls,4,12500,5,4 overage units of api_calls on Pro at 12500 micros (0.0125 USD) each\r\n" +
		"acme,2026-11-15T00:00:00Z,2026-12-15T00:00:00Z,USD,overage,max,api_calls,9,1000,1,9 overage units of api_calls on Max at 1000 micros (0.001 USD) each\r\n"
	const zoeCSV = "zoe,2026-11-01T00:00:00Z,2026-12-01T00:00:00Z,USD,base,pro,,1436400,49000000,2715,\"Pro, 49.00 USD per month, for 1436400 s of the period's 2592000 s\"\r\n"

	type want struct {
		status int
		body   string // exact, but for a problem: its code
	}
	expect := func(name, path, accept string, w want) {
		t.Helper()
		rec := s.do(http.MethodGet, path, "", accept)
		body := strings.TrimSuffix(rec.Body.String(), "\n")
		if accept == "text/csv" && rec.Code == http.StatusOK {
			body = rec.Body.String()
		}
		if rec.Code >= 400 {
			var p struct{ Code, Detail string }
			_ = json.Unmarshal(rec.Body.Bytes(), &p)
			body = p.Code
			if p.Code == "conflict" {
				body += ": " + p.Detail
			}
		}
		if rec.Code != w.status || body != w.body {
			t.Errorf("%s: answered %d\n%s\nwant %d\n%s", name, rec.Code, body, w.status, w.body)
		}
	}

	expect("acme's statement", "/v1/customers/acme/statement?period=2026-11", "", want{200, acme})
	expect("acme's CSV", "/v1/customers/acme/statement?period=2026-11", "text/csv", want{200, csvHeader + acmeCSV})
	expect("the list", "/v1/statements?period=2026-11", "", want{200, `{"statements":[` + acme + `,` + zoe + `]}`})
	expect("the list's CSV", "/v1/statements?period=2026-11", "text/csv", want{200, csvHeader + acmeCSV + zoeCSV})
	expect("a bad period", "/v1/customers/acme/statement?period=2026-1", "", want{400, "validation_failed"})
	expect("no period", "/v1/statements", "", want{400, "validation_failed"})
	expect("a period not begun", "/v1/customers/acme/statement?period=2027-01", "", want{400, "validation_failed"})
	expect("a month not begun", "/v1/statements?period=2027-01", "text/csv", want{400, "validation_failed"})
	expect("a customer never known", "/v1/customers/ghost/statement?period=2026-11", "", want{404, "customer_not_found"})

	// The period in progress: billed to its end as if nothing changed,
	// with the overage so far (1 unit on 15 Dec, at Max's price: 0.1 cent).
	expect("the period in progress", "/v1/customers/acme/statement?period=2026-12", "", want{200,
		`{"customer":"acme","period":{"start":"2026-12-15T00:00:00Z","end":"2027-01-15T00:00:00Z"},"currency":"USD","lines":[` +
			`{"kind":"base","plan":"max","metric":null,"quantity":2678400,"unit_price_micros":99000000,"amount_cents":9900,"description":"Max, 99.00 USD per month, for 2678400 s of the period's 2678400 s"},` +
			`{"kind":"overage","plan":"max","metric":"api_calls","quantity":1,"unit_price_micros":1000,"amount_cents":0,"description":"1 overage units of api_calls on Max at 1000 micros (0.001 USD) each"}` +
			`],"total_cents":9900}`})

	// History outlives the customer: a deleted customer's past periods
	// answer as before, its period after the deletion has no lines.
	s.at(ts("2026-12-20T00:00:00Z"), `/v1/customers/acme`)
	expect("a deleted customer's statement", "/v1/customers/acme/statement?period=2026-11", "", want{200, acme})
	expect("a deleted customer's list", "/v1/statements?period=2026-11", "text/csv", want{200, csvHeader + acmeCSV + zoeCSV})
	s.clock.Set(ts("2027-01-20T00:00:00Z"))
	expect("after the deletion", "/v1/customers/acme/statement?period=2027-01", "", want{200,
		`{"customer":"acme","period":{"start":"2027-01-15T00:00:00Z","end":"2027-02-15T00:00:00Z"},"currency":"USD","lines":[],"total_cents":0}`})

	// A plan in another currency mid-period: 409, for the customer and the
	// list.
	s.at(ts("2027-01-25T00:00:00Z"), `/v1/customers/zoe {"plan":"eu"}`)
	const mixed = "conflict: the period of customer zoe mixes currencies EUR and USD: one statement bills one currency"
	expect("mixed currencies", "/v1/customers/zoe/statement?period=2027-01", "", want{409, mixed})
	expect("mixed currencies in the list", "/v1/statements?period=2027-01", "", want{409, mixed})
	expect("mixed currencies in the list's CSV", "/v1/statements?period=2027-01", "text/csv", want{409, mixed})
}

// Two plan changes less than a second apart each keep their terms: the
// plan held for half a second is on the statement (0 s, at no amount,
// where it stayed within one second), and its currency counts, so a
// period that mixes currencies is the same 409 at 0.5 s as at 2.2 s.
func TestStatementPlanChangesWithinASecond(t *testing.T) {
	t.Parallel()
	start := ts("2026-11-10T09:00:00Z")
	s := MustStatementStack(t, start)
	s.at(start,
		`/v1/plans/pro {"name":"Pro","price":{"amount_cents":4900,"currency":"USD","interval":"month"}}`,
		`/v1/plans/max {"name":"Max","price":{"amount_cents":9900,"currency":"USD","interval":"month"}}`,
		`/v1/plans/eu {"name":"EU","price":{"amount_cents":4500,"currency":"EUR","interval":"month"}}`)
	tests := []struct {
		customer string
		first    string
		gap      time.Duration
		status   int
		body     string // exact, but for a problem: its code and detail
	}{
		{"half", "eu", 500 * time.Millisecond, 409,
			"conflict: the period of customer half mixes currencies EUR and USD: one statement bills one currency"},
		{"slow", "eu", 2200 * time.Millisecond, 409,
			"conflict: the period of customer slow mixes currencies EUR and USD: one statement bills one currency"},
		// Max from 09:00:00.2 to 09:00:00.7, within one second: 0 s.
		{"same", "max", 500 * time.Millisecond, 200,
			`{"customer":"same","period":{"start":"2026-11-01T00:00:00Z","end":"2026-12-01T00:00:00Z"},"currency":"USD","lines":[` +
				`{"kind":"base","plan":"max","metric":null,"quantity":0,"unit_price_micros":99000000,"amount_cents":0,"description":"Max, 99.00 USD per month, for 0 s of the period's 2592000 s"},` +
				`{"kind":"base","plan":"pro","metric":null,"quantity":1782000,"unit_price_micros":49000000,"amount_cents":3369,"description":"Pro, 49.00 USD per month, for 1782000 s of the period's 2592000 s"}` +
				`],"total_cents":3369}`},
	}
	for _, tt := range tests {
		at := start.Add(200 * time.Millisecond)
		s.at(at, `/v1/customers/`+tt.customer+` {"plan":"`+tt.first+`"}`)
		s.at(at.Add(tt.gap), `/v1/customers/`+tt.customer+` {"plan":"pro"}`)
	}
	s.clock.Set(ts("2026-12-02T00:00:00Z"))
	for _, tt := range tests {
		rec := s.do(http.MethodGet, "/v1/customers/"+tt.customer+"/statement?period=2026-11", "", "")
		body := strings.TrimSuffix(rec.Body.String(), "\n")
		if rec.Code >= 400 {
			var p struct{ Code, Detail string }
			_ = json.Unmarshal(rec.Body.Bytes(), &p)
			body = p.Code + ": " + p.Detail
		}
		if rec.Code != tt.status || body != tt.body {
			t.Errorf("%s, %v on %s: answered %d\n%s\nwant %d\n%s", tt.customer, tt.gap, tt.first, rec.Code, body, tt.status, tt.body)
		}
	}
}

// The list of a month's statements and each customer's statement agree,
// on a manual clock in the middle of a month: a customer whose period
// starts later in the month (anchor day 15, on the 10th) is on both,
// billed as if nothing changed; a month not begun is a 400 on both.
func TestStatementsListAgreesWithEachCustomer(t *testing.T) {
	t.Parallel()
	s := MustStatementStack(t, ts("2026-11-01T00:00:00Z"))
	s.at(ts("2026-11-01T00:00:00Z"),
		`/v1/plans/pro {"name":"Pro","price":{"amount_cents":4900,"currency":"USD","interval":"month"}}`,
		`/v1/customers/early {"plan":"pro"}`,
		`/v1/customers/late {"plan":"pro","billing_anchor_day":15}`)
	s.clock.Set(ts("2026-12-10T12:00:00Z"))
	for _, month := range []string{"2026-11", "2026-12", "2027-01"} {
		list := s.do(http.MethodGet, "/v1/statements?period="+month, "", "")
		var page struct {
			Statements []json.RawMessage `json:"statements"`
		}
		_ = json.Unmarshal(list.Body.Bytes(), &page)
		for i, c := range []string{"early", "late"} {
			one := s.do(http.MethodGet, "/v1/customers/"+c+"/statement?period="+month, "", "")
			if one.Code != list.Code {
				t.Errorf("%s %s: answered %d, the list %d\n%s\n%s", c, month, one.Code, list.Code, one.Body, list.Body)
				continue
			}
			if one.Code != http.StatusOK {
				continue
			}
			if len(page.Statements) != 2 || strings.TrimSpace(one.Body.String()) != string(page.Statements[i]) {
				t.Errorf("%s %s: answered\n%s\nlisted\n%s", c, month, one.Body, list.Body)
			}
		}
	}
	if rec := s.do(http.MethodGet, "/v1/statements?period=2027-01", "", ""); rec.Code != http.StatusBadRequest {
		t.Errorf("a month not begun: %d, want 400", rec.Code)
	}
}
