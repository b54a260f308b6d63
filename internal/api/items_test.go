package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/forwardauth"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/tiers"
)

// serveJSON serves one request to srv, its body sent as JSON.
func serveJSON(srv *Server, method, path, body string) *httptest.ResponseRecorder {
	req := newRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	return rec
}

// mustProblem decodes rec's problem document, failing unless its status
// is want.
func mustProblem(t *testing.T, rec *httptest.ResponseRecorder, want int) Problem {
	t.Helper()
	var p Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != want {
		t.Fatalf("answered %d %s, want a %d problem", rec.Code, rec.Body, want)
	}
	return p
}

// itemsBody returns the body of a check of n items of metrics m0, m1, ...
func itemsBody(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"metric":"m%d"}`, i)
	}
	return `{"customer":"acme","items":[` + strings.Join(items, ",") + `]}`
}

// Every bad check of items or subject, refund with a subject or usage of a
// subject is a 400 naming the one field at fault.
func TestItemsAndSubjectsRefused(t *testing.T) {
	const (
		required  = "is required"
		costRange = "must be an integer between 1 and 1000000000"
	)
	fs := newFuzzServer()
	for _, tc := range []struct {
		name, path, body string
		field, message   string
	}{
		{"17 items", "/v1/check", itemsBody(17), "items", "must hold 1 to 16 items"},
		{"no items", "/v1/check", `{"customer":"acme","items":[]}`, "items", "must hold 1 to 16 items"},
		{"null items", "/v1/check", `{"customer":"acme","items":null}`, "items", "must not be null"},
		{"items not an array", "/v1/check", `{"customer":"acme","items":{"metric":"a"}}`, "items", "must be a JSON array"},
		{"a null item", "/v1/check", `{"customer":"acme","items":[{"metric":"a"},null]}`, "items[1]", "must not be null"},
		{"items with metric", "/v1/check", `{"customer":"acme","metric":"a","items":[{"metric":"b"}]}`, "metric", itemsInstead},
		{"items with cost", "/v1/check", `{"customer":"acme","items":[{"metric":"b"}],"cost":2}`, "cost", itemsInstead},
		{"items with subject", "/v1/check", `{"customer":"acme","subject":"u","items":[{"metric":"b"}]}`, "subject", itemsInstead},
		{"the same metric and subject twice", "/v1/check", `{"customer":"acme","items":[{"metric":"a","subject":"u"},{"metric":"b"},{"metric":"a","subject":"u","cost":2}]}`,
			"items[2]", "names the metric and subject of items[0]"},
		{"the same metric twice, without subjects", "/v1/check", `{"customer":"acme","items":[{"metric":"a"},{"metric":"a"}]}`,
			"items[1]", "names the metric and subject of items[0]"},
		{"an item without metric", "/v1/check", `{"customer":"acme","items":[{"cost":2}]}`, "items[0].metric", required},
		{"an item of cost 0", "/v1/check", `{"customer":"acme","items":[{"metric":"a"},{"metric":"b","cost":0}]}`, "items[1].cost", costRange},
		{"an item with a bad subject", "/v1/check", `{"customer":"acme","items":[{"metric":"a"},{"metric":"b","subject":"a b"}]}`,
			"items[1].subject", tiers.SubjectRule},
		{"an item naming a customer", "/v1/check", `{"customer":"acme","items":[{"metric":"a","customer":"b"}]}`, "items[0].customer", "is not a known field"},
		{"an item's key twice", "/v1/check", `{"customer":"acme","items":[{"metric":"a","metric":"b"}]}`, "items[0].metric", "appears more than once"},
		{"items without customer", "/v1/check", `{"items":[{"metric":"a"}]}`, "customer", required},
		{"a bad subject", "/v1/check", `{"customer":"acme","metric":"a","subject":"a b"}`, "subject", tiers.SubjectRule},
		{"a subject too long", "/v1/check", `{"customer":"acme","metric":"a","subject":"` + strings.Repeat("s", 129) + `"}`, "subject", tiers.SubjectRule},
		{"a null subject", "/v1/check", `{"customer":"acme","metric":"a","subject":null}`, "subject", "must not be null"},
		{"a refund of items", "/v1/refund", `{"customer":"acme","items":[{"metric":"a"}]}`, "items", "is not a known field"},
		{"a refund with a bad subject", "/v1/refund", `{"customer":"acme","metric":"a","subject":"ü"}`, "subject", tiers.SubjectRule},
		{"usage of a bad subject", "/v1/customers/acme/usage?subject=a%20b", "", "subject", tiers.SubjectRule},
		{"usage of an empty subject", "/v1/customers/acme/usage?subject=", "", "subject", tiers.SubjectRule},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := http.MethodPost
			if tc.body == "" {
				method = http.MethodGet
			}
			p := mustProblem(t, serveJSON(fs.srv, method, tc.path, tc.body), http.StatusBadRequest)
			want := []tiers.FieldError{{Field: tc.field, Message: tc.message}}
			if p.Code != codeValidation || !reflect.DeepEqual(p.Errors, want) {
				t.Errorf("problem %s %+v, want %s %+v", p.Code, p.Errors, codeValidation, want)
			}
		})
	}
}

// What a check or refund passes on to the checker: items in the body's
// order, each cost 1 unless given, and by API key the key's id as the
// subject of whatever names none.
func TestItemsAndSubjectsPassedOn(t *testing.T) {
	fs := newFuzzServer()
	for _, tc := range []struct {
		name, path, body string
		want             any
	}{
		{"a subject", "/v1/check", `{"customer":"acme","metric":"a","subject":"user@example.com/7"}`,
			quota.Request{Customer: "acme", Metric: "a", Cost: 1, Subject: "user@example.com/7"}},
		{"items", "/v1/check", `{"customer":"acme","items":[{"metric":"a","cost":3},{"metric":"b","subject":"u"},{"metric":"a","subject":"u"}],"dry_run":true,"request_id":"r"}`,
			quota.Request{Customer: "acme", Items: []quota.Item{{Metric: "a", Cost: 3}, {Metric: "b", Cost: 1, Subject: "u"}, {Metric: "a", Cost: 1, Subject: "u"}},
				DryRun: true, RequestID: "r"}},
		{"16 items", "/v1/check", itemsBody(16), nil},
		{"items with an empty metric and subject", "/v1/check", `{"customer":"acme","metric":"","subject":"","items":[{"metric":"a"}]}`,
			quota.Request{Customer: "acme", Items: []quota.Item{{Metric: "a", Cost: 1}}}},
		{"by key: the key's id", "/v1/check", `{"api_key":"qk_fuzz","metric":"a"}`,
			quota.Request{Customer: "acme", Metric: "a", Cost: 1, Subject: fuzzKeyID}},
		{"by key, with a subject", "/v1/check", `{"api_key":"qk_fuzz","metric":"a","subject":"u"}`,
			quota.Request{Customer: "acme", Metric: "a", Cost: 1, Subject: "u"}},
		{"items by key", "/v1/check", `{"api_key":"qk_fuzz","items":[{"metric":"a"},{"metric":"b","subject":"u"}]}`,
			quota.Request{Customer: "acme", Items: []quota.Item{{Metric: "a", Cost: 1, Subject: fuzzKeyID}, {Metric: "b", Cost: 1, Subject: "u"}}}},
		{"a refund with a subject", "/v1/refund", `{"customer":"acme","metric":"a","cost":2,"subject":"u"}`,
			quota.RefundRequest{Customer: "acme", Metric: "a", Cost: 2, Subject: "u", Actor: anonymous.Name}},
		{"a refund by key", "/v1/refund", `{"api_key":"qk_fuzz","metric":"a"}`,
			quota.RefundRequest{Customer: "acme", Metric: "a", Cost: 1, Subject: fuzzKeyID, Actor: fuzzKeyID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs.passed = nil
			rec := serveJSON(fs.srv, http.MethodPost, tc.path, tc.body)
			if rec.Code != http.StatusOK {
				t.Fatalf("answered %d %s", rec.Code, rec.Body)
			}
			if tc.want != nil && !reflect.DeepEqual(fs.passed, tc.want) {
				t.Errorf("passed on\n%#v\nwant\n%#v", fs.passed, tc.want)
			}
		})
	}
}

// checkerFunc answers checks and refunds with its functions.
type checkerFunc struct {
	fuzzChecker
	check  func(quota.Request) (quota.Decision, error)
	refund func(quota.RefundRequest) (quota.RefundResult, error)
}

func (c checkerFunc) Check(_ context.Context, r quota.Request) (quota.Decision, error) {
	return c.check(r)
}

func (c checkerFunc) Refund(_ context.Context, r quota.RefundRequest) (quota.RefundResult, error) {
	return c.refund(r)
}

// An item's error names the item: its undeclared metric (404), the
// subject its metric requires (400 subject_required, naming the field).
func TestItemErrors(t *testing.T) {
	fail := func(err error) checkerFunc {
		return checkerFunc{
			check:  func(quota.Request) (quota.Decision, error) { return quota.Decision{}, err },
			refund: func(quota.RefundRequest) (quota.RefundResult, error) { return quota.RefundResult{}, err },
		}
	}
	subjectRequired := &quota.ItemError{Index: 0, Err: tiers.ErrSubjectRequired}
	const items = `{"customer":"acme","items":[{"metric":"api_calls","subject":"u"},{"metric":"ghost"}]}`
	for _, tc := range []struct {
		name, path, body string
		err              error
		status           int
		code, detail     string
		fields           []tiers.FieldError
	}{
		{"one metric, subject required", "/v1/check", `{"customer":"acme","metric":"api_calls"}`, subjectRequired,
			400, codeSubjectRequired, `the metric "api_calls" has limits per subject: the request must name a subject`,
			[]tiers.FieldError{{Field: "subject", Message: "is required: the metric has limits per subject"}}},
		{"an item, subject required", "/v1/check", items, &quota.ItemError{Index: 1, Err: tiers.ErrSubjectRequired},
			400, codeSubjectRequired, `the metric "ghost" has limits per subject: the request must name a subject`,
			[]tiers.FieldError{{Field: "items[1].subject", Message: "is required: the metric has limits per subject"}}},
		{"a refund, subject required", "/v1/refund", `{"customer":"acme","metric":"api_calls"}`, subjectRequired,
			400, codeSubjectRequired, `the metric "api_calls" has limits per subject: the request must name a subject`,
			[]tiers.FieldError{{Field: "subject", Message: "is required: the metric has limits per subject"}}},
		{"subject required, unwrapped", "/v1/check", `{"customer":"acme","metric":"api_calls"}`, tiers.ErrSubjectRequired,
			400, codeSubjectRequired, details[codeSubjectRequired], nil},
		{"an item's metric not declared", "/v1/check", items, &quota.ItemError{Index: 1, Err: tiers.ErrMetricNotFound},
			404, codeMetricNotFound, `items[1].metric: no metric with the key "ghost" is declared`, nil},
		{"one metric not declared", "/v1/check", `{"customer":"acme","metric":"ghost"}`, &quota.ItemError{Index: 0, Err: tiers.ErrMetricNotFound},
			404, codeMetricNotFound, details[codeMetricNotFound], nil},
		{"the customer of items not found", "/v1/check", items, &quota.ItemError{Index: 0, Err: tiers.ErrCustomerNotFound},
			404, codeCustomerNotFound, `no customer has the id "acme"`, nil},
		{"the key's customer of items gone", "/v1/check", `{"api_key":"qk_fuzz","items":[{"metric":"a"}]}`,
			&quota.ItemError{Index: 0, Err: tiers.ErrCustomerNotFound}, 403, codeInvalidAPIKey, details[codeInvalidAPIKey], nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := New(Config{Checker: fail(tc.err), KeyResolver: fuzzKeys{}})
			p := mustProblem(t, serveJSON(srv, http.MethodPost, tc.path, tc.body), tc.status)
			if p.Code != tc.code || p.Detail != tc.detail || !reflect.DeepEqual(p.Errors, tc.fields) {
				t.Errorf("problem %s %q %+v\nwant    %s %q %+v", p.Code, p.Detail, p.Errors, tc.code, tc.detail, tc.fields)
			}
		})
	}
}

// engineServer is a Server over a real engine on in-memory stores, every
// limit a minute long. acme's plan: api_calls 5 a minute for the customer
// and 2 a minute per subject; exports 1 a minute; credits 10 a minute, a
// pool llm draws on at 3 credits per 2 units; free has no limit. qk_fuzz is acme's key,
// fuzzKeyID its id. The rules, if not nil, are forward-auth's.
func engineServer(t *testing.T, rules *forwardauth.Rules) *Server {
	t.Helper()
	return New(engineConfig(t, rules))
}

// engineConfig configures engineServer.
func engineConfig(t *testing.T, rules *forwardauth.Rules) Config {
	t.Helper()
	catalog := quotafake.NewCatalog()
	for _, m := range []string{"api_calls", "exports", "credits", "free"} {
		catalog.PutMetric(m, nil)
	}
	catalog.Metrics["llm"] = tiers.Metric{Key: "llm", Draws: &tiers.Draw{Pool: "credits", Credits: 3, Per: 2}}
	limit := func(metric string, n int64, per tiers.Per) tiers.Limit {
		return tiers.Limit{Metric: metric, Window: tiers.Minute, Limit: n, Mode: tiers.Hard, Per: per}
	}
	catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{
		limit("api_calls", 5, tiers.PerCustomer), limit("api_calls", 2, tiers.PerSubject),
		limit("exports", 1, tiers.PerCustomer), limit("credits", 10, tiers.PerCustomer),
	})
	// A minute's start: the sliding windows count exactly.
	clock := quotafake.NewClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	ledger := quotafake.NewLedger()
	e := quota.New(quota.Options{Catalog: catalog, Counts: ledger, Requests: ledger, Maintenance: ledger, Audits: ledger,
		History: quotafake.NewHistory(), Clock: clock, StoreTimeout: 30 * time.Second})
	return Config{Checker: e, KeyResolver: fuzzKeys{}, ForwardAuth: rules}
}

// usedOf returns the counts of acme's usage (of subject, if any), by
// "metric/window" and "metric/window/subject".
func usedOf(t *testing.T, srv *Server, subject string) map[string]int64 {
	t.Helper()
	path := "/v1/customers/acme/usage"
	if subject != "" {
		path += "?subject=" + subject
	}
	rec := serveJSON(srv, http.MethodGet, path, "")
	var u struct {
		Usage []usageEntry `json:"usage"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &u); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("usage: %d %s", rec.Code, rec.Body)
	}
	out := map[string]int64{}
	for _, e := range u.Usage {
		name := e.Metric + "/" + e.Window.String()
		if e.Subject != "" {
			name += "/" + e.Subject
		}
		out[name] = e.Used
	}
	return out
}

