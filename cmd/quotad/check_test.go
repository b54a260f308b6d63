package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/dbtest"
)

// MustSeed declares metric api_calls (body metricJSON, "{}" if empty), a
// plan "limited" with limitsJSON, and customers on it.
func MustSeed(t testing.TB, s *testServer, metricJSON, limitsJSON string, customers ...string) {
	t.Helper()
	if metricJSON == "" {
		metricJSON = `{}`
	}
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/api_calls", metricJSON)
	s.mustDo(http.StatusCreated, "PUT", "/v1/plans/limited", `{"name":"Limited","limits":`+limitsJSON+`}`)
	for _, c := range customers {
		s.mustDo(http.StatusCreated, "PUT", "/v1/customers/"+c, `{"plan":"limited"}`)
	}
}

type checkAnswer struct {
	Allowed    bool   `json:"allowed"`
	RetryAfter *int64 `json:"retry_after"`
	Degraded   bool   `json:"degraded"`
	Limits     []struct {
		Window    string `json:"window"`
		Limit     int64  `json:"limit"`
		Used      int64  `json:"used"`
		Remaining int64  `json:"remaining"`
		State     string `json:"state"`
	} `json:"limits"`
}

// check posts a check with the check token and decodes the answer.
func (s *testServer) check(body string) (response, checkAnswer) {
	s.t.Helper()
	return postAsCheck[checkAnswer](s, "check", "/v1/check", body, http.StatusOK, http.StatusTooManyRequests)
}

// postAsCheck posts body to path with the check token and decodes the
// answer into an A when its status is one of decode, failing the test
// (naming the answer what) when it does not decode.
func postAsCheck[A any](s *testServer, what, path, body string, decode ...int) (response, A) {
	s.t.Helper()
	r := s.do("POST", path, body, "Authorization", "Bearer "+checkToken)
	var a A
	if slices.Contains(decode, r.Status) {
		if err := json.Unmarshal(r.Body, &a); err != nil {
			s.t.Fatalf("%s answer: %v\n%s", what, err, r.Body)
		}
	}
	return r, a
}

