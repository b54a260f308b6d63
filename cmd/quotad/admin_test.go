package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The admin API (metrics, plans, customers, overrides, audit; check and usage aside) through the
// real HTTP stack: every test starts quotad as main does.

// forT returns s reporting its failures to t, so that a failing request in a
// subtest fails the subtest rather than its parent.
func (s *testServer) forT(t testing.TB) *testServer {
	c := *s
	c.t = t
	return &c
}

// MustProblem fails t unless r is a problem document with status and code.
// It returns the decoded document.
func MustProblem(t testing.TB, r response, status int, code string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status = %d, want %d\n%s", r.Status, status, r.Body)
	}
	if got := r.Header.Get("Content-Type"); got != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", got)
	}
	p := r.JSON(t)
	if got := p["code"]; got != code {
		t.Errorf("code = %v, want %s\n%s", got, code, r.Body)
	}
	if got := p["status"]; got != float64(status) {
		t.Errorf("body status = %v, want %d", got, status)
	}
	for _, f := range []string{"type", "title"} {
		if v, _ := p[f].(string); v == "" {
			t.Errorf("problem without %s: %s", f, r.Body)
		}
	}
	return p
}

// MustEqualJSON fails t unless got, encoded as JSON, equals the JSON text want.
func MustEqualJSON(t testing.TB, what string, got any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want for %s: %v", what, err)
	}
	g, _ := json.Marshal(got)
	wb, _ := json.Marshal(w)
	if string(g) != string(wb) {
		t.Errorf("%s = %s, want %s", what, g, wb)
	}
}

// MustList gets one page of a list and returns the items' names (the value
// of key in each item) and the next cursor ("" when absent).
func MustList(t testing.TB, s *testServer, path, items, key string) (names []string, next string) {
	t.Helper()
	body := s.forT(t).mustDo(http.StatusOK, "GET", path, "").JSON(t)
	list, ok := body[items].([]any)
	if !ok {
		t.Fatalf("GET %s: %q is not a list: %v", path, items, body)
	}
	for _, it := range list {
		names = append(names, fmt.Sprint(it.(map[string]any)[key]))
	}
	if c, present := body["next_cursor"]; present {
		next, ok = c.(string)
		if !ok || next == "" {
			t.Fatalf("GET %s: next_cursor = %v, want a non-empty string or no field", path, c)
		}
	}
	return names, next
}

// MustExpireOverride moves an override's expiry into the past. A running
// server's clock cannot be advanced, so the test does in the database what
// time would do.
func MustExpireOverride(t testing.TB, s *testServer, customer, metric, window string) {
	t.Helper()
	const q = `UPDATE overrides SET expires_at = now() - interval '1 hour'
		WHERE customer_id = $1 AND metric = $2 AND quota_window = $3`
	tag, err := s.schema.Pool.Exec(context.Background(), q, customer, metric, window)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("expire override %s/%s/%s: %v (%d rows)", customer, metric, window, err, tag.RowsAffected())
	}
}

// auditPage is a page of GET /v1/audit, as far as the tests read it.
type auditPage struct {
	Events []struct {
		Actor    string          `json:"actor"`
		Action   string          `json:"action"`
		Resource string          `json:"resource"`
		Before   json.RawMessage `json:"before"`
		After    json.RawMessage `json:"after"`
	} `json:"events"`
}

// mustAudit reads the audit page at path (GET /v1/audit with a query),
// failing the test unless it is a 200 that decodes.
func mustAudit(t testing.TB, s *testServer, path string) (response, auditPage) {
	t.Helper()
	r := s.mustDo(http.StatusOK, "GET", path, "")
	var page auditPage
	if err := json.Unmarshal(r.Body, &page); err != nil {
		t.Fatal(err)
	}
	return r, page
}

func etagOf(version int) string { return `"` + strconv.Itoa(version) + `"` }

// TestAdminResourceLifecycle walks each kind of resource through create,
// read, replace, conditional writes and delete, checking status codes,
// versions and ETags.
func TestAdminResourceLifecycle(t *testing.T) {
	t.Parallel()
	future := time.Now().UTC().Add(72 * time.Hour).Format(time.RFC3339)
	kinds := []struct {
		name     string
		setup    func(s *testServer)
		path     string
		create   string
		replace  string
		notFound string
	}{
		{
			name:     "metric",
			path:     "/v1/metrics/api_calls",
			create:   `{"description":"calls"}`,
			replace:  `{"description":"API calls","capacity":{"day":1000}}`,
			notFound: "metric_not_found",
		},
		{
			name:     "plan",
			setup:    func(s *testServer) { s.mustDo(201, "PUT", "/v1/metrics/api_calls", `{}`) },
			path:     "/v1/plans/pro",
			create:   `{"name":"Pro"}`,
			replace:  `{"name":"Pro","limits":[{"metric":"api_calls","window":"day","limit":10}]}`,
			notFound: "plan_not_found",
		},
		{
			name:     "customer",
			setup:    func(s *testServer) { s.mustDo(201, "PUT", "/v1/plans/pro", `{}`) },
			path:     "/v1/customers/acme",
			create:   `{"plan":"pro"}`,
			replace:  `{"plan":"pro","name":"Acme","billing_anchor_day":15}`,
			notFound: "customer_not_found",
		},
		{
			name: "override",
			setup: func(s *testServer) {
				s.mustDo(201, "PUT", "/v1/metrics/api_calls", `{}`)
				s.mustDo(201, "PUT", "/v1/plans/pro", `{}`)
				s.mustDo(201, "PUT", "/v1/customers/acme", `{"plan":"pro"}`)
			},
			path:     "/v1/customers/acme/overrides/api_calls/day",
			create:   `{"limit":5}`,
			replace:  `{"limit":6,"mode":"soft","overage_percent":10,"expires_at":"` + future + `","reason":"launch"}`,
			notFound: "override_not_found",
		},
	}
	// Each step runs against the state the previous ones left; version is
	// the version (and ETag) a successful write or read must report.
	steps := []struct {
		name    string
		method  string
		body    string // "create", "replace" or ""
		ifMatch string
		want    int
		code    string
		version int
	}{
		{name: "get missing", method: "GET", want: 404, code: "notFound"},
		{name: "delete missing", method: "DELETE", want: 404, code: "notFound"},
		{name: "if-match on missing put", method: "PUT", body: "create", ifMatch: `"1"`, want: 412, code: "precondition_failed"},
		{name: "if-match any on missing put", method: "PUT", body: "create", ifMatch: "*", want: 412, code: "precondition_failed"},
		{name: "if-match on missing delete", method: "DELETE", ifMatch: "*", want: 412, code: "precondition_failed"},
		{name: "still missing", method: "GET", want: 404, code: "notFound"},
		{name: "create", method: "PUT", body: "create", want: 201, version: 1},
		{name: "read created", method: "GET", want: 200, version: 1},
		{name: "replace", method: "PUT", body: "replace", want: 200, version: 2},
		{name: "read replaced", method: "GET", want: 200, version: 2},
		{name: "stale if-match", method: "PUT", body: "create", ifMatch: `"1"`, want: 412, code: "precondition_failed"},
		{name: "weak if-match", method: "PUT", body: "create", ifMatch: `W/"2"`, want: 412, code: "precondition_failed"},
		{name: "unquoted if-match", method: "PUT", body: "create", ifMatch: `2`, want: 412, code: "precondition_failed"},
		{name: "unchanged by refused writes", method: "GET", want: 200, version: 2},
		{name: "matching if-match", method: "PUT", body: "replace", ifMatch: `"2"`, want: 200, version: 3},
		{name: "if-match any on existing", method: "PUT", body: "replace", ifMatch: "*", want: 200, version: 4},
		{name: "if-match list", method: "PUT", body: "replace", ifMatch: `"9", "4"`, want: 200, version: 5},
		{name: "stale if-match delete", method: "DELETE", ifMatch: `"4"`, want: 412, code: "precondition_failed"},
		{name: "survives refused delete", method: "GET", want: 200, version: 5},
		{name: "delete", method: "DELETE", ifMatch: `"5"`, want: 204},
		{name: "gone", method: "GET", want: 404, code: "notFound"},
		{name: "delete again", method: "DELETE", want: 404, code: "notFound"},
		{name: "recreate starts at 1", method: "PUT", body: "create", want: 201, version: 1},
		{name: "delete unconditionally", method: "DELETE", want: 204},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			s := MustStartServer(t, nil, nil)
			if k.setup != nil {
				k.setup(s)
			}
			for _, st := range steps {
				t.Run(st.name, func(t *testing.T) {
					body := map[string]string{"create": k.create, "replace": k.replace}[st.body]
					var h []string
					if st.ifMatch != "" {
						h = []string{"If-Match", st.ifMatch}
					}
					r := s.forT(t).do(st.method, k.path, body, h...)
					if st.want >= 400 {
						code := st.code
						if code == "notFound" {
							code = k.notFound
						}
						MustProblem(t, r, st.want, code)
						return
					}
					if r.Status != st.want {
						t.Fatalf("status = %d, want %d\n%s", r.Status, st.want, r.Body)
					}
					if st.want == http.StatusNoContent {
						if len(r.Body) != 0 {
							t.Errorf("204 with body %q", r.Body)
						}
						return
					}
					if got, want := r.Header.Get("ETag"), etagOf(st.version); got != want {
						t.Errorf("ETag = %s, want %s", got, want)
					}
					if got := r.JSON(t)["version"]; got != float64(st.version) {
						t.Errorf("version = %v, want %d", got, st.version)
					}
					if got, want := r.Header.Get("Content-Type"), "application/json"; got != want {
						t.Errorf("Content-Type = %q, want %q", got, want)
					}
					if st.want == http.StatusCreated {
						if got := r.Header.Get("Location"); got != k.path {
							t.Errorf("Location = %q, want %q", got, k.path)
						}
					}
				})
			}
		})
	}
}

