package quotad_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	quotad "github.com/quotad/quotad/client"
)

// recorder is a quotad stand-in that records each request as "METHOD
// path?query body" and answers with the body answers gives its path.
type recorder struct {
	mu   sync.Mutex
	seen []string
}

func (rc *recorder) serve(answers map[string]string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.seen = append(rc.seen, r.Method+" "+r.URL.RequestURI()+" "+string(body))
		rc.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost && r.URL.Path == "/v1/reservations" {
			w.WriteHeader(http.StatusCreated)
		}
		w.Write([]byte(answers[r.URL.Path]))
	}))
}

func (rc *recorder) last() string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.seen) == 0 {
		return ""
	}
	return rc.seen[len(rc.seen)-1]
}

// Items and subjects go out as quotad takes them, and come back: items
// in order, windows naming their metric and subject, remaining null.
func TestItemsAndSubjects(t *testing.T) {
	var rc recorder
	srv := rc.serve(map[string]string{
		"/v1/check": `{"allowed":true,"customer":"acme","overage":false,"elastic":false,"retry_after":0,"degraded":false,` +
			`"limits":[{"metric":"a","window":"minute","limit":5,"used":2,"remaining":3,"reset_at":"2026-11-22T10:01:00Z","mode":"hard","state":"ok"},` +
			`{"metric":"credits","subject":"u","window":"day","limit":10,"used":4,"remaining":6,"reset_at":"2026-11-23T00:00:00Z","mode":"hard","state":"ok"}],` +
			`"items":[{"metric":"a","cost":2,"allowed":true,"remaining":3,"limits":[{"metric":"a","window":"minute","limit":5,"used":2,"remaining":3,"reset_at":"2026-11-22T10:01:00Z","mode":"hard","state":"ok"}]},` +
			`{"metric":"b","subject":"u","cost":1,"allowed":true,"remaining":null,"limits":[]}]}`,
		"/v1/refund":               `{"customer":"acme","refunded":1,"usage":[]}`,
		"/v1/reservations":         `{"id":"rsv_1","expires_at":"2026-11-22T10:05:00Z","allowed":true,"customer":"acme","metric":"a","cost":1,"retry_after":0,"limits":[]}`,
		"/v1/customers/acme/usage": `{"customer":"acme","plan":"pro","usage":[{"metric":"a","subject":"user/7","window":"minute","limit":2,"used":1,"remaining":1,"overage":0,"reset_at":"2026-11-22T10:01:00Z"}]}`,
	})
	defer srv.Close()
	c := quotad.New(srv.URL, noRetry)
	ctx := context.Background()

	res, err := c.Check(ctx, quotad.CheckRequest{Customer: "acme", Items: []quotad.CheckItem{{Metric: "a", Cost: 2}, {Metric: "b", Subject: "u"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rc.last(), `POST /v1/check {"customer":"acme","items":[{"metric":"a","cost":2},{"metric":"b","subject":"u"}]}`; got != want {
		t.Errorf("sent %s\nwant %s", got, want)
	}
	three := int64(3)
	want := &quotad.CheckResult{Allowed: true, Customer: "acme", RetryAfter: new(int64),
		Limits: []quotad.CheckLimit{
			{Metric: "a", Window: "minute", Limit: 5, Used: 2, Remaining: 3, ResetAt: time.Date(2026, 11, 22, 10, 1, 0, 0, time.UTC), Mode: "hard", State: "ok"},
			{Metric: "credits", Subject: "u", Window: "day", Limit: 10, Used: 4, Remaining: 6, ResetAt: time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), Mode: "hard", State: "ok"}},
		Items: []quotad.CheckItemResult{
			{Metric: "a", Cost: 2, Allowed: true, Remaining: &three, Limits: []quotad.CheckLimit{
				{Metric: "a", Window: "minute", Limit: 5, Used: 2, Remaining: 3, ResetAt: time.Date(2026, 11, 22, 10, 1, 0, 0, time.UTC), Mode: "hard", State: "ok"}}},
			{Metric: "b", Subject: "u", Cost: 1, Allowed: true, Limits: []quotad.CheckLimit{}}}}
	if got, want := mustJSON(t, res), mustJSON(t, want); got != want {
		t.Errorf("Check = %s\nwant    %s", got, want)
	}
	if res.Items[1].Remaining != nil {
		t.Errorf("remaining null decoded as %d", *res.Items[1].Remaining)
	}

	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"a check with a subject", func() error {
			_, err := c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "a", Subject: "user/7"})
			return err
		}, `POST /v1/check {"customer":"acme","metric":"a","subject":"user/7"}`},
		{"a check by key", func() error {
			_, err := c.Check(ctx, quotad.CheckRequest{APIKey: "qk_x", Metric: "a"})
			return err
		}, `POST /v1/check {"api_key":"qk_x","metric":"a"}`},
		{"a refund with a subject", func() error {
			_, err := c.Refund(ctx, quotad.RefundRequest{Customer: "acme", Metric: "a", Subject: "u"})
			return err
		}, `POST /v1/refund {"customer":"acme","metric":"a","subject":"u"}`},
		{"a reserve with a subject", func() error {
			_, err := c.Reserve(ctx, quotad.ReserveRequest{Customer: "acme", Metric: "a", Cost: 1, Subject: "u"})
			return err
		}, `POST /v1/reservations {"customer":"acme","metric":"a","cost":1,"subject":"u"}`},
		{"a subject's usage", func() error {
			u, err := c.SubjectUsage(ctx, "acme", "user/7")
			if err == nil && (len(u.Usage) != 1 || u.Usage[0].Subject != "user/7") {
				t.Errorf("usage %+v, want user/7's window", u)
			}
			return err
		}, `GET /v1/customers/acme/usage?subject=user%2F7 `},
	} {
		if err := tc.call(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if got := rc.last(); got != tc.want {
			t.Errorf("%s: sent %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// The middleware names the subject its function finds, and none without
// one (quotad then counts a key's id); a subject quotad requires and the
// request lacks is a 403.
func TestMiddlewareSubject(t *testing.T) {
	var rc recorder
	srv := rc.serve(map[string]string{
		"/v1/check": `{"allowed":true,"customer":"acme","metric":"api_calls","cost":1,"retry_after":0,"limits":[]}`,
	})
	defer srv.Close()
	c := quotad.New(srv.URL)
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	type customerKey struct{}
	withSubject := c.Middleware(quotad.MiddlewareOptions{Customer: quotad.FromContext(customerKey{}),
		Metric: quotad.Static("api_calls"), Subject: quotad.FromHeader("X-User")})(next)
	keyWithSubject := c.Middleware(quotad.MiddlewareOptions{APIKey: quotad.FromHeader("X-Api-Key"),
		Metric: quotad.Static("api_calls"), Subject: quotad.FromHeader("X-User")})(next)
	without := c.Middleware(quotad.MiddlewareOptions{APIKey: quotad.FromHeader("X-Api-Key"), Metric: quotad.Static("api_calls")})(next)
	for _, tc := range []struct {
		name     string
		h        http.Handler
		customer string // authenticated, in the request's context
		headers  map[string]string
		want     string
	}{
		{"a customer's user", withSubject, "acme", map[string]string{"X-User": "u-1"}, `{"customer":"acme","metric":"api_calls","cost":1,"subject":"u-1"}`},
		{"a key's user", keyWithSubject, "", map[string]string{"X-Api-Key": "qk_x", "X-User": "u-2"}, `{"api_key":"qk_x","metric":"api_calls","cost":1,"subject":"u-2"}`},
		{"no user", withSubject, "acme", nil, `{"customer":"acme","metric":"api_calls","cost":1}`},
		{"no subject function", without, "", map[string]string{"X-Api-Key": "qk_x", "X-User": "u-3"}, `{"api_key":"qk_x","metric":"api_calls","cost":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			if tc.customer != "" {
				req = req.WithContext(context.WithValue(req.Context(), customerKey{}, tc.customer))
			}
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			tc.h.ServeHTTP(rec, req)
			if rec.Code != http.StatusNoContent {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			if got := rc.last(); got != "POST /v1/check "+tc.want {
				t.Errorf("sent %s\nwant POST /v1/check %s", got, tc.want)
			}
		})
	}

	required := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"type":"urn:quotad:problem:subject_required","title":"Bad Request","status":400,"code":"subject_required"}`))
	}))
	defer required.Close()
	h := quotad.New(required.URL).Middleware(quotad.MiddlewareOptions{Customer: quotad.Static("acme"), Metric: quotad.Static("api_calls")})(next)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "names no subject") {
		t.Errorf("subject required: %d %s, want a 403 saying so", rec.Code, rec.Body)
	}
}
