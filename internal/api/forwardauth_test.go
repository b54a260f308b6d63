package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/forwardauth"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// scriptedChecker answers checks with a decision made from the request:
// denied when the cost is above 5 (never passing above 100), allowed
// otherwise; it records the last request.
type scriptedChecker struct {
	fuzzChecker
	last *quota.Request
}

func (c scriptedChecker) Check(_ context.Context, r quota.Request) (quota.Decision, error) {
	if err := r.Validate(); err != nil {
		return quota.Decision{}, err
	}
	*c.last = r
	if r.Customer == "ghost" {
		return quota.Decision{}, tiers.ErrCustomerNotFound
	}
	w := quota.WindowResult{Window: tiers.Minute, Mode: tiers.Hard, Limit: 5, Used: r.Cost, Remaining: 5 - r.Cost,
		ResetAt: time.Now().Add(30 * time.Second), State: quota.StateOK, Length: time.Minute}
	d := quota.Decision{Allowed: true, Customer: r.Customer, Metric: r.Metric, Cost: r.Cost, Limits: []quota.WindowResult{w}}
	switch {
	case r.Metric == "spent": // nothing left
		d.Allowed, d.RetryAfter = false, 12
		d.Limits[0].State, d.Limits[0].Used, d.Limits[0].Remaining = quota.StateExceeded, 5, 0
	case r.Cost > 5:
		d.Allowed, d.RetryAfter, d.Never = false, 12, r.Cost > 100
		d.Limits[0].State, d.Limits[0].Used, d.Limits[0].Remaining = quota.StateExceeded, 0, 5
	}
	return d, nil
}

