package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/quotad/quotad/internal/dbtest"
)

// Usage events come from real checks: one big check that passes several
// thresholds of a soft day limit fires each of them once, and overage;
// the first denial fires limit_reached; nothing fires twice, however many
// more checks come, from either of two processes; a dry run fires nothing.
func TestUsageEventsFromChecks(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	a := MustStartProcess(t, schema, hookEnv...).server(t)
	b := MustStartProcess(t, schema, hookEnv...).server(t)
	rc := newReceiver(t, func(*http.Request, int) int { return http.StatusNoContent })
	got := a.mustDo(http.StatusCreated, "PUT", "/v1/webhooks/ops",
		fmt.Sprintf(`{"url": %q, "thresholds": [50, 80, 100, 120]}`, rc.srv.URL)).JSON(t)
	rc.mu.Lock()
	rc.secret = got["secret"].(string)
	rc.mu.Unlock()

	a.mustDo(http.StatusCreated, "PUT", "/v1/metrics/api_calls", `{}`)
	a.mustDo(http.StatusCreated, "PUT", "/v1/plans/pro", `{"name": "Pro", "limits": [
		{"metric": "api_calls", "window": "day", "limit": 100, "mode": "soft", "overage_percent": 50},
		{"metric": "api_calls", "window": "hour", "limit": 1000}]}`)
	for _, id := range []string{"acme", "later-a", "later-b"} {
		a.mustDo(http.StatusCreated, "PUT", "/v1/customers/"+id, `{"plan": "pro"}`)
	}

	checkAs := func(s *testServer, customer string, cost int, dryRun bool, want int) {
		t.Helper()
		s.mustDo(want, "POST", "/v1/check",
			fmt.Sprintf(`{"customer": %q, "metric": "api_calls", "cost": %d, "dry_run": %t}`, customer, cost, dryRun))
	}
	check := func(s *testServer, cost int, dryRun bool, want int) {
		t.Helper()
		checkAs(s, "acme", cost, dryRun, want)
	}
	check(a, 40, false, http.StatusOK) // 40%
	check(b, 100, true, http.StatusOK) // a dry run: not usage
	check(a, 85, false, http.StatusOK) // 125%: passes 50, 80, 100 and 120, and starts overage
	// b notices the same five events at its next check (it has not seen
	// them), and the first process to write an event is the one recorded:
	// wait until a's are delivered, or b's, each process writing what it
	// noticed every flush interval, may come first.
	rc.waitFor("the five events of the check that passed them to be delivered", func() bool { return len(rc.delivered) >= 5 })
	check(b, 5, false, http.StatusOK) // 130%, from the other process: nothing new
	check(b, 50, false, 429)          // 180% > 150%: the first denial
	check(a, 50, false, 429)          // denied again, in the other process
	check(a, 1, false, http.StatusOK) // 131%

	want := []string{
		"usage.limit_reached day 0 used=130",
		"usage.overage_started day 0 used=125",
		"usage.threshold day 100 used=125",
		"usage.threshold day 120 used=125",
		"usage.threshold day 50 used=125",
		"usage.threshold day 80 used=125",
	}
	events := func() []string {
		var out []string
		for _, body := range rc.bodies {
			var p struct {
				Type string
				Data struct {
					Customer, Metric, Window string
					Threshold                int
					Used                     int64
				}
			}
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatalf("payload %s: %v", body, err)
			}
			out = append(out, fmt.Sprintf("%s %s %d used=%d", p.Type, p.Data.Window, p.Data.Threshold, p.Data.Used))
		}
		slices.Sort(out)
		return out
	}
	// Each process writes what it noticed in order: once an event it
	// noticed after all of the above is delivered, anything it noticed
	// before is recorded too.
	checkAs(a, "later-a", 50, false, http.StatusOK)
	checkAs(b, "later-b", 50, false, http.StatusOK)
	want = append(want, "usage.threshold day 50 used=50", "usage.threshold day 50 used=50")
	slices.Sort(want)
	rc.waitFor("the events are delivered", func() bool { return len(rc.delivered) >= len(want) })
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if got := events(); !slices.Equal(got, want) {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for id, n := range rc.requests {
		if n != 1 {
			t.Errorf("message %s received %d times", id, n)
		}
	}
}
