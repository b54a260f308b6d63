package api

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/grants"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// appendEntitlements writes, byte for byte, what encoding/json makes of
// the answer as a struct, for answers of every shape.
func TestAppendEntitlements(t *testing.T) {
	reset := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	expires := time.Date(2027, 1, 1, 0, 0, 0, 123456000, time.FixedZone("", 3600))
	acct := tiers.Account{Customer: tiers.Customer{ID: "acme"}, Plan: tiers.Plan{Key: "pro"}}
	usage := []quota.Usage{
		{Metric: "api_calls", Window: tiers.Second, Mode: tiers.Hard, Limit: 50, Used: 3, Remaining: 47, ResetAt: reset},
		{Metric: "api_calls", Window: tiers.Month, Mode: tiers.Soft, Limit: 100000, Used: 120000, Remaining: 0, ResetAt: reset},
		{Metric: "exports", Subject: "user@example.com/<1>", Window: tiers.Day, Mode: tiers.Elastic, Limit: 20, Used: 1,
			Remaining: 19, ResetAt: reset},
		{Metric: "seats", Window: tiers.Total, Mode: tiers.Hard, Limit: 9007199254740991, Used: -1, Remaining: 9007199254740991},
	}
	live := []grants.Grant{
		{ID: "grt_AAAAAAAAAAAAAAAA", Metric: "api_calls", Amount: 5000, Remaining: 4200, Priority: 0},
		{ID: "grt_BBBBBBBBBBBBBBBB", Metric: "api_calls", Amount: 10, Remaining: 1, Priority: 1000, ExpiresAt: &expires},
	}
	features := map[string]tiers.FeatureValue{"sso": tiers.FeatureBool(true), "audit": tiers.FeatureBool(false),
		"max_projects": tiers.FeatureInt(-9007199254740991), "support": tiers.FeatureString("priority \"24/7\" <&> é\u2028")}
	for _, tc := range []struct {
		name string
		e    quota.Entitlements
		live []grants.Grant
	}{
		{"empty", quota.Entitlements{Account: acct}, nil},
		{"empty slices", quota.Entitlements{Account: acct, Features: map[string]tiers.FeatureValue{}, Usage: []quota.Usage{}}, []grants.Grant{}},
		{"everything", quota.Entitlements{Account: acct, Features: features, Usage: usage}, live},
		{"names to escape", quota.Entitlements{Account: tiers.Account{Customer: tiers.Customer{ID: "a<b>&\"c\""},
			Plan: tiers.Plan{Key: "p\u00e9"}}, Usage: usage[:1]}, live[:1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want bytes.Buffer
			if err := json.NewEncoder(&want).Encode(newEntitlementsAnswer(&tc.e, tc.live)); err != nil {
				t.Fatal(err)
			}
			got, ok := appendEntitlements([]byte("prefix"), &tc.e, tc.live)
			if !ok || string(got) != "prefix"+want.String() {
				t.Errorf("appendEntitlements (ok %t):\n%s\nencoding/json:\n%s", ok, got, want.String())
			}
		})
	}
	for _, bad := range []quota.Usage{
		{Metric: "api_calls", Window: tiers.Window(99), Mode: tiers.Hard},
		{Metric: "api_calls", Window: tiers.Day, Mode: tiers.Mode(99)},
		{Metric: "api_calls", Window: tiers.Day, Mode: tiers.Hard, ResetAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		e := quota.Entitlements{Account: acct, Usage: []quota.Usage{bad}}
		if got, ok := appendEntitlements([]byte("prefix"), &e, nil); ok || string(got) != "prefix" {
			t.Errorf("%+v: %q, %t; want the buffer as it was, not ok", bad, got, ok)
		}
		if _, err := json.Marshal(newEntitlementsAnswer(&e, nil)); err == nil {
			t.Errorf("%+v: encoding/json writes it; appendEntitlements refuses it", bad)
		}
	}
}