// answerOf decodes a check's answer, failing unless its status is want.
func answerOf(t *testing.T, rec *httptest.ResponseRecorder, want int) checkResponse {
	t.Helper()
	var a checkResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil || rec.Code != want {
		t.Fatalf("answered %d %s, want %d", rec.Code, rec.Body, want)
	}
	return a
}

// Checks of items and subjects over a real engine: all or nothing,
// subjects apart with the customer-wide limit shared, the key's id as the
// subject, a subject required, usage and refunds by subject, a credit
// pool's windows.
func TestItemsAndSubjectsOverTheEngine(t *testing.T) {
	srv := engineServer(t, nil)
	check := func(body string, want int) checkResponse {
		t.Helper()
		return answerOf(t, serveJSON(srv, http.MethodPost, "/v1/check", body), want)
	}
	alice := `{"customer":"acme","metric":"api_calls","subject":"alice"}`

	// A denial by one item counts nothing in the other.
	check(`{"customer":"acme","metric":"exports"}`, http.StatusOK)
	denied := check(`{"customer":"acme","items":[{"metric":"api_calls","subject":"alice"},{"metric":"exports"}]}`, http.StatusTooManyRequests)
	if len(denied.Items) != 2 || !denied.Items[0].Allowed || denied.Items[1].Allowed || denied.Metric != nil || denied.Cost != nil {
		t.Errorf("denied items: %+v", denied)
	}
	if u := usedOf(t, srv, "alice"); u["api_calls/minute"] != 0 || u["api_calls/minute/alice"] != 0 || u["exports/minute"] != 1 {
		t.Errorf("after a denied check of items: %v, want api_calls untouched", u)
	}

	// Subjects apart; the customer's limit shared.
	for i, tc := range []struct {
		body string
		want int
	}{
		{alice, 200}, {alice, 200}, {alice, 429},
		{`{"customer":"acme","metric":"api_calls","subject":"bob"}`, 200},
		{`{"api_key":"qk_fuzz","metric":"api_calls"}`, 200}, // subject: the key's id
		{`{"customer":"acme","metric":"api_calls","subject":"` + fuzzKeyID + `"}`, 200},
		{`{"customer":"acme","metric":"api_calls","subject":"carol"}`, 429}, // the customer's 5 are used
	} {
		if rec := serveJSON(srv, http.MethodPost, "/v1/check", tc.body); rec.Code != tc.want {
			t.Errorf("check %d, %s: %d %s, want %d", i, tc.body, rec.Code, rec.Body, tc.want)
		}
	}
	if u := usedOf(t, srv, fuzzKeyID); u["api_calls/minute"] != 5 || u["api_calls/minute/"+fuzzKeyID] != 2 {
		t.Errorf("usage of the key's id: %v, want 5 for acme, 2 for the key", u)
	}

	// A subject's windows name it in the answer.
	a := check(`{"customer":"acme","metric":"api_calls","subject":"dave","dry_run":true}`, http.StatusTooManyRequests)
	if len(a.Limits) != 2 || a.Limits[0].Metric != "api_calls" || a.Limits[0].Subject != "" || a.Limits[1].Subject != "dave" {
		t.Errorf("limits %+v, want the customer's window then dave's", a.Limits)
	}

	// A subject required.
	for _, tc := range []struct{ body, field string }{
		{`{"customer":"acme","metric":"api_calls"}`, "subject"},
		{`{"customer":"acme","items":[{"metric":"exports"},{"metric":"api_calls"}]}`, "items[1].subject"},
	} {
		p := mustProblem(t, serveJSON(srv, http.MethodPost, "/v1/check", tc.body), http.StatusBadRequest)
		if p.Code != codeSubjectRequired || len(p.Errors) != 1 || p.Errors[0].Field != tc.field {
			t.Errorf("%s: %s %+v, want subject_required naming %s", tc.body, p.Code, p.Errors, tc.field)
		}
	}

	// A refund by subject gives back to the subject's window and the
	// customer's.
	rec := serveJSON(srv, http.MethodPost, "/v1/refund", `{"customer":"acme","metric":"api_calls","subject":"alice"}`)
	var refunded refundAnswer
	if err := json.Unmarshal(rec.Body.Bytes(), &refunded); err != nil || rec.Code != http.StatusOK || refunded.Refunded != 1 ||
		len(refunded.Usage) != 2 || refunded.Usage[1].Subject != "alice" || refunded.Usage[1].Used != 1 {
		t.Errorf("refund: %d %s", rec.Code, rec.Body)
	}
	if u := usedOf(t, srv, "alice"); u["api_calls/minute"] != 4 || u["api_calls/minute/alice"] != 1 {
		t.Errorf("after the refund: %v, want 4 for acme, 1 for alice", u)
	}
	serveJSON(srv, http.MethodPost, "/v1/refund", `{"api_key":"qk_fuzz","metric":"api_calls"}`)
	if u := usedOf(t, srv, fuzzKeyID); u["api_calls/minute"] != 3 || u["api_calls/minute/"+fuzzKeyID] != 1 {
		t.Errorf("after a refund by key: %v, want 3 for acme, 1 for the key", u)
	}

	// An item's undeclared metric: 404, nothing counted.
	p := mustProblem(t, serveJSON(srv, http.MethodPost, "/v1/check", `{"customer":"acme","items":[{"metric":"api_calls","subject":"erin"},{"metric":"ghost"}]}`), 404)
	if p.Code != codeMetricNotFound || !strings.HasPrefix(p.Detail, "items[1].metric:") {
		t.Errorf("undeclared item: %s %q", p.Code, p.Detail)
	}
	if u := usedOf(t, srv, "erin"); u["api_calls/minute"] != 3 || u["api_calls/minute/erin"] != 0 {
		t.Errorf("after an undeclared item: %v", u)
	}

	// A credit pool: ceil(3 × 3 / 2) = 5 credits, its window named.
	rec = serveJSON(srv, http.MethodPost, "/v1/check", `{"customer":"acme","items":[{"metric":"llm","cost":3},{"metric":"api_calls","subject":"erin"}]}`)
	pool := answerOf(t, rec, http.StatusOK)
	if got := pool.Items[0]; len(got.Limits) != 1 || got.Limits[0].Metric != "credits" || got.Limits[0].Used != 5 ||
		got.Remaining == nil || *got.Remaining != 3 { // 5 credits left buy 3 units of llm
		t.Errorf("the pool's item: %+v", got)
	}
	if got := pool.Items[1]; got.Remaining == nil || *got.Remaining != 1 || got.Subject != "erin" {
		t.Errorf("erin's item: %+v, want 1 remaining (the subject's 2, less 1)", got)
	}
	if len(pool.Limits) != 3 {
		t.Errorf("limits %+v, want every window of every item once", pool.Limits)
	}
	// The most constraining window of all: the customer's api_calls, 1 left
	// (t is counted from the wall clock, not the engine's).
	if h := rec.Header().Get(headerRateLimit); !strings.HasPrefix(h, `"api_calls/minute";r=1;t=`) {
		t.Errorf("RateLimit %q", h)
	}
	if h := rec.Header().Get(headerRateLimitPolicy); h != `"credits/minute";q=10;w=60, "api_calls/minute";q=5;w=60, "api_calls/minute/erin";q=2;w=60` {
		t.Errorf("RateLimit-Policy %q", h)
	}
	// An item without a limit: remaining null.
	free := check(`{"customer":"acme","items":[{"metric":"free","cost":7}]}`, http.StatusOK)
	if it := free.Items[0]; it.Remaining != nil || it.Limits == nil || len(it.Limits) != 0 || !it.Allowed {
		t.Errorf("an item without a limit: %+v, want remaining null and no limits", it)
	}
}

