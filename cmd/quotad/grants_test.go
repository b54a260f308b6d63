package main

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/grants"
	"github.com/quotad/quotad/internal/quota/quotafake"
)

// The grants' routes as run wires them, over PostgreSQL: bad input is a
// 4xx problem, never a 5xx; a grant is made, listed, drawn by a check
// (whose answer says so, as usage does), and voided.
func TestGrantRoutes(t *testing.T) {
	t.Parallel()
	s := mustInProcess(t, stackOptions{clock: quotafake.NewClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)), grants: true})
	do := func(method, path, body string) *httptest.ResponseRecorder {
		t.Helper()
		return s.do(method, path, body, "")
	}
	s.write(
		`/v1/metrics/api_calls {}`,
		`/v1/plans/p {"name":"P","price":{"amount_cents":0,"currency":"USD","interval":"month"},"limits":[{"metric":"api_calls","window":"day","limit":1}]}`,
		`/v1/customers/acme {"plan":"p"}`,
	)
	bad := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"no amount", "POST", "/v1/customers/acme/grants", `{"metric":"api_calls"}`, 400, "validation_failed"},
		{"amount 0", "POST", "/v1/customers/acme/grants", `{"metric":"api_calls","amount":0}`, 400, "validation_failed"},
		{"amount too large", "POST", "/v1/customers/acme/grants", `{"metric":"api_calls","amount":9007199254740992}`, 400, "validation_failed"},
		{"amount a string", "POST", "/v1/customers/acme/grants", `{"metric":"api_calls","amount":"5"}`, 400, "validation_failed"},
		{"no metric", "POST", "/v1/customers/acme/grants", `{"amount":5}`, 400, "validation_failed"},
		{"bad metric", "POST", "/v1/customers/acme/grants", `{"metric":"API calls","amount":5}`, 400, "validation_failed"},
		{"negative priority", "POST", "/v1/customers/acme/grants", `{"metric":"api_calls","amount":5,"priority":-1}`, 400, "validation_failed"},
		{"expired already", "POST", "/v1/customers/acme/grants", `{"metric":"api_calls","amount":5,"expires_at":"2026-11-22T11:00:00Z"}`, 400, "validation_failed"},
		{"unknown field", "POST", "/v1/customers/acme/grants", `{"metric":"api_calls","amount":5,"units":5}`, 400, "validation_failed"},
		{"not JSON", "POST", "/v1/customers/acme/grants", `{"metric":`, 400, "validation_failed"},
		{"bad customer id", "POST", "/v1/customers/%20x/grants", `{"metric":"api_calls","amount":5}`, 400, "validation_failed"},
		{"unknown customer", "POST", "/v1/customers/ghost/grants", `{"metric":"api_calls","amount":5}`, 404, "customer_not_found"},
		{"unknown metric", "POST", "/v1/customers/acme/grants", `{"metric":"images","amount":5}`, 404, "metric_not_found"},
		{"list of unknown customer", "GET", "/v1/customers/ghost/grants", "", 404, "customer_not_found"},
		{"bad all", "GET", "/v1/customers/acme/grants?all=yes", "", 400, "validation_failed"},
		{"void unknown grant", "DELETE", "/v1/grants/grt_AAAAAAAAAAAAAAAA", "", 404, "grant_not_found"},
		{"void malformed id", "DELETE", "/v1/grants/nope", "", 404, "grant_not_found"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			rec := do(tt.method, tt.path, tt.body)
			var p struct{ Code string }
			_ = json.Unmarshal(rec.Body.Bytes(), &p)
			if rec.Code != tt.status || p.Code != tt.code {
				t.Errorf("%s %s: %d %q; want %d %q (%s)", tt.method, tt.path, rec.Code, p.Code, tt.status, tt.code, rec.Body)
			}
		})
	}

	body := `{"metric":"api_calls","amount":5,"priority":1,"reason":"top-up","request_id":"r1"}`
	rec := do("POST", "/v1/customers/acme/grants", body)
	var g grants.Grant
	if err := json.Unmarshal(rec.Body.Bytes(), &g); err != nil || rec.Code != 201 || g.Remaining != 5 || g.Priority != 1 {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	if rec := do("POST", "/v1/customers/acme/grants", body); rec.Code != 200 || !strings.Contains(rec.Body.String(), g.ID) {
		t.Fatalf("a repeat of the request id: %d %s; want 200 with %s", rec.Code, rec.Body, g.ID)
	}
	if rec := do("POST", "/v1/customers/acme/grants", strings.Replace(body, `"amount":5`, `"amount":6`, 1)); rec.Code != 409 {
		t.Fatalf("the request id with another body: %d %s; want 409", rec.Code, rec.Body)
	}
	for i, want := range []string{`"allowed":true,`, `"granted":1,`} {
		rec := do("POST", "/v1/check", `{"customer":"acme","metric":"api_calls","cost":1}`)
		if !strings.Contains(rec.Body.String(), want) {
			t.Fatalf("check %d: %d %s; want %s", i, rec.Code, rec.Body, want)
		}
	}
	if rec := do("GET", "/v1/customers/acme/usage", ""); !strings.Contains(rec.Body.String(), `"granted":1,`) {
		t.Fatalf("usage: %s; want the day window's granted unit", rec.Body)
	}
	if rec := do("DELETE", "/v1/grants/"+g.ID, ""); rec.Code != 204 {
		t.Fatalf("void: %d %s", rec.Code, rec.Body)
	}
	if rec := do("GET", "/v1/customers/acme/grants", ""); rec.Code != 200 || rec.Body.String() != "{\"grants\":[]}\n" {
		t.Fatalf("live grants after the void: %d %s; want none", rec.Code, rec.Body)
	}
	if rec := do("GET", "/v1/customers/acme/grants?all=true", ""); !strings.Contains(rec.Body.String(), `"remaining":0,`) {
		t.Fatalf("every grant after the void: %s", rec.Body)
	}
	if rec := do("POST", "/v1/check", `{"customer":"acme","metric":"api_calls","cost":1}`); rec.Code != 429 {
		t.Fatalf("a check after the void: %d %s; want 429", rec.Code, rec.Body)
	}
}
