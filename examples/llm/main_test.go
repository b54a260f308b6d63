package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	quotad "github.com/quotad/quotad/client"
	"github.com/quotad/quotad/internal/quotadtest"
)

func TestMain(m *testing.M) { os.Exit(quotadtest.Main(m)) }

// dayLimit is acme's limit of llm_tokens a day in these tests.
const dayLimit = 100

// The endpoint's answers, in order, against acme's 100 tokens a day: each
// request reserves its prompt and max_tokens and commits what the model
// used, so that the second fits only because the first gave back what it
// did not use.
var completionTests = []struct {
	name, key, body string // key: acme's, "" for none, or another
	wantStatus      int
	wantCode        string // the problem's, when not 200
	wantText        string
	wantTotal       int64  // tokens committed
	wantDetail      string // how the 429's detail starts, when set
}{
	{"first: 53 reserved, 9 used", "acme", `{"prompt": "a b c", "max_tokens": 50}`, 200, "", "c b a c b a", 9, ""},
	{"second: 85 reserved beside 9 used, 15 used", "acme", `{"prompt": "one two three four five", "max_tokens": 80}`, 200, "",
		"five four three two one five four three two one", 15, ""},
	{"third: 81 more than the 76 left", "acme", `{"prompt": "x", "max_tokens": 80}`, 429, "quota_exceeded", "", 0, "the customer's limit on this metric cannot take this request: it needs 81, 76 remain; retry after "},
	{"cut at max_tokens", "acme", `{"prompt": "hello world", "max_tokens": 2}`, 200, "", "world hello", 4, ""},
	{"max_tokens 0", "acme", `{"prompt": "x", "max_tokens": 0}`, 400, "validation_failed", "", 0, ""},
	{"not JSON", "acme", `prompt`, 400, "validation_failed", "", 0, ""},
	{"no key, naming acme", "", `{"prompt": "x", "max_tokens": 5}`, 401, "unauthorized", "", 0, ""},
	{"unknown key", "qk_unknown", `{"prompt": "x", "max_tokens": 5}`, 403, "forbidden", "", 0, ""},
}

// runCompletionTests sends completionTests to app, acme's API key being
// acmeKey. A request without a key names acme in X-Customer, which must
// not matter.
func runCompletionTests(t *testing.T, app *httptest.Server, acmeKey string) {
	t.Helper()
	for _, tt := range completionTests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, app.URL+"/v1/completions", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			switch tt.key {
			case "acme":
				req.Header.Set("X-Api-Key", acmeKey)
			case "":
				req.Header.Set("X-Customer", "acme")
			default:
				req.Header.Set("X-Api-Key", tt.key)
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
			if tt.wantStatus != 200 {
				var p quotad.Problem
				if err := json.Unmarshal(body, &p); err != nil || p.Code != tt.wantCode {
					t.Errorf("body = %s, want a problem with code %s", body, tt.wantCode)
				}
				if !strings.HasPrefix(p.Detail, tt.wantDetail) {
					t.Errorf("detail %q, want it to start %q", p.Detail, tt.wantDetail)
				}
				if got, want := resp.Header.Get("Retry-After") != "", tt.wantStatus == 429; got != want {
					t.Errorf("Retry-After = %q, want one: %v", resp.Header.Get("Retry-After"), want)
				}
				return
			}
			var c completion
			if err := json.Unmarshal(body, &c); err != nil {
				t.Fatalf("body %s: %v", body, err)
			}
			if c.Text != tt.wantText || c.Usage.TotalTokens != tt.wantTotal || c.Reserve == "" {
				t.Errorf("answer = %+v, want text %q, %d tokens, a reservation", c, tt.wantText, tt.wantTotal)
			}
			if rl := resp.Header.Get("RateLimit"); !strings.Contains(rl, Metric) {
				t.Errorf("RateLimit = %q, want quotad's header for %s", rl, Metric)
			}
		})
	}
}

