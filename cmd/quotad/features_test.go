package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
)

// featurePlan is a plan granting the three kinds of feature.
const featurePlan = `{"name":"Pro","features":{"sso":true,"max_projects":10,"support":"priority","audit_log":false}}`

type featureAnswer struct {
	Customer string `json:"customer"`
	Feature  string `json:"feature"`
	Allowed  bool   `json:"allowed"`
	Value    any    `json:"value"`
}

// checkFeature posts a feature check with the check token and decodes the
// answer, failing unless it is a 200.
func (s *testServer) checkFeature(body string) featureAnswer {
	s.t.Helper()
	r := s.mustDo(http.StatusOK, "POST", "/v1/features/check", body, "Authorization", "Bearer "+checkToken)
	var a featureAnswer
	if err := json.Unmarshal(r.Body, &a); err != nil {
		s.t.Fatalf("feature check answer %s: %v", r.Body, err)
	}
	return a
}

// featureOf checks feature for customer acme.
func (s *testServer) featureOf(feature string) featureAnswer {
	s.t.Helper()
	return s.checkFeature(`{"customer":"acme","feature":"` + feature + `"}`)
}

func TestFeaturesCheck(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/api_calls", `{}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/plans/pro", featurePlan)
	s.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme", `{"plan":"pro"}`)
	k := MustCreateKey(t, s, "acme", `{"name":"app"}`)

	// The plan as read shows its features.
	plan := s.mustDo(http.StatusOK, "GET", "/v1/plans/pro", "").JSON(t)
	if got, _ := json.Marshal(plan["features"]); string(got) != `{"audit_log":false,"max_projects":10,"sso":true,"support":"priority"}` {
		t.Errorf("plan features = %s", got)
	}

	tests := []struct {
		name, body string
		want       featureAnswer
	}{
		{"boolean", `{"customer":"acme","feature":"sso"}`, featureAnswer{"acme", "sso", true, true}},
		{"integer", `{"customer":"acme","feature":"max_projects"}`, featureAnswer{"acme", "max_projects", true, 10.0}},
		{"string", `{"customer":"acme","feature":"support"}`, featureAnswer{"acme", "support", true, "priority"}},
		{"false", `{"customer":"acme","feature":"audit_log"}`, featureAnswer{"acme", "audit_log", false, false}},
		{"granted by no one", `{"customer":"acme","feature":"sandbox"}`, featureAnswer{"acme", "sandbox", false, false}},
		{"by api key", `{"api_key":"` + k.Key + `","feature":"sso"}`, featureAnswer{"acme", "sso", true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.forT(t).checkFeature(tt.body); got != tt.want {
				t.Errorf("answer = %+v, want %+v", got, tt.want)
			}
		})
	}

	// Overrides: 0 withdraws, with a reason in the audit log; a DELETE
	// gives the plan's value back, and a second one is a 404.
	r := s.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme/features/max_projects", `{"value":0,"reason":"unpaid"}`)
	if o := r.JSON(t); o["value"] != 0.0 || o["reason"] != "unpaid" || o["feature"] != "max_projects" || o["version"] != 1.0 {
		t.Errorf("override = %s", r.Body)
	}
	if got := s.featureOf("max_projects"); got.Allowed || got.Value != 0.0 {
		t.Errorf("max_projects overridden to 0 = %+v, want not allowed", got)
	}
	events := s.mustDo(http.StatusOK, "GET", "/v1/audit?customer=acme&limit=1", "").JSON(t)["events"].([]any)
	if e := events[0].(map[string]any); e["resource"] != "customers/acme/features/max_projects" || e["action"] != "create" ||
		e["after"].(map[string]any)["reason"] != "unpaid" {
		t.Errorf("audit event = %v", e)
	}
	features := s.mustDo(http.StatusOK, "GET", "/v1/customers/acme/features", "").JSON(t)
	if got, _ := json.Marshal(features["features"]); string(got) != `{"audit_log":false,"max_projects":0,"sso":true,"support":"priority"}` {
		t.Errorf("effective features = %s", got)
	}
	s.mustDo(http.StatusNoContent, "DELETE", "/v1/customers/acme/features/max_projects", "")
	MustProblem(t, s.do("DELETE", "/v1/customers/acme/features/max_projects", ""), http.StatusNotFound, "feature_override_not_found")
	if got := s.featureOf("max_projects"); !got.Allowed || got.Value != 10.0 {
		t.Errorf("max_projects after the override's deletion = %+v, want the plan's 10", got)
	}

	// A check token may check features, not set them.
	MustProblem(t, s.do("PUT", "/v1/customers/acme/features/sso", `{"value":true}`, "Authorization", "Bearer "+checkToken),
		http.StatusForbidden, "forbidden")
}

