package quotadtest_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	quotad "github.com/quotad/quotad/client"
)

// excludedRoutes are the operations of openapi.yaml the Go client has no
// method for, each with the reason. The test fails if one of them leaves
// the spec, so that the list cannot rot.
var excludedRoutes = map[string]string{
	// Prometheus scrapes it; a backend never calls it.
	"GET /metrics": "Prometheus text for a scraper",
	// An operator's, about quotad's own processes, not a backend's.
	"GET /v1/admin/holders":                   "an operator's list of the processes that hold leases",
	"POST /v1/admin/holders/{holder}/release": "an operator's release of a process known dead",
	// Gateways ask these about their own clients' requests (nginx
	// auth_request, Traefik ForwardAuth, Envoy ext_authz); a Go backend
	// checks with Check or the middleware instead.
	"GET /v1/forward-auth":            "a gateway's authorization request",
	"GET /v1/forward-auth/{path}":     "Envoy's ext_authz request",
	"HEAD /v1/forward-auth/{path}":    "Envoy's ext_authz request",
	"POST /v1/forward-auth/{path}":    "Envoy's ext_authz request",
	"PUT /v1/forward-auth/{path}":     "Envoy's ext_authz request",
	"PATCH /v1/forward-auth/{path}":   "Envoy's ext_authz request",
	"DELETE /v1/forward-auth/{path}":  "Envoy's ext_authz request",
	"OPTIONS /v1/forward-auth/{path}": "Envoy's ext_authz request",
	"TRACE /v1/forward-auth/{path}":   "Envoy's ext_authz request",
	// A browser loads it; the page calls the API itself.
	"GET /console/{path}": "the admin console's static files",
}

