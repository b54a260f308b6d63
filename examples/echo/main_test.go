package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	quotad "github.com/quotad/quotad/client"
	"github.com/quotad/quotad/internal/quotadtest"
)

func TestMain(m *testing.M) { os.Exit(quotadtest.Main(m)) }

// The echo server lets acme's first two calls of a minute through and
// answers the third 429, against a real quotad; it charges the customer
// the app's token authenticates, and answers a request without one 401.
func TestEchoServer(t *testing.T) {
	s := quotadtest.MustStart(t, nil)
	admin := quotad.New(s.URL, quotad.WithToken(s.AdminToken))
	ctx := t.Context()
	if _, _, err := admin.Metrics.Put(ctx, "api_calls", quotad.MetricSpec{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := admin.Plans.Put(ctx, "pro", quotad.PlanSpec{Limits: []quotad.Limit{{Metric: "api_calls", Window: quotad.Minute, Limit: 2}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := admin.Customers.Put(ctx, "acme", quotad.CustomerSpec{Plan: "pro"}); err != nil {
		t.Fatal(err)
	}
	// A busy machine can hold quotad's answer past the middleware's
	// default timeout (250ms), which would let the request through
	// unchecked: the test waits longer.
	u, err := parseTokens("acme-token=acme, globex-token=globex")
	if err != nil {
		t.Fatal(err)
	}
	app := httptest.NewServer(newServer(quotad.New(s.URL, quotad.WithToken(s.CheckToken)), u, 30*time.Second))
	defer app.Close()

	// Every request names acme in X-Customer, which must not matter: the
	// customer is the one its token authenticates.
	tests := []struct {
		name, token   string
		wantStatus    int
		wantBody      string // a prefix; for a problem, its code
		wantRemaining string
	}{
		{"first", "acme-token", 200, "hello acme", "r=1"},
		{"second", "acme-token", 200, "hello acme", "r=0"},
		{"third denied", "acme-token", 429, "quota_exceeded", "r=0"},
		{"a customer quotad does not know", "globex-token", 403, "forbidden", ""},
		{"no token", "", 401, "unauthorized", ""},
		{"a token the app does not know", "acme", 401, "unauthorized", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, app.URL+"/hello", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Customer", "acme")
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, tt.wantStatus, body)
			}
			if tt.wantStatus == 200 {
				if !strings.HasPrefix(string(body), tt.wantBody) {
					t.Errorf("body = %q, want %q", body, tt.wantBody)
				}
			} else {
				var p quotad.Problem
				if err := json.Unmarshal(body, &p); err != nil || p.Code != tt.wantBody {
					t.Errorf("body = %s, want a problem with code %s", body, tt.wantBody)
				}
			}
			rl := resp.Header.Get("RateLimit")
			if tt.wantRemaining == "" && rl != "" || !strings.Contains(rl, tt.wantRemaining) {
				t.Errorf("RateLimit = %q, want %q in it", rl, tt.wantRemaining)
			}
			if got, want := resp.Header.Get("Retry-After") != "", tt.wantStatus == 429; got != want {
				t.Errorf("Retry-After = %q, want one: %v", resp.Header.Get("Retry-After"), want)
			}
		})
	}
}

func TestParseTokens(t *testing.T) {
	tests := []struct {
		name, in string
		want     int // users
		wantErr  bool
	}{
		{"none", "", 0, false},
		{"two", "a=acme, b=globex", 2, false},
		{"no customer", "a=", 0, true},
		{"no token", "=acme", 0, true},
		{"no pair", "acme", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := parseTokens(tt.in)
			if (err != nil) != tt.wantErr || len(u) != tt.want {
				t.Errorf("parseTokens(%q) = %d users, %v; want %d, error %v", tt.in, len(u), err, tt.want, tt.wantErr)
			}
		})
	}
}
