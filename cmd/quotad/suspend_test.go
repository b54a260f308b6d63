package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/quotad/quotad/internal/dbtest"
)

// A customer suspended through one process is refused by another before
// that one's next check, as any catalog change reaches it: checks (by
// customer and by API key), reservations, feature checks, gRPC
// descriptors and forward-auth answer customer_suspended with the reason,
// and count nothing; admin reads, usage and entitlements still answer.
// Resumed, it is served again everywhere.
func TestSuspensionReachesOtherProcess(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	file := mustForwardAuthFile(t, "headers:\n  api_key: X-Api-Key\n  metric: X-Quotad-Metric\n")
	a := MustStartServer(t, schema, nil)
	b := MustStartServer(t, schema, withGRPC(map[string]string{"QUOTAD_FORWARD_AUTH_CONFIG": file}))
	a.mustDo(http.StatusCreated, "PUT", "/v1/metrics/api_calls", `{}`)
	a.mustDo(http.StatusCreated, "PUT", "/v1/plans/pro",
		`{"name":"Pro","features":{"sso":true},"limits":[{"metric":"api_calls","window":"day","limit":100}]}`)
	a.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme", `{"plan":"pro","name":"Acme"}`)
	k := MustCreateKey(t, a, "acme", `{}`)
	rls := MustDialRLS(t, b)

	type call struct {
		name string
		do   func() response
	}
	check := `{"customer":"acme","metric":"api_calls","cost":1}`
	calls := []call{
		{"check", func() response { return b.do("POST", "/v1/check", check, "Authorization", "Bearer "+checkToken) }},
		{"check by key", func() response {
			return b.do("POST", "/v1/check", `{"api_key":"`+k.Key+`","metric":"api_calls","cost":1}`, "Authorization", "Bearer "+checkToken)
		}},
		{"reservation", func() response {
			return b.do("POST", "/v1/reservations", `{"customer":"acme","metric":"api_calls","cost":1}`, "Authorization", "Bearer "+checkToken)
		}},
		{"feature check", func() response {
			return b.do("POST", "/v1/features/check", `{"customer":"acme","feature":"sso"}`, "Authorization", "Bearer "+checkToken)
		}},
		{"forward-auth", func() response {
			return b.do("GET", "/v1/forward-auth", "", "Authorization", "Bearer "+checkToken, "X-Api-Key", k.Key, "X-Quotad-Metric", "api_calls")
		}},
	}
	for _, c := range calls {
		if r := c.do(); r.Status >= 300 {
			t.Fatalf("%s while active: %d %s", c.name, r.Status, r.Body)
		}
	}
	if res := rls.mustCall(t, "api_calls", rlDesc(1, "customer", "acme")); res.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("gRPC while active: %s", rlCodes(res))
	}
	used := b.usedDay("acme") // 3 so far: two checks and the gRPC descriptor (and a reservation held)

	a.mustDo(http.StatusOK, "PUT", "/v1/customers/acme",
		`{"plan":"pro","name":"Acme","status":"suspended","status_reason":"card declined"}`)
	MustProblem(t, a.do("POST", "/v1/check", check), http.StatusForbidden, "customer_suspended")
	eventually(t, func() bool { return b.do("POST", "/v1/check", check).Status == http.StatusForbidden },
		"the suspension to reach the other process")
	for _, c := range calls {
		p := MustProblem(t, c.do(), http.StatusForbidden, "customer_suspended")
		if d, _ := p["detail"].(string); !strings.Contains(d, "card declined") {
			t.Errorf("%s: detail %q lacks the reason", c.name, d)
		}
	}
	res := rls.mustCall(t, "api_calls", rlDesc(1, "customer", "acme"))
	if res.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || !strings.Contains(string(res.GetRawBody()), `"code":"customer_suspended"`) ||
		!strings.Contains(string(res.GetRawBody()), "card declined") {
		t.Errorf("gRPC while suspended: %s, body %s", rlCodes(res), res.GetRawBody())
	}
	if got := b.usedDay("acme"); got != used {
		t.Errorf("used %v after the refused calls, want %v: a suspended customer's calls count nothing", got, used)
	}
	ent := b.mustDo(http.StatusOK, "GET", "/v1/customers/acme/entitlements", "").JSON(t)
	if ent["status"] != "suspended" {
		t.Errorf("entitlements' status = %v, want suspended", ent["status"])
	}
	cu := b.mustDo(http.StatusOK, "GET", "/v1/customers/acme", "").JSON(t)
	if cu["status"] != "suspended" || cu["status_reason"] != "card declined" {
		t.Errorf("customer = %v", cu)
	}

	a.mustDo(http.StatusOK, "PUT", "/v1/customers/acme", `{"plan":"pro","name":"Acme","status":"active"}`)
	eventually(t, func() bool { return b.do("POST", "/v1/check", check).Status == http.StatusOK },
		"the resumption to reach the other process")
	if ent := b.mustDo(http.StatusOK, "GET", "/v1/customers/acme/entitlements", "").JSON(t); ent["status"] != "active" {
		t.Errorf("entitlements' status after resuming = %v", ent["status"])
	}
}

