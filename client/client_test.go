package quotad_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	quotad "github.com/quotad/quotad/client"
)

// noRetry is a client option for tests that count calls.
var noRetry = quotad.WithRetry(quotad.RetryPolicy{MaxAttempts: 1})

var allSentinels = map[string]error{
	"ErrValidation":           quotad.ErrValidation,
	"ErrUnauthorized":         quotad.ErrUnauthorized,
	"ErrForbidden":            quotad.ErrForbidden,
	"ErrInvalidAPIKey":        quotad.ErrInvalidAPIKey,
	"ErrCustomerSuspended":    quotad.ErrCustomerSuspended,
	"ErrNotFound":             quotad.ErrNotFound,
	"ErrCustomerNotFound":     quotad.ErrCustomerNotFound,
	"ErrPlanNotFound":         quotad.ErrPlanNotFound,
	"ErrPlanVersionNotFound":  quotad.ErrPlanVersionNotFound,
	"ErrMetricNotFound":       quotad.ErrMetricNotFound,
	"ErrOverrideNotFound":     quotad.ErrOverrideNotFound,
	"ErrMethodNotAllowed":     quotad.ErrMethodNotAllowed,
	"ErrConflict":             quotad.ErrConflict,
	"ErrReservationExpired":   quotad.ErrReservationExpired,
	"ErrReservationNotFound":  quotad.ErrReservationNotFound,
	"ErrCheckNotFound":        quotad.ErrCheckNotFound,
	"ErrPreconditionFailed":   quotad.ErrPreconditionFailed,
	"ErrPayloadTooLarge":      quotad.ErrPayloadTooLarge,
	"ErrUnsupportedMediaType": quotad.ErrUnsupportedMediaType,
	"ErrTooManyRequests":      quotad.ErrTooManyRequests,
	"ErrUnavailable":          quotad.ErrUnavailable,
	"ErrSubjectRequired":      quotad.ErrSubjectRequired,
	"ErrGrantNotFound":        quotad.ErrGrantNotFound,
}

