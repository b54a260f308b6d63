package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/quotad/quotad/internal/grants"
	"github.com/quotad/quotad/internal/quota/quotafake"
)

// entitlementsBody is GET /v1/customers/{id}/entitlements' answer.
type entitlementsBody struct {
	Customer string         `json:"customer"`
	Plan     string         `json:"plan"`
	Status   string         `json:"status"`
	Features map[string]any `json:"features"`
	Limits   []struct {
		Metric    string     `json:"metric"`
		Per       string     `json:"per"`
		Subject   string     `json:"subject"`
		Window    string     `json:"window"`
		Limit     int64      `json:"limit"`
		Mode      string     `json:"mode"`
		Used      int64      `json:"used"`
		Remaining int64      `json:"remaining"`
		ResetAt   *time.Time `json:"reset_at"`
	} `json:"limits"`
	Grants []struct {
		ID        string     `json:"id"`
		Metric    string     `json:"metric"`
		Amount    int64      `json:"amount"`
		Remaining int64      `json:"remaining"`
		Priority  int        `json:"priority"`
		ExpiresAt *time.Time `json:"expires_at"`
	} `json:"grants"`
}

// The entitlements of a customer in one call, through the binary: its
// features (overrides included), every limit with its usage (the
// subject's with ?subject=), its live grants; a check token may ask; bad
// input is a 4xx problem.
func TestEntitlementsRoute(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/api_calls", `{}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/seats", `{}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/plans/pro", `{"name":"Pro","features":{"sso":true,"max_projects":10},
		"price":{"amount_cents":4900,"currency":"USD","interval":"month"},"limits":[
		{"metric":"api_calls","window":"month","limit":10},
		{"metric":"api_calls","window":"day","limit":4,"per":"subject"},
		{"metric":"seats","window":"total","limit":3}]}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme", `{"plan":"pro"}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme/features/support", `{"value":"priority","reason":"deal"}`)
	s.mustDo(http.StatusCreated, "POST", "/v1/customers/acme/grants", `{"metric":"api_calls","amount":5,"priority":1}`)
	chk := []string{"Authorization", "Bearer " + checkToken}
	for _, body := range []string{
		`{"customer":"acme","metric":"api_calls","cost":3,"subject":"u1"}`,
		`{"customer":"acme","metric":"api_calls","cost":4,"subject":"u2"}`,
		`{"customer":"acme","metric":"api_calls","cost":4,"subject":"u2"}`, // beyond u2's day: denied
		`{"customer":"acme","metric":"api_calls","cost":1,"subject":"u1"}`,
		`{"customer":"acme","metric":"seats","cost":2}`,
	} {
		s.do("POST", "/v1/check", body, chk...)
	}
	// 8 of the month's 10 are used: 3 more are drawn from the grant, whole
	// (the month counts none of them).
	s.mustDo(http.StatusOK, "POST", "/v1/check", `{"customer":"acme","metric":"api_calls","cost":3,"subject":"u3"}`, chk...)

	var e entitlementsBody
	r := s.mustDo(http.StatusOK, "GET", "/v1/customers/acme/entitlements?subject=u1", "", chk...)
	if err := json.Unmarshal(r.Body, &e); err != nil {
		t.Fatal(err)
	}
	if e.Customer != "acme" || e.Plan != "pro" || e.Status != "active" {
		t.Errorf("entitlements: %s", r.Body)
	}
	if got, _ := json.Marshal(e.Features); string(got) != `{"max_projects":10,"sso":true,"support":"priority"}` {
		t.Errorf("features = %s", got)
	}
	var limits []string
	for _, l := range e.Limits {
		limits = append(limits, fmt.Sprintf("%s/%s/%s/%s %s %d used %d remaining %d reset %v", l.Metric, l.Per, l.Subject,
			l.Window, l.Mode, l.Limit, l.Used, l.Remaining, l.ResetAt != nil))
	}
	want := []string{
		"api_calls///month hard 10 used 8 remaining 2 reset true",
		"api_calls/subject/u1/day hard 4 used 4 remaining 0 reset true",
		"seats///total hard 3 used 2 remaining 1 reset false",
	}
	if fmt.Sprint(limits) != fmt.Sprint(want) {
		t.Errorf("limits:\n got %q\nwant %q", limits, want)
	}
	if len(e.Grants) != 1 || e.Grants[0].Amount != 5 || e.Grants[0].Remaining != 2 || e.Grants[0].Priority != 1 ||
		e.Grants[0].ExpiresAt != nil || !strings.HasPrefix(e.Grants[0].ID, grants.IDPrefix) {
		t.Errorf("grants: %s", r.Body)
	}
	r = s.mustDo(http.StatusOK, "GET", "/v1/customers/acme/entitlements", "")
	if err := json.Unmarshal(r.Body, &e); err != nil || len(e.Limits) != 2 {
		t.Errorf("without a subject: %s; want the customer's 2 windows", r.Body)
	}

	for _, tc := range []struct {
		path    string
		headers []string
		status  int
		code    string
	}{
		{"/v1/customers/ghost/entitlements", chk, 404, "customer_not_found"},
		{"/v1/customers/%20x/entitlements", chk, 400, "validation_failed"},
		{"/v1/customers/acme/entitlements?subject=a%20b", chk, 400, "validation_failed"},
		{"/v1/customers/acme/entitlements?subject=", chk, 400, "validation_failed"},
		{"/v1/customers/acme/entitlements", []string{"Authorization", ""}, 401, "unauthorized"},
	} {
		r := s.do("GET", tc.path, "", tc.headers...)
		var p struct{ Code string }
		_ = json.Unmarshal(r.Body, &p)
		if r.Status != tc.status || p.Code != tc.code {
			t.Errorf("GET %s: %d %s; want %d %s", tc.path, r.Status, r.Body, tc.status, tc.code)
		}
	}
}

