package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// logRecords returns the JSON lines of s's log whose message is msg and
// whose attributes include every one of match, decoded.
func (s *testServer) logRecords(msg string, match map[string]any) []map[string]any {
	s.t.Helper()
	all := map[string]any{"msg": msg}
	for k, v := range match {
		all[k] = v
	}
	return s.logRecordsOf(all)
}

// At debug level, the log line of a check says whose check it was, of
// which metric, what was decided and, of a denial, which limit denied; a
// refund's and a forward-auth check's lines too.
func TestDebugLogOfChecks(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil) // at debug level
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"minute","limit":1},{"metric":"api_calls","window":"day","limit":100}]`, "acme")
	if r, _ := s.check(`{"customer":"acme","metric":"api_calls","request_id":"r-1"}`); r.Status != http.StatusOK {
		t.Fatalf("first check: %d %s", r.Status, r.Body)
	}
	if r, _ := s.check(`{"customer":"acme","metric":"api_calls","cost":1,"request_id":"r-2"}`); r.Status != http.StatusTooManyRequests {
		t.Fatalf("second check: %d %s, want 429", r.Status, r.Body)
	}
	if r := s.do("POST", "/v1/refund", `{"customer":"acme","metric":"api_calls","request_id":"r-1"}`, "Authorization", "Bearer "+checkToken); r.Status != http.StatusOK {
		t.Fatalf("refund: %d %s", r.Status, r.Body)
	}
	if r := s.do("GET", "/v1/forward-auth", "", "Authorization", "Bearer "+checkToken,
		"X-Quotad-Customer", "acme", "X-Quotad-Metric", "api_calls"); r.Status != http.StatusOK {
		t.Fatalf("forward-auth (the refund gave the minute's unit back): %d %s", r.Status, r.Body)
	}
	if r, _ := s.check(`{"customer":"nobody","metric":"api_calls"}`); r.Status != http.StatusNotFound {
		t.Fatalf("check of an unknown customer: %d %s, want 404", r.Status, r.Body)
	}
	// A request's line is written once its answer is: wait for the last.
	eventually(t, func() bool { return len(s.logRecords("request", map[string]any{"customer": "nobody"})) == 1 },
		"the unknown customer's check to be logged")

	denied := s.logRecords("request", map[string]any{"route": "/v1/check", "request_id": "r-2"})
	if len(denied) != 1 {
		t.Fatalf("%d log lines of the denied check, want 1\n%s", len(denied), s.logs)
	}
	d := denied[0]
	for k, want := range map[string]any{"level": "DEBUG", "status": float64(429), "customer": "acme", "metric": "api_calls",
		"decision": "denied", "cost": float64(1), "actor": "backend"} {
		if d[k] != want {
			t.Errorf("denied check's %s = %v, want %v", k, d[k], want)
		}
	}
	by, _ := d["denied_by"].(map[string]any)
	if by["metric"] != "api_calls" || by["window"] != "minute" || by["limit"] != float64(1) || by["used"] != float64(1) {
		t.Errorf("denied_by = %v, want api_calls' minute, limit 1, used 1", d["denied_by"])
	}
	if ra, _ := d["retry_after"].(float64); ra < 1 {
		t.Errorf("retry_after = %v, want at least 1", d["retry_after"])
	}

	for _, tt := range []struct {
		what  string
		match map[string]any
	}{
		{"the allowed check", map[string]any{"route": "/v1/check", "request_id": "r-1", "decision": "allowed", "customer": "acme", "metric": "api_calls"}},
		{"the refund", map[string]any{"route": "/v1/refund", "decision": "refunded", "refunded": float64(1), "customer": "acme", "metric": "api_calls"}},
		{"the forward-auth check", map[string]any{"route": "/v1/forward-auth", "decision": "allowed", "customer": "acme", "metric": "api_calls"}},
		{"the unknown customer's", map[string]any{"route": "/v1/check", "decision": "rejected", "customer": "nobody", "metric": "api_calls"}},
	} {
		if n := len(s.logRecords("request", tt.match)); n != 1 {
			t.Errorf("%d log lines of %s with %v, want 1", n, tt.what, tt.match)
		}
	}
}

// At debug level, a gRPC rate limit request's log line lists each
// descriptor's customer, metric and decision, and the limit that denied.
func TestDebugLogOfRLS(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, withGRPC(nil))
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"minute","limit":1}]`, "acme")
	c := MustDialRLS(t, s)
	desc := rlDesc(0, "customer", "acme", "metric", "api_calls")
	c.mustCall(t, "api", desc)
	if res := c.mustCall(t, "api", desc); res.GetOverallCode().String() != "OVER_LIMIT" {
		t.Fatalf("second call: %s, want OVER_LIMIT", rlCodes(res))
	}
	var recs []map[string]any
	eventually(t, func() bool { recs = s.logRecords("rls: request", nil); return len(recs) == 2 }, "both requests to be logged")
	ds, _ := recs[1]["descriptors"].([]any)
	if len(ds) != 1 {
		t.Fatalf("descriptors %v, want one", recs[1]["descriptors"])
	}
	d, _ := ds[0].(map[string]any)
	by, _ := d["denied_by"].(map[string]any)
	if recs[1]["level"] != "DEBUG" || d["customer"] != "acme" || d["metric"] != "api_calls" || d["decision"] != "denied" ||
		by["window"] != "minute" || by["limit"] != float64(1) {
		t.Errorf("logged %v, want acme's api_calls denied by its minute's limit of 1", recs[1])
	}
}

