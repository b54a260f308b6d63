package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/quotad/quotad/internal/dbtest"
)

// checkUpgrade checks cost units of api_calls for acme on s and returns
// the answer's status and its upgrade's plan and limit ("" when absent).
func (s *testServer) checkUpgrade(cost int64) (status int, plan string, limit *int64) {
	s.t.Helper()
	r := s.do("POST", "/v1/check", `{"customer":"acme","metric":"api_calls","cost":`+strconv.FormatInt(cost, 10)+`}`)
	return upgradeOf(s.t, r)
}

// forwardAuthUpgrade is checkUpgrade through forward-auth.
func (s *testServer) forwardAuthUpgrade(cost int64) (status int, plan string, limit *int64) {
	s.t.Helper()
	r := s.do("GET", "/v1/forward-auth", "", "X-Quotad-Customer", "acme", "X-Quotad-Metric", "api_calls",
		"X-Quotad-Cost", strconv.FormatInt(cost, 10))
	if r.Status == http.StatusOK {
		return r.Status, "", nil
	}
	return upgradeOf(s.t, r)
}

func upgradeOf(t testing.TB, r response) (status int, plan string, limit *int64) {
	t.Helper()
	var body struct {
		Upgrade *struct {
			Plan  string `json:"plan"`
			Name  string `json:"name"`
			Price struct {
				AmountCents int64  `json:"amount_cents"`
				Currency    string `json:"currency"`
				Interval    string `json:"interval"`
			} `json:"price"`
			Limit *int64 `json:"limit"`
		} `json:"upgrade"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("answer %d %s: %v", r.Status, r.Body, err)
	}
	if body.Upgrade == nil {
		return r.Status, "", nil
	}
	if body.Upgrade.Name == "" || body.Upgrade.Price.Currency != "USD" || body.Upgrade.Price.Interval == "" {
		t.Errorf("upgrade %+v: want its name and price", *body.Upgrade)
	}
	return r.Status, body.Upgrade.Plan, body.Upgrade.Limit
}

// A check a hard limit denies names the cheapest public plan that would
// have admitted it, in the check's answer and forward-auth's 429, in every
// process; a plan made non-public disappears from the answers of every
// process, and that change makes no version of the plan.
func TestUpgradeInDenial(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	a := MustStartServer(t, schema, nil)
	b := MustStartServer(t, schema, nil)
	a.mustDo(http.StatusCreated, "PUT", "/v1/metrics/api_calls", `{}`)
	plan := func(key, public string, cents, day int64) {
		a.mustDo(http.StatusCreated, "PUT", "/v1/plans/"+key, `{"name":"Plan `+key+`",`+public+
			`"price":{"amount_cents":`+strconv.FormatInt(cents, 10)+`},
			"limits":[{"metric":"api_calls","window":"day","limit":`+strconv.FormatInt(day, 10)+`}]}`)
	}
	plan("free", `"public":true,`, 0, 10)
	plan("starter", `"public":true,`, 900, 20)
	plan("pro", `"public":true,`, 2900, 100)
	plan("secret", ``, 100, 1000) // not public
	plan("hobby", `"public":false,`, 500, 1000)
	a.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme", `{"plan":"free"}`)

	if status, up, _ := a.checkUpgrade(8); status != http.StatusOK || up != "" {
		t.Fatalf("first check: %d, upgrade %q; want 200 without one", status, up)
	}
	tests := []struct {
		name      string
		cost      int64
		wantPlan  string
		wantLimit int64
	}{
		{"the cheapest public plan that admits", 5, "starter", 20},
		{"the cheapest big enough", 50, "pro", 100},
		{"exactly big enough", 92, "pro", 100},
		{"none big enough", 93, "", 0},
	}
	for _, s := range []*testServer{a, b} {
		for _, tc := range tests {
			for how, check := range map[string]func(int64) (int, string, *int64){
				"check": s.checkUpgrade, "forward-auth": s.forwardAuthUpgrade,
			} {
				status, up, limit := check(tc.cost)
				if status != http.StatusTooManyRequests || up != tc.wantPlan {
					t.Errorf("%s, %s: %d, upgrade %q; want 429, %q", tc.name, how, status, up, tc.wantPlan)
				}
				if up != "" && (limit == nil || *limit != tc.wantLimit) {
					t.Errorf("%s, %s: upgrade's limit %v, want %d", tc.name, how, limit, tc.wantLimit)
				}
			}
		}
	}

	// b holds the public plans in memory: starter leaves them.
	a.mustDo(http.StatusOK, "PUT", "/v1/plans/starter", `{"name":"Plan starter","price":{"amount_cents":900},
		"limits":[{"metric":"api_calls","window":"day","limit":20}]}`)
	if _, up, _ := a.checkUpgrade(5); up != "pro" {
		t.Errorf("on a right after starter left: upgrade %q, want pro", up)
	}
	eventually(t, func() bool { _, up, _ := b.checkUpgrade(5); return up == "pro" },
		"starter to leave the upgrades of the other process")
	if _, up, _ := b.forwardAuthUpgrade(5); up != "pro" {
		t.Errorf("forward-auth on b: upgrade %q, want pro", up)
	}
	got := a.mustDo(http.StatusOK, "GET", "/v1/plans/starter", "").JSON(t)
	if got["public"] != false || got["latest_version"] != float64(1) {
		t.Errorf("starter: public %v, latest_version %v; want false, 1 (a change of public alone makes no version)",
			got["public"], got["latest_version"])
	}
	// And back.
	a.mustDo(http.StatusOK, "PUT", "/v1/plans/starter", `{"name":"Plan starter","public":true,"price":{"amount_cents":900},
		"limits":[{"metric":"api_calls","window":"day","limit":20}]}`)
	eventually(t, func() bool { _, up, _ := b.checkUpgrade(5); return up == "starter" },
		"starter to come back to the upgrades of the other process")
}