func TestConcurrentChecksAdmitExactlyTheLimit(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"day","limit":200}]`, "acme")
	got, _ := checkAll(t, []*testServer{s}, 64, 64*8, "acme")
	if got[200] != 200 || got[429] != 64*8-200 {
		t.Errorf("statuses = %v, want exactly 200 × 200 and %d × 429", got, 64*8-200)
	}
	_, a := s.check(`{"customer":"acme","metric":"api_calls","dry_run":true}`)
	if a.Limits[0].Used != 200 {
		t.Errorf("day used = %d, want 200", a.Limits[0].Used)
	}
}

func TestTwoServersOnOneDatabase(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	a := MustStartServer(t, schema, nil)
	b := MustStartServer(t, schema, nil)
	MustSeed(t, a, "", `[{"metric":"api_calls","window":"day","limit":150}]`, "acme", "beta")

	t.Run("hard limit exact across processes", func(t *testing.T) {
		got, _ := checkAll(t, []*testServer{a, b}, 64, 64*6, "acme")
		if got[200] != 150 || got[429] != 64*6-150 {
			t.Errorf("statuses = %v, want exactly 150 × 200", got)
		}
	})
	t.Run("a request id is kept in every process", func(t *testing.T) {
		body := `{"customer":"beta","metric":"api_calls","cost":5,"request_id":"job-42"}`
		r1, first := a.check(body)
		r2, again := b.check(body)
		if r1.Status != 200 || r2.Status != 200 || again.Limits[0].Used != first.Limits[0].Used {
			t.Fatalf("first %d %s, replay %d %s", r1.Status, r1.Body, r2.Status, r2.Body)
		}
		// b took 5 units for the replay and put them back in its lease; a
		// reads them as admitted until b reports them unused, at once or,
		// when a call of that lease is in flight, at b's next flush, which
		// a busy machine delays. Charged twice, the day would stay at 10.
		eventually(t, func() bool {
			u := a.mustDo(http.StatusOK, "GET", "/v1/customers/beta/usage", "")
			return strings.Contains(string(u.Body), `"window":"day","limit":150,"used":5,`)
		}, "the usage read after a replay on another server to be 5")
		r := b.do("POST", "/v1/check", `{"customer":"beta","metric":"api_calls","cost":6,"request_id":"job-42"}`,
			"Authorization", "Bearer "+checkToken)
		if r.Status != http.StatusConflict || r.JSON(t)["code"] != "conflict" {
			t.Errorf("reuse with another cost: %d %s", r.Status, r.Body)
		}
	})
	t.Run("admin changes reach the other process", func(t *testing.T) {
		a.mustDo(http.StatusCreated, "PUT", "/v1/customers/gamma", `{"plan":"limited"}`)
		if _, ans := b.check(`{"customer":"gamma","metric":"api_calls","cost":150}`); !ans.Allowed {
			t.Fatal("gamma's first check denied")
		}
		a.mustDo(http.StatusCreated, "PUT", "/v1/customers/gamma/overrides/api_calls/day", `{"limit":300}`)
		eventually(t, func() bool {
			_, ans := b.check(`{"customer":"gamma","metric":"api_calls","cost":150,"dry_run":true}`)
			return ans.Allowed
		}, "the override set on one server to apply on the other")
	})
}

// MustCutter returns cut: cut(false) makes database db refuse connections
// and ends those it has, as an outage would; cut(true) ends the outage,
// which the test's cleanup also does. admin connects to the same server.
func MustCutter(t testing.TB, db *dbtest.Schema, admin string) func(allow bool) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) }) // after the cleanup that lets connections back in
	name := pgx.Identifier{db.Name}.Sanitize()
	cut := func(allow bool) {
		t.Helper()
		if _, err := conn.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s ALLOW_CONNECTIONS %t`, name, allow)); err != nil {
			t.Fatal(err)
		}
		if !allow {
			const q = `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`
			if _, err := conn.Exec(ctx, q, db.Name); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() { cut(true) })
	return cut
}

// eventually polls cond until it holds, for at most 30 seconds: a bound
// on the wait, far above what an idle machine needs, so that a busy one
// does not reach it; never a measure.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func TestResetReachesOtherProcess(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	a := MustStartServer(t, schema, nil)
	b := MustStartServer(t, schema, nil)
	MustSeed(t, a, "", `[{"metric":"api_calls","window":"minute","limit":100},{"metric":"api_calls","window":"day","limit":1000}]`, "acme")
	if _, ans := b.check(`{"customer":"acme","metric":"api_calls","cost":100}`); !ans.Allowed {
		t.Fatal("first check denied")
	}
	// Even if the minute rolls over now, 100 previous units keep a check
	// of 50 out for the next 30 seconds: only the reset lets it pass.
	if _, ans := b.check(`{"customer":"acme","metric":"api_calls","cost":50,"dry_run":true}`); ans.Allowed {
		t.Fatal("a full minute window admitted 50 more")
	}
	a.mustDo(http.StatusNoContent, "DELETE", "/v1/customers/acme/usage/api_calls", "")
	eventually(t, func() bool {
		_, ans := b.check(`{"customer":"acme","metric":"api_calls","cost":50,"dry_run":true}`)
		// A dry run reports the count as if checked: 0 + 50.
		return ans.Allowed && ans.Limits[1].Used == 50
	}, "the reset on one server to zero the other's minute window")
}

