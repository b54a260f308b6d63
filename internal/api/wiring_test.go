package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/grants"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/rlheaders"
	"github.com/quotad/quotad/internal/tiers"
)

// oneGrant is Grants with one live grant for every customer.
type oneGrant struct{}

func (oneGrant) CreateGrant(context.Context, tiers.Write, string, grants.Spec) (grants.Grant, bool, error) {
	panic("oneGrant: unexpected call")
}
func (oneGrant) Grants(context.Context, string, bool) ([]grants.Grant, error) {
	panic("oneGrant: unexpected call")
}
func (oneGrant) VoidGrant(context.Context, tiers.Write, string) error {
	panic("oneGrant: unexpected call")
}
func (oneGrant) Live(_ context.Context, c tiers.Customer, _ time.Time) ([]grants.Grant, error) {
	return []grants.Grant{{ID: "grt_one", Customer: c.ID, Metric: "api_calls", Amount: 10, Remaining: 10}}, nil
}

// reserveRecorder is Reservations keeping the last reserve it was asked
// for, and allowing it.
type reserveRecorder struct{ last *quota.ReserveRequest }

func (r reserveRecorder) Reserve(_ context.Context, req quota.ReserveRequest) (quota.ReserveResult, error) {
	*r.last = req
	return quota.ReserveResult{Decision: benchDecision, ID: "rsv_1", ExpiresAt: fuzzNow.Add(time.Minute)}, nil
}
func (reserveRecorder) Commit(context.Context, string, int64) (quota.CommitResult, error) {
	panic("reserveRecorder: unexpected call")
}
func (reserveRecorder) ReleaseReservation(context.Context, string) error {
	panic("reserveRecorder: unexpected call")
}
func (reserveRecorder) Reservation(context.Context, string) (quota.Reservation, error) {
	panic("reserveRecorder: unexpected call")
}

// Each group of handlers gets its part of the Config: reserves and feature
// checks resolve API keys with the KeyResolver, a reserve answers the
// RateLimitHeaders' forms, and entitlements list the Grants' live grants.
func TestGroupsShareTheConfig(t *testing.T) {
	cfg := engineConfig(t, nil)
	var reserved quota.ReserveRequest
	cfg.Reservations = reserveRecorder{&reserved}
	cfg.Features = acmeFeatures
	cfg.Grants = oneGrant{}
	cfg.RateLimitHeaders = rlheaders.Legacy
	srv := New(cfg)
	serve := func(method, path, body string) *httptest.ResponseRecorder { return serveJSON(srv, method, path, body) }

	rec := serve(http.MethodPost, "/v1/reservations", `{"api_key":"`+fuzzAPIKey+`","metric":"api_calls","cost":1}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("reserve by key: %d %s", rec.Code, rec.Body)
	}
	if rec.Header().Get(rlheaders.RateLimitLimit) == "" || rec.Header().Get(rlheaders.RateLimit) != "" {
		t.Errorf("reserve: headers %v, want the legacy form only", rec.Header())
	}
	if reserved.Customer != "acme" || reserved.Subject != fuzzKeyID {
		t.Errorf("reserve by key: customer %q, subject %q, want acme and the key's id", reserved.Customer, reserved.Subject)
	}

	rec = serve(http.MethodPost, "/v1/features/check", `{"api_key":"`+fuzzAPIKey+`","feature":"sso"}`)
	var feature featureCheckAnswer
	if err := json.Unmarshal(rec.Body.Bytes(), &feature); err != nil || rec.Code != http.StatusOK ||
		feature.Customer != "acme" || !feature.Allowed {
		t.Errorf("feature check by key: %d %s, want acme allowed sso", rec.Code, rec.Body)
	}

	rec = serve(http.MethodGet, "/v1/customers/acme/entitlements", "")
	var ent entitlementsAnswer
	if err := json.Unmarshal(rec.Body.Bytes(), &ent); err != nil || rec.Code != http.StatusOK ||
		len(ent.Grants) != 1 || ent.Grants[0].ID != "grt_one" {
		t.Errorf("entitlements: %d %s, want the live grant grt_one", rec.Code, rec.Body)
	}
}
