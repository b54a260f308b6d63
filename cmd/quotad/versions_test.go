package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"testing"

	"github.com/quotad/quotad/internal/dbtest"
)

// planVersionAt is a plan version's body with its day limit of api_calls
// (0: none) and its month limit of exports, for comparison.
func planVersionBody(day, month, cents int64, sso bool) string {
	b, _ := json.Marshal(map[string]any{
		"name":     "Pro",
		"price":    map[string]any{"amount_cents": cents, "currency": "USD", "interval": "month"},
		"features": map[string]any{"sso": sso},
		"limits": []map[string]any{
			{"metric": "api_calls", "window": "day", "limit": day},
			{"metric": "exports", "window": "month", "limit": month},
		},
	})
	return string(b)
}

// customerPlanVersion reads the customer's plan_version.
func (s *testServer) customerPlanVersion(id string) int64 {
	s.t.Helper()
	var c struct {
		PlanVersion int64 `json:"plan_version"`
	}
	if err := json.Unmarshal(s.mustDo(http.StatusOK, "GET", "/v1/customers/"+id, "").Body, &c); err != nil {
		s.t.Fatal(err)
	}
	return c.PlanVersion
}

// dayLimitSeen is the day limit of api_calls a dry-run check of cost for
// customer id reports, and whether it was allowed. It checks twice: the
// first may load the customer, the second finds it in memory; both must
// agree.
func (s *testServer) dayLimitSeen(id string, cost int) (int64, bool) {
	s.t.Helper()
	limit, allowed := s.dayLimitOnce(id, cost)
	if l, a := s.dayLimitOnce(id, cost); l != limit || a != allowed {
		s.t.Fatalf("%s: day limit %d, allowed %v, then %d, %v from memory", id, limit, allowed, l, a)
	}
	return limit, allowed
}

func (s *testServer) dayLimitOnce(id string, cost int) (int64, bool) {
	s.t.Helper()
	r, a := s.check(`{"customer":"` + id + `","metric":"api_calls","cost":` + itoa(cost) + `,"dry_run":true}`)
	if r.Status != http.StatusOK && r.Status != http.StatusTooManyRequests {
		s.t.Fatalf("check: status %d\n%s", r.Status, r.Body)
	}
	for _, l := range a.Limits {
		if l.Window == "day" {
			return l.Limit, a.Allowed
		}
	}
	s.t.Fatalf("check of %s: no day window\n%s", id, r.Body)
	return 0, false
}