// assertOutageLogged checks that s logged one outage of store: one ERROR
// line when it began, one INFO line when it ended, saying how long it
// lasted, in that order; nothing else of store at ERROR.
func (s *testServer) assertOutageLogged(t *testing.T, store string) {
	t.Helper()
	var levels []string
	for _, rec := range s.logRecordsOf(map[string]any{"store": store}) {
		levels = append(levels, rec["level"].(string))
		if rec["level"] == "INFO" {
			if ms, ok := rec["outage_ms"].(float64); !ok || ms < 0 || rec["outage"] == nil || rec["outage_began"] == nil {
				t.Errorf("the end of %s's outage, logged %v, does not say how long it lasted", store, rec)
			}
		}
	}
	if strings.Join(levels, " ") != "ERROR INFO" {
		t.Errorf("%s's outage logged at %v, want one ERROR, then one INFO", store, levels)
	}
}

// logRecordsOf returns the JSON lines of s's log with every attribute of
// match, whatever their message.
func (s *testServer) logRecordsOf(match map[string]any) []map[string]any {
	var out []map[string]any
	for line := range strings.Lines(s.logs.String()) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		ok := true
		for k, v := range match {
			ok = ok && rec[k] == v
		}
		if ok {
			out = append(out, rec)
		}
	}
	return out
}

// PostgreSQL cut off (every connection reset) while checks go on: one
// ERROR line when the outage begins, however many checks fail over
// meanwhile, and one INFO line, with how long it lasted, once PostgreSQL
// answers again; the background work that fails meanwhile, retried, says
// so at DEBUG, not in a WARN line per retry.
func TestPostgreSQLOutageLoggedOnce(t *testing.T) {
	_, proxy, servers := MustStartProxied(t, 1, map[string]string{
		"QUOTAD_STORE_TIMEOUT": "250ms",
		"QUOTAD_LOG_LEVEL":     "debug",
	})
	s := servers[0]
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"day","limit":1000}]`, "acme")
	began := func() int { return len(s.logRecordsOf(map[string]any{"store": "postgresql", "level": "ERROR"})) }
	ended := func() int { return len(s.logRecordsOf(map[string]any{"store": "postgresql", "level": "INFO"})) }

	proxy.Reset()
	eventually(t, func() bool { return began() == 1 }, "the outage's ERROR line")
	// Checks of customers not cached need PostgreSQL: each fails over.
	for i := range 20 {
		if r, a := s.check(fmt.Sprintf(`{"customer":"c%d","metric":"api_calls"}`, i)); r.Status != http.StatusOK || !a.Degraded {
			t.Fatalf("check during the outage: %d %s, want 200 degraded", r.Status, r.Body)
		}
	}
	eventually(t, func() bool { return s.do("GET", "/readyz", "").Status == http.StatusServiceUnavailable }, "/readyz to say 503")
	const retried = "background work failed; will retry"
	eventually(t, func() bool { return len(s.logRecords(retried, map[string]any{"level": "DEBUG"})) >= 3 },
		"background work to fail and be retried during the outage")
	proxy.Clear()
	eventually(t, func() bool { return ended() == 1 }, "the outage's INFO line")
	// Between the outage's two lines, retries are at DEBUG (one WARN may
	// have been on its way as the outage was judged).
	warned, during := map[string]int{}, false
	for _, rec := range s.logRecordsOf(nil) {
		switch {
		case rec["store"] == "postgresql":
			during = rec["level"] == "ERROR"
		case during && rec["level"] == "WARN" && rec["msg"] != "request" && rec["msg"] != "not ready" && rec["msg"] != "store unavailable":
			warned[rec["msg"].(string)]++
		}
	}
	for msg, n := range warned {
		if n > 1 && msg != "webhook outbox unreachable; will retry" {
			t.Errorf("%d WARN lines %q during the outage, want its retries at DEBUG", n, msg)
		}
	}
	eventually(t, func() bool { return s.do("GET", "/readyz", "").Status == http.StatusOK }, "/readyz to say ready")
	s.assertOutageLogged(t, "postgresql")
}
