package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"testing"
	"time"
)

// metricUsageAnswer is the body of GET /v1/metrics/{metric}/usage.
type metricUsageAnswer struct {
	Metric string             `json:"metric"`
	Usage  []metricUsageEntry `json:"usage"`
}

type metricUsageEntry struct {
	Window    string    `json:"window"`
	Capacity  *int64    `json:"capacity"`
	Used      int64     `json:"used"`
	Remaining *int64    `json:"remaining"`
	ResetAt   time.Time `json:"reset_at"`
	Scope     string    `json:"scope"`
}

// metricUsage gets the metric's global usage, which must answer 200 with
// nothing but the documented fields.
func (s *testServer) metricUsage(metric string) metricUsageAnswer {
	s.t.Helper()
	r := s.mustDo(http.StatusOK, "GET", "/v1/metrics/"+metric+"/usage", "")
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	var a metricUsageAnswer
	if err := dec.Decode(&a); err != nil {
		s.t.Fatalf("metric usage answer: %v\n%s", err, r.Body)
	}
	return a
}

// window returns the entry of window w, failing the test without one.
func (a metricUsageAnswer) window(t *testing.T, w string) metricUsageEntry {
	t.Helper()
	for _, e := range a.Usage {
		if e.Window == w {
			return e
		}
	}
	t.Fatalf("no %s entry in %+v", w, a)
	return metricUsageEntry{}
}

// A metric's global usage per window: checks by two customers, one with
// limits and one without, move the metric's minute and day usage; a
// metric without capacity lists no window; an undeclared one is a 404.
// Short windows are this process's without Redis, every process's with
// it; long windows every process's. With leases (the default) the day's
// usage counts the units a process reserved, so it is at least what was
// admitted; without, exactly that.
func TestMetricUsage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		env        map[string]string
		processes  int
		minuteSeen string // scope of the minute window
		exactDay   bool
	}{
		{name: "in process, no leases", env: map[string]string{"QUOTAD_LEASES": "false"}, processes: 1, minuteSeen: "process", exactDay: true},
		{name: "in process, leases", processes: 1, minuteSeen: "process"},
		{name: "redis, two processes", env: map[string]string{"QUOTAD_LEASES": "false"}, processes: 2, minuteSeen: "shared", exactDay: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := maps.Clone(tc.env)
			if tc.processes > 1 {
				if env == nil {
					env = map[string]string{}
				}
				maps.Copy(env, redisEnv(t))
			}
			servers := MustStartServers(t, tc.processes, env)
			s := servers[0]
			s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/api_calls", `{"capacity":{"minute":1000,"day":100000}}`)
			s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/tokens", `{}`)
			s.mustDo(http.StatusCreated, "PUT", "/v1/plans/pro", `{"limits":[
				{"metric":"api_calls","window":"minute","limit":100},{"metric":"api_calls","window":"day","limit":1000}]}`)
			s.mustDo(http.StatusCreated, "PUT", "/v1/plans/free", `{}`)
			s.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme", `{"plan":"pro"}`)
			s.mustDo(http.StatusCreated, "PUT", "/v1/customers/bob", `{"plan":"free"}`)

			before := s.metricUsage("api_calls")
			if before.Metric != "api_calls" || len(before.Usage) != 2 ||
				before.Usage[0].Window != "minute" || before.Usage[1].Window != "day" {
				t.Fatalf("before any check: %+v, want the minute then the day", before)
			}
			for _, e := range before.Usage {
				want := map[string]int64{"minute": 1000, "day": 100000}[e.Window]
				if e.Capacity == nil || *e.Capacity != want || e.Used != 0 || e.Remaining == nil || *e.Remaining != want {
					t.Errorf("%s before any check: %+v, want capacity %d, used 0, remaining %d", e.Window, e, want, want)
				}
			}

			if r, a := s.check(`{"customer":"acme","metric":"api_calls","cost":3}`); r.Status != 200 || a.Degraded {
				t.Fatalf("acme's check: %d %s", r.Status, r.Body)
			}
			other := servers[len(servers)-1] // another process, with Redis
			if r, a := other.check(`{"customer":"bob","metric":"api_calls","cost":4}`); r.Status != 200 || a.Degraded || len(a.Limits) != 0 {
				t.Fatalf("bob's check: %d %s, want 200 with no limits", r.Status, r.Body)
			}

			for i, srv := range servers {
				after := srv.metricUsage("api_calls")
				minute, day := after.window(t, "minute"), after.window(t, "day")
				if minute.Scope != tc.minuteSeen || day.Scope != "shared" {
					t.Errorf("process %d: scopes minute %q, day %q, want %q and shared", i, minute.Scope, day.Scope, tc.minuteSeen)
				}
				wantMinute := int64(7)
				if tc.minuteSeen == "process" {
					wantMinute = []int64{7, 4}[i] // only this process's checks
				}
				if minute.ResetAt.Equal(before.Usage[0].ResetAt) {
					if minute.Used != wantMinute {
						t.Errorf("process %d: minute used %d, want %d", i, minute.Used, wantMinute)
					}
				} else if minute.Used < 1 || minute.Used > wantMinute {
					// The minute rolled over during the test: the sliding
					// count weighs the last minute's units down.
					t.Errorf("process %d: minute used %d after a new minute began, want 1..%d", i, minute.Used, wantMinute)
				}
				if tc.exactDay && day.Used != 7 || !tc.exactDay && (day.Used < 7 || day.Used > 100000) {
					t.Errorf("process %d: day used %d, want 7 (at least 7 with leases)", i, day.Used)
				}
				for _, e := range []metricUsageEntry{minute, day} {
					if e.Remaining == nil || e.Capacity == nil || *e.Remaining != max(0, *e.Capacity-e.Used) {
						t.Errorf("process %d: %s: %+v, want remaining = capacity - used", i, e.Window, e)
					}
				}
				if !day.ResetAt.After(time.Now()) || day.ResetAt.Hour() != 0 || day.ResetAt.Minute() != 0 {
					t.Errorf("process %d: day reset_at %v, want the next midnight UTC", i, day.ResetAt)
				}
			}

			if none := s.metricUsage("tokens"); none.Metric != "tokens" || none.Usage == nil || len(none.Usage) != 0 {
				t.Errorf("metric without capacity: %+v, want usage []", none)
			}
			r := s.mustDo(http.StatusNotFound, "GET", "/v1/metrics/ghost/usage", "")
			if code := r.JSON(t)["code"]; code != "metric_not_found" {
				t.Errorf("undeclared metric: code %v, want metric_not_found", code)
			}
		})
	}
}