// Forward-auth's subject: the header the rules name, else an issued key's
// id; a metric with limits per subject without one is 400
// subject_required naming the header.
func TestForwardAuthSubject(t *testing.T) {
	rules, err := forwardauth.Parse([]byte("headers: {subject: X-End-User}\n"))
	if err != nil {
		t.Fatal(err)
	}
	byKey, err := forwardauth.Parse([]byte("headers: {api_key: X-Api-Key}\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv, keySrv := engineServer(t, rules), engineServer(t, byKey)
	ask := func(srv *Server, kv ...string) *httptest.ResponseRecorder {
		req := newRequest(http.MethodGet, "/v1/forward-auth", nil)
		for i := 0; i+1 < len(kv); i += 2 {
			req.Header.Set(kv[i], kv[i+1])
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec
	}
	customer := []string{"X-Quotad-Customer", "acme", "X-Quotad-Metric", "api_calls"}
	for i, tc := range []struct {
		srv  *Server
		kv   []string
		want int
	}{
		{srv, append(customer, "X-End-User", "alice"), 200},
		{srv, append(customer, "X-End-User", "alice"), 200},
		{srv, append(customer, "X-End-User", "alice"), 429},
		{srv, append(customer, "X-End-User", "bob"), 200},
		{keySrv, []string{"X-Api-Key", fuzzAPIKey, "X-Quotad-Metric", "api_calls"}, 200},
		{keySrv, []string{"X-Api-Key", fuzzAPIKey, "X-Quotad-Metric", "api_calls", "X-End-User", "ignored"}, 200},
		{keySrv, []string{"X-Api-Key", fuzzAPIKey, "X-Quotad-Metric", "api_calls"}, 429}, // the key's 2
	} {
		if rec := ask(tc.srv, tc.kv...); rec.Code != tc.want {
			t.Errorf("request %d: %d %s, want %d", i, rec.Code, rec.Body, tc.want)
		}
	}
	if u := usedOf(t, keySrv, fuzzKeyID); u["api_calls/minute/"+fuzzKeyID] != 2 {
		t.Errorf("the key's usage: %v, want 2", u)
	}
	for _, tc := range []struct {
		name   string
		srv    *Server
		kv     []string
		code   string
		fields []tiers.FieldError
	}{
		{"no subject", srv, customer, codeSubjectRequired,
			[]tiers.FieldError{{Field: "X-End-User", Message: "is required: the metric has limits per subject"}}},
		{"no subject header named", engineServer(t, nil), customer, codeSubjectRequired,
			[]tiers.FieldError{{Field: "headers.subject", Message: "is required: the metric has limits per subject"}}},
		{"a bad subject", srv, append(customer, "X-End-User", "a b"), codeValidation,
			[]tiers.FieldError{{Field: "X-End-User", Message: tiers.SubjectRule}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustProblem(t, ask(tc.srv, tc.kv...), http.StatusBadRequest)
			if p.Code != tc.code || !reflect.DeepEqual(p.Errors, tc.fields) {
				t.Errorf("problem %s %+v, want %s %+v", p.Code, p.Errors, tc.code, tc.fields)
			}
		})
	}
}