// TestAdminConcurrentWrites sends many writes of one resource at once:
// exactly one creates it (201), every write gets its own version, and of
// several writes conditional on the same version exactly one succeeds.
func TestAdminConcurrentWrites(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(201, "PUT", "/v1/metrics/api_calls", `{}`)
	s.mustDo(201, "PUT", "/v1/plans/pro", `{}`)
	s.mustDo(201, "PUT", "/v1/customers/acme", `{"plan":"pro"}`)
	const writers = 16
	tests := []struct {
		name string
		path string
		body string
	}{
		{"metric", "/v1/metrics/exports", `{}`},
		{"plan", "/v1/plans/team", `{"limits":[{"metric":"api_calls","window":"day","limit":1}]}`},
		{"customer", "/v1/customers/beta", `{"plan":"pro"}`},
		{"override", "/v1/customers/acme/overrides/api_calls/day", `{"limit":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := func(headers ...string) (statuses map[int]int, versions map[string]bool) {
				statuses, versions = map[int]int{}, map[string]bool{}
				var mu sync.Mutex
				var wg sync.WaitGroup
				for range writers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r, err := s.send("PUT", tt.path, tt.body, headers...)
						mu.Lock()
						defer mu.Unlock()
						if err != nil {
							t.Errorf("PUT %s: %v", tt.path, err)
							return
						}
						statuses[r.Status]++
						if r.Status < 300 {
							versions[r.Header.Get("ETag")] = true
						}
					}()
				}
				wg.Wait()
				return statuses, versions
			}
			statuses, versions := run()
			if statuses[201] != 1 || statuses[200] != writers-1 {
				t.Errorf("statuses = %v, want one 201 and %d 200", statuses, writers-1)
			}
			if len(versions) != writers {
				t.Errorf("%d distinct ETags, want %d: %v", len(versions), writers, versions)
			}
			for v := 1; v <= writers; v++ {
				if !versions[etagOf(v)] {
					t.Errorf("no write got version %d", v)
				}
			}
			statuses, _ = run("If-Match", etagOf(writers))
			if statuses[200] != 1 || statuses[412] != writers-1 {
				t.Errorf("conditional statuses = %v, want one 200 and %d 412", statuses, writers-1)
			}
			got := s.forT(t).mustDo(200, "GET", tt.path, "")
			if e := got.Header.Get("ETag"); e != etagOf(writers+1) {
				t.Errorf("final ETag = %s, want %s", e, etagOf(writers+1))
			}
		})
	}
}

// TestAdminFullReplace checks that PUT replaces the whole resource: fields
// left out go back to their defaults.
func TestAdminFullReplace(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(201, "PUT", "/v1/metrics/api_calls", `{}`)
	s.mustDo(201, "PUT", "/v1/metrics/tokens", `{}`)
	s.mustDo(201, "PUT", "/v1/plans/base", `{}`)
	s.mustDo(201, "PUT", "/v1/customers/owner", `{"plan":"base"}`)
	future := time.Now().UTC().Add(72 * time.Hour).Truncate(time.Second)

	tests := []struct {
		name string
		path string
		full string
		// fullWant and partialWant map a response field to its JSON value
		// after the full and the partial body.
		fullWant    map[string]string
		partial     string
		partialWant map[string]string
	}{
		{
			name: "metric",
			path: "/v1/metrics/exports",
			full: `{"description":"CSV exports","capacity":{"second":5000,"day":10000000}}`,
			fullWant: map[string]string{
				"description": `"CSV exports"`, "capacity": `{"second":5000,"day":10000000}`,
			},
			partial:     `{}`,
			partialWant: map[string]string{"description": `""`, "capacity": `{}`},
		},
		{
			name: "plan",
			path: "/v1/plans/pro",
			full: `{"name":"Pro","description":"For teams","price":{"amount_cents":4900,"currency":"EUR","interval":"year"},
				"limits":[{"metric":"api_calls","window":"second","limit":50},
				          {"metric":"api_calls","window":"day","limit":100000,"mode":"soft","overage_percent":20,"overage_price_micros":1000},
				          {"metric":"tokens","window":"month","limit":1000,"mode":"elastic","ceiling":2000}]}`,
			fullWant: map[string]string{
				"name": `"Pro"`, "description": `"For teams"`,
				"price": `{"amount_cents":4900,"currency":"EUR","interval":"year"}`,
				"limits": `[
					{"metric":"api_calls","window":"second","limit":50,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null,"algorithm":"sliding_window"},
					{"metric":"api_calls","window":"day","limit":100000,"mode":"soft","overage_percent":20,"overage_price_micros":1000,"ceiling":null},
					{"metric":"tokens","window":"month","limit":1000,"mode":"elastic","overage_percent":0,"overage_price_micros":null,"ceiling":2000}]`,
			},
			partial: `{"price":{"amount_cents":100}}`,
			partialWant: map[string]string{
				"name": `"pro"`, "description": `""`, "limits": `[]`,
				"price": `{"amount_cents":100,"currency":"USD","interval":"month"}`,
			},
		},
		{
			name: "customer",
			path: "/v1/customers/acme",
			full: `{"plan":"base","name":"Acme","billing_anchor_day":15,"metadata":{"crm":{"id":42},"tags":["a","b"]}}`,
			fullWant: map[string]string{
				"id": `"acme"`, "plan": `"base"`, "name": `"Acme"`, "billing_anchor_day": `15`,
				"metadata": `{"crm":{"id":42},"tags":["a","b"]}`,
			},
			partial: `{"plan":"base"}`,
			partialWant: map[string]string{
				"plan": `"base"`, "name": `""`, "billing_anchor_day": `null`, "metadata": `{}`,
			},
		},
		{
			name: "override",
			path: "/v1/customers/owner/overrides/api_calls/day",
			full: `{"limit":5000,"mode":"soft","overage_percent":10,"overage_price_micros":7,"ceiling":null,
				"expires_at":"` + future.Format(time.RFC3339) + `","reason":"launch week"}`,
			fullWant: map[string]string{
				"customer": `"owner"`, "metric": `"api_calls"`, "window": `"day"`,
				"limit": `5000`, "mode": `"soft"`, "overage_percent": `10`, "overage_price_micros": `7`,
				"ceiling": `null`, "expires_at": `"` + future.Format(time.RFC3339) + `"`, "reason": `"launch week"`,
				"expired": `false`,
			},
			partial: `{"limit":6}`,
			partialWant: map[string]string{
				"limit": `6`, "mode": `"hard"`, "overage_percent": `0`, "overage_price_micros": `null`,
				"ceiling": `null`, "expires_at": `null`, "reason": `""`, "expired": `false`,
			},
		},
		{
			name:        "override elastic then nothing",
			path:        "/v1/customers/owner/overrides/tokens/month",
			full:        `{"limit":10,"mode":"elastic","ceiling":20}`,
			fullWant:    map[string]string{"mode": `"elastic"`, "ceiling": `20`},
			partial:     `{"limit":10}`,
			partialWant: map[string]string{"mode": `"hard"`, "ceiling": `null`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := s.forT(t)
			r := c.mustDo(201, "PUT", tt.path, tt.full)
			created := r.JSON(t)["created_at"]
			for _, r := range []response{r, c.mustDo(200, "GET", tt.path, "")} {
				got := r.JSON(t)
				for f, want := range tt.fullWant {
					MustEqualJSON(t, "full "+f, got[f], want)
				}
			}
			r = c.mustDo(200, "PUT", tt.path, tt.partial)
			got := r.JSON(t)
			createdAt, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(created))
			updatedAt, err := time.Parse(time.RFC3339Nano, fmt.Sprint(got["updated_at"]))
			if got["created_at"] != created || err != nil || updatedAt.Before(createdAt) {
				t.Errorf("after replace created_at = %v, updated_at = %v; want created_at %v kept and updated_at not before it",
					got["created_at"], got["updated_at"], created)
			}
			for _, r := range []response{r, c.mustDo(200, "GET", tt.path, "")} {
				got := r.JSON(t)
				for f, want := range tt.partialWant {
					MustEqualJSON(t, "after partial replace "+f, got[f], want)
				}
				if got["version"] != float64(2) {
					t.Errorf("version = %v, want 2", got["version"])
				}
			}
		})
	}
}

// TestAdminResponseShapes checks the fields each resource names itself with.
func TestAdminResponseShapes(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(201, "PUT", "/v1/metrics/api_calls", `{}`)
	s.mustDo(201, "PUT", "/v1/plans/pro", `{}`)
	s.mustDo(201, "PUT", "/v1/customers/acme", `{"plan":"pro"}`)
	s.mustDo(201, "PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit":1}`)
	tests := []struct {
		path   string
		fields []string
		name   map[string]string
	}{
		{"/v1/metrics/api_calls", []string{"key", "description", "capacity", "credit_schema", "version", "created_at", "updated_at"},
			map[string]string{"key": "api_calls"}},
		{"/v1/plans/pro", []string{"key", "name", "description", "price", "limits", "version", "created_at", "updated_at"},
			map[string]string{"key": "pro"}},
		{"/v1/customers/acme", []string{"id", "plan", "name", "billing_anchor_day", "metadata", "version", "created_at", "updated_at"},
			map[string]string{"id": "acme", "plan": "pro"}},
		{"/v1/customers/acme/overrides/api_calls/day", []string{"customer", "metric", "window", "limit", "mode",
			"overage_percent", "overage_price_micros", "ceiling", "expires_at", "reason", "expired", "version",
			"created_at", "updated_at"},
			map[string]string{"customer": "acme", "metric": "api_calls", "window": "day"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got := s.forT(t).mustDo(200, "GET", tt.path, "").JSON(t)
			for _, f := range tt.fields {
				if _, ok := got[f]; !ok {
					t.Errorf("field %s missing from %v", f, got)
				}
			}
			for f, want := range tt.name {
				if got[f] != want {
					t.Errorf("%s = %v, want %s", f, got[f], want)
				}
			}
			for _, f := range []string{"created_at", "updated_at"} {
				ts, _ := got[f].(string)
				p, err := time.Parse(time.RFC3339Nano, ts)
				if err != nil || p.Location() != time.UTC || !strings.HasSuffix(ts, "Z") {
					t.Errorf("%s = %q, want an RFC 3339 time in UTC", f, ts)
				}
			}
		})
	}
}

// TestAdminNotFound covers every 404 code of the admin API.
func TestAdminNotFound(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(201, "PUT", "/v1/metrics/api_calls", `{}`)
	s.mustDo(201, "PUT", "/v1/plans/pro", `{}`)
	s.mustDo(201, "PUT", "/v1/customers/acme", `{"plan":"pro"}`)
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		code   string
	}{
		{"get metric", "GET", "/v1/metrics/ghost", "", "metric_not_found"},
		{"delete metric", "DELETE", "/v1/metrics/ghost", "", "metric_not_found"},
		{"get plan", "GET", "/v1/plans/ghost", "", "plan_not_found"},
		{"delete plan", "DELETE", "/v1/plans/ghost", "", "plan_not_found"},
		{"get customer", "GET", "/v1/customers/ghost", "", "customer_not_found"},
		{"delete customer", "DELETE", "/v1/customers/ghost", "", "customer_not_found"},
		{"limits of missing customer", "GET", "/v1/customers/ghost/limits", "", "customer_not_found"},
		{"overrides of missing customer", "GET", "/v1/customers/ghost/overrides", "", "customer_not_found"},
		{"get override of missing customer", "GET", "/v1/customers/ghost/overrides/api_calls/day", "", "customer_not_found"},
		{"put override of missing customer", "PUT", "/v1/customers/ghost/overrides/api_calls/day", `{"limit":1}`, "customer_not_found"},
		{"delete override of missing customer", "DELETE", "/v1/customers/ghost/overrides/api_calls/day", "", "customer_not_found"},
		{"get override of undeclared metric", "GET", "/v1/customers/acme/overrides/ghost/day", "", "metric_not_found"},
		{"put override of undeclared metric", "PUT", "/v1/customers/acme/overrides/ghost/day", `{"limit":1}`, "metric_not_found"},
		{"delete override of undeclared metric", "DELETE", "/v1/customers/acme/overrides/ghost/day", "", "metric_not_found"},
		{"get missing override", "GET", "/v1/customers/acme/overrides/api_calls/day", "", "override_not_found"},
		{"delete missing override", "DELETE", "/v1/customers/acme/overrides/api_calls/day", "", "override_not_found"},
		{"get missing override per subject", "GET", "/v1/customers/acme/overrides/api_calls/day?per=subject", "", "override_not_found"},
		{"delete missing override per subject", "DELETE", "/v1/customers/acme/overrides/api_calls/day?per=subject", "", "override_not_found"},
		{"get override per subject of missing customer", "GET", "/v1/customers/ghost/overrides/api_calls/day?per=subject", "", "customer_not_found"},
		{"unknown route", "GET", "/v1/nothing", "", "not_found"},
		{"root", "GET", "/", "", "not_found"},
		{"version prefix only", "GET", "/v1", "", "not_found"},
		{"other version", "GET", "/v2/metrics", "", "not_found"},
		{"upper-case route", "GET", "/V1/metrics", "", "not_found"},
		{"below a metric", "GET", "/v1/metrics/api_calls/extra", "", "not_found"},
		{"below a customer", "GET", "/v1/customers/acme/nothing", "", "not_found"},
		{"override without window", "GET", "/v1/customers/acme/overrides/api_calls", "", "not_found"},
		{"below an override", "GET", "/v1/customers/acme/overrides/api_calls/day/more", "", "not_found"},
		{"unknown route with a body", "PUT", "/v1/things/x", `{}`, "not_found"},
		{"unknown route, unknown method", "PATCH", "/v1/things", "", "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			MustProblem(t, s.forT(t).do(tt.method, tt.path, tt.body), http.StatusNotFound, tt.code)
		})
	}
}

