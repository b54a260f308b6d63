package main

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
)

// totalUsage reads the customer's total of api_calls on s: its used and
// remaining, and its reset_at as sent (null for a total).
func totalUsage(t *testing.T, s *testServer) (used, remaining int64, resetAt string) {
	t.Helper()
	var u struct {
		Usage []struct {
			Window    string          `json:"window"`
			Used      int64           `json:"used"`
			Remaining int64           `json:"remaining"`
			ResetAt   json.RawMessage `json:"reset_at"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(s.mustDo(http.StatusOK, "GET", "/v1/customers/acme/usage", "").Body, &u); err != nil {
		t.Fatal(err)
	}
	for _, w := range u.Usage {
		if w.Window == "total" {
			return w.Used, w.Remaining, string(w.ResetAt)
		}
	}
	t.Fatalf("no total in the usage")
	return 0, 0, ""
}

// eventuallyUsed waits until s reads the total as used: leases report
// their unused units once idle for a flush interval.
func eventuallyUsed(t *testing.T, s *testServer, used int64) {
	t.Helper()
	eventually(t, func() bool {
		got, _, _ := totalUsage(t, s)
		return got == used
	}, "the total to read "+strconv.FormatInt(used, 10))
}

// A gauge (window total) across two processes that both serve it from
// leases: checks add seats, refunds remove them, an admin sets the count
// (ending every lease on it, so that no process spends units leased
// before), and a limit lowered below the count denies later adds, loses
// nothing, and refunds bring the count down under it.
func TestSeatsAcrossTwoProcesses(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	a := MustStartServer(t, schema, nil)
	b := MustStartServer(t, schema, nil)
	MustSeed(t, a, "", `[{"metric":"api_calls","window":"total","limit":1000}]`, "acme", "probe")
	servers := []*testServer{a, b}

	t.Run("add", func(t *testing.T) {
		got, _ := checkAll(t, servers, 16, 64, "acme")
		if got[200] != 64 {
			t.Fatalf("statuses = %v, want 64 × 200", got)
		}
		// A check's answer counts what this process knows admitted: the
		// other's leases count once reported.
		r, ans := a.check(`{"customer":"acme","metric":"api_calls","cost":1,"dry_run":true}`)
		if !ans.Allowed || len(ans.Limits) != 1 || ans.Limits[0].Window != "total" {
			t.Fatalf("dry run: %d %s, want allowed on the total", r.Status, r.Body)
		}
		if !regexp.MustCompile(`"window":"total","limit":1000,"used":[0-9]+,"remaining":[0-9]+,"reset_at":null,`).Match(r.Body) {
			t.Errorf("a total's reset_at is not null: %s", r.Body)
		}
		// The headers name no reset and no length: a total has neither.
		if got := r.Header.Get("RateLimit"); !regexp.MustCompile(`^"api_calls/total";r=[0-9]+$`).MatchString(got) {
			t.Errorf("RateLimit = %q", got)
		}
		if got := r.Header.Get("RateLimit-Policy"); got != `"api_calls/total";q=1000` {
			t.Errorf("RateLimit-Policy = %q", got)
		}
		eventuallyUsed(t, b, 64)
		if _, _, reset := totalUsage(t, b); reset != "null" {
			t.Errorf("usage reset_at = %s, want null", reset)
		}
	})
	t.Run("remove", func(t *testing.T) {
		b.mustDo(http.StatusOK, "POST", "/v1/refund", `{"customer":"acme","metric":"api_calls","cost":4}`,
			"Authorization", "Bearer "+checkToken)
		eventuallyUsed(t, a, 60)
	})
	t.Run("set", func(t *testing.T) {
		// Both processes hold leases of the total now, with units unused:
		// after the set, those units are no one's.
		for _, s := range servers {
			if _, ans := s.check(`{"customer":"acme","metric":"api_calls","cost":1}`); !ans.Allowed {
				t.Fatal("a check below the limit denied")
			}
		}
		r := a.mustDo(http.StatusOK, "PUT", "/v1/customers/acme/usage/api_calls/total", `{"used":995}`)
		want := `{"customer":"acme","metric":"api_calls","window":"total","limit":1000,"used":995,"remaining":5,"overage":0,"granted":0,"reset_at":null}`
		if strings.TrimSpace(string(r.Body)) != want {
			t.Errorf("PUT total answered %s, want %s", r.Body, want)
		}
		// Exact once every process has heard of the set: a check b admits
		// from its lease before then counts as before the set (see
		// docs/entitlements.md), so wait for b to hear a change made after it.
		heard(t, a, b)
		got, _ := checkAll(t, servers, 16, 64, "acme")
		if got[200] != 5 || got[429] != 59 {
			t.Errorf("statuses after setting 995 of 1000 = %v, want exactly 5 × 200", got)
		}
		eventuallyUsed(t, b, 1000)
		r, ans := b.check(`{"customer":"acme","metric":"api_calls","cost":1}`)
		if r.Status != http.StatusTooManyRequests || ans.RetryAfter != nil || r.Header.Get("Retry-After") != "" {
			t.Errorf("a full total: %d Retry-After %q %s, want 429 with no retry", r.Status, r.Header.Get("Retry-After"), r.Body)
		}
		// The count is the process's, which a lease may know a moment late.
		detail := regexp.MustCompile(`^the api_calls/total limit of 1000 is reached \([0-9]+ used\) and never resets: a refund or a set of the total frees units; do not retry$`)
		if got, _ := r.JSON(t)["detail"].(string); !detail.MatchString(got) {
			t.Errorf("detail = %q, want it to match %s", got, detail)
		}
	})
	t.Run("a limit lowered below the count", func(t *testing.T) {
		a.mustDo(http.StatusOK, "PUT", "/v1/plans/limited", `{"name":"Limited","limits":[{"metric":"api_calls","window":"total","limit":500}]}`)
		for _, s := range servers {
			eventually(t, func() bool {
				_, ans := s.check(`{"customer":"acme","metric":"api_calls","cost":1,"dry_run":true}`)
				return len(ans.Limits) == 1 && ans.Limits[0].Limit == 500
			}, "the lowered limit to apply")
		}
		used, remaining, _ := totalUsage(t, b)
		if used != 1000 || remaining != 0 {
			t.Errorf("after lowering the limit: used %d, remaining %d, want 1000 and 0: nothing lost", used, remaining)
		}
		b.mustDo(http.StatusOK, "POST", "/v1/refund", `{"customer":"acme","metric":"api_calls","cost":400}`,
			"Authorization", "Bearer "+checkToken)
		if r, ans := a.check(`{"customer":"acme","metric":"api_calls","cost":1}`); ans.Allowed {
			t.Errorf("600 of 500 admitted one more: %s", r.Body)
		}
		a.mustDo(http.StatusOK, "POST", "/v1/refund", `{"customer":"acme","metric":"api_calls","cost":150}`,
			"Authorization", "Bearer "+checkToken)
		if r, ans := b.check(`{"customer":"acme","metric":"api_calls","cost":50}`); !ans.Allowed {
			t.Errorf("450 of 500 denied 50 more: %s", r.Body)
		}
		got, _ := checkAll(t, servers, 16, 32, "acme")
		if got[200] != 0 {
			t.Errorf("statuses at 500 of 500 = %v, want none admitted", got)
		}
		eventuallyUsed(t, a, 500)
	})
	t.Run("the set is audited", func(t *testing.T) {
		_, page := mustAudit(t, a, "/v1/audit?customer=acme&limit=100")
		var got []string
		for _, e := range page.Events {
			if strings.HasSuffix(e.Resource, "/total") {
				got = append(got, e.Actor+" "+e.Action+" "+e.Resource+" "+string(e.After))
			}
		}
		want := `ops update customers/acme/usage/api_calls/total {"used":995}`
		if len(got) != 1 || got[0] != want {
			t.Errorf("audit events of the set: %q, want %q", got, want)
		}
	})
}

// Bad sets of a total are 4xx problems, never 5xx; a limit of window total
// is hard only.
func TestSetTotalBadInput(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"total","limit":10},{"metric":"api_calls","window":"total","limit":3,"per":"subject"}]`, "acme")
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/storage", `{}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/plans/other", `{"limits":[{"metric":"storage","window":"month","limit":10}]}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/customers/globex", `{"plan":"other"}`)
	tests := []struct {
		name, method, path, body string
		headers                  []string
		status                   int
		code                     string
	}{
		{"negative used", "PUT", "/v1/customers/acme/usage/api_calls/total", `{"used":-1}`, nil, 400, "validation_failed"},
		{"used above the largest count", "PUT", "/v1/customers/acme/usage/api_calls/total", `{"used":9007199254740992}`, nil, 400, "validation_failed"},
		{"no used", "PUT", "/v1/customers/acme/usage/api_calls/total", `{}`, nil, 400, "validation_failed"},
		{"used not a number", "PUT", "/v1/customers/acme/usage/api_calls/total", `{"used":"3"}`, nil, 400, "validation_failed"},
		{"unknown field", "PUT", "/v1/customers/acme/usage/api_calls/total", `{"used":3,"limit":4}`, nil, 400, "validation_failed"},
		{"bad customer id", "PUT", "/v1/customers/-x/usage/api_calls/total", `{"used":3}`, nil, 400, "validation_failed"},
		{"unknown customer", "PUT", "/v1/customers/nobody/usage/api_calls/total", `{"used":3}`, nil, 404, "customer_not_found"},
		{"unknown metric", "PUT", "/v1/customers/acme/usage/nothing/total", `{"used":3}`, nil, 404, "metric_not_found"},
		{"a metric without a total limit", "PUT", "/v1/customers/globex/usage/storage/total", `{"used":3}`, nil, 409, "no_total_limit"},
		{"a check token", "PUT", "/v1/customers/acme/usage/api_calls/total", `{"used":3}`,
			[]string{"Authorization", "Bearer " + checkToken}, 403, "forbidden"},
		{"a soft total", "PUT", "/v1/plans/soft", `{"limits":[{"metric":"api_calls","window":"total","limit":10,"mode":"soft","overage_percent":10}]}`, nil, 400, "validation_failed"},
		{"an elastic total override", "PUT", "/v1/customers/acme/overrides/api_calls/total", `{"limit":10,"mode":"elastic"}`, nil, 400, "validation_failed"},
		{"capacity on a total", "PUT", "/v1/metrics/pooled", `{"capacity":{"total":10}}`, nil, 400, "validation_failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.do(tt.method, tt.path, tt.body, tt.headers...)
			if r.Status != tt.status || r.JSON(t)["code"] != tt.code {
				t.Errorf("%s %s: %d %s, want %d %s", tt.method, tt.path, r.Status, r.Body, tt.status, tt.code)
			}
		})
	}
	// The per-subject total is not the customer's: only the customer's own
	// is set, and the set left nothing behind.
	if used, _, _ := totalUsage(t, s); used != 0 {
		t.Errorf("after bad sets, used = %d, want 0", used)
	}
}

// heard waits until to has heard every notification from's changes sent
// so far: it changes the limit of customer probe (on the seed's plan) in
// from, and waits until a look at probe in to sees the new limit. One
// channel carries the notifications, in order, and to applies each before
// the next, so once it applies this one it has applied those before.
func heard(t *testing.T, from, to *testServer) {
	t.Helper()
	limit := strconv.Itoa(int(time.Now().UnixNano()%1000) + 2000)
	// Created the first time, replaced after.
	if r := from.do("PUT", "/v1/customers/probe/overrides/api_calls/total", `{"limit":`+limit+`}`); r.Status != http.StatusCreated && r.Status != http.StatusOK {
		t.Fatalf("PUT probe's override: %d %s", r.Status, r.Body)
	}
	eventually(t, func() bool {
		r := to.do("POST", "/v1/check", `{"customer":"probe","metric":"api_calls","dry_run":true}`,
			"Authorization", "Bearer "+checkToken)
		return strings.Contains(string(r.Body), `"limit":`+limit+`,`)
	}, "the other process to hear the change")
}
