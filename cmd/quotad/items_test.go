package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/quotad/quotad/internal/dbtest"

	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// window is one window of a check's or a usage's answer, with the metric
// and subject it counts for.
type window struct {
	Metric    string `json:"metric"`
	Subject   string `json:"subject"`
	Window    string `json:"window"`
	Limit     int64  `json:"limit"`
	Used      int64  `json:"used"`
	Remaining int64  `json:"remaining"`
	State     string `json:"state"`
	Refunded  int64  `json:"refunded"`
}

// itemsAnswer is a check's answer with its items.
type itemsAnswer struct {
	Allowed    bool     `json:"allowed"`
	Customer   string   `json:"customer"`
	Metric     *string  `json:"metric"`
	Cost       *int64   `json:"cost"`
	RetryAfter *int64   `json:"retry_after"`
	Limits     []window `json:"limits"`
	Items      []struct {
		Metric    string   `json:"metric"`
		Subject   string   `json:"subject"`
		Cost      int64    `json:"cost"`
		Allowed   bool     `json:"allowed"`
		Remaining *int64   `json:"remaining"`
		Limits    []window `json:"limits"`
	} `json:"items"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// checkItems posts a check with the check token and decodes a 200 or 429.
func (s *testServer) checkItems(t *testing.T, body string, want int) (response, itemsAnswer) {
	t.Helper()
	r := s.do("POST", "/v1/check", body, "Authorization", "Bearer "+checkToken)
	var a itemsAnswer
	if r.Status != want {
		t.Fatalf("check %s: status %d, want %d\n%s", body, r.Status, want, r.Body)
	}
	if want == http.StatusOK || want == http.StatusTooManyRequests {
		if err := json.Unmarshal(r.Body, &a); err != nil {
			t.Fatalf("check answer: %v\n%s", err, r.Body)
		}
	}
	return r, a
}

// subjectUsage reads customer's usage (with subject's windows, if any) by
// "metric/window" and "metric/window/subject".
func (s *testServer) subjectUsage(t *testing.T, customer, subject string) map[string]int64 {
	t.Helper()
	path := "/v1/customers/" + customer + "/usage"
	if subject != "" {
		path += "?subject=" + subject
	}
	r := s.mustDo(http.StatusOK, "GET", path, "", "Authorization", "Bearer "+checkToken)
	var u struct{ Usage []window }
	if err := json.Unmarshal(r.Body, &u); err != nil {
		t.Fatal(err)
	}
	return byName(u.Usage)
}

// byName indexes windows by "metric/window" and "metric/window/subject",
// each to its used units.
func byName(ws []window) map[string]int64 {
	out := map[string]int64{}
	for _, w := range ws {
		name := w.Metric + "/" + w.Window
		if w.Subject != "" {
			name += "/" + w.Subject
		}
		out[name] = w.Used
	}
	return out
}

// A check of items is allowed on all of them or none: a denial by one item
// counts nothing in the other, an undeclared metric in one counts nothing,
// and a replay of a check of items answers its items again.
func TestItemsAllOrNothing(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/exports", `{}`)
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"minute","limit":10},{"metric":"api_calls","window":"day","limit":100},
		{"metric":"exports","window":"day","limit":2}]`, "acme")
	dryRun := func() map[string]int64 {
		r := s.do("POST", "/v1/check", `{"customer":"acme","items":[{"metric":"api_calls"},{"metric":"exports"}],"dry_run":true}`,
			"Authorization", "Bearer "+checkToken)
		var a itemsAnswer
		if err := json.Unmarshal(r.Body, &a); err != nil {
			t.Fatalf("dry run: %d %s", r.Status, r.Body)
		}
		return byName(a.Limits)
	}

	r, a := s.checkItems(t, `{"customer":"acme","items":[{"metric":"api_calls","cost":3},{"metric":"exports","cost":2}]}`, http.StatusOK)
	if a.Metric != nil || a.Cost != nil || len(a.Items) != 2 || a.Items[0].Metric != "api_calls" || a.Items[1].Metric != "exports" ||
		a.Items[1].Remaining == nil || *a.Items[1].Remaining != 0 || len(a.Limits) != 3 {
		t.Fatalf("allowed items: %s", r.Body)
	}
	// The most constraining window of all: exports' day, none left.
	if got := r.Header.Get("RateLimit"); !strings.HasPrefix(got, `"exports/day";r=0;t=`) {
		t.Errorf("RateLimit %q, want exports/day's", got)
	}
	if got := r.Header.Get("RateLimit-Policy"); got != `"api_calls/minute";q=10;w=60, "api_calls/day";q=100;w=86400, "exports/day";q=2;w=86400` {
		t.Errorf("RateLimit-Policy %q", got)
	}

	r, a = s.checkItems(t, `{"customer":"acme","items":[{"metric":"api_calls"},{"metric":"exports"}]}`, http.StatusTooManyRequests)
	if a.Allowed || !a.Items[0].Allowed || a.Items[1].Allowed || a.RetryAfter == nil || *a.RetryAfter < 1 || r.Header.Get("Retry-After") == "" {
		t.Errorf("denied by exports: %s", r.Body)
	}
	if got := dryRun(); got["api_calls/minute"] != 3 || got["api_calls/day"] != 3 || got["exports/day"] != 2 {
		t.Errorf("after a denied check of items: %v, want api_calls at 3", got)
	}

	r = s.do("POST", "/v1/check", `{"customer":"acme","items":[{"metric":"api_calls","cost":5},{"metric":"ghost"}]}`, "Authorization", "Bearer "+checkToken)
	if p := r.JSON(t); r.Status != http.StatusNotFound || p["code"] != "metric_not_found" ||
		p["detail"] != `items[1].metric: no metric with the key "ghost" is declared` {
		t.Errorf("an undeclared item: %d %s", r.Status, r.Body)
	}
	if got := dryRun(); got["api_calls/minute"] != 3 {
		t.Errorf("after an undeclared item: %v, want api_calls at 3", got)
	}

	body := `{"customer":"acme","items":[{"metric":"api_calls","cost":2}],"request_id":"job-1"}`
	_, first := s.checkItems(t, body, http.StatusOK)
	_, again := s.checkItems(t, body, http.StatusOK)
	if len(again.Items) != 1 || again.Items[0].Limits[0].Used != first.Items[0].Limits[0].Used || again.Limits[0].Metric != "api_calls" {
		t.Errorf("replay: %+v, want the first answer %+v", again, first)
	}
	if got := dryRun(); got["api_calls/minute"] != 5 {
		t.Errorf("after a replay: %v, want api_calls at 5 (counted once)", got)
	}
	r = s.do("POST", "/v1/check", `{"customer":"acme","items":[{"metric":"api_calls","cost":3}],"request_id":"job-1"}`, "Authorization", "Bearer "+checkToken)
	if r.Status != http.StatusConflict {
		t.Errorf("request_id reused with another cost: %d %s", r.Status, r.Body)
	}
}