// clientCalls calls every method of the client and of its services once.
// The names are the methods', "Check" for the client's own and
// "Plans.Put" for a service's, so that a method added to the client or a
// service without a call here fails TestEveryClientMethodIsWalked.
var clientCalls = map[string]func(ctx context.Context, c *quotad.Client) error{
	"Metrics.List": func(ctx context.Context, c *quotad.Client) error { return drain(c.Metrics.List(ctx)) },
	"Metrics.Get": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Metrics.Get(ctx, "api_calls")
		return err
	},
	"Metrics.Put": func(ctx context.Context, c *quotad.Client) error {
		_, _, err := c.Metrics.Put(ctx, "api_calls", quotad.MetricSpec{})
		return err
	},
	"Metrics.Delete": func(ctx context.Context, c *quotad.Client) error { return c.Metrics.Delete(ctx, "api_calls") },
	"Plans.List":     func(ctx context.Context, c *quotad.Client) error { return drain(c.Plans.List(ctx)) },
	"Plans.Get":      func(ctx context.Context, c *quotad.Client) error { _, err := c.Plans.Get(ctx, "pro"); return err },
	"Plans.Put": func(ctx context.Context, c *quotad.Client) error {
		_, _, err := c.Plans.Put(ctx, "pro", quotad.PlanSpec{})
		return err
	},
	"Plans.Delete": func(ctx context.Context, c *quotad.Client) error { return c.Plans.Delete(ctx, "pro") },
	"Plans.PutGrandfathered": func(ctx context.Context, c *quotad.Client) error {
		_, _, err := c.Plans.PutGrandfathered(ctx, "pro", quotad.PlanSpec{})
		return err
	},
	"Plans.Versions": func(ctx context.Context, c *quotad.Client) error { return drain(c.Plans.Versions(ctx, "pro")) },
	"Plans.Version": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Plans.Version(ctx, "pro", 1)
		return err
	},
	"Plans.Migrate": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Plans.Migrate(ctx, "pro", quotad.MigrationSpec{DryRun: true})
		return err
	},
	"Plans.WhatIf": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Plans.WhatIf(ctx, quotad.WhatIfSpec{Plan: "pro", Limits: []quotad.Limit{{Metric: "api_calls", Window: "day", Limit: 1}},
			From: "2026-01-01", To: "2026-01-31"})
		return err
	},
	"Customers.List": func(ctx context.Context, c *quotad.Client) error {
		return drain(c.Customers.List(ctx, quotad.CustomerFilter{Plan: "pro"}))
	},
	"Customers.Get": func(ctx context.Context, c *quotad.Client) error { _, err := c.Customers.Get(ctx, "acme"); return err },
	"Customers.Put": func(ctx context.Context, c *quotad.Client) error {
		_, _, err := c.Customers.Put(ctx, "acme", quotad.CustomerSpec{Plan: "pro"})
		return err
	},
	"Customers.Suspend": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Customers.Suspend(ctx, "acme", "card declined")
		return err
	},
	"Customers.Resume": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Customers.Resume(ctx, "acme")
		return err
	},
	"Customers.Delete": func(ctx context.Context, c *quotad.Client) error { return c.Customers.Delete(ctx, "acme") },
	"Customers.Limits": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Customers.Limits(ctx, "acme")
		return err
	},
	"Overrides.List": func(ctx context.Context, c *quotad.Client) error { return drain(c.Overrides.List(ctx, "acme")) },
	"Overrides.Get": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Overrides.Get(ctx, "acme", "api_calls", quotad.Day)
		return err
	},
	"Overrides.Put": func(ctx context.Context, c *quotad.Client) error {
		_, _, err := c.Overrides.Put(ctx, "acme", "api_calls", quotad.Day, quotad.OverrideSpec{Limit: 1})
		return err
	},
	"Overrides.Delete": func(ctx context.Context, c *quotad.Client) error {
		return c.Overrides.Delete(ctx, "acme", "api_calls", quotad.Day)
	},
	"Overrides.GetPer": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Overrides.GetPer(ctx, "acme", "api_calls", quotad.Day, quotad.PerSubject)
		return err
	},
	"Overrides.PutPer": func(ctx context.Context, c *quotad.Client) error {
		_, _, err := c.Overrides.PutPer(ctx, "acme", "api_calls", quotad.Day, quotad.PerSubject, quotad.OverrideSpec{Limit: 1})
		return err
	},
	"Overrides.DeletePer": func(ctx context.Context, c *quotad.Client) error {
		return c.Overrides.DeletePer(ctx, "acme", "api_calls", quotad.Day, quotad.PerSubject)
	},
	"Features.Get": func(ctx context.Context, c *quotad.Client) error { _, err := c.Features.Get(ctx, "acme"); return err },
	"Entitlements": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Entitlements(ctx, "acme", "u1")
		return err
	},
	"Features.Put": func(ctx context.Context, c *quotad.Client) error {
		_, _, err := c.Features.Put(ctx, "acme", "sso", quotad.FeatureOverrideSpec{Value: true})
		return err
	},
	"Features.Delete": func(ctx context.Context, c *quotad.Client) error { return c.Features.Delete(ctx, "acme", "sso") },
	"CheckFeature": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.CheckFeature(ctx, quotad.FeatureCheckRequest{Customer: "acme", Feature: "sso"})
		return err
	},
	"Check": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "api_calls"})
		return err
	},
	"Refund": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Refund(ctx, quotad.RefundRequest{Customer: "acme", Metric: "api_calls"})
		return err
	},
	"Metrics.Usage": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Metrics.Usage(ctx, "api_calls")
		return err
	},
	"Usage": func(ctx context.Context, c *quotad.Client) error { _, err := c.Usage(ctx, "acme"); return err },
	"SubjectUsage": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.SubjectUsage(ctx, "acme", "user-7")
		return err
	},
	"Customers.ResetUsage": func(ctx context.Context, c *quotad.Client) error {
		return c.Customers.ResetUsage(ctx, "acme", "api_calls")
	},
	"Customers.SetTotal": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Customers.SetTotal(ctx, "acme", "seats", 3)
		return err
	},
	"Customers.UsageHistory": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Customers.UsageHistory(ctx, "acme", quotad.HistoryFilter{Metric: "api_calls"})
		return err
	},
	"Audit.List": func(ctx context.Context, c *quotad.Client) error {
		return drain(c.Audit.List(ctx, quotad.AuditFilter{Customer: "acme"}))
	},
	"Statements.Get": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Statements.Get(ctx, "acme", "2026-11")
		return err
	},
	"Statements.GetCSV": func(ctx context.Context, c *quotad.Client) error {
		return c.Statements.GetCSV(ctx, "acme", "2026-11", io.Discard)
	},
	"Statements.List": func(ctx context.Context, c *quotad.Client) error { return drain(c.Statements.List(ctx, "2026-11")) },
	"Statements.ListCSV": func(ctx context.Context, c *quotad.Client) error {
		return c.Statements.ListCSV(ctx, "2026-11", io.Discard)
	},
	"Webhooks.Get": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Webhooks.Get(ctx, "billing")
		return err
	},
	"Webhooks.List": func(ctx context.Context, c *quotad.Client) error { return drain(c.Webhooks.List(ctx)) },
	"Webhooks.Put": func(ctx context.Context, c *quotad.Client) error {
		_, _, err := c.Webhooks.Put(ctx, "billing", quotad.WebhookSpec{URL: "https://example.com/hooks"})
		return err
	},
	"Webhooks.Delete": func(ctx context.Context, c *quotad.Client) error { return c.Webhooks.Delete(ctx, "billing") },
	"Webhooks.Deliveries": func(ctx context.Context, c *quotad.Client) error {
		return drain(c.Webhooks.Deliveries(ctx, "billing", 0))
	},
	"Keys.Create": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Keys.Create(ctx, "acme", quotad.KeySpec{Name: "ci"})
		return err
	},
	"Keys.List": func(ctx context.Context, c *quotad.Client) error { return drain(c.Keys.List(ctx, "acme")) },
	"Keys.ListIncludingRevoked": func(ctx context.Context, c *quotad.Client) error {
		return drain(c.Keys.ListIncludingRevoked(ctx, "acme"))
	},
	"Keys.Get": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Keys.Get(ctx, "key_AAAAAAAAAAAAAAAA")
		return err
	},
	"Keys.Revoke": func(ctx context.Context, c *quotad.Client) error { return c.Keys.Revoke(ctx, "key_AAAAAAAAAAAAAAAA") },
	"Grants.Create": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Grants.Create(ctx, "acme", quotad.GrantSpec{Metric: "api_calls", Amount: 500})
		return err
	},
	"Grants.List": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Grants.List(ctx, "acme", true)
		return err
	},
	"Grants.Void": func(ctx context.Context, c *quotad.Client) error { return c.Grants.Void(ctx, "grt_AAAAAAAAAAAAAAAA") },
	"Healthz":     func(ctx context.Context, c *quotad.Client) error { return c.Healthz(ctx) },
	"Readyz":      func(ctx context.Context, c *quotad.Client) error { return c.Readyz(ctx) },
	"Middleware": func(ctx context.Context, c *quotad.Client) error {
		h := c.Middleware(quotad.MiddlewareOptions{Customer: quotad.Static("acme"), Metric: quotad.Static("api_calls")})(http.NotFoundHandler())
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil))
		return nil
	},
	"Reserve": func(ctx context.Context, c *quotad.Client) error {
		_, err := c.Reserve(ctx, quotad.ReserveRequest{Customer: "acme", Metric: "llm_tokens", Cost: 100})
		return err
	},
	"Commit":      func(ctx context.Context, c *quotad.Client) error { _, err := c.Commit(ctx, "rsv_1", 42); return err },
	"Release":     func(ctx context.Context, c *quotad.Client) error { return c.Release(ctx, "rsv_1") },
	"Reservation": func(ctx context.Context, c *quotad.Client) error { _, err := c.Reservation(ctx, "rsv_1"); return err },
	"ReservationMiddleware": func(ctx context.Context, c *quotad.Client) error {
		h := c.ReservationMiddleware(quotad.ReservationMiddlewareOptions{Customer: quotad.Static("acme"), Metric: quotad.Static("llm_tokens"),
			Estimate: func(*http.Request) (int64, error) { return 100, nil }})(http.NotFoundHandler())
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, http.MethodPost, "/", nil))
		return nil
	},
}