// The entitlements answer is the sum of its parts: after random checks of
// a customer with random grants, each limit is the usage's window (used,
// remaining, reset), the grants are the live ones, and every unit a check
// admitted is in a window's count or was drawn from a grant — the answer
// coming from the leases' memory.
func TestEntitlementsSumOfParts(t *testing.T) {
	t.Parallel()
	s := mustInProcess(t, stackOptions{clock: quotafake.NewClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)),
		leases: true, grants: true, features: true})
	do := func(t interface{ Fatalf(string, ...any) }, method, path, body string) *httptest.ResponseRecorder {
		rec := s.do(method, path, body, "")
		if rec.Code >= 500 {
			t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
		return rec
	}
	s.write(
		`/v1/metrics/api_calls {}`,
		`/v1/metrics/images {}`,
		`/v1/plans/p {"name":"P","features":{"sso":true},"price":{"amount_cents":0,"currency":"USD","interval":"month"},"limits":[
			{"metric":"api_calls","window":"minute","limit":1000},
			{"metric":"api_calls","window":"day","limit":20},
			{"metric":"images","window":"day","limit":10,"mode":"soft","overage_percent":50}]}`,
	)
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		customer := fmt.Sprintf("c%d", n)
		if rec := do(rt, http.MethodPut, "/v1/customers/"+customer, `{"plan":"p"}`); rec.Code != 201 {
			rt.Fatalf("customer: %d %s", rec.Code, rec.Body)
		}
		for i, k := 0, rapid.IntRange(0, 3).Draw(rt, "grants"); i < k; i++ {
			body := fmt.Sprintf(`{"metric":"api_calls","amount":%d,"priority":%d}`,
				rapid.Int64Range(1, 10).Draw(rt, "amount"), rapid.IntRange(0, 2).Draw(rt, "priority"))
			if rec := do(rt, http.MethodPost, "/v1/customers/"+customer+"/grants", body); rec.Code != 201 {
				rt.Fatalf("grant: %d %s", rec.Code, rec.Body)
			}
		}
		admitted := map[string]int64{}
		for i, k := 0, rapid.IntRange(1, 30).Draw(rt, "checks"); i < k; i++ {
			metric := rapid.SampledFrom([]string{"api_calls", "images"}).Draw(rt, "metric")
			cost := rapid.Int64Range(1, 5).Draw(rt, "cost")
			rec := do(rt, http.MethodPost, "/v1/check", fmt.Sprintf(`{"customer":%q,"metric":%q,"cost":%d}`, customer, metric, cost))
			switch rec.Code {
			case 200:
				admitted[metric] += cost
			case 429:
			default:
				rt.Fatalf("check: %d %s", rec.Code, rec.Body)
			}
		}

		var e entitlementsBody
		if err := json.Unmarshal(do(rt, "GET", "/v1/customers/"+customer+"/entitlements", "").Body.Bytes(), &e); err != nil {
			rt.Fatal(err)
		}
		var u struct {
			Usage []struct {
				Metric, Window string
				Limit, Used    int64
				Remaining      int64
				ResetAt        *time.Time `json:"reset_at"`
			}
		}
		if err := json.Unmarshal(do(rt, "GET", "/v1/customers/"+customer+"/usage", "").Body.Bytes(), &u); err != nil {
			rt.Fatal(err)
		}
		var all struct{ Grants []grants.Grant }
		if err := json.Unmarshal(do(rt, "GET", "/v1/customers/"+customer+"/grants?all=true", "").Body.Bytes(), &all); err != nil {
			rt.Fatal(err)
		}

		if e.Customer != customer || e.Plan != "p" || e.Features["sso"] != true {
			rt.Fatalf("entitlements: %+v", e)
		}
		if len(e.Limits) != len(u.Usage) {
			rt.Fatalf("%d limits, usage has %d windows", len(e.Limits), len(u.Usage))
		}
		for i, l := range e.Limits {
			w := u.Usage[i]
			if l.Metric != w.Metric || l.Window != w.Window || l.Limit != w.Limit || l.Used != w.Used ||
				l.Remaining != w.Remaining || !l.ResetAt.Equal(*w.ResetAt) {
				rt.Fatalf("limit %d: %+v; usage says %+v", i, l, w)
			}
			size := l.Limit
			if l.Mode == "soft" {
				if l.Remaining != max(0, size-l.Used) {
					rt.Fatalf("soft limit %+v: remaining is not limit - used", l)
				}
			} else if l.Remaining != size-l.Used {
				rt.Fatalf("hard limit %+v: remaining is not limit - used", l)
			}
		}
		var drawn int64
		live := 0
		for _, g := range all.Grants {
			drawn += g.Amount - g.Remaining
			if g.Remaining > 0 {
				if live >= len(e.Grants) || e.Grants[live].ID != g.ID || e.Grants[live].Remaining != g.Remaining {
					rt.Fatalf("grants: %+v; the live ones are %+v", e.Grants, all.Grants)
				}
				live++
			}
		}
		if live != len(e.Grants) {
			rt.Fatalf("grants: %+v; the live ones are %+v", e.Grants, all.Grants)
		}
		for _, l := range e.Limits {
			want := admitted[l.Metric]
			if l.Metric == "api_calls" && l.Window == "day" {
				want -= drawn // the units beyond the day's limit came from the grants
			}
			if l.Used != want {
				rt.Fatalf("%s %s: used %d; the checks admitted %d (%d drawn from grants)", l.Metric, l.Window, l.Used,
					admitted[l.Metric], drawn)
			}
		}
	})
}