// Grandfathering end to end: customers on the plan stay on their version
// (their checks use its limits), new ones get the latest; a migration's
// dry run lists exactly the windows over the new limits and moves nobody;
// the migration moves them, and another process checks them against the
// new limits before its next check.
func TestPlanVersionsGrandfatherAndMigrate(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	a := MustStartServer(t, schema, nil)
	b := MustStartServer(t, schema, nil)
	a.mustDo(http.StatusCreated, "PUT", "/v1/metrics/api_calls", `{}`)
	a.mustDo(http.StatusCreated, "PUT", "/v1/metrics/exports", `{}`)
	a.mustDo(http.StatusCreated, "PUT", "/v1/plans/pro", planVersionBody(10, 5, 1000, true))
	for _, id := range []string{"old1", "old2"} {
		a.mustDo(http.StatusCreated, "PUT", "/v1/customers/"+id, `{"plan":"pro"}`)
	}
	use := func(id, metric string, cost int) {
		t.Helper()
		r, _ := a.check(`{"customer":"` + id + `","metric":"` + metric + `","cost":` + itoa(cost) + `}`)
		if r.Status != http.StatusOK {
			t.Fatalf("check %s %s %d: status %d\n%s", id, metric, cost, r.Status, r.Body)
		}
	}
	use("old1", "api_calls", 8)
	use("old1", "exports", 4)
	use("old2", "api_calls", 3)
	use("old2", "exports", 1)
	// b holds old2 in memory, on version 1.
	if limit, ok := b.dayLimitSeen("old2", 5); limit != 10 || !ok {
		t.Fatalf("old2 on b: day limit %d, allowed %v; want 10, allowed", limit, ok)
	}

	// Version 2, grandfathered: the day limit goes down to 5.
	r := a.mustDo(http.StatusOK, "PUT", "/v1/plans/pro?grandfather=true", planVersionBody(5, 3, 2000, false))
	if got := r.JSON(t)["latest_version"]; got != float64(2) {
		t.Fatalf("latest_version = %v, want 2\n%s", got, r.Body)
	}
	a.mustDo(http.StatusCreated, "PUT", "/v1/customers/new1", `{"plan":"pro"}`)
	for id, want := range map[string]int64{"old1": 1, "old2": 1, "new1": 2} {
		if got := a.customerPlanVersion(id); got != want {
			t.Errorf("%s: plan_version %d, want %d", id, got, want)
		}
	}
	// old1 (8 used) may take 2 more under version 1's 10; new1 may not
	// take 6 under version 2's 5.
	if limit, ok := a.dayLimitSeen("old1", 2); limit != 10 || !ok {
		t.Errorf("old1: day limit %d, allowed %v; want 10, allowed", limit, ok)
	}
	use("old1", "api_calls", 2)
	if limit, ok := a.dayLimitSeen("new1", 6); limit != 5 || ok {
		t.Errorf("new1: day limit %d, allowed %v; want 5, denied", limit, ok)
	}
	if limit, ok := b.dayLimitSeen("old2", 5); limit != 10 || !ok {
		t.Errorf("old2 on b after the grandfathered change: day limit %d, allowed %v; want 10, allowed", limit, ok)
	}
	// Version 3, not grandfathered: new1, on the latest, follows; the
	// others stay on 1.
	a.mustDo(http.StatusOK, "PUT", "/v1/plans/pro", planVersionBody(7, 3, 3000, true))
	if limit, _ := a.dayLimitSeen("new1", 1); limit != 7 {
		t.Errorf("new1 after version 3: day limit %d, want 7", limit)
	}
	if got := a.customerPlanVersion("old1"); got != 1 {
		t.Errorf("old1 after version 3: plan_version %d, want 1", got)
	}

	// The dry run, worked out by hand against version 3 (day 7, month 3):
	// old1 used 10 api_calls today and 4 exports this month, both beyond;
	// old2 used 3 and 1, neither.
	want := func(dryRun bool) string {
		d, _ := json.Marshal(dryRun)
		return `{"plan":"pro","from_versions":[1],"to_version":3,"dry_run":` + string(d) + `,"customers":[
			{"customer":"old1","from_version":1,"over_limit":[
				{"metric":"api_calls","window":"day","used":10,"limit":7},
				{"metric":"exports","window":"month","used":4,"limit":3}]},
			{"customer":"old2","from_version":1,"over_limit":[]}]}`
	}
	r = a.mustDo(http.StatusOK, "POST", "/v1/plans/pro/migrate", `{"dry_run":true}`)
	MustEqualJSON(t, "dry run", r.JSON(t), want(true))
	if got := a.customerPlanVersion("old1"); got != 1 {
		t.Errorf("old1 after the dry run: plan_version %d, want 1", got)
	}
	if limit, _ := b.dayLimitSeen("old2", 5); limit != 10 {
		t.Errorf("old2 on b after the dry run: day limit %d, want 10", limit)
	}

	r = a.mustDo(http.StatusOK, "POST", "/v1/plans/pro/migrate", `{"from_version":1,"dry_run":false}`)
	MustEqualJSON(t, "migration", r.JSON(t), want(false))
	for _, id := range []string{"old1", "old2", "new1"} {
		if got := a.customerPlanVersion(id); got != 3 {
			t.Errorf("%s after the migration: plan_version %d, want 3", id, got)
		}
	}
	// b hears of it (LISTEN/NOTIFY): old2's 3 + 5 no longer fit.
	eventually(t, func() bool {
		limit, ok := b.dayLimitOnce("old2", 5)
		return limit == 7 && !ok
	}, "the migration to reach the other process")
	if limit, ok := b.dayLimitSeen("old2", 5); limit != 7 || ok {
		t.Errorf("old2 on b after the migration: day limit %d, allowed %v; want 7, denied", limit, ok)
	}
	r = a.mustDo(http.StatusOK, "GET", "/v1/audit?customer=old2&limit=1", "")
	MustEqualJSON(t, "old2's audit event", auditShape(t, r), `{"actor":"ops","action":"update","resource":"customers/old2",
		"before":{"plan":"pro","plan_version":1},"after":{"plan":"pro","plan_version":3}}`)
	// Nobody is left to move.
	r = a.mustDo(http.StatusOK, "POST", "/v1/plans/pro/migrate", `{"dry_run":false}`)
	MustEqualJSON(t, "empty migration", r.JSON(t), `{"plan":"pro","from_versions":[],"to_version":3,"dry_run":false,"customers":[]}`)
}