func TestForwardAuth(t *testing.T) {
	t.Parallel()
	rules, err := forwardauth.Parse([]byte(`
headers: {api_key: X-Api-Key}
api_keys: {k-acme: acme, k-ghost: ghost}
routes:
  - {match: "POST /v1/jobs", metric: jobs, cost: 3}
  - {match: "/v1/big/", metric: jobs, cost: 9}
`))
	if err != nil {
		t.Fatal(err)
	}
	var last quota.Request
	newServer := func(rules *forwardauth.Rules) *Server {
		return New(Config{Checker: scriptedChecker{last: &last},
			Tokens: []Token{{Name: "gw", Secret: "chk", Role: RoleCheck}}, ForwardAuth: rules})
	}
	headerRules, keyRules := newServer(nil), newServer(rules)
	allowRules, err := forwardauth.Parse([]byte("routes:\n  - {match: POST /v1/jobs, metric: jobs, cost: 3}\nunmatched: allow\n"))
	if err != nil {
		t.Fatal(err)
	}
	allowAll := newServer(allowRules)

	tests := []struct {
		name   string
		srv    *Server
		method string
		path   string
		header []string // name, value pairs
		want   int
		// wantHeader are headers the answer must carry (value "" means
		// absent).
		wantHeader map[string]string
		wantCode   string
		wantDetail string // a 429's, when set
		wantField  string // the field a 400 names
		wantCheck  *quota.Request
	}{
		{name: "allowed", srv: headerRules, method: "GET", path: "/v1/forward-auth",
			header: []string{"X-Quotad-Customer", "acme", "X-Quotad-Metric", "api_calls", "X-Quotad-Cost", "2"}, want: 200,
			wantHeader: map[string]string{"RateLimit": `"api_calls/minute";r=3;t=30`, "RateLimit-Policy": `"api_calls/minute";q=5;w=60`,
				"X-Quotad-Customer": "acme", "Retry-After": "", "Content-Type": ""},
			wantCheck: &quota.Request{Customer: "acme", Metric: "api_calls", Cost: 2}},
		{name: "denied", srv: headerRules, method: "GET", path: "/v1/forward-auth",
			header: []string{"X-Quotad-Customer", "acme", "X-Quotad-Metric", "api_calls", "X-Quotad-Cost", "6"}, want: 429,
			wantHeader: map[string]string{"Retry-After": "12", // one wait: t is the Retry-After; r the 5 left
				"RateLimit": `"api_calls/minute";r=5;t=12`, "Content-Type": contentTypeProblemJSON,
				"X-Quotad-Customer": ""}, // a denial reaches the client as it is
			wantCode: codeQuotaExceeded, wantDetail: "the customer's limit on this metric cannot take this request: it needs 6, 5 remain; retry after 12 s"},
		{name: "denied, nothing left", srv: headerRules, method: "GET", path: "/v1/forward-auth",
			header: []string{"X-Quotad-Customer", "acme", "X-Quotad-Metric", "spent", "X-Quotad-Cost", "1"}, want: 429,
			wantHeader: map[string]string{"Retry-After": "12"},
			wantCode:   codeQuotaExceeded, wantDetail: "the customer's limit on this metric is reached; retry after 12 s"},
		{name: "never passes", srv: headerRules, method: "GET", path: "/v1/forward-auth",
			header: []string{"X-Quotad-Customer", "acme", "X-Quotad-Metric", "api_calls", "X-Quotad-Cost", "101"}, want: 429,
			wantHeader: map[string]string{"Retry-After": "", "RateLimit": "", "RateLimit-Policy": `"api_calls/minute";q=5;w=60`,
				"X-Quotad-Customer": ""},
			wantCode: codeCostExceedsLimit},
		{name: "no customer", srv: headerRules, method: "GET", path: "/v1/forward-auth",
			header: []string{"X-Quotad-Metric", "api_calls"}, want: 400, wantCode: codeValidation, wantField: "X-Quotad-Customer"},
		{name: "bad customer names its header", srv: headerRules, method: "GET", path: "/v1/forward-auth",
			header: []string{"X-Quotad-Customer", "-x", "X-Quotad-Metric", "api_calls"}, want: 400, wantCode: codeValidation, wantField: "X-Quotad-Customer"},
		{name: "bad metric names its header", srv: headerRules, method: "GET", path: "/v1/forward-auth",
			header: []string{"X-Quotad-Customer", "acme", "X-Quotad-Metric", "API"}, want: 400, wantCode: codeValidation, wantField: "X-Quotad-Metric"},
		{name: "no metric", srv: headerRules, method: "GET", path: "/v1/forward-auth",
			header: []string{"X-Quotad-Customer", "acme"}, want: 400, wantCode: codeValidation, wantField: "X-Quotad-Metric"},
		{name: "unknown customer", srv: headerRules, method: "GET", path: "/v1/forward-auth",
			header: []string{"X-Quotad-Customer", "ghost", "X-Quotad-Metric", "api_calls"}, want: 404, wantCode: codeCustomerNotFound},
		// As on every route, a check token is refused (403) before the
		// router says 405.
		{name: "wrong method on the bare path", srv: headerRules, method: "POST", path: "/v1/forward-auth",
			header: []string{"X-Quotad-Customer", "acme", "X-Quotad-Metric", "api_calls"}, want: 403, wantCode: codeForbidden},
		{name: "no quotad token", srv: headerRules, method: "GET", path: "/v1/forward-auth",
			header: []string{"Authorization", "", "X-Quotad-Customer", "acme", "X-Quotad-Metric", "api_calls"}, want: 401, wantCode: codeUnauthorized},

		{name: "route from headers", srv: keyRules, method: "GET", path: "/v1/forward-auth",
			header: []string{"X-Api-Key", "k-acme", "X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/v1/jobs?x=1"}, want: 200,
			wantHeader: map[string]string{"X-Quotad-Customer": "acme", "RateLimit": `"jobs/minute";r=2;t=30`},
			wantCheck:  &quota.Request{Customer: "acme", Metric: "jobs", Cost: 3}},
		{name: "route from the envoy path", srv: keyRules, method: "POST", path: "/v1/forward-auth/v1/jobs?x=1",
			header: []string{"X-Api-Key", "k-acme"}, want: 200, wantCheck: &quota.Request{Customer: "acme", Metric: "jobs", Cost: 3}},
		{name: "envoy HEAD, denied", srv: keyRules, method: "HEAD", path: "/v1/forward-auth/v1/big/x/y",
			header: []string{"X-Api-Key", "k-acme"}, want: 429, wantHeader: map[string]string{"Retry-After": "12"}},
		{name: "envoy root matches no route", srv: keyRules, method: "DELETE", path: "/v1/forward-auth/",
			header: []string{"X-Api-Key", "k-acme"}, want: 403, wantCode: codeForbidden},
		{name: "no key", srv: keyRules, method: "GET", path: "/v1/forward-auth",
			header: []string{"X-Quotad-Customer", "acme", "X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/v1/jobs"}, want: 401,
			wantCode: codeUnauthorized, wantHeader: map[string]string{"WWW-Authenticate": ""}}, // the key is wanted, not a bearer token,
		{name: "unknown key", srv: keyRules, method: "GET", path: "/v1/forward-auth",
			header: []string{"X-Api-Key", "k-nobody", "X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/v1/jobs"}, want: 403, wantCode: codeForbidden},
		{name: "no original uri", srv: keyRules, method: "GET", path: "/v1/forward-auth",
			header: []string{"X-Api-Key", "k-acme", "X-Forwarded-Method", "POST"}, want: 400, wantCode: codeValidation, wantField: "X-Forwarded-Uri"},

		// The canonical path decides the route; a path without one is a 400,
		// whatever unmatched says.
		{name: "trailing slash and case: the route", srv: keyRules, method: "GET", path: "/v1/forward-auth",
			header: []string{"X-Api-Key", "k-acme", "X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/V1/Jobs/"}, want: 200,
			wantCheck: &quota.Request{Customer: "acme", Metric: "jobs", Cost: 3}},
		{name: "encoded slash", srv: keyRules, method: "GET", path: "/v1/forward-auth",
			header: []string{"X-Api-Key", "k-acme", "X-Forwarded-Method", "GET", "X-Forwarded-Uri", "/v1/big%2Fx"}, want: 400,
			wantCode: codePathNotCanonical, wantField: "X-Forwarded-Uri"},
		{name: "envoy, encoded dot segment", srv: keyRules, method: "GET", path: "/v1/forward-auth/v1/x/%2e%2e/big/a",
			header: []string{"X-Api-Key", "k-acme"}, want: 400, wantCode: codePathNotCanonical, wantField: "path"},
		{name: "envoy, encoded slash", srv: keyRules, method: "GET", path: "/v1/forward-auth/v1/big%2fa",
			header: []string{"X-Api-Key", "k-acme"}, want: 400, wantCode: codePathNotCanonical, wantField: "path"},
		{name: "a parameter under unmatched: allow", srv: allowAll, method: "GET", path: "/v1/forward-auth",
			header: []string{"X-Quotad-Customer", "acme", "X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/v1/jobs;x"}, want: 400,
			wantCode: codePathNotCanonical, wantField: "X-Forwarded-Uri"},
		{name: "a dot segment under unmatched: allow", srv: allowAll, method: "GET", path: "/v1/forward-auth",
			header: []string{"X-Quotad-Customer", "acme", "X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/v1/x/../jobs"}, want: 400,
			wantCode: codePathNotCanonical, wantField: "X-Forwarded-Uri"},
		{name: "an unknown key before the path", srv: keyRules, method: "GET", path: "/v1/forward-auth",
			header: []string{"X-Api-Key", "k-nobody", "X-Forwarded-Method", "GET", "X-Forwarded-Uri", "/v1/big%2Fx"}, want: 403, wantCode: codeForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			last = quota.Request{}
			req := newRequest(tt.method, tt.path, nil)
			req.Header.Set("Authorization", "Bearer chk")
			for i := 0; i+1 < len(tt.header); i += 2 {
				if tt.header[i+1] == "" {
					req.Header.Del(tt.header[i])
					continue
				}
				req.Header.Set(tt.header[i], tt.header[i+1])
			}
			rec := httptest.NewRecorder()
			tt.srv.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d\n%s", rec.Code, tt.want, rec.Body)
			}
			for name, want := range tt.wantHeader {
				if got := rec.Header().Get(name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			if tt.want == http.StatusOK && rec.Body.Len() != 0 {
				t.Errorf("a 200 with a body: %q", rec.Body)
			}
			if tt.wantCode != "" || tt.wantField != "" {
				var p Problem
				if tt.method != http.MethodHead {
					if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
						t.Fatalf("body is no problem: %v\n%s", err, rec.Body)
					}
				}
				if tt.wantCode != "" && p.Code != tt.wantCode {
					t.Errorf("code %q, want %q", p.Code, tt.wantCode)
				}
				if tt.wantDetail != "" && tt.method != http.MethodHead && p.Detail != tt.wantDetail {
					t.Errorf("detail %q, want %q", p.Detail, tt.wantDetail)
				}
				if tt.wantField != "" && (len(p.Errors) != 1 || p.Errors[0].Field != tt.wantField) {
					t.Errorf("errors %+v, want one on %s", p.Errors, tt.wantField)
				}
			}
			if tt.wantCheck != nil && !reflect.DeepEqual(last, *tt.wantCheck) {
				t.Errorf("checked %+v, want %+v", last, *tt.wantCheck)
			}
		})
	}
}

// Forward-auth checks count in the check metrics, by decision; one
// refused for its headers counts as rejected.
func TestForwardAuthMetrics(t *testing.T) {
	t.Parallel()
	var last quota.Request
	srv := New(Config{Checker: scriptedChecker{last: &last}})
	for _, cost := range []string{"1", "2", "9", "0"} { // 0: refused, no check
		req := newRequest(http.MethodGet, "/v1/forward-auth", nil)
		req.Header.Set("X-Quotad-Customer", "acme")
		req.Header.Set("X-Quotad-Metric", "api_calls")
		req.Header.Set("X-Quotad-Cost", cost)
		srv.ServeHTTP(httptest.NewRecorder(), req)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, newRequest(http.MethodGet, "/metrics", nil))
	for _, want := range []string{
		`quotad_checks_total{decision="allowed"} 2`,
		`quotad_checks_total{decision="denied"} 1`,
		`quotad_checks_total{decision="rejected"} 1`,
		`quotad_check_duration_seconds_count 3`,
		`quotad_http_requests_total{method="GET",route="/v1/forward-auth",status="429"} 1`,
	} {
		if !strings.Contains(rec.Body.String(), want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
