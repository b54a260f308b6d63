package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/quotad/quotad/internal/forwardauth"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// featureFunc is a FeatureChecker of a function.
type featureFunc func(ctx context.Context, customer, feature string) (tiers.FeatureValue, error)

func (f featureFunc) Feature(ctx context.Context, customer, feature string) (tiers.FeatureValue, error) {
	return f(ctx, customer, feature)
}

var _ FeatureChecker = featureFunc(nil)

// acmeFeatures grants acme sso and 0 projects; ghost does not exist.
var acmeFeatures = featureFunc(func(_ context.Context, customer, feature string) (tiers.FeatureValue, error) {
	if customer == "ghost" {
		return tiers.FeatureValue{}, tiers.ErrCustomerNotFound
	}
	return map[string]tiers.FeatureValue{"sso": tiers.FeatureBool(true), "max_projects": tiers.FeatureInt(0)}[feature], nil
})

// TestForwardAuthFeatures: a route's feature is asked before anything is
// counted; without it, 403 feature_not_granted naming the feature.
func TestForwardAuthFeatures(t *testing.T) {
	t.Parallel()
	rules, err := forwardauth.Parse([]byte(`
routes:
  - {match: /v1/sso/, feature: sso}
  - {match: POST /v1/projects, metric: projects, feature: max_projects}
  - {match: POST /v1/reports, metric: reports, feature: sso}
`))
	if err != nil {
		t.Fatal(err)
	}
	var last quota.Request
	srv := New(Config{Checker: scriptedChecker{last: &last}, Features: acmeFeatures, ForwardAuth: rules})
	tests := []struct {
		name, customer, method, uri string
		want                        int
		code, feature               string // of a 403
		counted                     bool
	}{
		{"feature only, granted", "acme", "GET", "/v1/sso/login", 200, "", "", false},
		{"feature and metric, granted", "acme", "POST", "/v1/reports", 200, "", "", true},
		{"feature of 0", "acme", "POST", "/v1/projects", 403, codeFeatureNotGranted, "max_projects", false},
		{"unknown customer", "ghost", "GET", "/v1/sso/login", 404, codeCustomerNotFound, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			last = quota.Request{}
			req := newRequest(http.MethodGet, "/v1/forward-auth", nil)
			req.Header.Set("X-Quotad-Customer", tt.customer)
			req.Header.Set("X-Forwarded-Method", tt.method)
			req.Header.Set("X-Forwarded-Uri", tt.uri)
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d\n%s", rec.Code, tt.want, rec.Body)
			}
			if counted := last.Customer != ""; counted != tt.counted {
				t.Errorf("counted = %t, want %t (%+v)", counted, tt.counted, last)
			}
			if got := rec.Header().Get(headerFeature); got != tt.feature {
				t.Errorf("%s = %q, want %q", headerFeature, got, tt.feature)
			}
			if tt.want == http.StatusOK {
				if got := rec.Header().Get(headerCustomer); got != tt.customer {
					t.Errorf("%s = %q, want %q", headerCustomer, got, tt.customer)
				}
				return
			}
			var p Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Code != tt.code {
				t.Errorf("problem %s, want code %s", rec.Body, tt.code)
			}
			if tt.feature != "" && !strings.HasSuffix(p.Detail, "the feature "+tt.feature) {
				t.Errorf("detail %q, want it to name %s", p.Detail, tt.feature)
			}
		})
	}
}

// TestFeatureCheckRoute: the answer's shape, and 404 on a server without
// a FeatureChecker.
func TestFeatureCheckRoute(t *testing.T) {
	t.Parallel()
	post := func(srv *Server, body string) *httptest.ResponseRecorder {
		return serveJSON(srv, http.MethodPost, "/v1/features/check", body)
	}
	srv := New(Config{Checker: fuzzChecker{}, Features: acmeFeatures})
	for body, want := range map[string]string{
		`{"customer":"acme","feature":"sso"}`:          `{"customer":"acme","feature":"sso","allowed":true,"value":true}`,
		`{"customer":"acme","feature":"max_projects"}`: `{"customer":"acme","feature":"max_projects","allowed":false,"value":0}`,
		`{"customer":"acme","feature":"sandbox"}`:      `{"customer":"acme","feature":"sandbox","allowed":false,"value":false}`,
	} {
		if rec := post(srv, body); rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != want {
			t.Errorf("%s: %d %s, want 200 %s", body, rec.Code, rec.Body, want)
		}
	}
	if rec := post(New(Config{Checker: fuzzChecker{}}), `{"customer":"acme","feature":"sso"}`); rec.Code != http.StatusNotFound {
		t.Errorf("without a FeatureChecker: %d %s, want 404", rec.Code, rec.Body)
	}
}