// perSubjectLimits: api_calls, 5 a minute for the customer and 2 a minute
// per subject.
const perSubjectLimits = `[{"metric":"api_calls","window":"minute","limit":5},
	{"metric":"api_calls","window":"minute","limit":2,"per":"subject"}]`

// Limits per subject count each subject apart, the customer-wide limit is
// shared; a check by API key counts for the key's id; a subject is
// required; usage and refunds go by subject.
func TestSubjects(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	MustSeed(t, s, "", perSubjectLimits, "acme")
	k := MustCreateKey(t, s, "acme", `{}`)
	as := func(subject string) string {
		return `{"customer":"acme","metric":"api_calls","subject":"` + subject + `"}`
	}
	byKey := `{"api_key":"` + k.Key + `","metric":"api_calls"}`
	for i, tc := range []struct {
		body string
		want int
	}{
		{as("alice"), 200}, {as("alice"), 200}, {as("alice"), 429},
		{as("bob"), 200},
		{byKey, 200}, {byKey, 200}, {byKey, 429}, // the key's id is its subject
		{as("carol"), 429}, // the customer's 5 are used
	} {
		if r := s.do("POST", "/v1/check", tc.body, "Authorization", "Bearer "+checkToken); r.Status != tc.want {
			t.Errorf("check %d %s: %d, want %d\n%s", i, tc.body, r.Status, tc.want, r.Body)
		}
	}
	// The answer names each window's subject.
	_, a := s.checkItems(t, `{"customer":"acme","metric":"api_calls","subject":"alice","dry_run":true}`, http.StatusTooManyRequests)
	if len(a.Limits) != 2 || a.Limits[0].Subject != "" || a.Limits[1].Subject != "alice" || a.Limits[1].State != "exceeded" ||
		a.Limits[1].Used != 2 {
		t.Errorf("alice's windows: %+v", a.Limits)
	}

	if got := s.subjectUsage(t, "acme", ""); len(got) != 1 || got["api_calls/minute"] != 5 {
		t.Errorf("usage without subject: %v, want the customer's window only", got)
	}
	if got := s.subjectUsage(t, "acme", "alice"); len(got) != 2 || got["api_calls/minute"] != 5 || got["api_calls/minute/alice"] != 2 {
		t.Errorf("usage of alice: %v", got)
	}
	if got := s.subjectUsage(t, "acme", k.ID); got["api_calls/minute/"+k.ID] != 2 {
		t.Errorf("usage of the key's id: %v, want 2", got)
	}

	for _, tc := range []struct{ body, field string }{
		{`{"customer":"acme","metric":"api_calls"}`, "subject"},
		{`{"customer":"acme","items":[{"metric":"api_calls","subject":"dave"},{"metric":"api_calls"}]}`, "items[1].subject"},
	} {
		r := s.do("POST", "/v1/check", tc.body, "Authorization", "Bearer "+checkToken)
		p := MustProblem(t, r, http.StatusBadRequest, "subject_required")
		if errs, _ := p["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["field"] != tc.field {
			t.Errorf("%s: errors %v, want %s", tc.body, p["errors"], tc.field)
		}
	}

	r := s.mustDo(http.StatusOK, "POST", "/v1/refund", `{"customer":"acme","metric":"api_calls","subject":"alice"}`, "Authorization", "Bearer "+checkToken)
	var refund struct {
		Refunded int64
		Usage    []window
	}
	if err := json.Unmarshal(r.Body, &refund); err != nil || refund.Refunded != 1 || byName(refund.Usage)["api_calls/minute/alice"] != 1 {
		t.Errorf("refund of alice: %s", r.Body)
	}
	s.mustDo(http.StatusOK, "POST", "/v1/refund", `{"api_key":"`+k.Key+`","metric":"api_calls","cost":2}`, "Authorization", "Bearer "+checkToken)
	if got := s.subjectUsage(t, "acme", k.ID); got["api_calls/minute"] != 2 || got["api_calls/minute/"+k.ID] != 0 {
		t.Errorf("after refunds of alice and of the key: %v, want 2 for acme, 0 for the key", got)
	}
	s.mustDo(http.StatusOK, "POST", "/v1/check", as("alice"), "Authorization", "Bearer "+checkToken)
}