// TestAdminConflicts covers 409: a metric in use by a plan or an override
// (expired ones too) or named by a credit pool, a plan with customers. A
// refused delete changes nothing and records nothing.
func TestAdminConflicts(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	future := time.Now().UTC().Add(time.Hour).Format(time.RFC3339)
	for _, m := range []string{"in_plan", "in_override", "in_expired", "free", "in_pool"} {
		s.mustDo(201, "PUT", "/v1/metrics/"+m, `{}`)
	}
	s.mustDo(201, "PUT", "/v1/metrics/credits", `{"credit_schema":[{"metric":"in_pool","credits":2}]}`)
	s.mustDo(201, "PUT", "/v1/plans/pro", `{"limits":[{"metric":"in_plan","window":"day","limit":1}]}`)
	s.mustDo(201, "PUT", "/v1/plans/empty", `{}`)
	s.mustDo(201, "PUT", "/v1/customers/acme", `{"plan":"pro"}`)
	s.mustDo(201, "PUT", "/v1/customers/acme/overrides/in_override/hour", `{"limit":1}`)
	s.mustDo(201, "PUT", "/v1/customers/acme/overrides/in_expired/day", `{"limit":1,"expires_at":"`+future+`"}`)
	MustExpireOverride(t, s, "acme", "in_expired", "day")
	if got := s.mustDo(200, "GET", "/v1/customers/acme/overrides/in_expired/day", "").JSON(t)["expired"]; got != true {
		t.Fatalf("expired = %v, want true", got)
	}
	audited := func(t testing.TB) int {
		n, _ := MustList(t, s, "/v1/audit?limit=1000", "events", "id")
		return len(n)
	}

	steps := []struct {
		name    string
		method  string
		path    string
		body    string
		want    int
		headers []string
	}{
		{"metric used by a plan", "DELETE", "/v1/metrics/in_plan", "", 409, nil},
		{"metric used by an override", "DELETE", "/v1/metrics/in_override", "", 409, nil},
		{"metric used by an expired override", "DELETE", "/v1/metrics/in_expired", "", 409, nil},
		{"metric used by a plan, if-match any", "DELETE", "/v1/metrics/in_plan", "", 409, []string{"If-Match", "*"}},
		{"metric named by a credit pool", "DELETE", "/v1/metrics/in_pool", "", 409, nil},
		{"the pool goes, its schema with it", "DELETE", "/v1/metrics/credits", "", 204, nil},
		{"metric no longer named by a pool", "DELETE", "/v1/metrics/in_pool", "", 204, nil},
		{"plan with a customer", "DELETE", "/v1/plans/pro", "", 409, nil},
		{"unused metric", "DELETE", "/v1/metrics/free", "", 204, nil},
		{"plan without customers", "DELETE", "/v1/plans/empty", "", 204, nil},
		{"plan stops using the metric", "PUT", "/v1/plans/pro", `{}`, 200, nil},
		{"metric no longer used by a plan", "DELETE", "/v1/metrics/in_plan", "", 204, nil},
		{"expired override removed", "DELETE", "/v1/customers/acme/overrides/in_expired/day", "", 204, nil},
		{"metric of the expired override", "DELETE", "/v1/metrics/in_expired", "", 204, nil},
		{"customer still on the plan", "DELETE", "/v1/plans/pro", "", 409, nil},
		{"customer leaves", "DELETE", "/v1/customers/acme", "", 204, nil},
		{"plan left empty", "DELETE", "/v1/plans/pro", "", 204, nil},
		{"metric freed by the customer's deletion", "DELETE", "/v1/metrics/in_override", "", 204, nil},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before := audited(t)
			r := s.forT(t).do(st.method, st.path, st.body, st.headers...)
			if st.want == http.StatusConflict {
				p := MustProblem(t, r, http.StatusConflict, "conflict")
				if d, _ := p["detail"].(string); d == "" {
					t.Errorf("409 without a detail")
				}
				if after := audited(t); after != before {
					t.Errorf("audit events: %d after a refused write, want %d", after, before)
				}
				return
			}
			if r.Status != st.want {
				t.Fatalf("status = %d, want %d\n%s", r.Status, st.want, r.Body)
			}
			if after := audited(t); after != before+1 {
				t.Errorf("audit events: %d after a write, want %d", after, before+1)
			}
		})
	}
}

