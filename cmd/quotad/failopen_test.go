package main

import (
	"net/http"
	"testing"
)

// What a check failing open still enforces while PostgreSQL cannot be
// reached, as docs/operations.md says: a customer the process holds keeps its
// short windows enforced (its long ones answered from the block it holds,
// then left out); a customer it does not hold yet is admitted with no
// window at all, as is an id that does not exist, unless the process
// already knows it absent (404).
func TestFailOpenEnforcesWhatTheProcessHolds(t *testing.T) {
	_, proxy, servers := MustStartProxied(t, 1, map[string]string{"QUOTAD_STORE_TIMEOUT": "250ms"})
	s := servers[0]
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"minute","limit":2},{"metric":"api_calls","window":"day","limit":1000}]`, "held", "cold")
	if r, a := s.check(`{"customer":"held","metric":"api_calls"}`); r.Status != http.StatusOK || a.Degraded {
		t.Fatalf("held's first check: %d %s", r.Status, r.Body)
	}
	if r, _ := s.check(`{"customer":"absent","metric":"api_calls"}`); r.Status != http.StatusNotFound {
		t.Fatalf("a check of an id that does not exist: %d %s, want 404", r.Status, r.Body)
	}

	proxy.Reset()
	eventually(t, func() bool { return s.do("GET", "/readyz", "").Status == http.StatusServiceUnavailable }, "/readyz to say 503")

	// held: its minute's second unit from memory, the third denied by it.
	if r, a := s.check(`{"customer":"held","metric":"api_calls"}`); r.Status != http.StatusOK || len(a.Limits) == 0 {
		t.Errorf("held's second check: %d %s, want 200 with its windows", r.Status, r.Body)
	}
	if r, a := s.check(`{"customer":"held","metric":"api_calls"}`); r.Status != http.StatusTooManyRequests || a.Allowed {
		t.Errorf("held's third check: %d %s, want 429: its minute is still enforced", r.Status, r.Body)
	}
	// cold, never checked: admitted beyond its minute's limit, no window
	// in the answer.
	for i := range 3 {
		if r, a := s.check(`{"customer":"cold","metric":"api_calls"}`); r.Status != http.StatusOK || !a.Allowed || !a.Degraded || len(a.Limits) != 0 {
			t.Errorf("cold's check %d: %d %s, want 200 degraded with no limits", i+1, r.Status, r.Body)
		}
	}
	// An id quotad cannot tell from a customer: the same answer.
	if r, a := s.check(`{"customer":"ghost","metric":"api_calls"}`); r.Status != http.StatusOK || !a.Degraded || len(a.Limits) != 0 {
		t.Errorf("a check of an id never seen: %d %s, want 200 degraded with no limits", r.Status, r.Body)
	}
	// An id known absent stays so.
	if r, _ := s.check(`{"customer":"absent","metric":"api_calls"}`); r.Status != http.StatusNotFound {
		t.Errorf("a check of an id known absent: %d %s, want 404", r.Status, r.Body)
	}
	proxy.Clear()
	eventually(t, func() bool { return s.do("GET", "/readyz", "").Status == http.StatusOK }, "/readyz to say ready")
}
