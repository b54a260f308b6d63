package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// reserveAnswer is the answer of POST /v1/reservations (a check's answer
// with the reservation's id and expiry).
type reserveAnswer struct {
	ID        string    `json:"id"`
	ExpiresAt time.Time `json:"expires_at"`
	checkAnswer
}

// commitResult is the answer of a commit.
type commitResult struct {
	ID        string `json:"id"`
	Reserved  int64  `json:"reserved"`
	Committed int64  `json:"committed"`
	Released  int64  `json:"released"`
	Over      int64  `json:"over"`
	Limits    []struct {
		Window string `json:"window"`
		Used   int64  `json:"used"`
	} `json:"limits"`
}

// reserve posts a reservation with the check token and decodes a 201 or a
// 429.
func (s *testServer) reserve(body string) (response, reserveAnswer) {
	s.t.Helper()
	r := s.do("POST", "/v1/reservations", body, "Authorization", "Bearer "+checkToken)
	var a reserveAnswer
	if r.Status == http.StatusCreated || r.Status == http.StatusTooManyRequests {
		if err := json.Unmarshal(r.Body, &a); err != nil {
			s.t.Fatalf("reserve answer: %v\n%s", err, r.Body)
		}
	}
	return r, a
}

// commit commits reservation id at cost with the check token.
func (s *testServer) commit(id string, cost int64) (response, commitResult) {
	s.t.Helper()
	r := s.do("POST", "/v1/reservations/"+id+"/commit", fmt.Sprintf(`{"cost":%d}`, cost), "Authorization", "Bearer "+checkToken)
	var a commitResult
	if r.Status == http.StatusOK {
		if err := json.Unmarshal(r.Body, &a); err != nil {
			s.t.Fatalf("commit answer: %v\n%s", err, r.Body)
		}
	}
	return r, a
}

// reservationState reads reservation id's state.
func (s *testServer) reservationState(id string) string {
	s.t.Helper()
	r := s.mustDo(http.StatusOK, "GET", "/v1/reservations/"+id, "", "Authorization", "Bearer "+checkToken)
	var v struct{ State string }
	if err := json.Unmarshal(r.Body, &v); err != nil {
		s.t.Fatal(err)
	}
	return v.State
}

func TestReservationLifecycle(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"minute","limit":100000},{"metric":"api_calls","window":"day","limit":1000}]`, "acme", "beta")

	r, a := s.reserve(`{"customer":"acme","metric":"api_calls","cost":100,"ttl_seconds":600}`)
	if r.Status != http.StatusCreated || !a.Allowed || a.ID == "" {
		t.Fatalf("reserve: %d %s", r.Status, r.Body)
	}
	if r.Header.Get("RateLimit") == "" || r.Header.Get("Location") != "/v1/reservations/"+a.ID {
		t.Errorf("reserve headers: %v", r.Header)
	}
	if until := time.Until(a.ExpiresAt); until < 590*time.Second || until > 610*time.Second {
		t.Errorf("expires_at %s is not 600 s away", a.ExpiresAt)
	}
	if got := s.reservationState(a.ID); got != "held" {
		t.Errorf("state = %s, want held", got)
	}
	if got := s.usageOf("acme")["day"]; got != 100 {
		t.Errorf("day usage while held = %d, want 100", got)
	}

	// A commit of less gives the rest back.
	r, c := s.commit(a.ID, 60)
	if r.Status != http.StatusOK || c.Reserved != 100 || c.Committed != 60 || c.Released != 40 || c.Over != 0 {
		t.Fatalf("commit: %d %s", r.Status, r.Body)
	}
	if got := s.usageOf("acme")["day"]; got != 60 {
		t.Errorf("day usage after commit = %d, want 60", got)
	}
	// Idempotent by cost; another cost is 409; a committed one cannot be released.
	if r, again := s.commit(a.ID, 60); r.Status != http.StatusOK || again.Committed != 60 || again.Released != 40 {
		t.Errorf("repeated commit: %d %s", r.Status, r.Body)
	}
	if r, _ := s.commit(a.ID, 70); r.Status != http.StatusConflict {
		t.Errorf("commit at another cost: %d %s, want 409", r.Status, r.Body)
	}
	if r := s.do("DELETE", "/v1/reservations/"+a.ID, "", "Authorization", "Bearer "+checkToken); r.Status != http.StatusConflict {
		t.Errorf("release of a committed reservation: %d %s, want 409", r.Status, r.Body)
	}
	if got := s.usageOf("acme")["day"]; got != 60 {
		t.Errorf("day usage after the repeats = %d, want 60", got)
	}

	// A release gives everything back.
	_, b := s.reserve(`{"customer":"acme","metric":"api_calls","cost":200}`)
	s.mustDo(http.StatusNoContent, "DELETE", "/v1/reservations/"+b.ID, "", "Authorization", "Bearer "+checkToken)
	if got := s.reservationState(b.ID); got != "released" {
		t.Errorf("state = %s, want released", got)
	}
	if got := s.usageOf("acme")["day"]; got != 60 {
		t.Errorf("day usage after release = %d, want 60", got)
	}
	if r, _ := s.commit(b.ID, 10); r.Status != http.StatusConflict {
		t.Errorf("commit of a released reservation: %d %s, want 409", r.Status, r.Body)
	}

	// Denied like a check: 429, nothing held.
	r, d := s.reserve(`{"customer":"acme","metric":"api_calls","cost":941}`)
	if r.Status != http.StatusTooManyRequests || d.Allowed || d.ID != "" || r.Header.Get("Retry-After") == "" {
		t.Errorf("reserve beyond the limit: %d %v %s", r.Status, r.Header, r.Body)
	}
	if got := s.usageOf("acme")["day"]; got != 60 {
		t.Errorf("day usage after a denied reserve = %d, want 60", got)
	}

	// A repeated request_id returns the first answer and holds nothing more.
	_, first := s.reserve(`{"customer":"acme","metric":"api_calls","cost":40,"request_id":"job-1"}`)
	r, second := s.reserve(`{"customer":"acme","metric":"api_calls","cost":40,"request_id":"job-1"}`)
	if r.Status != http.StatusCreated || second.ID != first.ID {
		t.Errorf("repeated request_id: %d %s, want the first reservation %s", r.Status, r.Body, first.ID)
	}
	if r, _ := s.reserve(`{"customer":"acme","metric":"api_calls","cost":41,"request_id":"job-1"}`); r.Status != http.StatusConflict {
		t.Errorf("request_id reused with another cost: %d, want 409", r.Status)
	}
	if got := s.usageOf("acme")["day"]; got != 100 {
		t.Errorf("day usage = %d, want 100 (60 committed, 40 held once)", got)
	}

	// More than reserved is counted, beyond the hard limit: over says how far.
	_, e := s.reserve(`{"customer":"acme","metric":"api_calls","cost":900}`)
	r, c = s.commit(e.ID, 1000)
	// 100 before it, 1000 committed: 1100, 100 beyond the limit of 1000.
	if r.Status != http.StatusOK || c.Over != 100 || c.Released != 0 {
		t.Errorf("commit beyond the limit: %d %s, want over 100", r.Status, r.Body)
	}
	if got := s.usageOf("acme")["day"]; got != 1100 {
		t.Errorf("day usage = %d, want 1100", got)
	}
	if _, ans := s.check(`{"customer":"acme","metric":"api_calls"}`); ans.Allowed {
		t.Error("a check passed beyond the limit")
	}
	// Another customer is untouched.
	if got := s.usageOf("beta")["day"]; got != 0 {
		t.Errorf("beta's day usage = %d", got)
	}
}
