package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// /metrics carries the Go runtime's and the process's series, the build,
// PostgreSQL's pool and quotad's own, and promlint (what promtool check
// metrics runs) finds no problem in any of them.
func TestMetricsLint(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"day","limit":100}]`, "acme")
	if _, a := s.check(`{"customer":"acme","metric":"api_calls"}`); !a.Allowed {
		t.Fatalf("check: %+v", a)
	}
	mustLintMetrics(t, s,
		"go_goroutines ", "process_resident_memory_bytes ", `quotad_build_info{go="go`,
		"quotad_db_pool_conns ", "quotad_db_pool_max_conns 6", "quotad_db_pool_acquires_total ",
		`quotad_checks_total{decision="allowed"} 1`, "quotad_degraded_units_owed 0",
		`quotad_purged_rows_total{table="usage_history"} 0`,
	)
}

// With --stripe-meters, /metrics carries the Stripe sender's series, and
// promlint finds no problem in them.
func TestStripeMetrics(t *testing.T) {
	t.Parallel()
	stripe := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(stripe.Close)
	s := MustStartServer(t, nil, map[string]string{
		"QUOTAD_STRIPE_METERS": "api_calls=api_calls", "QUOTAD_STRIPE_API_KEY": "sk_test", "QUOTAD_STRIPE_API_BASE": stripe.URL,
	})
	mustLintMetrics(t, s,
		"quotad_stripe_outbox_lag_seconds 0", "quotad_stripe_outbox_pending 0", "quotad_stripe_outbox_failed 0",
		"quotad_stripe_skipped_total 0",
	)
}

// mustLintMetrics reads s's /metrics and fails the test on any problem
// promlint finds in it and on each of series it does not have.
func mustLintMetrics(t *testing.T, s *testServer, series ...string) {
	t.Helper()
	body := string(s.mustDo(http.StatusOK, "GET", "/metrics", "").Body)
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	for _, want := range series {
		if !strings.Contains(body, "\n"+want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
}