// TestAdminOverridesAndLimits checks the override list (expired ones
// included and marked) and the effective limits: the plan's limits with the
// unexpired overrides laid over them.
func TestAdminOverridesAndLimits(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	future := time.Now().UTC().Add(72 * time.Hour).Truncate(time.Second).Format(time.RFC3339)
	for _, m := range []string{"api_calls", "exports", "tokens"} {
		s.mustDo(201, "PUT", "/v1/metrics/"+m, `{}`)
	}
	s.mustDo(201, "PUT", "/v1/plans/pro", `{"limits":[
		{"metric":"tokens","window":"day","limit":500},
		{"metric":"api_calls","window":"day","limit":1000,"mode":"soft","overage_percent":20},
		{"metric":"api_calls","window":"second","limit":50}]}`)
	s.mustDo(201, "PUT", "/v1/plans/small", `{"limits":[{"metric":"api_calls","window":"day","limit":10}]}`)
	s.mustDo(201, "PUT", "/v1/customers/acme", `{"plan":"pro"}`)
	s.mustDo(201, "PUT", "/v1/customers/other", `{"plan":"pro"}`)
	// Replaces the plan's api_calls/day until it expires.
	s.mustDo(201, "PUT", "/v1/customers/acme/overrides/api_calls/day",
		`{"limit":5000,"mode":"soft","overage_percent":10,"expires_at":"`+future+`","reason":"launch"}`)
	// Adds a limit the plan does not have.
	s.mustDo(201, "PUT", "/v1/customers/acme/overrides/exports/month", `{"limit":3,"mode":"elastic","ceiling":6}`)
	// Expired: the plan's tokens/day applies again.
	s.mustDo(201, "PUT", "/v1/customers/acme/overrides/tokens/day", `{"limit":1,"expires_at":"`+future+`"}`)
	MustExpireOverride(t, s, "acme", "tokens", "day")
	// Expired, on a window the plan does not limit: adds nothing.
	s.mustDo(201, "PUT", "/v1/customers/acme/overrides/api_calls/hour", `{"limit":2,"expires_at":"`+future+`"}`)
	MustExpireOverride(t, s, "acme", "api_calls", "hour")

	t.Run("list marks expired overrides", func(t *testing.T) {
		body := s.forT(t).mustDo(200, "GET", "/v1/customers/acme/overrides", "").JSON(t)
		var got []string
		for _, o := range body["overrides"].([]any) {
			m := o.(map[string]any)
			got = append(got, fmt.Sprintf("%s/%s expired=%v", m["metric"], m["window"], m["expired"]))
			if m["customer"] != "acme" {
				t.Errorf("customer = %v, want acme", m["customer"])
			}
		}
		want := []string{
			"api_calls/hour expired=true", "api_calls/day expired=false",
			"exports/month expired=false", "tokens/day expired=true",
		}
		if !slices.Equal(got, want) {
			t.Errorf("overrides = %q, want %q", got, want)
		}
		if _, ok := body["next_cursor"]; ok {
			t.Errorf("next_cursor on the only page")
		}
	})

	t.Run("single expired override", func(t *testing.T) {
		got := s.forT(t).mustDo(200, "GET", "/v1/customers/acme/overrides/tokens/day", "").JSON(t)
		if got["expired"] != true {
			t.Errorf("expired = %v, want true", got["expired"])
		}
		got = s.forT(t).mustDo(200, "GET", "/v1/customers/acme/overrides/exports/month", "").JSON(t)
		if got["expired"] != false {
			t.Errorf("expired = %v, want false", got["expired"])
		}
	})

	// The effective limits that recur in the steps below.
	const (
		apiSecondPlan   = `{"metric":"api_calls","window":"second","limit":50,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null,"algorithm":"sliding_window","source":"plan","expires_at":null}`
		apiDayPlan      = `{"metric":"api_calls","window":"day","limit":1000,"mode":"soft","overage_percent":20,"overage_price_micros":null,"ceiling":null,"source":"plan","expires_at":null}`
		apiDay7Override = `{"metric":"api_calls","window":"day","limit":7,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null,"source":"override","expires_at":null}`
		exportsOverride = `{"metric":"exports","window":"month","limit":3,"mode":"elastic","overage_percent":0,"overage_price_micros":null,"ceiling":6,"source":"override","expires_at":null}`
		tokensPlan      = `{"metric":"tokens","window":"day","limit":500,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null,"source":"plan","expires_at":null}`
	)
	// limitsOf is the effective limits' answer for customer on plan.
	limitsOf := func(customer, plan string, limits ...string) string {
		return `{"customer":"` + customer + `","plan":"` + plan + `","limits":[` + strings.Join(limits, ",") + `]}`
	}
	steps := []struct {
		name     string
		customer string
		before   func(s *testServer)
		want     string
	}{
		{
			name:     "plan with overrides laid over",
			customer: "acme",
			want:     limitsOf("acme", "pro", apiSecondPlan, `{"metric":"api_calls","window":"day","limit":5000,"mode":"soft","overage_percent":10,"overage_price_micros":null,"ceiling":null,"source":"override","expires_at":"`+future+`"}`, exportsOverride, tokensPlan),
		},
		{
			name:     "another customer on the plan sees the plan only",
			customer: "other",
			want:     limitsOf("other", "pro", apiSecondPlan, apiDayPlan, tokensPlan),
		},
		{
			name:     "deleted override gives the plan's limit back",
			customer: "acme",
			before: func(s *testServer) {
				s.mustDo(204, "DELETE", "/v1/customers/acme/overrides/api_calls/day", "")
			},
			want: limitsOf("acme", "pro", apiSecondPlan, apiDayPlan, exportsOverride, tokensPlan),
		},
		{
			name:     "an override without mode is hard, whatever the plan says",
			customer: "acme",
			before: func(s *testServer) {
				s.mustDo(201, "PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit":7}`)
			},
			want: limitsOf("acme", "pro", apiSecondPlan, apiDay7Override, exportsOverride, tokensPlan),
		},
		{
			name:     "a new plan applies, overrides stay",
			customer: "acme",
			before: func(s *testServer) {
				s.mustDo(200, "PUT", "/v1/customers/acme", `{"plan":"small"}`)
			},
			want: limitsOf("acme", "small", apiDay7Override, exportsOverride),
		},
		{
			name:     "without the override the new plan's limit shows",
			customer: "acme",
			before: func(s *testServer) {
				s.mustDo(204, "DELETE", "/v1/customers/acme/overrides/api_calls/day", "")
			},
			want: limitsOf("acme", "small", `{"metric":"api_calls","window":"day","limit":10,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null,"source":"plan","expires_at":null}`, exportsOverride),
		},
		{
			name:     "an override of limit 0 replaces the plan's",
			customer: "acme",
			before: func(s *testServer) {
				s.mustDo(201, "PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit":0}`)
			},
			want: limitsOf("acme", "small", `{"metric":"api_calls","window":"day","limit":0,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null,"source":"override","expires_at":null}`, exportsOverride),
		},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			c := s.forT(t)
			if st.before != nil {
				st.before(c)
			}
			got := c.mustDo(200, "GET", "/v1/customers/"+st.customer+"/limits", "").JSON(t)
			MustEqualJSON(t, "limits of "+st.customer, got, st.want)
		})
	}
}

// TestAdminLimitsPerSubject: a plan's limit per subject beside its
// customer-wide limit of the same metric and window, and the customer's
// overrides of each, addressed by ?per=. per shows on limits per subject
// only, in plans, overrides and effective limits alike.
func TestAdminLimitsPerSubject(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(201, "PUT", "/v1/metrics/api_calls", `{}`)
	plan := s.mustDo(201, "PUT", "/v1/plans/team", `{"limits":[
		{"metric":"api_calls","window":"day","limit":100,"per":"subject"},
		{"metric":"api_calls","window":"day","limit":1000,"per":"customer"},
		{"metric":"api_calls","window":"second","limit":2,"per":"subject","algorithm":"token_bucket"}]}`).JSON(t)
	MustEqualJSON(t, "plan limits", plan["limits"], `[
		{"metric":"api_calls","window":"day","per":"subject","limit":100,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null},
		{"metric":"api_calls","window":"day","limit":1000,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null},
		{"metric":"api_calls","window":"second","per":"subject","limit":2,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null,"algorithm":"token_bucket","burst":2}]`)
	s.mustDo(201, "PUT", "/v1/customers/acme", `{"plan":"team"}`)

	const (
		subjectDay  = `{"metric":"api_calls","window":"day","per":"subject","limit":100,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null,"source":"plan","expires_at":null}`
		customerDay = `{"metric":"api_calls","window":"day","limit":1000,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null,"source":"plan","expires_at":null}`
		subjectSec  = `{"metric":"api_calls","window":"second","per":"subject","limit":2,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null,"algorithm":"token_bucket","burst":2,"source":"plan","expires_at":null}`
	)
	steps := []struct {
		name       string
		method     string
		path       string
		body       string
		want       int
		wantLimits string // the effective limits after the step
	}{
		{name: "the plan's limits, the customer's before the one per subject",
			wantLimits: `[` + subjectSec + `,` + customerDay + `,` + subjectDay + `]`},
		{name: "an override per subject replaces the plan's limit per subject",
			method: "PUT", path: "/v1/customers/acme/overrides/api_calls/day?per=subject", body: `{"limit":300,"reason":"big team"}`, want: 201,
			wantLimits: `[` + subjectSec + `,` + customerDay + `,
				{"metric":"api_calls","window":"day","per":"subject","limit":300,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null,"source":"override","expires_at":null}]`},
		{name: "a customer-wide override replaces the customer's limit only",
			method: "PUT", path: "/v1/customers/acme/overrides/api_calls/day", body: `{"limit":5000}`, want: 201,
			wantLimits: `[` + subjectSec + `,
				{"metric":"api_calls","window":"day","limit":5000,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null,"source":"override","expires_at":null},
				{"metric":"api_calls","window":"day","per":"subject","limit":300,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null,"source":"override","expires_at":null}]`},
		{name: "deleting the override per subject gives the plan's back",
			method: "DELETE", path: "/v1/customers/acme/overrides/api_calls/day?per=subject", want: 204,
			wantLimits: `[` + subjectSec + `,
				{"metric":"api_calls","window":"day","limit":5000,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null,"source":"override","expires_at":null},` +
				subjectDay + `]`},
		{name: "an override per subject on a window the plan lacks adds one",
			method: "PUT", path: "/v1/customers/acme/overrides/api_calls/hour?per=subject", body: `{"limit":40,"per":"subject"}`, want: 201,
			wantLimits: `[` + subjectSec + `,
				{"metric":"api_calls","window":"hour","per":"subject","limit":40,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null,"source":"override","expires_at":null},
				{"metric":"api_calls","window":"day","limit":5000,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null,"source":"override","expires_at":null},` +
				subjectDay + `]`},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			c := s.forT(t)
			if st.method != "" {
				c.mustDo(st.want, st.method, st.path, st.body)
			}
			got := c.mustDo(200, "GET", "/v1/customers/acme/limits", "").JSON(t)
			MustEqualJSON(t, "limits", got["limits"], st.wantLimits)
		})
	}

	t.Run("the list shows per on overrides per subject only, in order", func(t *testing.T) {
		body := s.forT(t).mustDo(200, "GET", "/v1/customers/acme/overrides", "").JSON(t)
		var got []string
		for _, o := range body["overrides"].([]any) {
			m := o.(map[string]any)
			per, shown := m["per"]
			got = append(got, fmt.Sprintf("%s/%s per=%v shown=%v", m["metric"], m["window"], per, shown))
		}
		want := []string{"api_calls/hour per=subject shown=true", "api_calls/day per=<nil> shown=false"}
		if !slices.Equal(got, want) {
			t.Errorf("overrides = %q, want %q", got, want)
		}
	})
	t.Run("each override is its own resource, with its own version", func(t *testing.T) {
		c := s.forT(t)
		c.mustDo(201, "PUT", "/v1/customers/acme/overrides/api_calls/day?per=subject", `{"limit":7}`)
		r := c.mustDo(200, "GET", "/v1/customers/acme/overrides/api_calls/day?per=subject", "")
		if got := r.JSON(t); got["limit"] != float64(7) || got["version"] != float64(1) || r.Header.Get("ETag") != etagOf(1) {
			t.Errorf("override per subject = %v (ETag %s), want limit 7 at version 1", got, r.Header.Get("ETag"))
		}
		r = c.mustDo(200, "GET", "/v1/customers/acme/overrides/api_calls/day", "")
		if got := r.JSON(t); got["limit"] != float64(5000) || got["version"] != float64(1) {
			t.Errorf("customer-wide override = %v, want limit 5000 at version 1", got)
		}
		c.mustDo(200, "PUT", "/v1/customers/acme/overrides/api_calls/day?per=subject", `{"limit":8}`, "If-Match", etagOf(1))
		MustProblem(t, c.do("DELETE", "/v1/customers/acme/overrides/api_calls/day", "", "If-Match", etagOf(2)),
			http.StatusPreconditionFailed, "precondition_failed")
	})
	t.Run("audit names an override per subject by its URL", func(t *testing.T) {
		names, _ := MustList(t, s.forT(t), "/v1/audit?customer=acme&limit=1", "events", "resource")
		if want := []string{"customers/acme/overrides/api_calls/day?per=subject"}; !slices.Equal(names, want) {
			t.Errorf("last audit event about %q, want %q", names, want)
		}
	})
}