func TestProblems(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		want        []string // the sentinels the error matches
		wantProblem quotad.Problem
		wantText    string
	}{
		{
			name: "customer not found", status: 404, contentType: "application/problem+json",
			body: `{"type":"urn:quotad:problem:customer_not_found","title":"Not Found","status":404,"detail":"customer \"x\" not found","code":"customer_not_found","extra":1}`,
			want: []string{"ErrNotFound", "ErrCustomerNotFound"},
			wantProblem: quotad.Problem{Type: "urn:quotad:problem:customer_not_found", Title: "Not Found", Status: 404,
				Detail: `customer "x" not found`, Code: "customer_not_found"},
			wantText: `quotad: 404 customer_not_found: customer "x" not found`,
		},
		{
			name: "validation with fields", status: 400, contentType: "application/problem+json",
			body: `{"type":"urn:quotad:problem:validation_failed","title":"Bad Request","status":400,"detail":"the request is invalid","code":"validation_failed",` +
				`"errors":[{"field":"limits[0].window","message":"must be one of second, minute"},{"field":"name","message":"is required"}]}`,
			want: []string{"ErrValidation"},
			wantProblem: quotad.Problem{Type: "urn:quotad:problem:validation_failed", Title: "Bad Request", Status: 400,
				Detail: "the request is invalid", Code: "validation_failed", Errors: []quotad.FieldError{
					{Field: "limits[0].window", Message: "must be one of second, minute"}, {Field: "name", Message: "is required"}}},
			wantText: "quotad: 400 validation_failed: the request is invalid (limits[0].window: must be one of second, minute; name: is required)",
		},
		{
			name: "subject required", status: 400, contentType: "application/problem+json",
			body: `{"type":"urn:quotad:problem:subject_required","title":"Bad Request","status":400,"detail":"the metric \"m\" has limits per subject: the request must name a subject","code":"subject_required",` +
				`"errors":[{"field":"items[1].subject","message":"is required: the metric has limits per subject"}]}`,
			want: []string{"ErrValidation", "ErrSubjectRequired"},
			wantProblem: quotad.Problem{Type: "urn:quotad:problem:subject_required", Title: "Bad Request", Status: 400,
				Detail: `the metric "m" has limits per subject: the request must name a subject`, Code: "subject_required",
				Errors: []quotad.FieldError{{Field: "items[1].subject", Message: "is required: the metric has limits per subject"}}},
			wantText: `quotad: 400 subject_required: the metric "m" has limits per subject: the request must name a subject (items[1].subject: is required: the metric has limits per subject)`,
		},
		{
			name: "conflict", status: 409, contentType: "application/problem+json",
			body:        `{"type":"urn:quotad:problem:conflict","title":"Conflict","status":409,"code":"conflict"}`,
			want:        []string{"ErrConflict"},
			wantProblem: quotad.Problem{Type: "urn:quotad:problem:conflict", Title: "Conflict", Status: 409, Code: "conflict"},
			wantText:    "quotad: 409 conflict",
		},
		{
			name: "precondition failed", status: 412, contentType: "application/problem+json",
			body:        `{"type":"urn:quotad:problem:precondition_failed","title":"Precondition Failed","status":412,"code":"precondition_failed"}`,
			want:        []string{"ErrPreconditionFailed"},
			wantProblem: quotad.Problem{Type: "urn:quotad:problem:precondition_failed", Title: "Precondition Failed", Status: 412, Code: "precondition_failed"},
			wantText:    "quotad: 412 precondition_failed",
		},
		{
			name: "a proxy's 404 page", status: 404, contentType: "text/html",
			body:        "<html>nothing here</html>",
			want:        []string{"ErrNotFound"},
			wantProblem: quotad.Problem{Title: "Not Found", Status: 404, Detail: "<html>nothing here</html>"},
			wantText:    "quotad: 404 Not Found: <html>nothing here</html>",
		},
		{
			name: "a gateway's 403 in JSON that is no problem", status: 403, contentType: "application/json",
			body:        `{"message":"denied"}`,
			want:        []string{"ErrForbidden"},
			wantProblem: quotad.Problem{Title: "Forbidden", Status: 403, Detail: `{"message":"denied"}`},
			wantText:    `quotad: 403 Forbidden: {"message":"denied"}`,
		},
		{
			name: "401", status: 401, contentType: "application/problem+json",
			body:        `{"type":"urn:quotad:problem:unauthorized","title":"Unauthorized","status":401,"code":"unauthorized"}`,
			want:        []string{"ErrUnauthorized"},
			wantProblem: quotad.Problem{Type: "urn:quotad:problem:unauthorized", Title: "Unauthorized", Status: 401, Code: "unauthorized"},
			wantText:    "quotad: 401 unauthorized",
		},
		{
			name: "429 from a proxy", status: 429, contentType: "text/plain",
			body:        "slow down",
			want:        []string{"ErrTooManyRequests"},
			wantProblem: quotad.Problem{Title: "Too Many Requests", Status: 429, Detail: "slow down"},
			wantText:    "quotad: 429 Too Many Requests: slow down",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			_, err := quotad.New(srv.URL, noRetry).Customers.Get(context.Background(), "x")
			var p *quotad.Problem
			if !errors.As(err, &p) {
				t.Fatalf("err = %v (%T), want a *Problem", err, err)
			}
			if got, want := mustJSON(t, p), mustJSON(t, tt.wantProblem); got != want {
				t.Errorf("problem = %s, want %s", got, want)
			}
			if got := err.Error(); got != tt.wantText {
				t.Errorf("Error() = %q, want %q", got, tt.wantText)
			}
			for name, s := range allSentinels {
				if got, want := errors.Is(err, s), slices.Contains(tt.want, name); got != want {
					t.Errorf("errors.Is(err, %s) = %v, want %v", name, got, want)
				}
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCheckDenialIsAResult(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		wantErr     error
		wantAllowed bool
		wantRetry   *int64
	}{
		{"allowed", 200, "application/json", `{"allowed":true,"customer":"acme","metric":"m","cost":1,"retry_after":0,"limits":[]}`, nil, true, ptr(int64(0))},
		{"denied", 429, "application/json", `{"allowed":false,"customer":"acme","metric":"m","cost":1,"retry_after":3,"limits":[]}`, nil, false, ptr(int64(3))},
		{"never", 429, "application/json", `{"allowed":false,"customer":"acme","metric":"m","cost":9,"retry_after":null,"limits":[]}`, nil, false, nil},
		{"a proxy's 429", 429, "text/plain", `busy`, quotad.ErrTooManyRequests, false, nil},
		{"a proxy's 429 in JSON", 429, "application/json", `{"error":"busy"}`, quotad.ErrTooManyRequests, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			res, err := quotad.New(srv.URL).Check(context.Background(), quotad.CheckRequest{Customer: "acme", Metric: "m"})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v, want a result", err)
			}
			if res.Allowed != tt.wantAllowed {
				t.Errorf("Allowed = %v, want %v", res.Allowed, tt.wantAllowed)
			}
			if (res.RetryAfter == nil) != (tt.wantRetry == nil) || res.RetryAfter != nil && *res.RetryAfter != *tt.wantRetry {
				t.Errorf("RetryAfter = %v, want %v", res.RetryAfter, tt.wantRetry)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestPagination(t *testing.T) {
	f, srv := newFakeQuotad(0)
	defer srv.Close()
	c := quotad.New(srv.URL, noRetry)
	ctx := context.Background()
	tests := []struct {
		name      string
		filter    quotad.CustomerFilter
		stopAfter int // 0: read all
		want      []string
		wantCalls int
	}{
		{"one page", quotad.CustomerFilter{}, 0, []string{"c01", "c02", "c03", "c04", "c05"}, 1},
		{"pages of two", quotad.CustomerFilter{PageSize: 2}, 0, []string{"c01", "c02", "c03", "c04", "c05"}, 3},
		{"pages of five", quotad.CustomerFilter{PageSize: 5}, 0, []string{"c01", "c02", "c03", "c04", "c05"}, 1},
		{"break early fetches no more", quotad.CustomerFilter{PageSize: 2}, 3, []string{"c01", "c02", "c03"}, 2},
		{"plan filter", quotad.CustomerFilter{Plan: "free"}, 0, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.mu.Lock()
			f.calls = map[string]int{}
			f.mu.Unlock()
			var got []string
			for cust, err := range c.Customers.List(ctx, tt.filter) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, cust.ID)
				if len(got) == tt.stopAfter {
					break
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ids = %v, want %v", got, tt.want)
			}
			if calls := f.calls["GET /v1/customers"]; calls != tt.wantCalls {
				t.Errorf("pages fetched = %d, want %d", calls, tt.wantCalls)
			}
		})
	}
}

// An error on a later page ends the loop with that error.
func TestPaginationError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("cursor") == "" {
			w.Write([]byte(`{"events":[{"id":2},{"id":1}],"next_cursor":"x"}`))
			return
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(400)
		w.Write([]byte(`{"type":"urn:quotad:problem:validation_failed","title":"Bad Request","status":400,"code":"validation_failed","errors":[{"field":"cursor","message":"is not valid"}]}`))
	}))
	defer srv.Close()
	var ids []int64
	var errs []error
	for ev, err := range quotad.New(srv.URL).Audit.List(context.Background(), quotad.AuditFilter{}) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ids = append(ids, ev.ID)
	}
	if !slices.Equal(ids, []int64{2, 1}) {
		t.Errorf("ids = %v, want [2 1]", ids)
	}
	if len(errs) != 1 || !errors.Is(errs[0], quotad.ErrValidation) {
		t.Errorf("errors = %v, want one ErrValidation", errs)
	}
}