func drain[T any](seq func(func(T, error) bool)) error {
	for _, err := range seq {
		if err != nil {
			return err
		}
	}
	return nil
}

// specRoutes lists the operations of openapi.yaml as "METHOD /path/{param}".
func specRoutes(t *testing.T) []string {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile("../../openapi.yaml")
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	var routes []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			routes = append(routes, method+" "+path)
		}
	}
	slices.Sort(routes)
	return routes
}

// matchRoute finds the route a request took: the one with its method whose
// path matches segment by segment, preferring literal segments to
// parameters (as GET /v1/customers/{customer}/usage/history is preferred
// to a path parameter there).
func matchRoute(routes []string, method, path string) (string, bool) {
	segs := strings.Split(path, "/")
	best, bestLiterals := "", -1
	for _, r := range routes {
		m, tmpl, _ := strings.Cut(r, " ")
		if m != method {
			continue
		}
		tsegs := strings.Split(tmpl, "/")
		if len(tsegs) != len(segs) {
			continue
		}
		literals := 0
		ok := true
		for i, ts := range tsegs {
			switch {
			case strings.HasPrefix(ts, "{") && strings.HasSuffix(ts, "}"):
			case ts == segs[i]:
				literals++
			default:
				ok = false
			}
		}
		if ok && literals > bestLiterals {
			best, bestLiterals = r, literals
		}
	}
	return best, bestLiterals >= 0
}

