package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
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
	return postAsCheck[reserveAnswer](s, "reserve", "/v1/reservations", body, http.StatusCreated, http.StatusTooManyRequests)
}

// commit commits reservation id at cost with the check token.
func (s *testServer) commit(id string, cost int64) (response, commitResult) {
	s.t.Helper()
	return postAsCheck[commitResult](s, "commit", "/v1/reservations/"+id+"/commit", fmt.Sprintf(`{"cost":%d}`, cost), http.StatusOK)
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

// Exactness across 4 processes: 64 concurrent reserve/commit pairs with
// random estimates and actual costs at a hard day limit. What is
// deterministic, whatever the interleaving, and asserted exactly:
//   - while only reserves run, the count only grows, so the admitted
//     estimates S fit the limit and every denied estimate is above L − S;
//   - commits run in two concurrent rounds, those that give units back
//     first, then those that count more than their estimate: in the second
//     round the count only grows from C₂ ≤ L to C, so whatever the order,
//     the sum of the units each commit counted beyond the limit is
//     max(0, C − L): a sequential model of the same commits, in any order,
//     predicts it, and the count read at the end is exactly C, the sum of
//     the admitted reservations' actual costs.
func TestReservationsExactAcrossProcesses(t *testing.T) {
	t.Parallel()
	const limit, pairs = 1000, 64
	servers := MustStartServers(t, 4, nil)
	MustSeed(t, servers[0], "", fmt.Sprintf(`[{"metric":"api_calls","window":"day","limit":%d}]`, limit), "acme")
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 23))
	type pair struct {
		estimate, actual int64
		id               string
		over             int64
	}
	ps := make([]pair, pairs)
	for i := range ps {
		ps[i].estimate = 1 + rng.Int64N(60)
		ps[i].actual = rng.Int64N(3*ps[i].estimate + 1) // a third give back, two thirds count more
	}
	// Each pair runs on its own goroutine and process; the barriers
	// between its steps are the rounds above.
	var reserved, gaveBack sync.WaitGroup
	reserved.Add(pairs)
	gaveBack.Add(pairs)
	var wg sync.WaitGroup
	for i := range ps {
		p, s := &ps[i], servers[i%len(servers)]
		wg.Go(func() {
			r, err := s.send("POST", "/v1/reservations", fmt.Sprintf(`{"customer":"acme","metric":"api_calls","cost":%d}`, p.estimate),
				"Authorization", "Bearer "+checkToken)
			switch {
			case err != nil:
				t.Error(err)
			case r.Status == http.StatusCreated:
				var a reserveAnswer
				if err := json.Unmarshal(r.Body, &a); err != nil || a.ID == "" {
					t.Errorf("reserve answer %s: %v", r.Body, err)
				}
				p.id = a.ID
			case r.Status != http.StatusTooManyRequests:
				t.Errorf("reserve: %d %s", r.Status, r.Body)
			}
			reserved.Done()
			reserved.Wait()
			commit := func() {
				if p.id == "" {
					return
				}
				r, err := s.send("POST", "/v1/reservations/"+p.id+"/commit", fmt.Sprintf(`{"cost":%d}`, p.actual),
					"Authorization", "Bearer "+checkToken)
				if err != nil || r.Status != http.StatusOK {
					t.Errorf("commit %d of %d: %v %d %s", p.actual, p.estimate, err, r.Status, r.Body)
					return
				}
				var c commitResult
				if err := json.Unmarshal(r.Body, &c); err != nil {
					t.Error(err)
				}
				p.over = c.Over
			}
			if p.actual <= p.estimate {
				commit()
			}
			gaveBack.Done()
			gaveBack.Wait()
			if p.actual > p.estimate {
				commit()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var held, admitted, committed, over int64
	for _, p := range ps {
		if p.id != "" {
			held += p.estimate
			admitted++
		}
	}
	if held > limit {
		t.Errorf("reserves held %d units at a limit of %d", held, limit)
	}
	for _, p := range ps {
		if p.id == "" && p.estimate <= limit-held {
			t.Errorf("a reserve of %d was denied with %d units held at a limit of %d", p.estimate, held, limit)
		}
	}
	// The sequential model: give-backs, then the extras in any order.
	count := held
	for _, p := range ps {
		if p.id != "" && p.actual <= p.estimate {
			count -= p.estimate - p.actual
		}
	}
	var want int64
	for _, p := range ps {
		if p.id != "" && p.actual > p.estimate {
			x := p.actual - p.estimate
			want += min(x, max(0, count+x-limit))
			count += x
		}
	}
	for _, p := range ps {
		if p.id != "" {
			committed += p.actual
			over += p.over
		}
	}
	t.Logf("%d of %d reserves admitted, %d units held, %d committed, over %d", admitted, pairs, held, committed, over)
	if admitted == pairs || admitted == 0 {
		t.Errorf("%d of %d reserves admitted: the limit did not bind", admitted, pairs)
	}
	if count != committed {
		t.Fatalf("model count %d != committed %d", count, committed)
	}
	if over != want {
		t.Errorf("sum of over = %d, the sequential model predicts %d", over, want)
	}
	for i, s := range servers {
		eventually(t, func() bool { return s.usageOf("acme")["day"] == committed },
			fmt.Sprintf("process %d to read day usage %d (committed)", i, committed))
	}
	if committed > limit+over {
		t.Errorf("counted %d beyond the limit %d by more than the over reported, %d", committed, limit, over)
	}
}

// reservationRow reads reservation id's state as stored.
func reservationRow(t testing.TB, schema *dbtest.Schema, id string) string {
	t.Helper()
	return mustQueryOne[string](t, schema, `SELECT state FROM reservations WHERE id = $1`, id)
}

// A reservation outlives the process that made it: stopped while the
// reservation is held, the process that starts next expires it, gives its
// units back, and a later commit is 410.
func TestReservationExpiresAcrossRestart(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	a := MustStartServer(t, schema, nil)
	MustSeed(t, a, "", `[{"metric":"api_calls","window":"day","limit":1000}]`, "acme")
	_, r := a.reserve(`{"customer":"acme","metric":"api_calls","cost":100,"ttl_seconds":5}`)
	if r.ID == "" {
		t.Fatal("reserve denied")
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	if got := reservationRow(t, schema, r.ID); got != "held" {
		t.Fatalf("state after the stop = %s, want held: the stop took longer than the ttl", got)
	}
	if got := rawDay(t, schema, "acme"); got != 100 {
		t.Fatalf("day counter after the stop = %d, want the 100 held", got)
	}
	b := MustStartServer(t, schema, nil)
	eventually(t, func() bool { return reservationRow(t, schema, r.ID) == "expired" }, "the new process to expire the reservation")
	eventually(t, func() bool { return b.usageOf("acme")["day"] <= 0 }, "the units to go back")
	if got := rawDay(t, schema, "acme"); got != 0 {
		t.Errorf("day counter after expiry = %d, want 0", got)
	}
	if got := b.reservationState(r.ID); got != "expired" {
		t.Errorf("GET state = %s, want expired", got)
	}
	res, _ := b.commit(r.ID, 50)
	var p struct{ Code string }
	_ = json.Unmarshal(res.Body, &p)
	if res.Status != http.StatusGone || p.Code != "reservation_expired" {
		t.Errorf("commit after expiry: %d %s, want 410 reservation_expired", res.Status, res.Body)
	}
	if got := b.usageOf("acme")["day"]; got != 0 {
		t.Errorf("day usage after a refused commit = %d, want 0", got)
	}
}

// A reservation made by a process that is then killed (SIGKILL) is
// released at its expiry by another process: the reserved units go back,
// once, and the killed process's unused lease units stay counted, as any
// dead process's do.
func TestReservationReleasedAfterSIGKILL(t *testing.T) {
	t.Parallel()
	const estimate = 500
	schema := dbtest.New(t)
	first := MustStartProcess(t, schema)
	s := first.server(t)
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"day","limit":10000}]`, "acme")
	other := MustStartServer(t, schema, nil)
	_, r := s.reserve(fmt.Sprintf(`{"customer":"acme","metric":"api_calls","cost":%d,"ttl_seconds":3}`, estimate))
	if r.ID == "" {
		t.Fatal("reserve denied")
	}
	// Once the killed process has reported its lease, the store knows
	// which of its units were admitted (the reservation's) and which it
	// held unused.
	leased := func() int64 {
		return mustQueryOne[int64](t, schema, `SELECT coalesce(sum(unused), 0)::bigint FROM counter_leases WHERE customer_id = 'acme'`)
	}
	eventually(t, func() bool { return rawDay(t, schema, "acme")-leased() == estimate }, "the lease to be reported")
	raw := rawDay(t, schema, "acme")
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.done
	// The units go back right after the state changes: wait for both.
	eventually(t, func() bool { return reservationRow(t, schema, r.ID) == "expired" }, "the other process to expire the reservation")
	eventually(t, func() bool { return rawDay(t, schema, "acme") <= raw-estimate },
		fmt.Sprintf("the day counter to lose the %d units reserved", estimate))
	if got := rawDay(t, schema, "acme"); got != raw-estimate {
		t.Errorf("day counter after expiry = %d, want %d − %d (the dead process's unused block stays)", got, raw, estimate)
	}
	if res, _ := other.commit(r.ID, estimate); res.Status != http.StatusGone {
		t.Errorf("commit after expiry: %d %s, want 410", res.Status, res.Body)
	}
	if got := rawDay(t, schema, "acme"); got != raw-estimate {
		t.Errorf("day counter after a refused commit = %d, want %d", got, raw-estimate)
	}
}

// Every reservation answer, success and error, matches openapi.yaml.
func TestOpenAPIReservations(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	v := MustSpecValidator(t)
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"minute","limit":100},{"metric":"api_calls","window":"day","limit":1000}]`, "acme")
	asCheck := []string{"Authorization", "Bearer " + checkToken}
	do := func(want int, method, path, body string) response {
		t.Helper()
		c := apiCall{method, path, body, asCheck}
		r := sendCall(t, s, c)
		if r.Status != want {
			t.Errorf("%s: status %d, want %d\n%s", c, r.Status, want, r.Body)
		}
		if err := v.validateResponse(s.URL, c, r); err != nil {
			t.Errorf("%s: answer does not match openapi.yaml: %v\n%s", c, err, r.Body)
		}
		return r
	}
	idOf := func(r response) string {
		var a struct{ ID string }
		_ = json.Unmarshal(r.Body, &a)
		return a.ID
	}
	id := idOf(do(201, "POST", "/v1/reservations", `{"customer":"acme","metric":"api_calls","cost":10,"request_id":"r-1"}`))
	if again := idOf(do(201, "POST", "/v1/reservations", `{"customer":"acme","metric":"api_calls","cost":10,"request_id":"r-1"}`)); again != id {
		t.Errorf("replay answered %s, want %s", again, id)
	}
	do(409, "POST", "/v1/reservations", `{"customer":"acme","metric":"api_calls","cost":11,"request_id":"r-1"}`)
	do(429, "POST", "/v1/reservations", `{"customer":"acme","metric":"api_calls","cost":95}`)
	do(429, "POST", "/v1/reservations", `{"customer":"acme","metric":"api_calls","cost":5000}`)
	do(200, "GET", "/v1/reservations/"+id, "")
	do(200, "POST", "/v1/reservations/"+id+"/commit", `{"cost":5}`)
	do(200, "POST", "/v1/reservations/"+id+"/commit", `{"cost":5}`)
	do(409, "POST", "/v1/reservations/"+id+"/commit", `{"cost":6}`)
	do(200, "GET", "/v1/reservations/"+id, "")
	do(409, "DELETE", "/v1/reservations/"+id, "")
	other := idOf(do(201, "POST", "/v1/reservations", `{"customer":"acme","metric":"api_calls","cost":3}`))
	do(204, "DELETE", "/v1/reservations/"+other, "")
	do(204, "DELETE", "/v1/reservations/"+other, "")
	do(200, "GET", "/v1/reservations/"+other, "")
	short := idOf(do(201, "POST", "/v1/reservations", `{"customer":"acme","metric":"api_calls","cost":3,"ttl_seconds":1}`))
	eventually(t, func() bool { return s.reservationState(short) == "expired" }, "the reservation to expire")
	do(410, "POST", "/v1/reservations/"+short+"/commit", `{"cost":3}`)
	do(404, "GET", "/v1/reservations/rsv_000000000000000000000000", "")
	do(404, "POST", "/v1/reservations/nope/commit", `{"cost":3}`)
	do(400, "POST", "/v1/reservations", `{"customer":"acme","metric":"api_calls","cost":0}`)
	do(400, "POST", "/v1/reservations/"+id+"/commit", `{"cost":-1}`)
	do(403, "POST", "/v1/reservations", `{"api_key":"k","metric":"api_calls","cost":1}`)
	do(404, "POST", "/v1/reservations", `{"customer":"ghost","metric":"api_calls","cost":1}`)
}