// Against a stand-in for quotad's reservation routes.
func TestCompletions(t *testing.T) {
	f := &fakeQuotad{reserved: map[string]int64{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	app := httptest.NewServer(newServer(quotad.New(srv.URL), 30*time.Second))
	defer app.Close()
	runCompletionTests(t, app, fakeKey)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.used != 9+15+4 || len(f.reserved) != 0 {
		t.Errorf("used = %d with %d reservations held, want 28 and none", f.used, len(f.reserved))
	}
}

// Against a real quotad.
func TestCompletionsQuotad(t *testing.T) {
	s := quotadtest.MustStart(t, nil)
	admin := quotad.New(s.URL, quotad.WithToken(s.AdminToken))
	ctx := t.Context()
	if _, _, err := admin.Metrics.Put(ctx, Metric, quotad.MetricSpec{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := admin.Plans.Put(ctx, "pro", quotad.PlanSpec{Limits: []quotad.Limit{{Metric: Metric, Window: quotad.Day, Limit: dayLimit}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := admin.Customers.Put(ctx, "acme", quotad.CustomerSpec{Plan: "pro"}); err != nil {
		t.Fatal(err)
	}
	key, err := admin.Keys.Create(ctx, "acme", quotad.KeySpec{Name: "llm example"})
	if err != nil {
		t.Fatal(err)
	}
	// A busy machine can hold quotad's answer past the middleware's
	// default timeout (250ms), which would let the request through
	// without a reservation: the test waits longer.
	app := httptest.NewServer(newServer(quotad.New(s.URL, quotad.WithToken(s.CheckToken)), 30*time.Second))
	defer app.Close()
	runCompletionTests(t, app, key.Key)
}

// fakeKey is acme's API key in fakeQuotad.
const fakeKey = "qk_acme"

// fakeQuotad answers quotad's reservation routes for customer acme (by
// its API key fakeKey) and its day limit of llm_tokens, as the contract
// describes them.
type fakeQuotad struct {
	mu       sync.Mutex
	used     int64            // reserved and committed units
	reserved map[string]int64 // held reservations
	n        int
}

func (f *fakeQuotad) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	answer := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	problem := func(status int, code string) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]any{"type": "urn:quotad:problem:" + code, "status": status, "code": code})
	}
	limits := func(state string) []any {
		return []any{map[string]any{"window": "day", "limit": dayLimit, "used": f.used, "remaining": max(0, dayLimit-f.used), "state": state}}
	}
	w.Header().Set("RateLimit-Policy", `"`+Metric+`/day";q=`+strconv.Itoa(dayLimit)+`;w=86400`)
	switch id, commit := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/v1/reservations/"), "/commit"); {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/reservations":
		var req quotad.ReserveRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Cost < 1 || req.Metric != Metric {
			problem(400, "validation_failed")
			return
		}
		if req.Customer != "" || req.APIKey != fakeKey {
			problem(403, "invalid_api_key")
			return
		}
		if f.used+req.Cost > dayLimit {
			w.Header().Set("Retry-After", "3600")
			w.Header().Set("RateLimit", `"`+Metric+`/day";r=`+strconv.FormatInt(dayLimit-f.used, 10)+`;t=3600`)
			answer(429, map[string]any{"allowed": false, "customer": "acme", "metric": Metric, "cost": req.Cost,
				"retry_after": 3600, "limits": limits("exceeded"), "code": "quota_exceeded",
				"detail": fmt.Sprintf("the customer's limit on this metric cannot take this request: it needs %d, %d remain; retry after 3600 s",
					req.Cost, dayLimit-f.used)})
			return
		}
		f.n++
		id := "r" + strconv.Itoa(f.n)
		f.used += req.Cost
		f.reserved[id] = req.Cost
		w.Header().Set("RateLimit", `"`+Metric+`/day";r=`+strconv.FormatInt(dayLimit-f.used, 10)+`;t=3600`)
		answer(201, map[string]any{"id": id, "customer": "acme", "metric": Metric, "cost": req.Cost, "allowed": true,
			"expires_at": time.Now().Add(time.Duration(req.TTLSeconds) * time.Second), "limits": limits("ok")})
	case r.Method == http.MethodPost && commit:
		var req struct{ Cost int64 }
		reserved, ok := f.reserved[id]
		if !ok {
			problem(404, "reservation_not_found")
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Cost < 0 {
			problem(400, "validation_failed")
			return
		}
		delete(f.reserved, id)
		f.used += req.Cost - reserved
		answer(200, map[string]any{"id": id, "reserved": reserved, "committed": req.Cost, "released": max(0, reserved-req.Cost),
			"over": 0, "limits": limits("ok")})
	case r.Method == http.MethodDelete && !commit:
		f.used -= f.reserved[id]
		delete(f.reserved, id)
		w.WriteHeader(http.StatusNoContent)
	default:
		problem(404, "not_found")
	}
}