func TestRestartKeepsDayCounts(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	first := MustStartServer(t, schema, nil)
	MustSeed(t, first, "", `[{"metric":"api_calls","window":"day","limit":10}]`, "acme")
	if _, ans := first.check(`{"customer":"acme","metric":"api_calls","cost":7}`); !ans.Allowed {
		t.Fatal("first check denied")
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	second := MustStartServer(t, schema, nil)
	r, ans := second.check(`{"customer":"acme","metric":"api_calls","cost":4}`)
	if r.Status != http.StatusTooManyRequests || ans.Limits[0].Used != 7 {
		t.Errorf("after restart: %d %s, want 429 with used 7", r.Status, r.Body)
	}
	// The history written before the restart is there too.
	h := second.mustDo(http.StatusOK, "GET", "/v1/customers/acme/usage/history", "")
	days := h.JSON(t)["days"].([]any)
	if len(days) != 1 || days[0].(map[string]any)["used"].(float64) != 7 || days[0].(map[string]any)["denied"].(float64) != 1 {
		t.Errorf("history = %s, want used 7 and denied 1 today", h.Body)
	}
}

func TestCheckHTTPContract(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"minute","limit":1000},{"metric":"api_calls","window":"day","limit":10}]`, "acme")
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/exports", `{}`)

	r, ans := s.check(`{"customer":"acme","metric":"api_calls","cost":4}`)
	if r.Status != 200 || !ans.Allowed || ans.RetryAfter == nil || *ans.RetryAfter != 0 {
		t.Fatalf("allowed check: %d %s", r.Status, r.Body)
	}
	const policy = `"api_calls/minute";q=1000;w=60, "api_calls/day";q=10;w=86400`
	if got := r.Header.Get("RateLimit-Policy"); got != policy {
		t.Errorf("RateLimit-Policy = %q, want %q", got, policy)
	}
	if got := r.Header.Get("RateLimit"); !strings.HasPrefix(got, `"api_calls/day";r=6;t=`) {
		t.Errorf("RateLimit = %q", got)
	}

	r, ans = s.check(`{"customer":"acme","metric":"api_calls","cost":7}`)
	if r.Status != http.StatusTooManyRequests || ans.Allowed || ans.RetryAfter == nil || *ans.RetryAfter < 1 {
		t.Fatalf("denied check: %d %s", r.Status, r.Body)
	}
	if got := r.Header.Get("Retry-After"); got != strconv.FormatInt(*ans.RetryAfter, 10) {
		t.Errorf("Retry-After = %q, body retry_after = %d", got, *ans.RetryAfter)
	}
	if got := r.Header.Get("RateLimit-Policy"); got != policy {
		t.Errorf("RateLimit-Policy on 429 = %q, want %q (the same policy)", got, policy)
	}
	if ans.Limits[0].State != "ok" || ans.Limits[1].State != "exceeded" || ans.Limits[1].Used != 4 {
		t.Errorf("denied windows = %+v", ans.Limits)
	}
	if got, want := r.Header.Get("RateLimit"), `"api_calls/day";r=`+strconv.FormatInt(ans.Limits[1].Remaining, 10)+
		`;t=`+strconv.FormatInt(*ans.RetryAfter, 10); got != want || ans.Limits[1].Remaining != 6 {
		t.Errorf("RateLimit on 429 = %q, want %q (r the body's remaining, 6; t equal to Retry-After)", got, want)
	}

	r, ans = s.check(`{"customer":"acme","metric":"api_calls","cost":11}`)
	if r.Status != http.StatusTooManyRequests || ans.RetryAfter != nil || r.Header.Get("Retry-After") != "" {
		t.Errorf("a check that can never pass: %d %s Retry-After=%q", r.Status, r.Body, r.Header.Get("Retry-After"))
	}
	// The cost_exceeds_limit 429: the check answer with a code and a detail
	// naming the window and its limit, no Retry-After and no RateLimit,
	// whose t would invite a retry; the policy as on every answer.
	never := r.JSON(t)
	if never["code"] != "cost_exceeds_limit" || never["detail"] != "a cost of 11 can never pass the api_calls/day limit of 10; do not retry" ||
		never["allowed"] != false || len(ans.Limits) != 2 {
		t.Errorf("a check that can never pass: %s", r.Body)
	}
	if got := r.Header.Get("RateLimit"); got != "" {
		t.Errorf("RateLimit on a check that can never pass = %q, want none", got)
	}
	if got := r.Header.Get("RateLimit-Policy"); got != policy {
		t.Errorf("RateLimit-Policy on a check that can never pass = %q, want %q", got, policy)
	}
	r, ans = s.check(`{"customer":"acme","metric":"exports","cost":5}`)
	if r.Status != 200 || len(ans.Limits) != 0 || r.Header.Get("RateLimit") != "" {
		t.Errorf("metric without limits: %d %s", r.Status, r.Body)
	}

	errorsTable := []struct {
		name   string
		method string
		path   string
		body   string
		token  string
		status int
		code   string
	}{
		{"unknown customer", "POST", "/v1/check", `{"customer":"ghost","metric":"api_calls"}`, checkToken, 404, "customer_not_found"},
		{"undeclared metric", "POST", "/v1/check", `{"customer":"acme","metric":"nope"}`, checkToken, 404, "metric_not_found"},
		{"cost zero", "POST", "/v1/check", `{"customer":"acme","metric":"api_calls","cost":0}`, checkToken, 400, "validation_failed"},
		{"cost too large", "POST", "/v1/check", `{"customer":"acme","metric":"api_calls","cost":1000000001}`, checkToken, 400, "validation_failed"},
		{"cost not an integer", "POST", "/v1/check", `{"customer":"acme","metric":"api_calls","cost":1.5}`, checkToken, 400, "validation_failed"},
		{"unknown field", "POST", "/v1/check", `{"customer":"acme","metric":"api_calls","costs":1}`, checkToken, 400, "validation_failed"},
		{"field name in another case", "POST", "/v1/check", `{"CUSTOMER":"acme","metric":"api_calls"}`, checkToken, 400, "validation_failed"},
		{"bad customer id", "POST", "/v1/check", `{"customer":"-acme","metric":"api_calls"}`, checkToken, 400, "validation_failed"},
		{"no token", "POST", "/v1/check", `{"customer":"acme","metric":"api_calls"}`, "", 401, "unauthorized"},
		{"check token reads history", "GET", "/v1/customers/acme/usage/history", "", checkToken, 403, "forbidden"},
		{"check token resets usage", "DELETE", "/v1/customers/acme/usage/api_calls", "", checkToken, 403, "forbidden"},
		{"refund of unknown customer", "POST", "/v1/refund", `{"customer":"ghost","metric":"api_calls","cost":1}`, checkToken, 404, "customer_not_found"},
		{"usage of unknown customer", "GET", "/v1/customers/ghost/usage", "", checkToken, 404, "customer_not_found"},
		{"reset of undeclared metric", "DELETE", "/v1/customers/acme/usage/nope", "", adminToken, 404, "metric_not_found"},
		{"history with a bad date", "GET", "/v1/customers/acme/usage/history?from=2026-13-01", "", adminToken, 400, "validation_failed"},
		{"history backwards", "GET", "/v1/customers/acme/usage/history?from=2026-11-20&to=2026-11-10", "", adminToken, 400, "validation_failed"},
		{"history of an invalid id", "GET", "/v1/customers/-x/usage/history", "", adminToken, 400, "validation_failed"},
	}
	for _, tt := range errorsTable {
		t.Run(tt.name, func(t *testing.T) {
			auth := ""
			if tt.token != "" {
				auth = "Bearer " + tt.token
			}
			r := s.do(tt.method, tt.path, tt.body, "Authorization", auth)
			if r.Status != tt.status || r.Header.Get("Content-Type") != "application/problem+json" || r.JSON(t)["code"] != tt.code {
				t.Errorf("%d %s %s, want %d %s", r.Status, r.Header.Get("Content-Type"), r.Body, tt.status, tt.code)
			}
		})
	}

	t.Run("check token may check, refund and read usage", func(t *testing.T) {
		r := s.do("POST", "/v1/refund", `{"customer":"acme","metric":"api_calls","cost":2}`, "Authorization", "Bearer "+checkToken)
		if r.Status != 200 {
			t.Fatalf("refund: %d %s", r.Status, r.Body)
		}
		var body struct {
			Usage []struct {
				Window string `json:"window"`
				Used   int64  `json:"used"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil || len(body.Usage) != 2 || body.Usage[1].Used != 2 {
			t.Errorf("refund answer = %s", r.Body)
		}
		r = s.do("GET", "/v1/customers/acme/usage", "", "Authorization", "Bearer "+checkToken)
		if r.Status != 200 || r.JSON(t)["plan"] != "limited" {
			t.Errorf("usage: %d %s", r.Status, r.Body)
		}
	})
}