// A check of a metric that draws on a credit pool charges the pool
// ceil(cost × credits / per), and its answer lists the pool's windows.
func TestCreditPools(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/llm_tokens", `{}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/credits", `{"credit_schema":[{"metric":"llm_tokens","credits":3,"per":2}]}`)
	MustSeed(t, s, "", `[{"metric":"credits","window":"day","limit":10},{"metric":"api_calls","window":"day","limit":100}]`, "acme")

	_, a := s.checkItems(t, `{"customer":"acme","metric":"llm_tokens","cost":3}`, http.StatusOK)
	if len(a.Limits) != 1 || a.Limits[0].Metric != "credits" || a.Limits[0].Used != 5 {
		t.Errorf("3 tokens: %+v, want 5 credits used", a.Limits)
	}
	r, a := s.checkItems(t, `{"customer":"acme","items":[{"metric":"api_calls"},{"metric":"llm_tokens","cost":4}]}`, http.StatusTooManyRequests)
	if a.Items[1].Allowed || a.Items[1].Remaining == nil || *a.Items[1].Remaining != 3 || !strings.HasPrefix(r.Header.Get("RateLimit"), `"credits/day";r=5;`) {
		t.Errorf("6 credits more, 5 left: %s %s", r.Header.Get("RateLimit"), r.Body)
	}
	_, a = s.checkItems(t, `{"customer":"acme","items":[{"metric":"api_calls"},{"metric":"llm_tokens","cost":3}]}`, http.StatusOK)
	if got := byName(a.Limits); got["credits/day"] != 10 || got["api_calls/day"] != 1 {
		t.Errorf("after 3 tokens more: %v, want 10 credits", got)
	}
	r = s.mustDo(http.StatusOK, "POST", "/v1/refund", `{"customer":"acme","metric":"llm_tokens","cost":2}`, "Authorization", "Bearer "+checkToken)
	var refund struct{ Usage []window }
	if err := json.Unmarshal(r.Body, &refund); err != nil || byName(refund.Usage)["credits/day"] != 7 {
		t.Errorf("a refund of 2 tokens gives back 3 credits: %s", r.Body)
	}
}