// Bad input of a customer's state over time is a 4xx problem naming the
// field; a plan a customer will be on cannot be deleted.
func TestCustomerLifeBadInput(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(http.StatusCreated, "PUT", "/v1/plans/free", `{"name":"Free"}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/plans/pro", `{"name":"Pro"}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme", `{"plan":"free"}`)
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	future := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	tests := []struct {
		name, body string
		status     int
		code       string
		field      string
	}{
		{"unknown status", `{"plan":"free","status":"frozen"}`, 400, "validation_failed", "status"},
		{"status not a string", `{"plan":"free","status":true}`, 400, "validation_failed", "status"},
		{"reason too long", `{"plan":"free","status":"suspended","status_reason":"` + strings.Repeat("x", 501) + `"}`, 400, "validation_failed", "status_reason"},
		{"reason of an active customer", `{"plan":"free","status_reason":"why"}`, 400, "validation_failed", "status_reason"},
		{"scheduled change to an unknown plan", `{"plan":"free","scheduled_change":{"plan":"gold","at":"period_end"}}`, 400, "validation_failed", "scheduled_change.plan"},
		{"scheduled change to its plan", `{"plan":"free","scheduled_change":{"plan":"free","at":"period_end"}}`, 400, "validation_failed", "scheduled_change.plan"},
		{"scheduled change in the past", `{"plan":"free","scheduled_change":{"plan":"pro","at":"` + past + `"}}`, 400, "validation_failed", "scheduled_change.at"},
		{"scheduled change at no time", `{"plan":"free","scheduled_change":{"plan":"pro","at":"next month"}}`, 400, "validation_failed", "scheduled_change.at"},
		{"scheduled change without at", `{"plan":"free","scheduled_change":{"plan":"pro"}}`, 400, "validation_failed", "scheduled_change.at"},
		{"scheduled change unknown field", `{"plan":"free","scheduled_change":{"plan":"pro","at":"period_end","when":"now"}}`, 400, "validation_failed", "scheduled_change.when"},
		{"trial of an unknown plan", `{"plan":"free","trial":{"plan":"gold","ends_at":"` + future + `"}}`, 400, "validation_failed", "trial.plan"},
		{"trial ended already", `{"plan":"free","trial":{"plan":"pro","ends_at":"` + past + `"}}`, 400, "validation_failed", "trial.ends_at"},
		{"trial without an end", `{"plan":"free","trial":{"plan":"pro"}}`, 400, "validation_failed", "trial.ends_at"},
		{"trial of its own plan", `{"plan":"free","trial":{"plan":"free","ends_at":"` + future + `"}}`, 400, "validation_failed", "trial.plan"},
		{"trial ending at a fraction of a second", `{"plan":"free","trial":{"plan":"pro","ends_at":"2099-01-01T00:00:00.5Z"}}`, 400, "validation_failed", "trial.ends_at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := MustProblem(t, s.forT(t).do("PUT", "/v1/customers/acme", tt.body), tt.status, tt.code)
			errs, _ := p["errors"].([]any)
			if len(errs) == 0 || errs[0].(map[string]any)["field"] != tt.field {
				t.Errorf("errors = %v, want the field %s", p["errors"], tt.field)
			}
		})
	}

	// period_end is the end of the billing period in progress, by the
	// customer's anchor day.
	cu := s.mustDo(http.StatusOK, "PUT", "/v1/customers/acme",
		`{"plan":"free","billing_anchor_day":1,"scheduled_change":{"plan":"pro","at":"period_end"},"trial":{"plan":"pro","ends_at":"`+future+`"}}`).JSON(t)
	now := time.Now().UTC()
	periodEnd := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	if sc, _ := cu["scheduled_change"].(map[string]any); sc["at"] != periodEnd.Format(time.RFC3339) && now.Add(time.Minute).Before(periodEnd) {
		t.Errorf("scheduled_change = %v, want at %s", cu["scheduled_change"], periodEnd.Format(time.RFC3339))
	}
	MustProblem(t, s.do("DELETE", "/v1/plans/pro", ""), http.StatusConflict, "conflict")
}