// auditShape is the first event of an audit page without its id and time.
func auditShape(t *testing.T, r response) map[string]any {
	t.Helper()
	events, _ := r.JSON(t)["events"].([]any)
	if len(events) == 0 {
		t.Fatalf("no audit event\n%s", r.Body)
	}
	e := events[0].(map[string]any)
	delete(e, "id")
	delete(e, "at")
	return e
}

// The versions of a plan: listed oldest first, a page at a time, and each
// as it was.
func TestPlanVersionsListAndGet(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/api_calls", `{}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/exports", `{}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/plans/pro", planVersionBody(10, 5, 1000, true))
	s.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme", `{"plan":"pro"}`)
	// A new description alone is no version.
	var pro map[string]any
	json.Unmarshal([]byte(planVersionBody(10, 5, 1000, true)), &pro)
	pro["description"] = "For teams"
	desc, _ := json.Marshal(pro)
	s.mustDo(http.StatusOK, "PUT", "/v1/plans/pro", string(desc))
	s.mustDo(http.StatusOK, "PUT", "/v1/plans/pro?grandfather=true", planVersionBody(20, 5, 1000, true))
	s.mustDo(http.StatusOK, "PUT", "/v1/plans/pro?grandfather=false", planVersionBody(20, 5, 2500, false))

	type version struct {
		Version   int64 `json:"version"`
		Customers int64 `json:"customers"`
	}
	var all []version
	cursor := ""
	for pages := 0; ; pages++ {
		path := "/v1/plans/pro/versions?limit=2"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		var page struct {
			Versions   []version `json:"versions"`
			NextCursor string    `json:"next_cursor"`
		}
		if err := json.Unmarshal(s.mustDo(http.StatusOK, "GET", path, "").Body, &page); err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Versions...)
		if cursor = page.NextCursor; cursor == "" {
			if pages != 1 {
				t.Errorf("%d pages, want 2", pages+1)
			}
			break
		}
	}
	if want := []version{{1, 1}, {2, 0}, {3, 0}}; !reflect.DeepEqual(all, want) {
		t.Errorf("versions = %+v, want %+v", all, want)
	}
	r := s.mustDo(http.StatusOK, "GET", "/v1/plans/pro/versions/1", "")
	got := r.JSON(t)
	if _, ok := got["created_at"].(string); !ok {
		t.Errorf("version 1 without created_at\n%s", r.Body)
	}
	delete(got, "created_at")
	MustEqualJSON(t, "version 1", got, `{"plan":"pro","version":1,"customers":1,
		"price":{"amount_cents":1000,"currency":"USD","interval":"month"},
		"features":{"sso":true},
		"limits":[{"metric":"api_calls","window":"day","limit":10,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null},
		          {"metric":"exports","window":"month","limit":5,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null}]}`)
	r = s.mustDo(http.StatusOK, "GET", "/v1/plans/pro/versions/3", "")
	if p := r.JSON(t)["price"].(map[string]any); p["amount_cents"] != float64(2500) {
		t.Errorf("version 3's price = %v, want 2500", p)
	}
}

// Bad input to versions and migrations is a 4xx problem.
func TestPlanVersionsBadInput(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/api_calls", `{}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/exports", `{}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/plans/pro", planVersionBody(10, 5, 1000, true))
	s.mustDo(http.StatusOK, "PUT", "/v1/plans/pro?grandfather=true", planVersionBody(5, 5, 1000, true))
	s.mustDo(http.StatusOK, "PUT", "/v1/plans/pro", planVersionBody(4, 5, 1000, true))
	tests := []struct {
		name, method, path, body string
		status                   int
		code, field              string
	}{
		{"grandfather not a boolean", "PUT", "/v1/plans/pro?grandfather=yes", planVersionBody(3, 5, 1000, true), 400, "validation_failed", "grandfather"},
		{"grandfather empty", "PUT", "/v1/plans/pro?grandfather=", planVersionBody(3, 5, 1000, true), 400, "validation_failed", "grandfather"},
		{"unknown version", "GET", "/v1/plans/pro/versions/4", "", 404, "plan_version_not_found", ""},
		{"version zero", "GET", "/v1/plans/pro/versions/0", "", 400, "validation_failed", "version"},
		{"version not a number", "GET", "/v1/plans/pro/versions/latest", "", 400, "validation_failed", "version"},
		{"version of an unknown plan", "GET", "/v1/plans/nope/versions/1", "", 404, "plan_not_found", ""},
		{"versions of an unknown plan", "GET", "/v1/plans/nope/versions", "", 404, "plan_not_found", ""},
		{"versions of a bad key", "GET", "/v1/plans/NOPE/versions", "", 400, "validation_failed", "plan"},
		{"bad cursor", "GET", "/v1/plans/pro/versions?cursor=abc", "", 400, "validation_failed", "cursor"},
		{"bad limit", "GET", "/v1/plans/pro/versions?limit=0", "", 400, "validation_failed", "limit"},
		{"migrate without dry_run", "POST", "/v1/plans/pro/migrate", `{}`, 400, "validation_failed", "dry_run"},
		{"migrate dry_run not a boolean", "POST", "/v1/plans/pro/migrate", `{"dry_run":"yes"}`, 400, "validation_failed", "dry_run"},
		{"migrate unknown field", "POST", "/v1/plans/pro/migrate", `{"dry_run":true,"to":2}`, 400, "validation_failed", "to"},
		{"migrate to older", "POST", "/v1/plans/pro/migrate", `{"from_version":2,"to_version":1,"dry_run":true}`, 400, "validation_failed", "to_version"},
		{"migrate to the same", "POST", "/v1/plans/pro/migrate", `{"from_version":2,"to_version":2,"dry_run":true}`, 400, "validation_failed", "to_version"},
		{"migrate from the latest", "POST", "/v1/plans/pro/migrate", `{"from_version":3,"dry_run":true}`, 400, "validation_failed", "to_version"},
		{"migrate from version zero", "POST", "/v1/plans/pro/migrate", `{"from_version":0,"dry_run":true}`, 400, "validation_failed", "from_version"},
		{"migrate to an unknown version", "POST", "/v1/plans/pro/migrate", `{"to_version":9,"dry_run":true}`, 404, "plan_version_not_found", ""},
		{"migrate from an unknown version", "POST", "/v1/plans/pro/migrate", `{"from_version":9,"to_version":10,"dry_run":true}`, 404, "plan_version_not_found", ""},
		{"migrate an unknown plan", "POST", "/v1/plans/nope/migrate", `{"dry_run":true}`, 404, "plan_not_found", ""},
		{"migrate without a body", "POST", "/v1/plans/pro/migrate", ``, 415, "unsupported_media_type", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := MustProblem(t, s.forT(t).do(tc.method, tc.path, tc.body), tc.status, tc.code)
			if tc.field == "" {
				return
			}
			errs, _ := p["errors"].([]any)
			for _, e := range errs {
				if e.(map[string]any)["field"] == tc.field {
					return
				}
			}
			t.Errorf("errors = %v, want one about %s", p["errors"], tc.field)
		})
	}
	// Nothing moved, nothing changed.
	r := s.mustDo(http.StatusOK, "GET", "/v1/plans/pro", "")
	if got := r.JSON(t)["latest_version"]; got != float64(3) {
		t.Errorf("latest_version = %v, want 3", got)
	}
}
