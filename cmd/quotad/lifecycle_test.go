package main

import (
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/quotad/quotad/internal/dbtest"
)

// usageOf reads the customer's usage of api_calls, window by window.
func (s *testServer) usageOf(customer string) map[string]int64 {
	s.t.Helper()
	return s.metricUsageOf(customer, "api_calls")
}

// metricUsageOf reads the customer's usage of metric, window by window.
func (s *testServer) metricUsageOf(customer, metric string) map[string]int64 {
	s.t.Helper()
	r := s.mustDo(http.StatusOK, "GET", "/v1/customers/"+customer+"/usage", "")
	var body struct {
		Usage []struct {
			Metric string `json:"metric"`
			Window string `json:"window"`
			Used   int64  `json:"used"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		s.t.Fatalf("usage: %v\n%s", err, r.Body)
	}
	out := map[string]int64{}
	for _, u := range body.Usage {
		if u.Metric == metric {
			out[u.Window] = u.Used
		}
	}
	return out
}

// Counters belong to (customer, metric, window), not to a plan: a plan
// change keeps them and takes effect on the next check, a window that gains
// a limit starts from zero, and deleting the customer removes them, short
// and long, in every process.
func TestCountersAcrossCatalogChanges(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	a := MustStartServer(t, schema, nil)
	b := MustStartServer(t, schema, nil)
	// The minute's sliding log counts the same whenever it is read within
	// the minute after the checks; a sliding window's count would shrink
	// if a slow run crossed into the next minute.
	MustSeed(t, a, "", `[{"metric":"api_calls","window":"minute","limit":100,"algorithm":"sliding_log"},{"metric":"api_calls","window":"day","limit":10}]`, "acme")
	a.mustDo(http.StatusCreated, "PUT", "/v1/plans/bigger", `{"name":"Bigger","limits":[
		{"metric":"api_calls","window":"minute","limit":100,"algorithm":"sliding_log"},
		{"metric":"api_calls","window":"hour","limit":50},
		{"metric":"api_calls","window":"day","limit":20}]}`)

	// 8 units through a, 1 through b: the day counter is shared, each
	// process counts its own minute window.
	if _, ans := a.check(`{"customer":"acme","metric":"api_calls","cost":8}`); !ans.Allowed {
		t.Fatal("first check denied")
	}
	if _, ans := b.check(`{"customer":"acme","metric":"api_calls","cost":1}`); !ans.Allowed {
		t.Fatal("second check denied")
	}
	if _, ans := a.check(`{"customer":"acme","metric":"api_calls","cost":2}`); ans.Allowed {
		t.Fatal("9 + 2 admitted on a day limit of 10")
	}

	// The plan change is effective on the writer's next check; the day
	// counter is kept (9 of the new 20) and the new hour window starts at 0.
	a.mustDo(http.StatusOK, "PUT", "/v1/customers/acme", `{"plan":"bigger"}`)
	if got, want := a.usageOf("acme"), map[string]int64{"minute": 8, "hour": 0, "day": 9}; !maps.Equal(got, want) {
		t.Errorf("usage on a after the plan change = %v, want %v", got, want)
	}
	if _, ans := a.check(`{"customer":"acme","metric":"api_calls","cost":2}`); !ans.Allowed {
		t.Errorf("9 + 2 denied after moving to a day limit of 20: %+v", ans.Limits)
	}
	// ... and on the other process's next check once the change reaches it.
	eventually(t, func() bool {
		return maps.Equal(b.usageOf("acme"), map[string]int64{"minute": 1, "hour": 2, "day": 11})
	}, "the plan change to reach the other process")

	// Deleting the customer removes every counter, in both processes: a
	// customer created again under the same id starts from zero.
	a.mustDo(http.StatusNoContent, "DELETE", "/v1/customers/acme", "")
	a.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme", `{"plan":"limited"}`)
	zero := map[string]int64{"minute": 0, "day": 0}
	if got := a.usageOf("acme"); !maps.Equal(got, zero) {
		t.Errorf("usage on a after delete and re-create = %v, want %v", got, zero)
	}
	eventually(t, func() bool { return maps.Equal(b.usageOf("acme"), zero) },
		"the deletion to clear the other process's counters")
}

// /metrics exposes the series the operations guide names, and they move.
func TestMetricsSeries(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	// A day limit of 1000 leases blocks of 10 units.
	// The minute's sliding log denies the second check whenever it comes
	// (a second's window could roll over between two slow checks).
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"minute","limit":1,"algorithm":"sliding_log"},{"metric":"api_calls","window":"day","limit":1000}]`, "acme")
	s.check(`{"customer":"acme","metric":"api_calls"}`) // a lease: 1 unit now, 10 held
	s.check(`{"customer":"acme","metric":"api_calls"}`) // denied in memory, the day answered from the lease
	body := string(s.mustDo(http.StatusOK, "GET", "/metrics", "", "Authorization", "").Body)
	for _, want := range []string{
		`quotad_checks_total{decision="allowed"} 1`,
		`quotad_checks_total{decision="denied"} 1`,
		`quotad_check_duration_seconds_count`,
		`quotad_store_errors_total 0`,
		`quotad_short_window_keys`,
		`quotad_http_requests_total`,
		`quotad_check_store_round_trips_count 2`,
		`quotad_check_store_round_trips_sum 1`,
		`quotad_lease_refills_total 1`,
		`quotad_lease_recalls_total 0`,
		`quotad_lease_recalled_total 0`,
		`quotad_leases 1`,
		`quotad_lease_units_held 10`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}

// /readyz answers 503 while the schema is dirty or older than the binary.
func TestReadyzFollowsTheSchema(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	ctx := t.Context()
	exec := func(q string) {
		t.Helper()
		if _, err := s.schema.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var version int
	if err := s.schema.Pool.QueryRow(ctx, `SELECT version FROM schema_migrations`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, update, reason string
	}{
		{"dirty", `UPDATE schema_migrations SET dirty = true`, "dirty"},
		{"older", `UPDATE schema_migrations SET dirty = false, version = 1`, "older"},
	} {
		exec(tc.update)
		r := s.do("GET", "/readyz", "", "Authorization", "")
		if r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), tc.reason) {
			t.Errorf("%s schema: /readyz = %d %s, want 503 naming %q", tc.name, r.Status, r.Body, tc.reason)
		}
	}
	exec(`UPDATE schema_migrations SET dirty = false, version = ` + strconv.Itoa(version))
	s.mustDo(http.StatusOK, "GET", "/readyz", "", "Authorization", "")
}

func TestListenDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no tokens: loopback", nil, "127.0.0.1:8080"},
		{"tokens: every interface", map[string]string{"QUOTAD_ADMIN_TOKENS": "ops:" + adminToken}, ":8080"},
		{"check tokens only", map[string]string{"QUOTAD_CHECK_TOKENS": "backend:" + checkToken}, ":8080"},
		{"set explicitly", map[string]string{"QUOTAD_LISTEN": "127.0.0.1:9000", "QUOTAD_ADMIN_TOKENS": "ops:" + adminToken}, "127.0.0.1:9000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParseConfig(t, nil, tc.env)
			if cfg.Listen != tc.want {
				t.Errorf("listen = %q, want %q", cfg.Listen, tc.want)
			}
		})
	}
}