// Requests carry the token, user agent, JSON body, If-Match and escaped
// path segments; a base URL's path prefix is kept.
func TestRequests(t *testing.T) {
	type seen struct {
		method, path, rawPath, auth, ua, contentType, ifMatch, body string
	}
	var got seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = seen{r.Method, r.URL.Path, r.URL.EscapedPath(), r.Header.Get("Authorization"), r.Header.Get("User-Agent"),
			r.Header.Get("Content-Type"), r.Header.Get("If-Match"), string(body)}
		w.Header().Set("ETag", `"7"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"customer":"a/b","metric":"m","window":"day","limit":5,"version":7,"new_field":[1,2]}`))
	}))
	defer srv.Close()
	c := quotad.New(srv.URL+"/quota/", quotad.WithToken("tok"), quotad.WithUserAgent("test/1"))
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	o, created, err := c.Overrides.Put(context.Background(), "a/b", "m", "day",
		quotad.OverrideSpec{Limit: 5, ExpiresAt: &exp}, quotad.IfMatch(`"6"`))
	if err != nil {
		t.Fatal(err)
	}
	want := seen{"PUT", "/quota/v1/customers/a/b/overrides/m/day", "/quota/v1/customers/a%2Fb/overrides/m/day", "Bearer tok", "test/1",
		"application/json", `"6"`, `{"limit":5,"expires_at":"2030-01-02T03:04:05Z"}`}
	if got != want {
		t.Errorf("request = %+v\nwant      %+v", got, want)
	}
	if !created || o.ETag != `"7"` || o.Version != 7 || o.Customer != "a/b" || o.Limit != 5 {
		t.Errorf("Overrides.Put = %+v, created %v; want version 7, ETag \"7\", created", o, created)
	}
}