func TestHistoryOutlivesCustomer(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"day","limit":5,"mode":"soft","overage_percent":100}]`, "acme")
	for _, cost := range []int{4, 3, 5} { // 4, 7 (2 overage), denied
		s.check(fmt.Sprintf(`{"customer":"acme","metric":"api_calls","cost":%d}`, cost))
	}
	s.mustDo(http.StatusNoContent, "DELETE", "/v1/customers/acme", "")
	today := time.Now().UTC().Format("2006-01-02")
	r := s.mustDo(http.StatusOK, "GET", "/v1/customers/acme/usage/history?metric=api_calls&from="+today+"&to="+today, "")
	want := fmt.Sprintf(`{"days":[{"date":%q,"metric":"api_calls","used":7,"overage":2,"denied":1}]}`, today)
	if strings.TrimSpace(string(r.Body)) != want {
		t.Errorf("history = %s, want %s", r.Body, want)
	}
	r = s.mustDo(http.StatusOK, "GET", "/v1/customers/never-seen/usage/history", "")
	if strings.TrimSpace(string(r.Body)) != `{"days":[]}` {
		t.Errorf("history of an unknown id = %s", r.Body)
	}
}

func TestStoreFailure(t *testing.T) {
	t.Parallel()
	db, admin := dbtest.NewDatabase(t)
	open := MustStartServer(t, db, map[string]string{"QUOTAD_STORE_FAILURE": "open"})
	closed := MustStartServer(t, db, map[string]string{"QUOTAD_STORE_FAILURE": "closed"})
	MustSeed(t, open, "", `[{"metric":"api_calls","window":"minute","limit":1000},{"metric":"api_calls","window":"day","limit":100}]`, "acme")
	for _, s := range []*testServer{open, closed} { // warm the caches
		if _, ans := s.check(`{"customer":"acme","metric":"api_calls"}`); !ans.Allowed {
			t.Fatal("warm-up check denied")
		}
	}

	cut := MustCutter(t, db, admin)
	cut(false)

	r, ans := open.check(`{"customer":"acme","metric":"api_calls","cost":2}`)
	if r.Status != 200 || !ans.Degraded || len(ans.Limits) != 1 || ans.Limits[0].Window != "minute" {
		t.Errorf("fail open: %d %s, want 200 degraded with only the minute window", r.Status, r.Body)
	}
	r, _ = closed.check(`{"customer":"acme","metric":"api_calls","cost":2}`)
	if r.Status != http.StatusServiceUnavailable || r.JSON(t)["code"] != "unavailable" {
		t.Errorf("fail closed: %d %s, want 503 unavailable", r.Status, r.Body)
	}
	r = open.do("PUT", "/v1/metrics/new_metric", `{}`)
	if r.Status != http.StatusServiceUnavailable || r.JSON(t)["code"] != "unavailable" {
		t.Errorf("admin write while the database is gone: %d %s, want 503", r.Status, r.Body)
	}
	if r := open.do("GET", "/readyz", ""); r.Status != http.StatusServiceUnavailable {
		t.Errorf("/readyz = %d, want 503", r.Status)
	}
	if r := open.do("GET", "/healthz", ""); r.Status != http.StatusOK {
		t.Errorf("/healthz = %d, want 200 while the process runs", r.Status)
	}

	cut(true)
	eventually(t, func() bool { return open.do("GET", "/readyz", "").Status == http.StatusOK }, "/readyz to recover")
	r, ans = open.check(`{"customer":"acme","metric":"api_calls","cost":2}`)
	if r.Status != 200 || ans.Degraded || len(ans.Limits) != 2 {
		t.Fatalf("after recovery: %d %s", r.Status, r.Body)
	}
	// The two warm-ups, the degraded check (owed during the outage, charged
	// once PostgreSQL answered again) and this one. Usage reads count
	// admitted units exactly once traffic has been idle for the flush
	// interval (the other process holds a leased unit it has not used).
	eventually(t, func() bool { return open.usageOf("acme")["day"] == 1+1+2+2 },
		"the day counter to count the two warm-ups, the degraded check and the check after recovery")
	open.mustDo(http.StatusNotFound, "GET", "/v1/metrics/new_metric", "")
}

// A refund says how many units went back, in all and per window, against
// PostgreSQL's counters: 1000 refunded against 9 used take back 9.
func TestRefundSaysHowManyUnitsWentBack(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"minute","limit":1000},{"metric":"api_calls","window":"day","limit":100}]`, "acme")
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/exports", `{}`)
	type refundAnswer struct {
		Refunded *int64 `json:"refunded"`
		Usage    []struct {
			Window   string `json:"window"`
			Used     int64  `json:"used"`
			Refunded *int64 `json:"refunded"`
		} `json:"usage"`
	}
	refund := func(body string) refundAnswer {
		t.Helper()
		r := s.mustDo(http.StatusOK, "POST", "/v1/refund", body, "Authorization", "Bearer "+checkToken)
		var a refundAnswer
		if err := json.Unmarshal(r.Body, &a); err != nil || a.Refunded == nil {
			t.Fatalf("refund answer: %v\n%s", err, r.Body)
		}
		for _, u := range a.Usage {
			if u.Refunded == nil {
				t.Fatalf("usage entry without refunded:\n%s", r.Body)
			}
		}
		return a
	}
	if r, ans := s.check(`{"customer":"acme","metric":"api_calls","cost":9,"request_id":"r1"}`); !ans.Allowed {
		t.Fatalf("check: %d %s", r.Status, r.Body)
	}
	tests := []struct {
		name     string
		body     string
		refunded int64
		windows  map[string][2]int64 // window: refunded, used after
	}{
		{"some of the used units", `{"customer":"acme","metric":"api_calls","cost":2,"request_id":"r1"}`, 2,
			map[string][2]int64{"minute": {2, 7}, "day": {2, 7}}},
		{"a replay gives nothing back", `{"customer":"acme","metric":"api_calls","cost":2,"request_id":"r1"}`, 0,
			map[string][2]int64{"minute": {0, 7}, "day": {0, 7}}},
		{"1000 against 7 used", `{"customer":"acme","metric":"api_calls","cost":1000}`, 7,
			map[string][2]int64{"minute": {7, 0}, "day": {7, 0}}},
		{"nothing used", `{"customer":"acme","metric":"api_calls","cost":5}`, 0,
			map[string][2]int64{"minute": {0, 0}, "day": {0, 0}}},
		{"a metric without a limit", `{"customer":"acme","metric":"exports","cost":5}`, 0, map[string][2]int64{}},
	}
	for _, tt := range tests {
		a := refund(tt.body)
		if *a.Refunded != tt.refunded {
			t.Errorf("%s: refunded %d, want %d", tt.name, *a.Refunded, tt.refunded)
		}
		got := map[string][2]int64{}
		for _, u := range a.Usage {
			got[u.Window] = [2]int64{*u.Refunded, u.Used}
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.windows) {
			t.Errorf("%s: windows (refunded, used) = %v, want %v", tt.name, got, tt.windows)
		}
	}
	// 9 used, 1000 refunded: 9 went back.
	s.check(`{"customer":"acme","metric":"api_calls","cost":9}`)
	if a := refund(`{"customer":"acme","metric":"api_calls","cost":1000}`); *a.Refunded != 9 {
		t.Errorf("1000 refunded against 9 used: refunded %d, want 9", *a.Refunded)
	}
	// A check is refunded once: another cost under its id is a conflict.
	s.mustDo(http.StatusConflict, "POST", "/v1/refund", `{"customer":"acme","metric":"api_calls","cost":3,"request_id":"r1"}`)
	// The usage read shows no refunded.
	if r := s.mustDo(http.StatusOK, "GET", "/v1/customers/acme/usage", ""); strings.Contains(string(r.Body), "refunded") {
		t.Errorf("usage names refunded: %s", r.Body)
	}
}