// TestAdminCreditPools: a metric's credit_schema, shown always ([] when
// none); the rules that span metrics, each a 400 naming its field; a metric
// a pool names cannot be deleted.
func TestAdminCreditPools(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	for _, m := range []string{"gpt4_tokens", "images", "audio"} {
		got := s.mustDo(201, "PUT", "/v1/metrics/"+m, `{}`).JSON(t)
		MustEqualJSON(t, m+" credit_schema", got["credit_schema"], `[]`)
	}
	pool := s.mustDo(201, "PUT", "/v1/metrics/credits",
		`{"credit_schema":[{"metric":"gpt4_tokens","credits":3,"per":100},{"metric":"images","credits":10}]}`).JSON(t)
	MustEqualJSON(t, "pool", pool["credit_schema"], `[{"metric":"gpt4_tokens","credits":3,"per":100},{"metric":"images","credits":10,"per":1}]`)
	list := s.mustDo(200, "GET", "/v1/metrics", "").JSON(t)
	for _, m := range list["metrics"].([]any) {
		if _, ok := m.(map[string]any)["credit_schema"]; !ok {
			t.Errorf("listed metric without credit_schema: %v", m)
		}
	}

	bad := []struct {
		name, path, body string
		field, message   string
	}{
		{"undeclared", "/v1/metrics/bonus", `{"credit_schema":[{"metric":"audio","credits":1},{"metric":"video","credits":1}]}`,
			"credit_schema[1].metric", `metric "video" is not declared`},
		{"draws on another pool already", "/v1/metrics/bonus", `{"credit_schema":[{"metric":"images","credits":1}]}`,
			"credit_schema[0].metric", `metric "images" draws on pool "credits" already, and a metric draws on at most one`},
		{"a pool named", "/v1/metrics/bonus", `{"credit_schema":[{"metric":"credits","credits":1}]}`,
			"credit_schema[0].metric", `metric "credits" is a credit pool, and a pool draws on none`},
		{"a metric that draws made a pool", "/v1/metrics/images", `{"credit_schema":[{"metric":"audio","credits":1}]}`,
			"credit_schema", `must be empty: the metric draws on pool "credits", and a pool draws on none`},
		{"itself", "/v1/metrics/credits", `{"credit_schema":[{"metric":"credits","credits":1}]}`,
			"credit_schema[0].metric", "must name another metric: a pool cannot draw on itself"},
		{"twice", "/v1/metrics/credits", `{"credit_schema":[{"metric":"audio","credits":1},{"metric":"audio","credits":2}]}`,
			"credit_schema[1].metric", "duplicates credit_schema[0]: a metric appears at most once"},
		{"credits 0", "/v1/metrics/credits", `{"credit_schema":[{"metric":"audio","credits":0}]}`,
			"credit_schema[0].credits", "must be an integer between 1 and 9007199254740991"},
		{"per above 2^53-1", "/v1/metrics/credits", `{"credit_schema":[{"metric":"audio","credits":1,"per":9007199254740992}]}`,
			"credit_schema[0].per", "must be an integer between 1 and 9007199254740991"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			p := MustProblem(t, s.forT(t).do("PUT", tc.path, tc.body), http.StatusBadRequest, "validation_failed")
			MustEqualJSON(t, "errors", p["errors"], fmt.Sprintf(`[{"field":%q,"message":%q}]`, tc.field, tc.message))
		})
	}

	t.Run("a metric a pool names cannot be deleted", func(t *testing.T) {
		p := MustProblem(t, s.forT(t).do("DELETE", "/v1/metrics/images", ""), http.StatusConflict, "conflict")
		if d, _ := p["detail"].(string); !strings.Contains(d, "credit pool") {
			t.Errorf("detail = %q, want it to name the credit pool", d)
		}
	})
	t.Run("a pool moves a metric to another once it lets it go", func(t *testing.T) {
		c := s.forT(t)
		c.mustDo(200, "PUT", "/v1/metrics/credits", `{"credit_schema":[{"metric":"gpt4_tokens","credits":3,"per":100}]}`)
		c.mustDo(201, "PUT", "/v1/metrics/bonus", `{"credit_schema":[{"metric":"images","credits":1}]}`)
		c.mustDo(204, "DELETE", "/v1/metrics/bonus", "")
		c.mustDo(204, "DELETE", "/v1/metrics/images", "")
	})
}