// An override is addressed by its per: the customer-wide one without a
// query, the one per subject with ?per=subject; the bodies carry the new
// fields only when set.
func TestOverridesPerAndCreditSchemas(t *testing.T) {
	type seen struct{ method, uri, body string }
	var got seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = seen{r.Method, r.URL.RequestURI(), string(body)}
		w.Header().Set("ETag", `"3"`)
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Write([]byte(`{"customer":"acme","metric":"m","window":"day","per":"subject","limit":5,"version":3,
			"credit_schema":[{"metric":"m","credits":3,"per":100}]}`))
	}))
	defer srv.Close()
	c := quotad.New(srv.URL, noRetry)
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		want seen
	}{
		{"get the customer-wide override", func() error { _, err := c.Overrides.Get(ctx, "acme", "m", quotad.Day); return err },
			seen{"GET", "/v1/customers/acme/overrides/m/day", ""}},
		{"get it by its per", func() error {
			_, err := c.Overrides.GetPer(ctx, "acme", "m", quotad.Day, quotad.PerCustomer)
			return err
		}, seen{"GET", "/v1/customers/acme/overrides/m/day", ""}},
		{"get the override per subject", func() error {
			o, err := c.Overrides.GetPer(ctx, "acme", "m", quotad.Day, quotad.PerSubject)
			if err == nil && (o.Per != quotad.PerSubject || o.ETag != `"3"`) {
				err = fmt.Errorf("override = %+v, want per subject, ETag \"3\"", o)
			}
			return err
		}, seen{"GET", "/v1/customers/acme/overrides/m/day?per=subject", ""}},
		{"put the override per subject", func() error {
			_, _, err := c.Overrides.PutPer(ctx, "acme", "m", quotad.Day, quotad.PerSubject, quotad.OverrideSpec{Limit: 5}, quotad.IfMatch(`"2"`))
			return err
		}, seen{"PUT", "/v1/customers/acme/overrides/m/day?per=subject", `{"limit":5}`}},
		{"put the customer-wide override", func() error {
			_, _, err := c.Overrides.Put(ctx, "acme", "m", quotad.Day, quotad.OverrideSpec{Limit: 5})
			return err
		}, seen{"PUT", "/v1/customers/acme/overrides/m/day", `{"limit":5}`}},
		{"delete the override per subject", func() error {
			return c.Overrides.DeletePer(ctx, "acme", "m", quotad.Day, quotad.PerSubject)
		}, seen{"DELETE", "/v1/customers/acme/overrides/m/day?per=subject", ""}},
		{"a plan's limit per subject", func() error {
			_, _, err := c.Plans.Put(ctx, "team", quotad.PlanSpec{Limits: []quotad.Limit{
				{Metric: "m", Window: quotad.Day, Limit: 10}, {Metric: "m", Window: quotad.Day, Limit: 1, Per: quotad.PerSubject}}})
			return err
		}, seen{"PUT", "/v1/plans/team", `{"limits":[{"metric":"m","window":"day","limit":10},{"metric":"m","window":"day","limit":1,"per":"subject"}]}`}},
		{"a credit pool", func() error {
			m, _, err := c.Metrics.Put(ctx, "credits", quotad.MetricSpec{CreditSchema: []quotad.CreditRate{
				{Metric: "m", Credits: 3, Per: 100}, {Metric: "images", Credits: 10}}})
			if err == nil && !reflect.DeepEqual(m.CreditSchema, []quotad.CreditRate{{Metric: "m", Credits: 3, Per: 100}}) {
				err = fmt.Errorf("metric = %+v", m)
			}
			return err
		}, seen{"PUT", "/v1/metrics/credits", `{"credit_schema":[{"metric":"m","credits":3,"per":100},{"metric":"images","credits":10}]}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("request = %+v\nwant      %+v", got, tc.want)
			}
		})
	}
}

func TestBadBaseURL(t *testing.T) {
	for _, u := range []string{"", "quotad:8080", "ftp://quotad", "http://"} {
		if err := quotad.New(u).Healthz(context.Background()); err == nil {
			t.Errorf("New(%q).Healthz = nil, want an error", u)
		}
	}
}

func TestMiddleware(t *testing.T) {
	allowedBody := `{"allowed":true,"customer":"acme","metric":"api_calls","cost":3,"retry_after":0,"limits":[]}`
	deniedBody := `{"allowed":false,"customer":"acme","metric":"api_calls","cost":3,"retry_after":5,"limits":[]}`
	neverBody := `{"allowed":false,"customer":"acme","metric":"api_calls","cost":3,"retry_after":null,"limits":[],` +
		`"code":"cost_exceeds_limit","detail":"a cost of 3 can never pass the api_calls/second limit of 2; do not retry"}`
	upgrade := `"upgrade":{"plan":"pro","name":"Pro","price":{"amount_cents":2900,"currency":"USD","interval":"month"},"limit":1000}`
	deniedUpgradeBody := strings.TrimSuffix(deniedBody, "}") + "," + upgrade + "}"
	neverUpgradeBody := strings.TrimSuffix(neverBody, "}") + "," + upgrade + "}"
	pro := &quotad.Upgrade{Plan: "pro", Name: "Pro", Price: quotad.Price{AmountCents: 2900, Currency: "USD", Interval: "month"},
		Limit: ptr(int64(1000))}
	// quotad answers status with body; status 0 waits until the request
	// is cancelled (a quotad too slow to answer).
	type answer struct {
		status int
		body   string
	}
	tests := []struct {
		name       string
		quotad     answer
		down       bool // quotad unreachable
		opts       quotad.MiddlewareOptions
		customer   string
		wantStatus int
		wantCode   string // the problem's code, if the middleware answered
		wantDetail string // and its detail, if set
		wantHeader map[string]string
		wantErrors int // calls of OnError
		// wantUpgrade is the 429's upgrade, if the middleware answered.
		wantUpgrade *quotad.Upgrade
	}{
		{name: "allowed", quotad: answer{200, allowedBody}, customer: "acme", wantStatus: 200,
			wantHeader: map[string]string{"RateLimit": `"api_calls/second";r=7;t=1`, "RateLimit-Policy": `"api_calls/second";q=10;w=1`, "Retry-After": ""}},
		{name: "denied", quotad: answer{429, deniedBody}, customer: "acme", wantStatus: 429, wantCode: "quota_exceeded",
			wantDetail: "the customer's limit on this metric is reached; retry after 5 s",
			wantHeader: map[string]string{"Retry-After": "5", "RateLimit": `"api_calls/second";r=7;t=1`, "RateLimit-Policy": `"api_calls/second";q=10;w=1`}},
		{name: "denied for good", quotad: answer{429, neverBody}, customer: "acme", wantStatus: 429, wantCode: "cost_exceeds_limit",
			wantDetail: "a cost of 3 can never pass the api_calls/second limit of 2; do not retry",
			wantHeader: map[string]string{"Retry-After": ""}},
		{name: "denied, an upgrade", quotad: answer{429, deniedUpgradeBody}, customer: "acme", wantStatus: 429,
			wantCode: "quota_exceeded", wantUpgrade: pro},
		{name: "denied for good, an upgrade", quotad: answer{429, neverUpgradeBody}, customer: "acme", wantStatus: 429,
			wantCode: "cost_exceeds_limit", wantUpgrade: pro},
		{name: "unknown customer", quotad: answer{404, `{"type":"urn:quotad:problem:customer_not_found","title":"Not Found","status":404,"code":"customer_not_found"}`},
			customer: "acme", wantStatus: 403, wantCode: "forbidden", wantErrors: 1},
		{name: "unknown customer even failing open", quotad: answer{400, `{"type":"urn:quotad:problem:validation_failed","title":"Bad Request","status":400,"code":"validation_failed"}`},
			customer: "bad id", wantStatus: 403, wantCode: "forbidden", wantErrors: 1},
		{name: "no customer", quotad: answer{200, allowedBody}, customer: "", wantStatus: 401, wantCode: "unauthorized"},
		{name: "no customer, anonymous allowed", quotad: answer{429, deniedBody}, customer: "", opts: quotad.MiddlewareOptions{AllowAnonymous: true},
			wantStatus: 200, wantHeader: map[string]string{"RateLimit": ""}},
		{name: "quotad down, fail open", down: true, customer: "acme", wantStatus: 200, wantErrors: 1},
		{name: "quotad down, fail closed", down: true, customer: "acme", opts: quotad.MiddlewareOptions{FailClosed: true},
			wantStatus: 503, wantCode: "unavailable", wantErrors: 1},
		{name: "quotad failing, fail open", quotad: answer{503, `{"type":"urn:quotad:problem:unavailable","title":"Service Unavailable","status":503,"code":"unavailable"}`},
			customer: "acme", wantStatus: 200, wantErrors: 1},
		{name: "quotad failing, fail closed", quotad: answer{500, `oops`}, customer: "acme", opts: quotad.MiddlewareOptions{FailClosed: true},
			wantStatus: 503, wantCode: "unavailable", wantErrors: 1},
		{name: "quotad too slow, fail open", quotad: answer{0, ""}, customer: "acme", opts: quotad.MiddlewareOptions{Timeout: 20 * time.Millisecond},
			wantStatus: 200, wantErrors: 1},
		{name: "quotad too slow, fail closed", quotad: answer{0, ""}, customer: "acme", opts: quotad.MiddlewareOptions{Timeout: 20 * time.Millisecond, FailClosed: true},
			wantStatus: 503, wantCode: "unavailable", wantErrors: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var checks atomic.Int32
			var mu sync.Mutex
			var gotReq quotad.CheckRequest
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var req quotad.CheckRequest
				json.NewDecoder(r.Body).Decode(&req)
				mu.Lock()
				gotReq = req
				mu.Unlock()
				checks.Add(1)
				if tt.quotad.status == 0 {
					<-r.Context().Done()
					return
				}
				ct := "application/json"
				if tt.quotad.status >= 400 && tt.quotad.status != 429 {
					ct = "application/problem+json"
				}
				w.Header().Set("Content-Type", ct)
				w.Header().Set("RateLimit-Policy", `"api_calls/second";q=10;w=1`)
				w.Header().Set("RateLimit", `"api_calls/second";r=7;t=1`)
				if tt.quotad.status == 429 && strings.Contains(tt.quotad.body, `"retry_after":5`) {
					w.Header().Set("Retry-After", "5")
				}
				w.WriteHeader(tt.quotad.status)
				w.Write([]byte(tt.quotad.body))
			}))
			defer srv.Close()
			if tt.down {
				srv.Close()
			}
			var onError int
			opts := tt.opts
			if opts.Timeout == 0 {
				// A busy machine can hold an answer past the default
				// (250ms): the middleware would then fail open or closed.
				// Only the cases of a quotad too slow want that.
				opts.Timeout = 30 * time.Second
			}
			opts.Customer = quotad.FromHeader("X-Customer")
			opts.Metric = quotad.Static("api_calls")
			opts.Cost = quotad.StaticCost(3)
			opts.OnError = func(*http.Request, error) { onError++ }
			var handled bool
			h := quotad.New(srv.URL).Middleware(opts)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				handled = true
				w.WriteHeader(http.StatusOK)
			}))

			req := httptest.NewRequest(http.MethodGet, "/work", nil)
			if tt.customer != "" {
				req.Header.Set("X-Customer", tt.customer)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)

			if rec.Code != tt.wantStatus {
				t.Errorf("status = %d, want %d; body %s", rec.Code, tt.wantStatus, rec.Body)
			}
			if handled != (tt.wantStatus == 200) {
				t.Errorf("handler ran = %v, want %v", handled, tt.wantStatus == 200)
			}
			if tt.wantCode != "" {
				var p quotad.Problem
				if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
					t.Errorf("Content-Type = %q, want application/problem+json", ct)
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Code != tt.wantCode || p.Status != tt.wantStatus ||
					p.Type != "urn:quotad:problem:"+tt.wantCode {
					t.Errorf("body = %s (%v), want a problem with code %s and status %d", rec.Body, err, tt.wantCode, tt.wantStatus)
				}
				if !reflect.DeepEqual(p.Upgrade, tt.wantUpgrade) {
					t.Errorf("upgrade = %+v, want %+v", p.Upgrade, tt.wantUpgrade)
				}
				if tt.wantDetail != "" && p.Detail != tt.wantDetail {
					t.Errorf("detail = %q, want %q", p.Detail, tt.wantDetail)
				}
			}
			for k, want := range tt.wantHeader {
				if got := rec.Header().Get(k); got != want {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
			if onError != tt.wantErrors {
				t.Errorf("OnError called %d times, want %d", onError, tt.wantErrors)
			}
			mu.Lock()
			defer mu.Unlock()
			if checks.Load() > 0 && (gotReq.Customer != tt.customer || gotReq.Metric != "api_calls" || gotReq.Cost != 3) {
				t.Errorf("check sent = %+v, want acme, api_calls, cost 3", gotReq)
			}
			if n := checks.Load(); n > 1 {
				t.Errorf("quotad asked %d times, want at most once (no retries)", n)
			}
		})
	}
}

func TestMiddlewareNeedsCustomerAndMetric(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Middleware without Metric did not panic")
		}
	}()
	quotad.New("http://quotad.invalid").Middleware(quotad.MiddlewareOptions{Customer: quotad.Static("acme")})
}

// A refund's answer says how many units went back, overall and per window,
// and fields this client does not know are ignored.
func TestRefundDecodes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"refunded":2,"later":{"x":1},"usage":[{"metric":"m","window":"day","limit":10,"used":3,"remaining":7,` +
			`"overage":0,"reset_at":"2026-11-23T00:00:00Z","refunded":2,"later":true}]}`))
	}))
	defer srv.Close()
	res, err := quotad.New(srv.URL).Refund(context.Background(), quotad.RefundRequest{Customer: "acme", Metric: "m", Cost: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := quotad.RefundResult{Refunded: 2, Usage: []quotad.UsageEntry{{Metric: "m", Window: "day", Limit: 10, Used: 3, Remaining: 7,
		ResetAt: time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), Refunded: 2}}}
	if got, want := mustJSON(t, res), mustJSON(t, want); got != want {
		t.Errorf("Refund = %s, want %s", got, want)
	}
}

