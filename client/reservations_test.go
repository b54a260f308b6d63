package quotad_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	quotad "github.com/quotad/quotad/client"
)

// A reservation's life against the fake: reserved, denied, committed
// (idempotently, a second cost refused), released, expired, and beyond a
// hard limit.
func TestReservationLifecycle(t *testing.T) {
	f, srv := newFakeQuotad(10)
	defer srv.Close()
	c := quotad.New(srv.URL, noRetry)
	ctx := context.Background()

	res, err := c.Reserve(ctx, quotad.ReserveRequest{Customer: "acme", Metric: "llm_tokens", Cost: 6, TTLSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Allowed || res.ID != "rsv_1" || res.State != quotad.ReservationHeld || res.Cost != 6 || res.Customer != "acme" ||
		!res.ExpiresAt.Equal(time.Date(2026, 11, 22, 10, 5, 0, 0, time.UTC)) || len(res.Limits) != 1 || res.Limits[0].Used != 6 {
		t.Fatalf("Reserve = %+v, want rsv_1 held for 6 units, used 6", res)
	}
	if got, want := res.RateLimit, `"llm_tokens/minute";r=4;t=42`; got != want {
		t.Errorf("RateLimit = %q, want %q", got, want)
	}

	t.Run("denied is a result", func(t *testing.T) {
		res, err := c.Reserve(ctx, quotad.ReserveRequest{Customer: "acme", Metric: "llm_tokens", Cost: 5})
		if err != nil {
			t.Fatalf("err = %v, want a denial", err)
		}
		if res.Allowed || res.ID != "" || res.RetryAfter == nil || *res.RetryAfter != 42 || res.State != "" {
			t.Errorf("Reserve = %+v, want denied, no id, retry after 42", res)
		}
		res, err = c.Reserve(ctx, quotad.ReserveRequest{Customer: "acme", Metric: "llm_tokens", Cost: 11})
		if err != nil {
			t.Fatalf("err = %v, want a denial", err)
		}
		if res.Allowed || res.RetryAfter != nil || res.Code != "cost_exceeds_limit" {
			t.Errorf("Reserve = %+v, want denied for good", res)
		}
	})

	t.Run("commit, the same commit again, another cost", func(t *testing.T) {
		want := quotad.Settlement{ID: "rsv_1", Reserved: 6, Committed: 4, Released: 2, Over: 0}
		for i := range 2 {
			s, err := c.Commit(ctx, "rsv_1", 4)
			if err != nil {
				t.Fatalf("commit %d: %v", i+1, err)
			}
			if s.ID != want.ID || s.Reserved != want.Reserved || s.Committed != want.Committed || s.Released != want.Released || s.Over != want.Over {
				t.Errorf("commit %d = %+v, want %+v", i+1, *s, want)
			}
			if len(s.Limits) != 1 || s.Limits[0].Used != 4 {
				t.Errorf("commit %d limits = %+v, want used 4", i+1, s.Limits)
			}
		}
		if _, err := c.Commit(ctx, "rsv_1", 5); !errors.Is(err, quotad.ErrConflict) {
			t.Errorf("commit at another cost: err = %v, want ErrConflict", err)
		}
		r, err := c.Reservation(ctx, "rsv_1")
		if err != nil {
			t.Fatal(err)
		}
		if r.State != quotad.ReservationCommitted || !r.Allowed || r.Cost != 6 || r.Metric != "llm_tokens" ||
			r.Committed == nil || *r.Committed != 4 || r.Over != 0 || r.CreatedAt.IsZero() {
			t.Errorf("Reservation = %+v, want committed at 4 of 6, allowed, with its creation time", r)
		}
	})

	t.Run("by API key, released twice", func(t *testing.T) {
		res, err := c.Reserve(ctx, quotad.ReserveRequest{APIKey: "qk_acme", Metric: "llm_tokens", Cost: 5, RequestID: "job-7"})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Allowed || res.Customer != "acme" {
			t.Fatalf("Reserve = %+v, want allowed for acme", res)
		}
		for i := range 2 {
			if err := c.Release(ctx, res.ID); err != nil {
				t.Fatalf("release %d: %v", i+1, err)
			}
		}
		r, err := c.Reservation(ctx, res.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != quotad.ReservationReleased || r.RequestID != "job-7" || r.Committed != nil {
			t.Errorf("Reservation = %+v, want released, request id job-7, nothing committed", r)
		}
		if _, err := c.Commit(ctx, res.ID, 1); !errors.Is(err, quotad.ErrConflict) {
			t.Errorf("commit after release: err = %v, want ErrConflict", err)
		}
	})

	t.Run("expired", func(t *testing.T) {
		res, err := c.Reserve(ctx, quotad.ReserveRequest{Customer: "acme", Metric: "llm_tokens", Cost: 3})
		if err != nil || !res.Allowed {
			t.Fatalf("Reserve = %+v, %v; want allowed", res, err)
		}
		f.expire(res.ID)
		_, err = c.Commit(ctx, res.ID, 3)
		var p *quotad.Problem
		if !errors.Is(err, quotad.ErrReservationExpired) || !errors.As(err, &p) || p.Status != http.StatusGone {
			t.Errorf("commit after expiry: err = %v, want ErrReservationExpired (410)", err)
		}
		if r, err := c.Reservation(ctx, res.ID); err != nil || r.State != quotad.ReservationExpired {
			t.Errorf("Reservation = %+v, %v; want expired", r, err)
		}
	})

	t.Run("a commit beyond the hard limit is counted as over", func(t *testing.T) {
		res, err := c.Reserve(ctx, quotad.ReserveRequest{Customer: "acme", Metric: "llm_tokens", Cost: 6})
		if err != nil || !res.Allowed {
			t.Fatalf("Reserve = %+v, %v; want allowed", res, err)
		}
		s, err := c.Commit(ctx, res.ID, 8)
		if err != nil {
			t.Fatal(err)
		}
		if s.Reserved != 6 || s.Committed != 8 || s.Released != 0 || s.Over != 2 {
			t.Errorf("Commit = %+v, want reserved 6, committed 8, released 0, over 2", s)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		tests := []struct {
			name string
			call func() error
			want []error
		}{
			{"commit of an unknown id", func() error { _, err := c.Commit(ctx, "nope", 1); return err },
				[]error{quotad.ErrReservationNotFound, quotad.ErrNotFound}},
			{"release of an unknown id", func() error { return c.Release(ctx, "nope") },
				[]error{quotad.ErrReservationNotFound, quotad.ErrNotFound}},
			{"get of an unknown id", func() error { _, err := c.Reservation(ctx, "nope"); return err },
				[]error{quotad.ErrReservationNotFound, quotad.ErrNotFound}},
			{"an invalid API key", func() error {
				_, err := c.Reserve(ctx, quotad.ReserveRequest{APIKey: "qk_revoked", Metric: "m", Cost: 1})
				return err
			}, []error{quotad.ErrInvalidAPIKey, quotad.ErrForbidden}},
			{"an unknown customer", func() error {
				_, err := c.Reserve(ctx, quotad.ReserveRequest{Customer: "globex", Metric: "m", Cost: 1})
				return err
			}, []error{quotad.ErrCustomerNotFound, quotad.ErrNotFound}},
			{"both customer and API key", func() error {
				_, err := c.Reserve(ctx, quotad.ReserveRequest{Customer: "acme", APIKey: "qk_acme", Metric: "m", Cost: 1})
				return err
			}, []error{quotad.ErrValidation}},
			{"a negative commit", func() error { _, err := c.Commit(ctx, "rsv_1", -1); return err }, []error{quotad.ErrValidation}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := tt.call()
				for _, want := range tt.want {
					if !errors.Is(err, want) {
						t.Errorf("err = %v, want %v", err, want)
					}
				}
			})
		}
	})
}

// Each call sends quotad's route and body: the customer or the API key
// (never both fields), a commit's cost even when 0, escaped ids.
func TestReservationRequests(t *testing.T) {
	type seen struct{ method, path, body string }
	var got seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = seen{r.Method, r.URL.EscapedPath(), string(body)}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case r.URL.Path == "/v1/reservations":
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"id":"r1","customer":"acme","metric":"m","cost":500,"allowed":true,"limits":[],"new_field":1}`))
		default:
			w.Write([]byte(`{"id":"r1","state":"held"}`))
		}
	}))
	defer srv.Close()
	c := quotad.New(srv.URL, noRetry)
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		want seen
	}{
		{"reserve for a customer", func() error {
			_, err := c.Reserve(ctx, quotad.ReserveRequest{Customer: "acme", Metric: "m", Cost: 500, TTLSeconds: 60, RequestID: "job-1"})
			return err
		}, seen{"POST", "/v1/reservations", `{"customer":"acme","metric":"m","cost":500,"ttl_seconds":60,"request_id":"job-1"}`}},
		{"reserve by API key, default ttl", func() error {
			_, err := c.Reserve(ctx, quotad.ReserveRequest{APIKey: "qk_x", Metric: "m", Cost: 1})
			return err
		}, seen{"POST", "/v1/reservations", `{"api_key":"qk_x","metric":"m","cost":1}`}},
		{"commit of 0", func() error { _, err := c.Commit(ctx, "a/b", 0); return err },
			seen{"POST", "/v1/reservations/a%2Fb/commit", `{"cost":0}`}},
		{"release", func() error { return c.Release(ctx, "r1") }, seen{"DELETE", "/v1/reservations/r1", ""}},
		{"get", func() error { _, err := c.Reservation(ctx, "r1"); return err }, seen{"GET", "/v1/reservations/r1", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got = seen{}
			if err := tt.call(); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("request = %+v\nwant      %+v", got, tt.want)
			}
		})
	}
}

// Every error status of every reservation call is a *Problem that matches
// its sentinels, and only those.
func TestReservationErrors(t *testing.T) {
	calls := map[string]func(c *quotad.Client) error{
		"Reserve": func(c *quotad.Client) error {
			_, err := c.Reserve(context.Background(), quotad.ReserveRequest{Customer: "acme", Metric: "m", Cost: 1})
			return err
		},
		"Commit":      func(c *quotad.Client) error { _, err := c.Commit(context.Background(), "r1", 1); return err },
		"Release":     func(c *quotad.Client) error { return c.Release(context.Background(), "r1") },
		"Reservation": func(c *quotad.Client) error { _, err := c.Reservation(context.Background(), "r1"); return err },
	}
	tests := []struct {
		status int
		code   string
		want   []string
	}{
		{400, "validation_failed", []string{"ErrValidation"}},
		{401, "unauthorized", []string{"ErrUnauthorized"}},
		{403, "forbidden", []string{"ErrForbidden"}},
		{403, "invalid_api_key", []string{"ErrForbidden", "ErrInvalidAPIKey"}},
		{404, "not_found", []string{"ErrNotFound"}},
		{404, "customer_not_found", []string{"ErrNotFound", "ErrCustomerNotFound"}},
		{404, "metric_not_found", []string{"ErrNotFound", "ErrMetricNotFound"}},
		{404, "reservation_not_found", []string{"ErrNotFound", "ErrReservationNotFound"}},
		{404, "check_not_found", []string{"ErrNotFound", "ErrCheckNotFound"}},
		{409, "conflict", []string{"ErrConflict"}},
		{410, "reservation_expired", []string{"ErrReservationExpired"}},
		{413, "payload_too_large", []string{"ErrPayloadTooLarge"}},
		{415, "unsupported_media_type", []string{"ErrUnsupportedMediaType"}},
		{503, "unavailable", []string{"ErrUnavailable"}},
		{429, "", []string{"ErrTooManyRequests"}}, // a proxy's 429, not a decision
	}
	for name, call := range calls {
		for _, tt := range tests {
			t.Run(name+"/"+http.StatusText(tt.status)+"/"+tt.code, func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if tt.code == "" {
						w.Header().Set("Content-Type", "text/plain")
						w.WriteHeader(tt.status)
						w.Write([]byte("slow down"))
						return
					}
					writeFakeProblem(w, tt.status, tt.code)
				}))
				defer srv.Close()
				err := call(quotad.New(srv.URL, noRetry))
				var p *quotad.Problem
				if !errors.As(err, &p) || p.Status != tt.status || p.Code != tt.code {
					t.Fatalf("err = %v, want a *Problem %d %s", err, tt.status, tt.code)
				}
				for s, sentinel := range allSentinels {
					if got, want := errors.Is(err, sentinel), slices.Contains(tt.want, s); got != want {
						t.Errorf("errors.Is(err, %s) = %v, want %v", s, got, want)
					}
				}
			})
		}
	}
}

func TestReportCostWithoutReservation(t *testing.T) {
	if quotad.ReportCost(context.Background(), 3) {
		t.Error("ReportCost on a context without a reservation = true, want false")
	}
	if res, ok := quotad.ReservationFromContext(context.Background()); ok || res != nil {
		t.Errorf("ReservationFromContext = %v, %v; want nil, false", res, ok)
	}
}

func TestReservationMiddlewareNeeds(t *testing.T) {
	estimate := func(*http.Request) (int64, error) { return 1, nil }
	tests := []struct {
		name string
		opts quotad.ReservationMiddlewareOptions
	}{
		{"no customer nor key", quotad.ReservationMiddlewareOptions{Metric: quotad.Static("m"), Estimate: estimate}},
		{"customer and key", quotad.ReservationMiddlewareOptions{Customer: quotad.Static("acme"), APIKey: quotad.Static("qk"),
			Metric: quotad.Static("m"), Estimate: estimate}},
		{"no metric", quotad.ReservationMiddlewareOptions{Customer: quotad.Static("acme"), Estimate: estimate}},
		{"no estimate", quotad.ReservationMiddlewareOptions{APIKey: quotad.Static("qk"), Metric: quotad.Static("m")}},
		{"a ttl beyond an hour", quotad.ReservationMiddlewareOptions{Customer: quotad.Static("acme"), Metric: quotad.Static("m"),
			Estimate: estimate, TTL: time.Hour + time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("ReservationMiddleware did not panic")
				}
			}()
			quotad.New("http://quotad.invalid").ReservationMiddleware(tt.opts)
		})
	}
}

// The ReservationMiddleware's paths, against the fake quotad (acme may use
// 10 units a minute): what the client gets, whether the handler ran, and
// what became of the reservation.
func TestReservationMiddleware(t *testing.T) {
	reportThree := func(w http.ResponseWriter, r *http.Request) {
		if !quotad.ReportCost(r.Context(), 3) {
			w.WriteHeader(http.StatusTeapot) // no reservation to report to
			return
		}
		w.Write([]byte("done\n"))
	}
	tests := []struct {
		name     string
		used     int64 // units acme has used before the request
		down     bool  // quotad unreachable
		opts     quotad.ReservationMiddlewareOptions
		customer string // X-Customer
		apiKey   string // X-Api-Key
		estimate int64  // 0: Estimate fails
		handler  func(w http.ResponseWriter, r *http.Request)

		wantStatus  int
		wantCode    string // the problem's code, when the middleware answered
		wantDetail  string
		wantHandled bool
		wantPanic   bool
		wantState   string // of rsv_1; "" when nothing was reserved
		wantUsed    int64  // acme's units after the request
		wantHeader  map[string]string
		wantErrors  int   // calls of OnError
		wantErrIs   error // what the last OnError's error matches
	}{
		{name: "the reported cost is committed", customer: "acme", estimate: 8, handler: reportThree,
			wantStatus: 200, wantHandled: true, wantState: "committed", wantUsed: 3,
			wantHeader: map[string]string{"RateLimit": `"llm_tokens/minute";r=2;t=42`, "RateLimit-Policy": `"llm_tokens/minute";q=10;w=60`}},
		{name: "by API key", apiKey: "qk_acme", customer: "globex", estimate: 8, handler: reportThree,
			wantStatus: 200, wantHandled: true, wantState: "committed", wantUsed: 3},
		{name: "nothing reported commits the estimate", customer: "acme", estimate: 8,
			handler:    func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("done\n")) },
			wantStatus: 200, wantHandled: true, wantState: "committed", wantUsed: 8},
		{name: "nothing reported, ReleaseUnreported", customer: "acme", estimate: 8,
			opts:       quotad.ReservationMiddlewareOptions{ReleaseUnreported: true},
			handler:    func(w http.ResponseWriter, r *http.Request) {},
			wantStatus: 200, wantHandled: true, wantState: "released", wantUsed: 0},
		{name: "a report above the estimate is committed", customer: "acme", estimate: 4,
			handler:    func(w http.ResponseWriter, r *http.Request) { quotad.ReportCost(r.Context(), 12) },
			wantStatus: 200, wantHandled: true, wantState: "committed", wantUsed: 12},
		{name: "the last report wins", customer: "acme", estimate: 8,
			handler: func(w http.ResponseWriter, r *http.Request) {
				for n := range int64(6) {
					quotad.ReportCost(r.Context(), n)
				}
			},
			wantStatus: 200, wantHandled: true, wantState: "committed", wantUsed: 5},
		{name: "a handler's 500 releases", customer: "acme", estimate: 8,
			handler:    func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) },
			wantStatus: 502, wantHandled: true, wantState: "released", wantUsed: 0},
		{name: "a handler's 4xx commits the estimate", customer: "acme", estimate: 8,
			handler:    func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadRequest) },
			wantStatus: 400, wantHandled: true, wantState: "committed", wantUsed: 8},
		{name: "a 500 after a report commits the report", customer: "acme", estimate: 8,
			handler: func(w http.ResponseWriter, r *http.Request) {
				quotad.ReportCost(r.Context(), 3)
				w.WriteHeader(http.StatusInternalServerError)
			},
			wantStatus: 500, wantHandled: true, wantState: "committed", wantUsed: 3},
		{name: "a panic releases", customer: "acme", estimate: 8,
			handler:   func(w http.ResponseWriter, r *http.Request) { panic("model crashed") },
			wantPanic: true, wantHandled: true, wantState: "released", wantUsed: 0},
		{name: "a panic after a report commits the report", customer: "acme", estimate: 8,
			handler: func(w http.ResponseWriter, r *http.Request) {
				quotad.ReportCost(r.Context(), 5)
				panic(http.ErrAbortHandler)
			},
			wantPanic: true, wantHandled: true, wantState: "committed", wantUsed: 5},
		{name: "the client went away: still committed", customer: "acme", estimate: 8,
			handler: func(w http.ResponseWriter, r *http.Request) {
				r.Context().Value(cancelKey{}).(context.CancelFunc)()
				reportThree(w, r)
			},
			wantStatus: 200, wantHandled: true, wantState: "committed", wantUsed: 3},
		{name: "denied", customer: "acme", used: 5, estimate: 8, handler: reportThree,
			wantStatus: 429, wantCode: "quota_exceeded", wantDetail: "the customer's limit on this metric is reached; retry after 42 s",
			wantUsed: 5, wantHeader: map[string]string{"Retry-After": "42", "RateLimit": `"llm_tokens/minute";r=5;t=42`}},
		{name: "denied for good", customer: "acme", estimate: 11, handler: reportThree,
			wantStatus: 429, wantCode: "cost_exceeds_limit", wantDetail: "a cost of 11 can never pass the llm_tokens/minute limit of 10; do not retry",
			wantHeader: map[string]string{"Retry-After": ""}},
		{name: "the estimate fails", customer: "acme", estimate: 0, handler: reportThree,
			wantStatus: 400, wantCode: "validation_failed", wantDetail: "max_tokens: must be a positive integer"},
		{name: "no customer", handler: reportThree, estimate: 8, wantStatus: 401, wantCode: "unauthorized"},
		{name: "no customer, anonymous allowed", handler: reportThree, estimate: 8,
			opts:       quotad.ReservationMiddlewareOptions{AllowAnonymous: true},
			wantStatus: http.StatusTeapot, wantHandled: true},
		{name: "unknown customer", customer: "globex", estimate: 8, handler: reportThree,
			wantStatus: 403, wantCode: "forbidden", wantDetail: "the request's customer is not known", wantErrors: 1, wantErrIs: quotad.ErrCustomerNotFound},
		{name: "an invalid API key", apiKey: "qk_revoked", estimate: 8, handler: reportThree,
			wantStatus: 403, wantCode: "forbidden", wantDetail: "the request's API key is not valid", wantErrors: 1, wantErrIs: quotad.ErrInvalidAPIKey},
		{name: "quotad down, fail open", down: true, customer: "acme", estimate: 8, handler: reportThree,
			wantStatus: http.StatusTeapot, wantHandled: true, wantErrors: 1},
		{name: "quotad down, fail closed", down: true, customer: "acme", estimate: 8, handler: reportThree,
			opts:       quotad.ReservationMiddlewareOptions{FailClosed: true},
			wantStatus: 503, wantCode: "unavailable", wantErrors: 1},
		{name: "a failed commit is told", customer: "acme", estimate: 8,
			handler: func(w http.ResponseWriter, r *http.Request) {
				quotad.ReportCost(r.Context(), 3)
				res, _ := quotad.ReservationFromContext(r.Context())
				expireInFake(r.Context(), res.ID) // quotad releases it meanwhile
			},
			wantStatus: 200, wantHandled: true, wantState: "expired", wantUsed: 0, wantErrors: 1, wantErrIs: quotad.ErrReservationExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, srv := newFakeQuotad(10)
			defer srv.Close()
			f.used = tt.used
			if tt.down {
				srv.Close()
			}
			var errs []error
			opts := tt.opts
			if tt.apiKey != "" {
				opts.APIKey = quotad.FromHeader("X-Api-Key")
			} else {
				opts.Customer = quotad.FromHeader("X-Customer")
			}
			opts.Metric = quotad.Static("llm_tokens")
			opts.Estimate = func(*http.Request) (int64, error) {
				if tt.estimate == 0 {
					return 0, errors.New("max_tokens: must be a positive integer")
				}
				return tt.estimate, nil
			}
			// A busy machine can hold an answer past the default (250ms):
			// the middleware would then fail open or closed.
			opts.Timeout = 30 * time.Second
			opts.OnError = func(_ *http.Request, err error) { errs = append(errs, err) }
			var handled bool
			h := quotad.New(srv.URL, noRetry).ReservationMiddleware(opts)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				handled = true
				tt.handler(w, r)
			}))

			ctx, cancel := context.WithCancel(context.WithValue(context.Background(), fakeKey{}, f))
			defer cancel()
			ctx = context.WithValue(ctx, cancelKey{}, cancel)
			req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/complete", nil)
			for k, v := range map[string]string{"X-Customer": tt.customer, "X-Api-Key": tt.apiKey} {
				if v != "" {
					req.Header.Set(k, v)
				}
			}
			rec := httptest.NewRecorder()
			panicked := func() (p bool) {
				defer func() { p = recover() != nil }()
				h.ServeHTTP(rec, req)
				return false
			}()

			if panicked != tt.wantPanic {
				t.Errorf("panicked = %v, want %v", panicked, tt.wantPanic)
			}
			if !tt.wantPanic && rec.Code != tt.wantStatus {
				t.Errorf("status = %d, want %d; body %s", rec.Code, tt.wantStatus, rec.Body)
			}
			if handled != tt.wantHandled {
				t.Errorf("handler ran = %v, want %v", handled, tt.wantHandled)
			}
			if tt.wantCode != "" {
				p := mustProblem(t, rec)
				if p.Code != tt.wantCode || p.Status != tt.wantStatus {
					t.Errorf("problem = %+v, want code %s, status %d", p, tt.wantCode, tt.wantStatus)
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
			if !tt.down {
				if got := f.reservationState("rsv_1"); got != tt.wantState {
					t.Errorf("reservation rsv_1 is %q, want %q", got, tt.wantState)
				}
				f.mu.Lock()
				used := f.used
				f.mu.Unlock()
				if used != tt.wantUsed {
					t.Errorf("units used = %d, want %d", used, tt.wantUsed)
				}
			}
			if len(errs) != tt.wantErrors {
				t.Fatalf("OnError told of %v, want %d errors", errs, tt.wantErrors)
			}
			if tt.wantErrIs != nil && !errors.Is(errs[len(errs)-1], tt.wantErrIs) {
				t.Errorf("OnError told of %v, want %v", errs[len(errs)-1], tt.wantErrIs)
			}
		})
	}
}

// fakeKey carries the fake quotad in a request's context, for handlers
// that act on it as quotad would meanwhile.
type fakeKey struct{}

func expireInFake(ctx context.Context, id string) {
	ctx.Value(fakeKey{}).(*fakeQuotad).expire(id)
}

// cancelKey carries the cancel func of a request's context, for handlers
// whose client goes away.
type cancelKey struct{}

func mustProblem(t *testing.T, rec *httptest.ResponseRecorder) quotad.Problem {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	var p quotad.Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatalf("body %s: %v", rec.Body, err)
	}
	if p.Type != "urn:quotad:problem:"+p.Code {
		t.Errorf("type = %q, want urn:quotad:problem:%s", p.Type, p.Code)
	}
	return p
}

// reserveEight is the reservation middleware of a client of the quotad at
// url, reserving 8 of acme's llm_tokens for each request, around h.
func reserveEight(url string, h http.HandlerFunc) http.Handler {
	return quotad.New(url, noRetry).ReservationMiddleware(quotad.ReservationMiddlewareOptions{
		Customer: quotad.Static("acme"),
		Metric:   quotad.Static("llm_tokens"),
		Estimate: func(*http.Request) (int64, error) { return 8, nil },
		Timeout:  30 * time.Second,
	})(h)
}

// Without OnError, a commit that failed after the handler is written to
// the standard library's log, naming the reservation and the cost.
func TestReservationMiddlewareLogsSettleFailures(t *testing.T) {
	f, srv := newFakeQuotad(10)
	defer srv.Close()
	var buf strings.Builder
	log.SetOutput(&buf)
	defer log.SetOutput(os.Stderr)
	h := reserveEight(srv.URL, func(w http.ResponseWriter, r *http.Request) {
		quotad.ReportCost(r.Context(), 3)
		f.expire("rsv_1")
	})
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/complete", nil))
	if want := "quotad: commit of reservation rsv_1 at cost 3: quotad: 410 reservation_expired"; !strings.Contains(buf.String(), want) {
		t.Errorf("log = %q, want it to contain %q", buf.String(), want)
	}
}

// A streaming handler can flush through the middleware (http.Flusher and
// http.ResponseController both reach the server's writer), and its status
// is what it wrote first.
func TestReservationMiddlewareStreams(t *testing.T) {
	f, srv := newFakeQuotad(10)
	defer srv.Close()
	h := reserveEight(srv.URL, func(w http.ResponseWriter, r *http.Request) {
		for n := range int64(3) {
			w.Write([]byte("token\n"))
			w.(http.Flusher).Flush()
			quotad.ReportCost(r.Context(), n+1)
		}
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("ResponseController.Flush: %v", err)
		}
		w.WriteHeader(http.StatusInternalServerError) // too late: the answer is a 200
	})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/complete", nil))
	if !rec.Flushed || rec.Code != 200 || rec.Body.String() != "token\ntoken\ntoken\n" {
		t.Errorf("flushed %v, status %d, body %q; want flushed, 200, three tokens", rec.Flushed, rec.Code, rec.Body)
	}
	if got := f.reservationState("rsv_1"); got != quotad.ReservationCommitted {
		t.Errorf("reservation is %q, want committed", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.used != 3 {
		t.Errorf("units used = %d, want 3", f.used)
	}
}

// An allowed answer without an id cannot be committed: it is an error, not
// a reservation.
func TestReserveAllowedWithoutID(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"customer":"acme","metric":"m","cost":5,"allowed":true,"limits":[]}`))
	}))
	defer srv.Close()
	res, err := quotad.New(srv.URL).Reserve(context.Background(), quotad.ReserveRequest{Customer: "acme", Metric: "m", Cost: 5})
	if err == nil || res != nil {
		t.Errorf("Reserve = %+v, %v; want an error", res, err)
	}
}
