package quotad_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	quotad "github.com/quotad/quotad/client"
)

// Neither middleware ever charges a customer the request names itself:
// checking by API key, a request without a key is a 401 (or, with
// AllowAnonymous, goes on charged to no one), whatever X-Customer says; and
// Customer beside APIKey, which used to take over when the key was
// missing, is refused when the middleware is made.
func TestMiddlewareNeverChargesANamedCustomer(t *testing.T) {
	type config struct{ customerToo, anonymous bool }
	// Each middleware, as configured, around a handler that answers 200.
	middlewares := map[string]func(c *quotad.Client, cfg config) http.Handler{
		"Middleware": func(c *quotad.Client, cfg config) http.Handler {
			opts := quotad.MiddlewareOptions{APIKey: quotad.FromHeader("X-Api-Key"), Metric: quotad.Static("api_calls"),
				AllowAnonymous: cfg.anonymous, Timeout: 30 * time.Second}
			if cfg.customerToo {
				opts.Customer = quotad.FromHeader("X-Customer")
			}
			return c.Middleware(opts)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		},
		"ReservationMiddleware": func(c *quotad.Client, cfg config) http.Handler {
			opts := quotad.ReservationMiddlewareOptions{APIKey: quotad.FromHeader("X-Api-Key"), Metric: quotad.Static("llm_tokens"),
				Estimate: func(*http.Request) (int64, error) { return 1, nil }, AllowAnonymous: cfg.anonymous, Timeout: 30 * time.Second}
			if cfg.customerToo {
				opts.Customer = quotad.FromHeader("X-Customer")
			}
			return c.ReservationMiddleware(opts)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		},
	}
	tests := []struct {
		name     string
		cfg      config
		customer string // X-Customer
		apiKey   string // X-Api-Key

		wantPanic  bool  // when the middleware is made
		wantStatus int   // if made all the same
		wantUsed   int64 // acme's units after the request
	}{
		{name: "by key", apiKey: "qk_acme", customer: "globex", wantStatus: 200, wantUsed: 1},
		{name: "no key, naming acme", customer: "acme", wantStatus: 401},
		{name: "no key, anonymous allowed", customer: "acme", cfg: config{anonymous: true}, wantStatus: 200},
		{name: "Customer beside APIKey", customer: "acme", cfg: config{customerToo: true}, wantPanic: true, wantStatus: 401},
		{name: "Customer beside APIKey, anonymous allowed", customer: "acme", cfg: config{customerToo: true, anonymous: true},
			wantPanic: true, wantStatus: 200},
	}
	for mwName, newHandler := range middlewares {
		for _, tt := range tests {
			t.Run(mwName+"/"+tt.name, func(t *testing.T) {
				f, srv := newFakeQuotad(10)
				defer srv.Close()
				var h http.Handler
				panicked := func() (p bool) {
					defer func() { p = recover() != nil }()
					h = newHandler(quotad.New(srv.URL), tt.cfg)
					return false
				}()
				if panicked != tt.wantPanic {
					t.Errorf("making the middleware panicked = %v, want %v", panicked, tt.wantPanic)
				}
				if panicked {
					return
				}
				// Made after all: it must still refuse (wantStatus).
				req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/work", nil)
				for k, v := range map[string]string{"X-Customer": tt.customer, "X-Api-Key": tt.apiKey} {
					if v != "" {
						req.Header.Set(k, v)
					}
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != tt.wantStatus {
					t.Errorf("status = %d, want %d; body %s", rec.Code, tt.wantStatus, rec.Body)
				}
				if tt.wantStatus == 401 {
					if p := mustProblem(t, rec); p.Code != "unauthorized" || p.Detail != "the request carries no API key" {
						t.Errorf("problem = %+v, want unauthorized: the request carries no API key", p)
					}
				}
				f.mu.Lock()
				defer f.mu.Unlock()
				if f.used != tt.wantUsed {
					t.Errorf("acme's units used = %d, want %d", f.used, tt.wantUsed)
				}
				if tt.apiKey == "" && len(f.calls) != 0 {
					t.Errorf("quotad was asked %v for a request without a key, want nothing", f.calls)
				}
			})
		}
	}
}

// FromContext reads what the application's authentication put in the
// request's context, and nothing else.
func TestFromContext(t *testing.T) {
	type customerKey struct{}
	tests := []struct {
		name  string
		value any
		want  string
	}{
		{"a customer", "acme", "acme"},
		{"none", nil, ""},
		{"not a string", 42, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("X-Customer", "globex")
			if tt.value != nil {
				r = r.WithContext(context.WithValue(r.Context(), customerKey{}, tt.value))
			}
			if got := quotad.FromContext(customerKey{})(r); got != tt.want {
				t.Errorf("FromContext = %q, want %q", got, tt.want)
			}
		})
	}
}
