package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/quotad/quotad/internal/dbtest"
)

// MustStartServers starts n quotad processes on one schema.
func MustStartServers(t testing.TB, n int, env map[string]string) []*testServer {
	t.Helper()
	schema := dbtest.New(t)
	servers := make([]*testServer, n)
	for i := range servers {
		servers[i] = MustStartServer(t, schema, env)
	}
	return servers
}

// checkAll sends cost-1 checks of customer, count of them, from workers
// goroutines taking the servers in turn, and returns the answers' statuses
// and how many allowed answers reported overage. A degraded answer (the
// store could not be reached) fails the test: it would count as admitted
// without being counted anywhere.
func checkAll(t *testing.T, servers []*testServer, workers, count int, customer string) (statuses map[int]int, overage int) {
	t.Helper()
	var mu sync.Mutex
	statuses = map[int]int{}
	var wg sync.WaitGroup
	next := make(chan int, count)
	for i := range count {
		next <- i
	}
	close(next)
	body := `{"customer":"` + customer + `","metric":"api_calls","cost":1}`
	for range workers {
		wg.Go(func() {
			for i := range next {
				r, err := servers[i%len(servers)].send("POST", "/v1/check", body, "Authorization", "Bearer "+checkToken)
				if err != nil {
					t.Error(err)
					return
				}
				var a struct {
					Overage  bool `json:"overage"`
					Degraded bool `json:"degraded"`
				}
				if r.Status == http.StatusOK {
					if err := json.Unmarshal(r.Body, &a); err != nil {
						t.Error(err)
					}
					if a.Degraded {
						t.Errorf("a degraded answer: the store could not be reached: %s", r.Body)
					}
				}
				mu.Lock()
				statuses[r.Status]++
				if a.Overage {
					overage++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return statuses, overage
}

// With leases, a hard long window still admits exactly its limit across
// processes: 400 checks at a limit of 100 through 2 and 4 processes admit
// 100, recalling units other processes hold, and the usage every process
// reads comes to the same 100 once traffic stops.
func TestLeasesExactAcrossProcesses(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("%d processes", n), func(t *testing.T) {
			t.Parallel()
			servers := MustStartServers(t, n, nil)
			MustSeed(t, servers[0], "", `[{"metric":"api_calls","window":"day","limit":100}]`, "acme")
			got, _ := checkAll(t, servers, 32, 400, "acme")
			if got[200] != 100 || got[429] != 300 {
				t.Errorf("statuses = %v, want exactly 100 × 200 and 300 × 429", got)
			}
			for i, s := range servers {
				eventually(t, func() bool { return s.usageOf("acme")["day"] == 100 },
					fmt.Sprintf("process %d to read day usage 100", i))
			}
		})
	}
}

// Nothing is stranded: units a process reserved are recalled when another
// one needs them. 60 checks at one process then 40 at another, at a limit
// of 100, are all admitted; the next is denied at both.
func TestLeasesNothingStranded(t *testing.T) {
	t.Parallel()
	servers := MustStartServers(t, 2, nil)
	a, b := servers[0], servers[1]
	MustSeed(t, a, "", `[{"metric":"api_calls","window":"day","limit":100}]`, "acme")
	if got, _ := checkAll(t, []*testServer{a}, 8, 60, "acme"); got[200] != 60 {
		t.Fatalf("60 checks at the first process: %v, want all admitted", got)
	}
	if got, _ := checkAll(t, []*testServer{b}, 8, 40, "acme"); got[200] != 40 {
		t.Fatalf("40 checks at the second process: %v, want all admitted", got)
	}
	for _, s := range servers {
		if r, _ := s.check(`{"customer":"acme","metric":"api_calls"}`); r.Status != http.StatusTooManyRequests {
			t.Errorf("check 101: %d %s, want 429", r.Status, r.Body)
		}
	}
}

// A soft window's overage is billed, so it is counted exactly: 4
// processes, 320 checks at a limit of 100 with 20% overage admit 120, 20
// of them answered as overage and recorded as such in history.
func TestLeasesSoftOverageExact(t *testing.T) {
	t.Parallel()
	servers := MustStartServers(t, 4, nil)
	MustSeed(t, servers[0], "", `[{"metric":"api_calls","window":"day","limit":100,"mode":"soft","overage_percent":20}]`, "acme")
	got, overage := checkAll(t, servers, 32, 320, "acme")
	if got[200] != 120 || got[429] != 200 || overage != 20 {
		t.Errorf("statuses = %v with %d overage answers, want 120 × 200 (20 of them overage) and 200 × 429", got, overage)
	}
	eventually(t, func() bool {
		r := servers[0].mustDo(http.StatusOK, "GET", "/v1/customers/acme/usage/history", "")
		return strings.Contains(string(r.Body), `"used":120,"overage":20,"denied":200`)
	}, "the history of every process to hold 120 used, 20 overage and 200 denied")
}

// An elastic window beyond its limit spends spare capacity in PostgreSQL,
// where units leased to other processes already count: two elastic
// customers hammering through two processes never take the metric past
// its capacity, and spend all of it.
func TestLeasesElasticCapacity(t *testing.T) {
	t.Parallel()
	servers := MustStartServers(t, 2, nil)
	MustSeed(t, servers[0], `{"capacity":{"day":150}}`,
		`[{"metric":"api_calls","window":"day","limit":40,"mode":"elastic"}]`, "e1", "e2")
	var wg sync.WaitGroup
	results := make([]map[int]int, 2)
	for i, c := range []string{"e1", "e2"} {
		wg.Go(func() { results[i], _ = checkAll(t, servers, 16, 120, c) })
	}
	wg.Wait()
	if total := results[0][200] + results[1][200]; total != 150 {
		t.Errorf("admitted %d + %d = %d, want the capacity, 150", results[0][200], results[1][200], total)
	}
	for i, r := range results {
		if r[200] < 40 {
			t.Errorf("customer %d admitted %d, fewer than its limit of 40", i+1, r[200])
		}
	}
}

// Checks with a request id take leased units before they claim the id:
// far more of them at once than the process has connections all answer.
func TestLeasesRequestIDsUnderConcurrency(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, map[string]string{"QUOTAD_DB_MAX_CONNS": "2"})
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"day","limit":100000}]`, "acme")
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for w := range 32 {
		wg.Go(func() {
			for i := range 4 {
				body := fmt.Sprintf(`{"customer":"acme","metric":"api_calls","cost":2,"request_id":"job-%d"}`, (w*4+i)%64)
				r, err := s.send("POST", "/v1/check", body, "Authorization", "Bearer "+checkToken)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				statuses[r.Status]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if statuses[200] != 128 {
		t.Errorf("statuses = %v, want 128 × 200", statuses)
	}
	// 64 distinct ids of cost 2, each sent twice: charged once each.
	if got := s.usageOf("acme")["day"]; got != 128 {
		t.Errorf("day used = %d, want 128", got)
	}
}

// During an outage a process goes on admitting from the units it holds
// (not degraded: they are reserved), then follows the failure policy, and
// recovers without a restart.
func TestLeasesOutage(t *testing.T) {
	t.Parallel()
	db, admin := dbtest.NewDatabase(t)
	open := MustStartServer(t, db, map[string]string{"QUOTAD_STORE_FAILURE": "open"})
	closed := MustStartServer(t, db, map[string]string{"QUOTAD_STORE_FAILURE": "closed"})
	// A day limit of 1000 leases blocks of 10.
	MustSeed(t, open, "", `[{"metric":"api_calls","window":"day","limit":1000}]`, "a", "b", "probe")
	// Both processes have heard of the seed before the first checks: a
	// notification heard after a first check would drop the customer it
	// loaded, and the next check would need PostgreSQL during the cut.
	heard(t, open, closed)
	heard(t, closed, open)
	for _, c := range []struct {
		s        *testServer
		customer string
	}{{open, "a"}, {closed, "b"}} {
		if _, ans := c.s.check(`{"customer":"` + c.customer + `","metric":"api_calls"}`); !ans.Allowed || ans.Degraded {
			t.Fatalf("first check of %s: %+v", c.customer, ans)
		}
	}
	cut := MustCutter(t, db, admin)
	cut(false)
	for i := range 10 {
		for _, c := range []struct {
			s        *testServer
			customer string
		}{{open, "a"}, {closed, "b"}} {
			r, ans := c.s.check(`{"customer":"` + c.customer + `","metric":"api_calls"}`)
			if r.Status != http.StatusOK || ans.Degraded || len(ans.Limits) != 1 || ans.Limits[0].Used != int64(i+2) {
				t.Fatalf("check %d of %s from its held block: %d %s, want 200, not degraded, used %d", i+2, c.customer, r.Status, r.Body, i+2)
			}
		}
	}
	// The blocks are spent: the failure policy decides. a's degraded
	// answers are owed, and charged once PostgreSQL answers again.
	degraded := int64(1)
	if r, ans := open.check(`{"customer":"a","metric":"api_calls"}`); r.Status != http.StatusOK || !ans.Degraded || len(ans.Limits) != 0 {
		t.Errorf("fail open, block spent: %d %s, want 200 degraded without the day window", r.Status, r.Body)
	}
	if r, _ := closed.check(`{"customer":"b","metric":"api_calls"}`); r.Status != http.StatusServiceUnavailable {
		t.Errorf("fail closed, block spent: %d %s, want 503", r.Status, r.Body)
	}
	cut(true)
	// Each process recovers by itself, but not at once: a pooled
	// connection the outage killed fails its next call, and how many a
	// process holds depends on how its calls overlapped. (A dry run is no
	// sign of recovery either: the lease may judge one from memory.) So
	// each process is sent checks until one is answered from PostgreSQL.
	// b's refused meanwhile count nothing, so that one finds b's day at 12;
	// a's degraded are charged, so a's day ends at 12 and those.
	var ans checkAnswer
	eventually(t, func() bool {
		var r response
		r, ans = open.check(`{"customer":"a","metric":"api_calls"}`)
		if ans.Degraded {
			degraded++
		}
		return r.Status == http.StatusOK && !ans.Degraded
	}, "a check of a answered from PostgreSQL again")
	eventually(t, func() bool { return open.usageOf("a")["day"] == 12+degraded },
		fmt.Sprintf("a's day to count 12 units and the %d admitted degraded", degraded))
	eventually(t, func() bool {
		var r response
		r, ans = closed.check(`{"customer":"b","metric":"api_calls"}`)
		return r.Status == http.StatusOK
	}, "a check of b answered from PostgreSQL again")
	if !ans.Allowed || len(ans.Limits) != 1 || ans.Limits[0].Used != 12 {
		t.Errorf("after recovery, b: %+v, want allowed, used 12 (the checks refused are not counted)", ans)
	}
}

// rawDay reads a customer's day counter as stored: units admitted, and
// units held in leases.
func rawDay(t testing.TB, schema *dbtest.Schema, customer string) int64 {
	t.Helper()
	return mustQueryOne[int64](t, schema, `
		SELECT coalesce(sum(used), 0)::bigint FROM usage_counters WHERE customer_id = $1 AND quota_window = 'day'`, customer)
}

// mustQueryOne reads the one value a query of schema answers, failing the
// test on an error.
func mustQueryOne[T any](t testing.TB, schema *dbtest.Schema, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := schema.Pool.QueryRow(t.Context(), sql, args...).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// On a graceful shutdown a process gives back the units it holds: the
// counter is left with the units admitted.
func TestLeasesGivenBackOnShutdown(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	s := MustStartServer(t, schema, nil)
	// A day limit of 1000 leases blocks of 10.
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"day","limit":1000}]`, "acme")
	for range 3 {
		if _, ans := s.check(`{"customer":"acme","metric":"api_calls"}`); !ans.Allowed {
			t.Fatal("denied")
		}
	}
	// The first check reserved its unit and a block of 10; two came from it.
	if got := rawDay(t, schema, "acme"); got != 3+8 {
		t.Fatalf("counter = %d with a lease held, want 3 admitted + 8 held", got)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if got := rawDay(t, schema, "acme"); got != 3 {
		t.Errorf("counter = %d after a graceful shutdown, want the 3 admitted", got)
	}
}