// TestAdminDeleteCustomerRemovesOverrides checks that a customer's overrides
// go with it and do not come back with a customer of the same id.
func TestAdminDeleteCustomerRemovesOverrides(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(201, "PUT", "/v1/metrics/api_calls", `{}`)
	s.mustDo(201, "PUT", "/v1/metrics/only_override", `{}`)
	s.mustDo(201, "PUT", "/v1/plans/pro", `{}`)
	s.mustDo(201, "PUT", "/v1/customers/acme", `{"plan":"pro"}`)
	s.mustDo(201, "PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit":1}`)
	s.mustDo(201, "PUT", "/v1/customers/acme/overrides/only_override/month", `{"limit":2}`)

	s.mustDo(204, "DELETE", "/v1/customers/acme", "")
	MustProblem(t, s.do("GET", "/v1/customers/acme/overrides", ""), 404, "customer_not_found")
	// The metric only an override of the deleted customer used is free.
	s.mustDo(204, "DELETE", "/v1/metrics/only_override", "")

	s.mustDo(201, "PUT", "/v1/customers/acme", `{"plan":"pro"}`)
	if names, _ := MustList(t, s, "/v1/customers/acme/overrides", "overrides", "metric"); len(names) != 0 {
		t.Errorf("overrides after re-creating the customer = %q, want none", names)
	}
	MustProblem(t, s.do("GET", "/v1/customers/acme/overrides/api_calls/day", ""), 404, "override_not_found")
	got := s.mustDo(200, "GET", "/v1/customers/acme/limits", "").JSON(t)
	MustEqualJSON(t, "limits", got["limits"], `[]`)
}

// TestAdminAudit checks the audit log: one event per committed write with
// the token's name as actor (admin#N for unnamed tokens), before and after
// images, the customer filter, newest first, and cursor pagination.
func TestAdminAudit(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, map[string]string{
		"QUOTAD_ADMIN_TOKENS": "ops:" + adminToken + ",second-admin-secret, third-admin-secret",
	})
	as := func(secret string) []string { return []string{"Authorization", "Bearer " + secret} }
	ops, second, third := as(adminToken), as("second-admin-secret"), as("third-admin-secret")

	type event struct{ actor, action, resource string }
	var want []event // oldest first
	write := func(status int, h []string, method, path, body string, e event) {
		t.Helper()
		s.mustDo(status, method, path, body, h...)
		want = append(want, e)
	}
	write(201, ops, "PUT", "/v1/metrics/api_calls", `{}`, event{"ops", "create", "metrics/api_calls"})
	write(200, second, "PUT", "/v1/metrics/api_calls", `{"description":"calls"}`, event{"admin#2", "update", "metrics/api_calls"})
	write(201, third, "PUT", "/v1/plans/pro", `{"name":"Pro"}`, event{"admin#3", "create", "plans/pro"})
	write(201, ops, "PUT", "/v1/customers/acme", `{"plan":"pro"}`, event{"ops", "create", "customers/acme"})
	write(201, second, "PUT", "/v1/customers/beta", `{"plan":"pro","name":"Beta"}`, event{"admin#2", "create", "customers/beta"})
	write(201, ops, "PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit":5}`,
		event{"ops", "create", "customers/acme/overrides/api_calls/day"})
	write(200, ops, "PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit":6}`,
		event{"ops", "update", "customers/acme/overrides/api_calls/day"})
	// Refused writes are not recorded.
	s.mustDo(412, "PUT", "/v1/metrics/api_calls", `{}`, "If-Match", `"99"`)
	s.mustDo(409, "DELETE", "/v1/plans/pro", "")
	s.mustDo(400, "PUT", "/v1/customers/gamma", `{"plan":"ghost"}`)
	s.mustDo(404, "DELETE", "/v1/customers/ghost", "")
	s.mustDo(403, "PUT", "/v1/metrics/sneaky", `{}`, "Authorization", "Bearer "+checkToken)
	s.mustDo(401, "PUT", "/v1/metrics/sneaky", `{}`, "Authorization", "Bearer wrong")
	write(204, ops, "DELETE", "/v1/customers/acme/overrides/api_calls/day", "",
		event{"ops", "delete", "customers/acme/overrides/api_calls/day"})
	write(204, third, "DELETE", "/v1/customers/beta", "", event{"admin#3", "delete", "customers/beta"})
	write(201, ops, "PUT", "/v1/metrics/exports", `{}`, event{"ops", "create", "metrics/exports"})
	write(204, ops, "DELETE", "/v1/metrics/exports", "", event{"ops", "delete", "metrics/exports"})

	all := s.mustDo(200, "GET", "/v1/audit", "").JSON(t)
	events := all["events"].([]any)
	if _, ok := all["next_cursor"]; ok {
		t.Errorf("next_cursor on the only page")
	}
	byResource := map[string][]map[string]any{}

	t.Run("every write newest first", func(t *testing.T) {
		if len(events) != len(want) {
			t.Fatalf("got %d events, want %d: %v", len(events), len(want), events)
		}
		lastID := float64(1 << 62)
		var lastAt time.Time
		for i, raw := range events {
			e := raw.(map[string]any)
			w := want[len(want)-1-i]
			got := event{fmt.Sprint(e["actor"]), fmt.Sprint(e["action"]), fmt.Sprint(e["resource"])}
			if got != w {
				t.Errorf("event %d = %+v, want %+v", i, got, w)
			}
			id, _ := e["id"].(float64)
			if id >= lastID {
				t.Errorf("event %d: id %v not below the previous %v", i, id, lastID)
			}
			lastID = id
			at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(e["at"]))
			if err != nil || !strings.HasSuffix(fmt.Sprint(e["at"]), "Z") {
				t.Errorf("event %d: at = %v, want an RFC 3339 time in UTC", i, e["at"])
			}
			if i > 0 && at.After(lastAt) {
				t.Errorf("event %d is newer than the one before it", i)
			}
			lastAt = at
			for _, f := range []string{"id", "at", "actor", "action", "resource", "before", "after"} {
				if _, ok := e[f]; !ok {
					t.Errorf("event %d lacks %s", i, f)
				}
			}
			byResource[got.resource] = append(byResource[got.resource], e)
		}
	})

	t.Run("before and after images", func(t *testing.T) {
		tests := []struct {
			name       string
			resource   string
			index      int // among the resource's events, newest first
			before     map[string]any
			after      map[string]any
			beforeNull bool
			afterNull  bool
		}{
			{name: "create has no before", resource: "metrics/api_calls", index: 1, beforeNull: true,
				after: map[string]any{"key": "api_calls", "description": "", "version": float64(1)}},
			{name: "update has both", resource: "metrics/api_calls", index: 0,
				before: map[string]any{"description": "", "version": float64(1)},
				after:  map[string]any{"description": "calls", "version": float64(2)}},
			{name: "override update", resource: "customers/acme/overrides/api_calls/day", index: 1,
				before: map[string]any{"limit": float64(5), "customer": "acme"},
				after:  map[string]any{"limit": float64(6), "version": float64(2)}},
			{name: "delete has no after", resource: "customers/beta", index: 0, afterNull: true,
				before: map[string]any{"id": "beta", "name": "Beta", "plan": "pro"}},
			{name: "metric delete", resource: "metrics/exports", index: 0, afterNull: true,
				before: map[string]any{"key": "exports"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				list := byResource[tt.resource]
				if len(list) <= tt.index {
					t.Fatalf("%d events for %s, want more than %d", len(list), tt.resource, tt.index)
				}
				e := list[tt.index]
				for _, side := range []struct {
					name   string
					isNull bool
					fields map[string]any
				}{{"before", tt.beforeNull, tt.before}, {"after", tt.afterNull, tt.after}} {
					img := e[side.name]
					if side.isNull {
						if img != nil {
							t.Errorf("%s = %v, want null", side.name, img)
						}
						continue
					}
					m, ok := img.(map[string]any)
					if !ok {
						t.Fatalf("%s = %v, want an object", side.name, img)
					}
					for f, want := range side.fields {
						if m[f] != want {
							t.Errorf("%s.%s = %v, want %v", side.name, f, m[f], want)
						}
					}
				}
			})
		}
	})

	t.Run("customer filter", func(t *testing.T) {
		tests := []struct {
			customer string
			want     []string // resource/action, newest first
		}{
			{"acme", []string{
				"customers/acme/overrides/api_calls/day delete",
				"customers/acme/overrides/api_calls/day update",
				"customers/acme/overrides/api_calls/day create",
				"customers/acme create",
			}},
			{"beta", []string{"customers/beta delete", "customers/beta create"}},
			{"ghost", nil},
		}
		for _, tt := range tests {
			t.Run(tt.customer, func(t *testing.T) {
				body := s.forT(t).mustDo(200, "GET", "/v1/audit?customer="+tt.customer, "").JSON(t)
				var got []string
				for _, raw := range body["events"].([]any) {
					e := raw.(map[string]any)
					got = append(got, fmt.Sprintf("%s %s", e["resource"], e["action"]))
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("events = %q, want %q", got, tt.want)
				}
			})
		}
	})

	t.Run("cursor walk", func(t *testing.T) {
		tests := []struct {
			name  string
			query string
			limit int
			pages []int
		}{
			{"all, 3 a page", "", 3, []int{3, 3, 3, 2}},
			{"all, 11 a page", "", 11, []int{11}},
			{"all, 10 a page", "", 10, []int{10, 1}},
			{"acme, 1 a page", "customer=acme&", 1, []int{1, 1, 1, 1}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				wantIDs, _ := MustList(t, s, "/v1/audit?"+tt.query+"limit=1000", "events", "id")
				var got []string
				var sizes []int
				cursor := ""
				for range 20 {
					path := fmt.Sprintf("/v1/audit?%slimit=%d", tt.query, tt.limit)
					if cursor != "" {
						path += "&cursor=" + url.QueryEscape(cursor)
					}
					ids, next := MustList(t, s, path, "events", "id")
					got = append(got, ids...)
					sizes = append(sizes, len(ids))
					if cursor = next; cursor == "" {
						break
					}
				}
				if !slices.Equal(sizes, tt.pages) {
					t.Errorf("page sizes = %v, want %v", sizes, tt.pages)
				}
				if !slices.Equal(got, wantIDs) {
					t.Errorf("ids = %v, want %v", got, wantIDs)
				}
			})
		}
	})
}

// TestAdminAuditActors checks the actor of a server without tokens and of
// a list of unnamed tokens.
func TestAdminAuditActors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		tokens string
		secret string // "" sends no token
		want   string
	}{
		{"first unnamed", "first-admin-secret,second-admin-secret", "first-admin-secret", "admin#1"},
		{"second unnamed", "first-admin-secret,second-admin-secret", "second-admin-secret", "admin#2"},
		{"unnamed after named", "boss:first-admin-secret,second-admin-secret", "second-admin-secret", "admin#2"},
		{"named", "first-admin-secret,boss:second-admin-secret", "second-admin-secret", "boss"},
		{"no tokens", "", "", "anonymous"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"QUOTAD_ADMIN_TOKENS": tt.tokens}
			if tt.tokens == "" {
				env["QUOTAD_CHECK_TOKENS"] = ""
			}
			s := MustStartServer(t, nil, env)
			h := []string{"Authorization", ""}
			if tt.secret != "" {
				h = []string{"Authorization", "Bearer " + tt.secret}
			}
			s.mustDo(201, "PUT", "/v1/metrics/m", `{}`, h...)
			body := s.mustDo(200, "GET", "/v1/audit", "", h...).JSON(t)
			events := body["events"].([]any)
			if len(events) != 1 {
				t.Fatalf("%d events, want 1", len(events))
			}
			if got := events[0].(map[string]any)["actor"]; got != tt.want {
				t.Errorf("actor = %v, want %s", got, tt.want)
			}
		})
	}
}

// TestAdminPagination walks every list with a small page size and checks
// the order (by key or id, byte-wise ascending), the page sizes, and that
// next_cursor is absent exactly on the last page.
func TestAdminPagination(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	// Created out of order on purpose.
	metrics := []string{"m3", "m0", "m6", "m1", "m5", "m2", "m4"}
	for _, m := range metrics {
		s.mustDo(201, "PUT", "/v1/metrics/"+m, `{}`)
	}
	plans := []string{"pro", "basic", "zeta", "a.1", "a-1", "a_1", "free"}
	for _, p := range plans {
		s.mustDo(201, "PUT", "/v1/plans/"+p, `{}`)
	}
	customers := map[string]string{ // id → plan
		"alpha": "pro", "Beta": "pro", "Zed": "basic", "0x": "pro", "user@example.com": "basic",
		"a:b": "pro", "zz": "pro",
	}
	for _, id := range []string{"alpha", "Beta", "Zed", "0x", "user@example.com", "a:b", "zz"} {
		s.mustDo(201, "PUT", "/v1/customers/"+id, `{"plan":"`+customers[id]+`"}`)
	}
	overrides := []string{"m1/day", "m0/month", "m0/second", "m0/day", "m0/hour", "m0/minute", "m0/week"}
	for _, o := range overrides {
		s.mustDo(201, "PUT", "/v1/customers/alpha/overrides/"+o, `{"limit":1}`)
	}
	for _, o := range []string{"m0/day?per=subject", "m0/day", "m1/day?per=subject", "m0/second?per=subject", "m0/hour"} {
		s.mustDo(201, "PUT", "/v1/customers/Beta/overrides/"+o, `{"limit":1}`)
	}

	tests := []struct {
		name  string
		path  string // without limit and cursor
		items string
		key   func(m map[string]any) string
		want  []string
	}{
		{"metrics", "/v1/metrics?", "metrics", keyOf("key"),
			[]string{"m0", "m1", "m2", "m3", "m4", "m5", "m6"}},
		{"plans", "/v1/plans?", "plans", keyOf("key"),
			[]string{"a-1", "a.1", "a_1", "basic", "free", "pro", "zeta"}},
		{"customers", "/v1/customers?", "customers", keyOf("id"),
			[]string{"0x", "Beta", "Zed", "a:b", "alpha", "user@example.com", "zz"}},
		{"customers on a plan", "/v1/customers?plan=pro&", "customers", keyOf("id"),
			[]string{"0x", "Beta", "a:b", "alpha", "zz"}},
		{"overrides", "/v1/customers/alpha/overrides?", "overrides",
			func(m map[string]any) string { return fmt.Sprintf("%s/%s", m["metric"], m["window"]) },
			[]string{"m0/second", "m0/minute", "m0/hour", "m0/day", "m0/week", "m0/month", "m1/day"}},
		{"overrides per subject beside the customer's", "/v1/customers/Beta/overrides?", "overrides",
			func(m map[string]any) string {
				k := fmt.Sprintf("%s/%s", m["metric"], m["window"])
				if per, ok := m["per"]; ok {
					k += fmt.Sprintf("/%s", per)
				}
				return k
			},
			[]string{"m0/second/subject", "m0/hour", "m0/day", "m0/day/subject", "m1/day/subject"}},
	}
	for _, tt := range tests {
		for _, limit := range []int{1, 3, 6, 7, 100} {
			t.Run(fmt.Sprintf("%s limit %d", tt.name, limit), func(t *testing.T) {
				var got []string
				cursor := ""
				pages := 0
				for {
					path := fmt.Sprintf("%slimit=%d", tt.path, limit)
					if cursor != "" {
						path += "&cursor=" + url.QueryEscape(cursor)
					}
					body := s.forT(t).mustDo(200, "GET", path, "").JSON(t)
					list := body[tt.items].([]any)
					pages++
					for _, it := range list {
						got = append(got, tt.key(it.(map[string]any)))
					}
					next, more := body["next_cursor"]
					remaining := len(tt.want) - len(got)
					if more != (remaining > 0) {
						t.Fatalf("page %d: next_cursor present = %t with %d items left", pages, more, remaining)
					}
					if !more {
						break
					}
					if len(list) != limit {
						t.Fatalf("page %d: %d items, want %d", pages, len(list), limit)
					}
					cursor = next.(string)
					if pages > len(tt.want)+1 {
						t.Fatalf("too many pages")
					}
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("walked %q, want %q", got, tt.want)
				}
				if wantPages := max(1, (len(tt.want)+limit-1)/limit); pages != wantPages {
					t.Errorf("pages = %d, want %d", pages, wantPages)
				}
			})
		}
	}

	t.Run("empty lists", func(t *testing.T) {
		for _, path := range []string{"/v1/customers?plan=free", "/v1/customers?plan=ghost", "/v1/customers/Zed/overrides"} {
			body := s.forT(t).mustDo(200, "GET", path, "").JSON(t)
			for k, v := range body {
				if k == "next_cursor" {
					t.Errorf("%s: next_cursor on an empty list", path)
				}
				if l, ok := v.([]any); !ok || len(l) != 0 {
					t.Errorf("%s: %s = %v, want []", path, k, v)
				}
			}
		}
	})

	t.Run("cursor after a deleted item", func(t *testing.T) {
		_, next := MustList(t, s, "/v1/metrics?limit=2", "metrics", "key") // m0, m1
		s.forT(t).mustDo(204, "DELETE", "/v1/metrics/m2", "")
		names, _ := MustList(t, s, "/v1/metrics?limit=2&cursor="+url.QueryEscape(next), "metrics", "key")
		if want := []string{"m3", "m4"}; !slices.Equal(names, want) {
			t.Errorf("page after the cursor = %q, want %q", names, want)
		}
	})
}

func keyOf(name string) func(m map[string]any) string {
	return func(m map[string]any) string { return fmt.Sprint(m[name]) }
}

// TestAdminPageSizeBounds checks the default page size (100) and the
// largest (1000).
func TestAdminPageSizeBounds(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	for i := range 101 {
		s.mustDo(201, "PUT", fmt.Sprintf("/v1/metrics/m%03d", i), `{}`)
	}
	tests := []struct {
		query    string
		wantLen  int
		wantNext bool
	}{
		{"", 100, true},
		{"?limit=100", 100, true},
		{"?limit=101", 101, false},
		{"?limit=1000", 101, false},
		{"?limit=1", 1, true},
	}
	for _, tt := range tests {
		t.Run("limit"+tt.query, func(t *testing.T) {
			names, next := MustList(t, s, "/v1/metrics"+tt.query, "metrics", "key")
			if len(names) != tt.wantLen || (next != "") != tt.wantNext {
				t.Errorf("%d items, next_cursor %q; want %d items, next_cursor present %t",
					len(names), next, tt.wantLen, tt.wantNext)
			}
			if len(names) > 0 && names[0] != "m000" {
				t.Errorf("first = %s, want m000", names[0])
			}
		})
	}
	names, next := MustList(t, s, "/v1/metrics", "metrics", "key")
	rest, last := MustList(t, s, "/v1/metrics?cursor="+url.QueryEscape(next), "metrics", "key")
	if len(names) != 100 || names[99] != "m099" {
		t.Errorf("first default page ends with %q, want m099 as item 100", names[len(names)-1])
	}
	if len(rest) != 1 || rest[0] != "m100" || last != "" {
		t.Errorf("second default page = %q (next %q), want [m100] and no cursor", rest, last)
	}
}

// TestAdminAcceptsBoundaryValues checks the largest and smallest values the
// contract allows.
func TestAdminAcceptsBoundaryValues(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	key63 := "m" + strings.Repeat("x", 62)
	id128 := "C" + strings.Repeat("c", 127)
	s.mustDo(201, "PUT", "/v1/metrics/api_calls", `{}`)
	s.mustDo(201, "PUT", "/v1/plans/pro", `{}`)
	s.mustDo(201, "PUT", "/v1/customers/acme", `{"plan":"pro"}`)
	exact64K := func() string {
		head, tail := `{"description":"x"`, `}`
		return head + strings.Repeat(" ", 64<<10-len(head)-len(tail)) + tail
	}()
	tests := []struct {
		name string
		path string
		body string
		want map[string]string
	}{
		{"63-character metric key", "/v1/metrics/" + key63, `{}`, map[string]string{"key": `"` + key63 + `"`}},
		{"one-character keys", "/v1/metrics/0", `{}`, map[string]string{"key": `"0"`}},
		{"punctuation in keys", "/v1/metrics/a.b-c_d", `{}`, nil},
		{"capacity 2^53-1", "/v1/metrics/big", `{"capacity":{"second":9007199254740991,"month":0}}`,
			map[string]string{"capacity": `{"second":9007199254740991,"month":0}`}},
		{"body of exactly 64 KiB", "/v1/metrics/padded", exact64K, map[string]string{"description": `"x"`}},
		{"body with charset", "/v1/metrics/charset", `{}`, nil},
		{"128-character customer id", "/v1/customers/" + id128, `{"plan":"pro"}`, map[string]string{"id": `"` + id128 + `"`}},
		{"customer id punctuation", "/v1/customers/A0_.:@-z", `{"plan":"pro"}`, map[string]string{"id": `"A0_.:@-z"`}},
		{"anchor day 1", "/v1/customers/d1", `{"plan":"pro","billing_anchor_day":1}`, map[string]string{"billing_anchor_day": `1`}},
		{"anchor day 28", "/v1/customers/d28", `{"plan":"pro","billing_anchor_day":28}`, map[string]string{"billing_anchor_day": `28`}},
		{"metadata nested 32 deep", "/v1/customers/deep", `{"plan":"pro","metadata":` +
			strings.Repeat(`{"a":`, 32) + `1` + strings.Repeat(`}`, 32) + `}`, nil},
		{"unicode text", "/v1/customers/uni", `{"plan":"pro","name":"Ünïcødé ✓ 😀","metadata":{"ключ":"значение"}}`,
			map[string]string{"name": `"Ünïcødé ✓ 😀"`, "metadata": `{"ключ":"значение"}`}},
		{"limit 2^53-1", "/v1/plans/max", `{"limits":[{"metric":"api_calls","window":"month","limit":9007199254740991,
			"mode":"elastic","ceiling":9007199254740991}]}`, nil},
		{"limit 0", "/v1/plans/zero", `{"limits":[{"metric":"api_calls","window":"day","limit":0}]}`, nil},
		{"overage percent 1000", "/v1/plans/soft", `{"limits":[{"metric":"api_calls","window":"day","limit":1,
			"mode":"soft","overage_percent":1000,"overage_price_micros":0}]}`, nil},
		{"ceiling equal to limit", "/v1/plans/elastic", `{"limits":[{"metric":"api_calls","window":"day","limit":5,
			"mode":"elastic","ceiling":5}]}`, nil},
		{"zero-valued foreign fields as GET returns them", "/v1/plans/roundtrip", `{"limits":[{"metric":"api_calls",
			"window":"day","limit":5,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null}]}`, nil},
		{"same metric, every window", "/v1/plans/windows", `{"limits":[
			{"metric":"api_calls","window":"second","limit":1},{"metric":"api_calls","window":"minute","limit":1},
			{"metric":"api_calls","window":"hour","limit":1},{"metric":"api_calls","window":"day","limit":1},
			{"metric":"api_calls","window":"week","limit":1},{"metric":"api_calls","window":"month","limit":1}]}`, nil},
		{"override limit 2^53-1", "/v1/customers/acme/overrides/api_calls/week", `{"limit":9007199254740991}`, nil},
		{"override expiring with an offset", "/v1/customers/acme/overrides/api_calls/day",
			`{"limit":1,"expires_at":"2999-01-01T02:00:00+02:00"}`, map[string]string{"expires_at": `"2999-01-01T00:00:00Z"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h []string
			if tt.name == "body with charset" {
				h = []string{"Content-Type", "application/json; charset=utf-8"}
			}
			got := s.forT(t).mustDo(201, "PUT", tt.path, tt.body, h...).JSON(t)
			for f, want := range tt.want {
				MustEqualJSON(t, f, got[f], want)
			}
		})
	}
}