// A reservation holds units for its subject (the key's id by key), and a
// metric with limits per subject needs one.
func TestReservationSubjects(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	MustSeed(t, s, "", perSubjectLimits, "acme")
	k := MustCreateKey(t, s, "acme", `{}`)
	r, alice := s.reserve(`{"customer":"acme","metric":"api_calls","cost":2,"subject":"alice"}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("reserve for alice: %d %s", r.Status, r.Body)
	}
	if r, _ := s.reserve(`{"customer":"acme","metric":"api_calls","cost":1,"subject":"alice"}`); r.Status != http.StatusTooManyRequests {
		t.Errorf("alice's third unit: %d %s", r.Status, r.Body)
	}
	r, byKey := s.reserve(`{"api_key":"` + k.Key + `","metric":"api_calls","cost":1}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("reserve by key: %d %s", r.Status, r.Body)
	}
	for id, want := range map[string]string{alice.ID: "alice", byKey.ID: k.ID} {
		v := s.mustDo(http.StatusOK, "GET", "/v1/reservations/"+id, "").JSON(t)
		if v["subject"] != want {
			t.Errorf("reservation %s: subject %v, want %s", id, v["subject"], want)
		}
	}
	r = s.do("POST", "/v1/reservations", `{"customer":"acme","metric":"api_calls","cost":1}`, "Authorization", "Bearer "+checkToken)
	MustProblem(t, r, http.StatusBadRequest, "subject_required")
	if rr, _ := s.commit(alice.ID, 1); rr.Status != http.StatusOK {
		t.Fatalf("commit: %d %s", rr.Status, rr.Body)
	}
	if got := s.subjectUsage(t, "acme", "alice"); got["api_calls/minute/alice"] != 1 || got["api_calls/minute"] != 2 {
		t.Errorf("after alice's commit of 1: %v, want 1 for alice, 2 for acme", got)
	}
}

// A day's limit per subject is kept in PostgreSQL for each subject apart,
// exact across processes: alice's 3 units, checked on two servers, admit 3;
// bob still has his, and the customer's own day counts them all.
func TestSubjectsLongWindowsAcrossProcesses(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	a := MustStartServer(t, schema, nil)
	b := MustStartServer(t, schema, nil)
	MustSeed(t, a, "", `[{"metric":"api_calls","window":"day","limit":100},
		{"metric":"api_calls","window":"day","limit":3,"per":"subject"}]`, "acme")
	allowed := 0
	for i := range 8 {
		s := []*testServer{a, b}[i%2]
		r := s.do("POST", "/v1/check", `{"customer":"acme","metric":"api_calls","subject":"alice"}`, "Authorization", "Bearer "+checkToken)
		switch r.Status {
		case http.StatusOK:
			allowed++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("check %d: %d %s", i, r.Status, r.Body)
		}
	}
	if allowed != 3 {
		t.Errorf("alice's checks on two servers admitted %d, want 3", allowed)
	}
	if _, ans := b.checkItems(t, `{"customer":"acme","metric":"api_calls","subject":"bob","cost":3}`, http.StatusOK); len(ans.Limits) != 2 || ans.Limits[1].Used != 3 {
		t.Errorf("bob's day: %+v, want 3 of his own", ans.Limits)
	}
	eventually(t, func() bool {
		u := a.subjectUsage(t, "acme", "alice")
		return u["api_calls/day"] == 6 && u["api_calls/day/alice"] == 3
	}, "the usage of acme and alice to read 6 and 3")
}