// TestClientCoversOpenAPI drives every client call against a server that
// records the routes they take, and requires that together they take every
// operation of openapi.yaml (but the excluded ones) and nothing else.
func TestClientCoversOpenAPI(t *testing.T) {
	routes := specRoutes(t)
	var mu sync.Mutex
	hit := map[string][]string{} // route -> client methods
	var current string
	var unknown []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, ok := matchRoute(routes, r.Method, r.URL.EscapedPath())
		mu.Lock()
		switch {
		case ok:
			hit[route] = append(hit[route], current)
		default:
			unknown = append(unknown, current+": "+r.Method+" "+r.URL.Path)
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/check":
			w.Write([]byte(`{"allowed":true,"customer":"acme","metric":"api_calls","cost":1,"retry_after":0,"limits":[]}`))
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/keys"):
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"id":"key_AAAAAAAAAAAAAAAA","key":"qk_x"}`))
		case r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/total"):
			// A set of a total answers 200: it creates no resource.
			w.Write([]byte(`{"customer":"acme","metric":"seats","window":"total","limit":10,"used":3}`))
		case r.Method == http.MethodPut:
			w.Header().Set("ETag", `"1"`)
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"version":1}`))
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Write([]byte(`{}`))
		}
	}))
	defer srv.Close()
	c := quotad.New(srv.URL, quotad.WithToken("t"))
	names := make([]string, 0, len(clientCalls))
	for name := range clientCalls {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		mu.Lock()
		current = name
		mu.Unlock()
		if err := clientCalls[name](t.Context(), c); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	for _, u := range unknown {
		t.Errorf("a client call takes a route openapi.yaml lacks: %s", u)
	}
	for _, r := range routes {
		_, excluded := excludedRoutes[r]
		switch {
		case excluded && len(hit[r]) > 0:
			t.Errorf("%s is excluded (%s) but the client calls it (%v): drop it from excludedRoutes", r, excludedRoutes[r], hit[r])
		case !excluded && len(hit[r]) == 0:
			t.Errorf("openapi.yaml has %s but no client method calls it: give the client one, or add it to excludedRoutes with the reason", r)
		}
	}
	for r := range excludedRoutes {
		if !slices.Contains(routes, r) {
			t.Errorf("excludedRoutes has %s, which openapi.yaml no longer has: drop it", r)
		}
	}
}

// clientMethods names every exported method of the client: its own, and
// those of each service it holds in an exported field, as "Field.Method".
func clientMethods(t *testing.T) []string {
	t.Helper()
	typ := reflect.TypeFor[*quotad.Client]()
	var methods []string
	for m := range typ.Methods() {
		methods = append(methods, m.Name)
	}
	for f := range typ.Elem().Fields() {
		if !f.IsExported() {
			continue
		}
		if f.Type.Kind() != reflect.Pointer || f.Type.NumMethod() == 0 {
			t.Errorf("(*Client).%s is a %s, not a service: teach clientMethods about it", f.Name, f.Type)
			continue
		}
		for m := range f.Type.Methods() {
			methods = append(methods, f.Name+"."+m.Name)
		}
	}
	return methods
}

// Every exported method of the client and of its services is in
// clientCalls, so the walk above cannot miss one.
func TestEveryClientMethodIsWalked(t *testing.T) {
	methods := clientMethods(t)
	for _, name := range methods {
		if _, ok := clientCalls[name]; !ok {
			t.Errorf("(*Client).%s is not in clientCalls", name)
		}
	}
	for name := range clientCalls {
		if !slices.Contains(methods, name) {
			t.Errorf("clientCalls has %s, which *Client has no longer", name)
		}
	}
}