// A feature override written through one process is seen there on its
// next check and on the other's once the change reaches it, as every
// catalog change is; one that expires stops applying at its instant in
// both, though nothing is written then.
func TestFeatureOverrideReachesOtherProcess(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	a := MustStartServer(t, schema, nil)
	b := MustStartServer(t, schema, nil)
	a.mustDo(http.StatusCreated, "PUT", "/v1/plans/pro", featurePlan)
	a.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme", `{"plan":"pro"}`)
	// b holds acme in memory before the change.
	if got := b.featureOf("sso"); !got.Allowed {
		t.Fatalf("sso on b = %+v, want the plan's true", got)
	}

	a.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme/features/sso", `{"value":false,"reason":"downgrade"}`)
	if got := a.featureOf("sso"); got.Allowed {
		t.Errorf("sso on a right after its override = %+v, want withdrawn", got)
	}
	eventually(t, func() bool { return !b.featureOf("sso").Allowed }, "the override to reach the other process")

	a.mustDo(http.StatusNoContent, "DELETE", "/v1/customers/acme/features/sso", "")
	eventually(t, func() bool { return b.featureOf("sso").Allowed }, "the override's deletion to reach the other process")

	// An override of a few seconds: granted until its expiry, judged by
	// each server's clock when the check arrives.
	expires := time.Now().Add(2 * time.Second).Truncate(time.Second)
	a.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme/features/sandbox",
		`{"value":"large","expires_at":"`+expires.UTC().Format(time.RFC3339)+`"}`)
	eventually(t, func() bool { return b.featureOf("sandbox").Allowed || time.Now().After(expires) },
		"the expiring override to reach the other process")
	for _, s := range []*testServer{a, b} {
		eventually(t, func() bool {
			sent := time.Now()
			got := s.featureOf("sandbox")
			if got.Allowed && sent.After(expires) {
				t.Fatalf("sandbox granted %v after its override expired", sent.Sub(expires))
			}
			return !got.Allowed
		}, "the override to expire")
	}
}

func TestFeaturesBadInput(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(http.StatusCreated, "PUT", "/v1/plans/pro", `{"name":"Pro"}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme", `{"plan":"pro"}`)
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	long := strings.Repeat("x", 257)
	tests := []struct {
		name, method, path, body string
		status                   int
		code, field              string
	}{
		{"plan feature key", "PUT", "/v1/plans/pro", `{"features":{"SSO":true}}`, 400, "validation_failed", "features.SSO"},
		{"plan feature float", "PUT", "/v1/plans/pro", `{"features":{"seats":1.5}}`, 400, "validation_failed", "features.seats"},
		{"plan feature null", "PUT", "/v1/plans/pro", `{"features":{"sso":null}}`, 400, "validation_failed", "features.sso"},
		{"plan feature object", "PUT", "/v1/plans/pro", `{"features":{"sso":{"on":true}}}`, 400, "validation_failed", "features.sso"},
		{"plan feature long string", "PUT", "/v1/plans/pro", `{"features":{"support":"` + long + `"}}`, 400, "validation_failed", "features.support"},
		{"plan features not an object", "PUT", "/v1/plans/pro", `{"features":[]}`, 400, "validation_failed", "features"},
		{"override without value", "PUT", "/v1/customers/acme/features/sso", `{}`, 400, "validation_failed", "value"},
		{"override value array", "PUT", "/v1/customers/acme/features/sso", `{"value":[true]}`, 400, "validation_failed", "value"},
		{"override value too big", "PUT", "/v1/customers/acme/features/sso", `{"value":9007199254740992}`, 400, "validation_failed", "value"},
		{"override expired", "PUT", "/v1/customers/acme/features/sso", `{"value":true,"expires_at":"` + past + `"}`, 400, "validation_failed", "expires_at"},
		{"override unknown field", "PUT", "/v1/customers/acme/features/sso", `{"value":true,"until":"x"}`, 400, "validation_failed", "until"},
		{"override bad key", "PUT", "/v1/customers/acme/features/SSO", `{"value":true}`, 400, "validation_failed", "feature"},
		{"override of no customer", "PUT", "/v1/customers/nobody/features/sso", `{"value":true}`, 404, "customer_not_found", ""},
		{"delete bad key", "DELETE", "/v1/customers/acme/features/SSO", ``, 400, "validation_failed", "feature"},
		{"check without feature", "POST", "/v1/features/check", `{"customer":"acme"}`, 400, "validation_failed", "feature"},
		{"check bad feature", "POST", "/v1/features/check", `{"customer":"acme","feature":"Bad Key"}`, 400, "validation_failed", "feature"},
		{"check customer and key", "POST", "/v1/features/check", `{"customer":"acme","api_key":"qk_x","feature":"sso"}`, 400, "validation_failed", "api_key"},
		{"check unknown key", "POST", "/v1/features/check", `{"api_key":"qk_nothing","feature":"sso"}`, 403, "invalid_api_key", ""},
		{"check unknown customer", "POST", "/v1/features/check", `{"customer":"nobody","feature":"sso"}`, 404, "customer_not_found", ""},
		{"check metric field", "POST", "/v1/features/check", `{"customer":"acme","feature":"sso","metric":"x"}`, 400, "validation_failed", "metric"},
		{"check not json", "POST", "/v1/features/check", `{"customer":`, 400, "validation_failed", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := MustProblem(t, s.forT(t).do(tt.method, tt.path, tt.body), tt.status, tt.code)
			if tt.field == "" {
				return
			}
			errs, _ := p["errors"].([]any)
			if len(errs) == 0 || errs[0].(map[string]any)["field"] != tt.field {
				t.Errorf("errors = %v, want one about %s", p["errors"], tt.field)
			}
		})
	}
}