// TestAdminAuthAndPrecedence checks authentication and the order in which
// problems are reported: 401, 403, unknown route 404, 405, 415, 413, 400,
// then a missing resource's 404. Each case sends a request with two
// problems; the earlier one must win.
func TestAdminAuthAndPrecedence(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(201, "PUT", "/v1/metrics/api_calls", `{}`)
	s.mustDo(201, "PUT", "/v1/plans/pro", `{}`)
	s.mustDo(201, "PUT", "/v1/customers/acme", `{"plan":"pro"}`)

	big := `{"description":"` + strings.Repeat("x", 70<<10) + `"}`
	bigBad := `{"description":` + strings.Repeat("x", 70<<10)
	noToken := []string{"Authorization", ""}
	badToken := []string{"Authorization", "Bearer nope"}
	asCheck := []string{"Authorization", "Bearer " + checkToken}
	text := []string{"Content-Type", "text/plain"}
	with := func(a, b []string) []string { return append(slices.Clone(a), b...) }

	tests := []struct {
		name    string
		method  string
		path    string
		body    string
		headers []string
		want    int
		code    string
	}{
		// Authentication.
		{"no token", "GET", "/v1/metrics", "", noToken, 401, "unauthorized"},
		{"unknown token", "GET", "/v1/metrics", "", badToken, 401, "unauthorized"},
		{"basic scheme", "GET", "/v1/metrics", "", []string{"Authorization", "Basic " + adminToken}, 401, "unauthorized"},
		{"bearer without token", "GET", "/v1/metrics", "", []string{"Authorization", "Bearer"}, 401, "unauthorized"},
		{"bearer with empty token", "GET", "/v1/metrics", "", []string{"Authorization", "Bearer "}, 401, "unauthorized"},
		{"token without scheme", "GET", "/v1/metrics", "", []string{"Authorization", adminToken}, 401, "unauthorized"},
		{"token prefix", "GET", "/v1/metrics", "", []string{"Authorization", "Bearer adm"}, 401, "unauthorized"},
		{"token with suffix", "GET", "/v1/metrics", "", []string{"Authorization", "Bearer " + adminToken + "x"}, 401, "unauthorized"},
		{"name:secret as token", "GET", "/v1/metrics", "", []string{"Authorization", "Bearer ops:" + adminToken}, 401, "unauthorized"},
		{"lower-case scheme", "GET", "/v1/metrics", "", []string{"Authorization", "bearer " + adminToken}, 200, ""},
		// 401 before everything else.
		{"401 before 403", "PUT", "/v1/metrics/m", `{}`, badToken, 401, "unauthorized"},
		{"401 before unknown route", "GET", "/v1/nothing", "", noToken, 401, "unauthorized"},
		{"401 before 405", "POST", "/v1/metrics/m", `{}`, noToken, 401, "unauthorized"},
		{"401 before 415", "PUT", "/v1/metrics/m", `{}`, with(noToken, text), 401, "unauthorized"},
		{"401 before 413", "PUT", "/v1/metrics/m", big, noToken, 401, "unauthorized"},
		{"401 before 400", "PUT", "/v1/metrics/BAD", `{`, noToken, 401, "unauthorized"},
		{"401 before missing resource", "GET", "/v1/metrics/ghost", "", noToken, 401, "unauthorized"},
		// 403: the check token on admin routes.
		{"403 before unknown route", "GET", "/v1/nothing", "", asCheck, 403, "forbidden"},
		{"403 before 405", "POST", "/v1/metrics/m", `{}`, asCheck, 403, "forbidden"},
		{"403 before 415", "PUT", "/v1/metrics/m", `{}`, with(asCheck, text), 403, "forbidden"},
		{"403 before 413", "PUT", "/v1/metrics/m", big, asCheck, 403, "forbidden"},
		{"403 before 400", "PUT", "/v1/metrics/BAD", `{`, asCheck, 403, "forbidden"},
		{"403 before missing resource", "GET", "/v1/customers/ghost", "", asCheck, 403, "forbidden"},
		// Unknown route.
		{"unknown route before 405", "PATCH", "/v1/nothing", "", nil, 404, "not_found"},
		{"unknown route before 415", "PUT", "/v1/nothing/x", `{}`, text, 404, "not_found"},
		{"unknown route before 413", "PUT", "/v1/nothing/x", big, nil, 404, "not_found"},
		{"unknown route before 400", "PUT", "/v1/metrics/BAD/x", `{`, nil, 404, "not_found"},
		// 405.
		{"405", "POST", "/v1/metrics/m", `{}`, nil, 405, "method_not_allowed"},
		{"405 on a list", "DELETE", "/v1/metrics", "", nil, 405, "method_not_allowed"},
		{"405 before 415", "POST", "/v1/metrics/m", `{}`, text, 405, "method_not_allowed"},
		{"405 before 413", "PATCH", "/v1/metrics/m", big, nil, 405, "method_not_allowed"},
		{"405 before 400", "POST", "/v1/metrics/BAD", `{`, nil, 405, "method_not_allowed"},
		{"405 before missing resource", "PATCH", "/v1/customers/ghost", `{}`, nil, 405, "method_not_allowed"},
		// 415.
		{"415 before 413", "PUT", "/v1/metrics/m", big, text, 415, "unsupported_media_type"},
		{"415 before 400", "PUT", "/v1/metrics/BAD", `{`, text, 415, "unsupported_media_type"},
		{"415 before missing resource", "PUT", "/v1/customers/ghost/overrides/api_calls/day", `{"limit":1}`, text, 415, "unsupported_media_type"},
		// 413.
		{"413 before 400 (body)", "PUT", "/v1/metrics/m", bigBad, nil, 413, "payload_too_large"},
		{"413 before 400 (path)", "PUT", "/v1/metrics/BAD", big, nil, 413, "payload_too_large"},
		{"413 before missing resource", "PUT", "/v1/customers/ghost/overrides/api_calls/day", big, nil, 413, "payload_too_large"},
		// 400 before a missing resource.
		{"400 body before missing customer", "PUT", "/v1/customers/ghost/overrides/api_calls/day", `{"limit":-1}`, nil, 400, "validation_failed"},
		{"400 path before missing metric", "PUT", "/v1/customers/acme/overrides/ghost/fortnight", `{"limit":1}`, nil, 400, "validation_failed"},
		{"400 id before missing customer", "GET", "/v1/customers/-ghost", "", nil, 400, "validation_failed"},
		{"400 key before missing metric", "DELETE", "/v1/metrics/Ghost", "", nil, 400, "validation_failed"},
		{"unknown plan is a 400, not a 404", "PUT", "/v1/customers/ghost", `{"plan":"ghost"}`, nil, 400, "validation_failed"},
		{"missing resource last", "PUT", "/v1/customers/ghost/overrides/api_calls/day", `{"limit":1}`, nil, 404, "customer_not_found"},
		// The check token's own routes are not forbidden.
		{"check token may check", "POST", "/v1/check", `{"customer":"ghost","metric":"api_calls"}`, asCheck, 404, "customer_not_found"},
		{"check token may refund", "POST", "/v1/refund", `{"customer":"acme","metric":"api_calls","cost":1}`, asCheck, 200, ""},
		{"check token may read usage", "GET", "/v1/customers/ghost/usage", "", asCheck, 404, "customer_not_found"},
		{"check token may read usage of a customer", "GET", "/v1/customers/acme/usage", "", asCheck, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.forT(t).do(tt.method, tt.path, tt.body, tt.headers...)
			if tt.code == "" {
				if r.Status != tt.want {
					t.Fatalf("status = %d, want %d\n%s", r.Status, tt.want, r.Body)
				}
				return
			}
			MustProblem(t, r, tt.want, tt.code)
			if tt.want == http.StatusUnauthorized && r.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without WWW-Authenticate")
			}
		})
	}
	// None of the refused requests wrote anything.
	if names, _ := MustList(t, s, "/v1/metrics", "metrics", "key"); !slices.Equal(names, []string{"api_calls"}) {
		t.Errorf("metrics = %q, want only api_calls", names)
	}
}