// Forward-auth counts the subject of the header its file names, and by a
// key quotad issued without one, the key's id; it never reads a subject
// header the file does not name.
func TestForwardAuthSubjects(t *testing.T) {
	t.Parallel()
	s := mustStartForwardAuth(t, "headers:\n  api_key: X-Api-Key\n  subject: X-End-User\napi_keys:\n  static-key: acme\n")
	MustSeed(t, s, "", perSubjectLimits, "acme")
	k := MustCreateKey(t, s, "acme", `{}`)
	ask := func(key, user string) response {
		return s.do("GET", "/v1/forward-auth", "", "Authorization", "Bearer "+checkToken, "X-Api-Key", key,
			"X-Quotad-Metric", "api_calls", "X-End-User", user)
	}
	for i, tc := range []struct {
		key, user string
		want      int
	}{
		{k.Key, "alice", 200}, {k.Key, "alice", 200}, {k.Key, "alice", 429},
		{"static-key", "bob", 200},
		{k.Key, "", 200}, {k.Key, "", 200}, {k.Key, "", 429},
	} {
		if r := ask(tc.key, tc.user); r.Status != tc.want {
			t.Errorf("request %d (%s, %q): %d, want %d\n%s", i, tc.key, tc.user, r.Status, tc.want, r.Body)
		}
	}
	if got := s.subjectUsage(t, "acme", k.ID); got["api_calls/minute/"+k.ID] != 2 || got["api_calls/minute"] != 5 {
		t.Errorf("usage of the key's id: %v, want 2 of acme's 5", got)
	}
	r := ask("static-key", "")
	p := MustProblem(t, r, http.StatusBadRequest, "subject_required")
	if errs, _ := p["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["field"] != "X-End-User" {
		t.Errorf("a file's key without a subject: %s", r.Body)
	}
}

// Envoy's descriptors by API key count for the key's id, unless they name
// a subject.
func TestRLSSubjects(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, withGRPC(nil))
	MustSeed(t, s, "", perSubjectLimits, "acme")
	k := MustCreateKey(t, s, "acme", `{}`)
	c := MustDialRLS(t, s)
	for i, tc := range []struct {
		kv   []string
		want string
	}{
		{[]string{"api_key", k.Key}, "OK [OK]"},
		{[]string{"api_key", k.Key, "subject", "alice"}, "OK [OK]"},
		{[]string{"api_key", k.Key}, "OK [OK]"},
		{[]string{"api_key", k.Key}, "OVER_LIMIT [OVER_LIMIT]"},
		{[]string{"customer", "acme", "subject", k.ID}, "OVER_LIMIT [OVER_LIMIT]"},
	} {
		if res := c.mustCall(t, "api_calls", rlDesc(1, tc.kv...)); rlCodes(res) != tc.want {
			t.Errorf("call %d %v: %s, want %s", i, tc.kv, rlCodes(res), tc.want)
		}
	}
	if got := s.subjectUsage(t, "acme", k.ID); got["api_calls/minute/"+k.ID] != 2 || got["api_calls/minute"] != 3 {
		t.Errorf("usage: %v, want 2 for the key's id, 3 for acme", got)
	}
	_, err := c.ShouldRateLimit(asToken(checkToken), &rlsv3.RateLimitRequest{Domain: "api_calls",
		Descriptors: []*commonrl.RateLimitDescriptor{rlDesc(1, "customer", "acme")}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `metric "api_calls" has limits per subject`) {
		t.Errorf("a descriptor without subject: %v, want InvalidArgument naming the metric", err)
	}
}