// A customer's metadata keeps its numbers' digits from GET to PUT: they
// are json.Number, not float64.
func TestMetadataKeepsDigits(t *testing.T) {
	tests := []struct {
		name, metadata string
		want           quotad.Metadata
		wantPut        string
	}{
		{
			name:     "numbers",
			metadata: `{"big":12345678901234567890,"nested":{"n":[1.0e2,-0]},"ratio":1.50,"s":"x"}`,
			want: quotad.Metadata{"big": json.Number("12345678901234567890"),
				"nested": map[string]any{"n": []any{json.Number("1.0e2"), json.Number("-0")}}, "ratio": json.Number("1.50"), "s": "x"},
			wantPut: `{"plan":"pro","metadata":{"big":12345678901234567890,"nested":{"n":[1.0e2,-0]},"ratio":1.50,"s":"x"}}`,
		},
		{name: "null", metadata: `null`, want: nil, wantPut: `{"plan":"pro"}`},
		{name: "empty", metadata: `{}`, want: quotad.Metadata{}, wantPut: `{"plan":"pro"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var put string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPut {
					body, _ := io.ReadAll(r.Body)
					put = string(body)
				}
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"id":"acme","plan":"pro","metadata":` + tt.metadata + `,"version":1}`))
			}))
			defer srv.Close()
			c := quotad.New(srv.URL, noRetry)
			cu, err := c.Customers.Get(context.Background(), "acme")
			if err != nil {
				t.Fatal(err)
			}
			if got, want := fmt.Sprintf("%#v", cu.Metadata), fmt.Sprintf("%#v", tt.want); got != want {
				t.Errorf("Metadata = %s, want %s", got, want)
			}
			if _, _, err := c.Customers.Put(context.Background(), "acme", cu.CustomerSpec); err != nil {
				t.Fatal(err)
			}
			if put != tt.wantPut {
				t.Errorf("PUT body = %s, want %s", put, tt.wantPut)
			}
		})
	}
}

// SetTotal puts the count to the customer's total of the metric and reads
// the total back: its reset_at, null, is the zero time.
func TestSetTotal(t *testing.T) {
	var method, path, body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		method, path, body = r.Method, r.URL.EscapedPath(), string(b)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"customer":"acme","metric":"seats","window":"total","limit":10,"used":12,"remaining":0,` +
			`"overage":0,"reset_at":null}`))
	}))
	defer srv.Close()
	u, err := quotad.New(srv.URL).Customers.SetTotal(context.Background(), "acme", "seats", 12)
	if err != nil {
		t.Fatal(err)
	}
	if method != "PUT" || path != "/v1/customers/acme/usage/seats/total" || body != `{"used":12}` {
		t.Errorf("request = %s %s %s, want PUT /v1/customers/acme/usage/seats/total {\"used\":12}", method, path, body)
	}
	want := quotad.UsageEntry{Metric: "seats", Window: quotad.Total, Limit: 10, Used: 12}
	if *u != want || !u.ResetAt.IsZero() {
		t.Errorf("Customers.SetTotal = %+v, want %+v", *u, want)
	}
}