// TestAdminForbiddenToCheckToken sends every admin route the check token:
// each answers 403 and changes nothing.
func TestAdminForbiddenToCheckToken(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(201, "PUT", "/v1/metrics/api_calls", `{}`)
	s.mustDo(201, "PUT", "/v1/plans/pro", `{"limits":[{"metric":"api_calls","window":"day","limit":5}]}`)
	s.mustDo(201, "PUT", "/v1/customers/acme", `{"plan":"pro"}`)
	s.mustDo(201, "PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit":1}`)
	auditBefore, _ := MustList(t, s, "/v1/audit", "events", "id")
	asCheck := []string{"Authorization", "Bearer " + checkToken}
	routes := []struct{ method, path, body string }{
		{"GET", "/v1/metrics", ""},
		{"GET", "/v1/metrics/api_calls", ""},
		{"PUT", "/v1/metrics/api_calls", `{"description":"x"}`},
		{"PUT", "/v1/metrics/new", `{}`},
		{"DELETE", "/v1/metrics/api_calls", ""},
		{"GET", "/v1/plans", ""},
		{"GET", "/v1/plans/pro", ""},
		{"PUT", "/v1/plans/pro", `{}`},
		{"DELETE", "/v1/plans/pro", ""},
		{"GET", "/v1/customers", ""},
		{"GET", "/v1/customers/acme", ""},
		{"PUT", "/v1/customers/acme", `{"plan":"pro","name":"x"}`},
		{"DELETE", "/v1/customers/acme", ""},
		{"GET", "/v1/customers/acme/limits", ""},
		{"GET", "/v1/customers/acme/overrides", ""},
		{"GET", "/v1/customers/acme/overrides/api_calls/day", ""},
		{"PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit":2}`},
		{"DELETE", "/v1/customers/acme/overrides/api_calls/day", ""},
		{"DELETE", "/v1/customers/acme/usage/api_calls", ""},
		{"GET", "/v1/customers/acme/usage/history", ""},
		{"GET", "/v1/audit", ""},
	}
	for _, rt := range routes {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			MustProblem(t, s.forT(t).do(rt.method, rt.path, rt.body, asCheck...), http.StatusForbidden, "forbidden")
		})
	}
	if after, _ := MustList(t, s, "/v1/audit", "events", "id"); !slices.Equal(after, auditBefore) {
		t.Errorf("audit log changed under the check token: %v, was %v", after, auditBefore)
	}
	if v := s.mustDo(200, "GET", "/v1/customers/acme/overrides/api_calls/day", "").JSON(t)["version"]; v != float64(1) {
		t.Errorf("override version = %v, want 1", v)
	}
}

// TestOpenEndpointsNeedNoToken checks /healthz, /readyz and /metrics with
// no token, a wrong one and the check token.
func TestOpenEndpointsNeedNoToken(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		for _, auth := range []string{"", "Bearer nope", "Bearer " + checkToken, "Bearer " + adminToken} {
			t.Run(path+" "+auth, func(t *testing.T) {
				s.forT(t).mustDo(http.StatusOK, "GET", path, "", "Authorization", auth)
			})
		}
	}
}
