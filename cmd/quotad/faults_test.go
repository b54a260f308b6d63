package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	neturl "net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/faulttest"
)

// These tests put a fault injector (see faulttest) between quotad and
// PostgreSQL: connections reset while grants are in flight, a server that
// goes silent, a slow one. They load the machine (several processes, dozens of clients), so they do not
// run in parallel with the package's other tests, whose timing they would
// disturb: Go runs them first, one at a time.

// throughProxy returns PostgreSQL URL u with its host replaced by addr.
func throughProxy(t testing.TB, u, addr string) string {
	t.Helper()
	parsed, err := neturl.Parse(u)
	if err != nil || parsed.Host == "" {
		t.Fatalf("the fault tests need the test database as a URL, got %q", u)
	}
	parsed.Host = addr
	return parsed.String()
}

// hostOf returns the host:port of PostgreSQL URL u.
func hostOf(t testing.TB, u string) string {
	t.Helper()
	parsed, err := neturl.Parse(u)
	if err != nil || parsed.Host == "" {
		t.Fatalf("the fault tests need the test database as a URL, got %q", u)
	}
	if parsed.Port() == "" {
		return parsed.Host + ":5432"
	}
	return parsed.Host
}

// MustStartProxied starts n quotad processes on a fresh schema, each
// reaching PostgreSQL through one fault proxy, with env on top.
func MustStartProxied(t testing.TB, n int, env map[string]string) (*dbtest.Schema, *faulttest.Proxy, []*testServer) {
	t.Helper()
	schema := dbtest.New(t)
	proxy := faulttest.Start(t, hostOf(t, schema.URL))
	vars := map[string]string{"QUOTAD_DATABASE_URL": throughProxy(t, schema.URL, proxy.Addr())}
	for k, v := range env {
		vars[k] = v
	}
	servers := make([]*testServer, n)
	for i := range servers {
		servers[i] = MustStartServer(t, schema, vars)
	}
	return schema, proxy, servers
}

// metricValue returns the value of one series of s's /metrics as a
// number (see metric).
func (s *testServer) metricValue(series string) float64 {
	s.t.Helper()
	v, err := strconv.ParseFloat(s.metric(series), 64)
	if err != nil {
		s.t.Fatalf("metric %s: %v", series, err)
	}
	return v
}

// runTally counts the answers of a run of checks.
type runTally struct {
	mu       sync.Mutex
	statuses map[int]int
	admitted int // 200 and not degraded: counted in the store
	degraded int // 200 degraded: admitted without the store
	slowest  time.Duration
}

func (tl *runTally) String() string {
	return fmt.Sprintf("statuses %v, %d admitted from the store, %d degraded, slowest answer %s",
		tl.statuses, tl.admitted, tl.degraded, tl.slowest.Round(time.Millisecond))
}

// runChecks sends count cost-1 checks of customer from workers goroutines,
// taking the servers in turn. Before each check, each worker calls
// between(i) with the check's number (nil: nothing), so that a test can
// change the network as the run goes.
func runChecks(t *testing.T, servers []*testServer, workers, count int, customer string, between func(i int)) *runTally {
	t.Helper()
	tl := &runTally{statuses: map[int]int{}}
	var next atomic.Int64
	var wg sync.WaitGroup
	body := `{"customer":"` + customer + `","metric":"api_calls","cost":1}`
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= count {
					return
				}
				if between != nil {
					between(i)
				}
				start := time.Now()
				r, err := servers[i%len(servers)].send("POST", "/v1/check", body, "Authorization", "Bearer "+checkToken)
				took := time.Since(start)
				if err != nil {
					t.Error(err)
					return
				}
				var a struct {
					Degraded bool `json:"degraded"`
				}
				if r.Status == http.StatusOK {
					if err := json.Unmarshal(r.Body, &a); err != nil {
						t.Error(err)
					}
				}
				tl.mu.Lock()
				tl.statuses[r.Status]++
				tl.slowest = max(tl.slowest, took)
				switch {
				case r.Status == http.StatusOK && a.Degraded:
					tl.degraded++
				case r.Status == http.StatusOK:
					tl.admitted++
				}
				tl.mu.Unlock()
			}
		})
	}
	wg.Wait()
	return tl
}

// Connections to PostgreSQL reset again and again while four processes
// take grants, 4000 checks from 32 clients at a hard day limit of 1000:
// no unit is lost with an answer. Once the network is sound and traffic
// stops, every process reads exactly the units its answers admitted (a
// degraded answer admits without the store, and is charged once the store
// answers), and once they stop, the counter holds exactly those units.
// Never more than the limit is admitted from the store.
func TestFaultResetsDuringGrants(t *testing.T) {
	for _, policy := range []string{"open", "closed"} {
		t.Run(policy, func(t *testing.T) {
			schema, proxy, servers := MustStartProxied(t, 4, map[string]string{
				"QUOTAD_STORE_FAILURE": policy,
				// Resets fail calls at once; the store timeout is for a
				// busy machine, not for this test's faults.
				"QUOTAD_STORE_TIMEOUT": "2s",
			})
			MustSeed(t, servers[0], "", `[{"metric":"api_calls","window":"day","limit":1000}]`, "acme")
			// Connections are reset for 60 checks out of every 200 sent,
			// whatever the machine's speed: 20 times in the run.
			const count, period, broken = 4000, 200, 60
			var faults atomic.Int64
			tl := runChecks(t, servers, 32, count, "acme", func(i int) {
				switch i % period {
				case 0:
					proxy.Reset()
					faults.Add(1)
				case broken:
					proxy.Clear()
				}
			})
			proxy.Clear()
			t.Logf("%s, resets %d times: %s", policy, faults.Load(), tl)
			if tl.admitted > 1000 {
				t.Fatalf("%d units admitted at a hard limit of 1000", tl.admitted)
			}
			if tl.statuses[http.StatusOK]+tl.statuses[http.StatusTooManyRequests]+tl.statuses[http.StatusServiceUnavailable] != count {
				t.Errorf("statuses %v: want only 200, 429 and 503", tl.statuses)
			}
			// Every process reports what it holds, and resolves what it
			// doubts, within a flush interval of quiet.
			all := int64(tl.admitted + tl.degraded)
			var used int64 // the last read, said if the wait fails
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("the day's usage read last: %d", used)
				}
			})
			for _, s := range servers {
				eventually(t, func() bool { used = s.usageOf("acme")["day"]; return used == all },
					fmt.Sprintf("the day's usage to be the %d units admitted (%d degraded)", all, tl.degraded))
			}
			for _, s := range servers {
				if err := s.stop(); err != nil {
					t.Fatal(err)
				}
			}
			if raw := rawDay(t, schema, "acme"); raw != all {
				t.Errorf("every process stopped: the counter holds %d units, want the %d admitted", raw, all)
			}
		})
	}
}

// PostgreSQL goes silent (every byte dropped, nothing closed): every check
// is answered once quotad judges it silent (the proxy acknowledges what it
// drops: within a second), well before the request timeout, whether
// another check's grant is stuck or its customer is not cached; checks a
// held block covers are
// admitted, not degraded; the others follow the failure policy; readiness
// says 503, an admin write answers 503 within the request timeout; and
// once PostgreSQL answers again, so does quotad, by itself.
func TestFaultSilentDatabase(t *testing.T) {
	const storeTimeout, requestTimeout = 250 * time.Millisecond, 5 * time.Second
	// A bound on each answer's wait: the second silence takes to judge,
	// and a busy machine's slack, below the request timeout that a check
	// waits for a PostgreSQL judged alive. A check stuck behind the silent
	// server would wait until the test's end.
	const judged, slack = time.Second, 1500 * time.Millisecond
	for _, policy := range []string{"open", "closed"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			_, proxy, servers := MustStartProxied(t, 1, map[string]string{
				"QUOTAD_STORE_FAILURE":   policy,
				"QUOTAD_STORE_TIMEOUT":   storeTimeout.String(),
				"QUOTAD_REQUEST_TIMEOUT": requestTimeout.String(),
			})
			s := servers[0]
			MustSeed(t, s, "", `[{"metric":"api_calls","window":"day","limit":1000}]`, "warm", "cold")
			// warm's first check leases 11 units: 1 for it, a block of 10.
			// A busy machine can hold it past the short store timeout:
			// answered degraded or refused, it counts nothing, and is sent
			// again.
			eventually(t, func() bool {
				_, a := s.check(`{"customer":"warm","metric":"api_calls"}`)
				return a.Allowed && !a.Degraded
			}, "warm's first check to be admitted from PostgreSQL")
			proxy.BlackHole()
			// 30 checks of warm from 8 clients at once: 10 from the block,
			// 20 that need a grant the silent server will never give.
			tl := runChecks(t, servers, 8, 30, "warm", nil)
			t.Logf("%s, warm: %s", policy, tl)
			if tl.admitted != 10 {
				t.Errorf("%d checks admitted from the held block, want its 10", tl.admitted)
			}
			wantOthers := map[string]int{"open": tl.degraded, "closed": tl.statuses[http.StatusServiceUnavailable]}[policy]
			if wantOthers != 20 {
				t.Errorf("%s: %s; want the 20 checks beyond the block to follow the policy", policy, tl)
			}
			if tl.slowest > judged+slack {
				t.Errorf("an answer took %s, want at most the second silence takes to judge, and slack", tl.slowest)
			}
			// A customer never cached: the lookup itself waits, no longer.
			cold := runChecks(t, servers, 4, 8, "cold", nil)
			t.Logf("%s, cold: %s", policy, cold)
			if n := map[string]int{"open": cold.degraded, "closed": cold.statuses[http.StatusServiceUnavailable]}[policy]; n != 8 || cold.slowest > judged+slack {
				t.Errorf("%s, cold customer: %s; want all 8 following the policy once PostgreSQL is judged silent", policy, cold)
			}
			start := time.Now()
			if r := s.do("PUT", "/v1/customers/new", `{"plan":"limited"}`, "Authorization", "Bearer "+adminToken); r.Status != http.StatusServiceUnavailable {
				t.Errorf("an admin write to a silent database: %d %s, want 503", r.Status, r.Body)
			}
			// Bounded by the request timeout, not left to hang: twice it
			// leaves room for a busy machine's scheduling (seen at 6.8 s
			// with load 10 on 2 cores) and still tells a bounded wait from
			// none.
			if took := time.Since(start); took > 2*requestTimeout {
				t.Errorf("the admin write answered after %s, want at most twice the request timeout (%s)", took, requestTimeout)
			}
			if r := s.do("GET", "/readyz", ""); r.Status != http.StatusServiceUnavailable {
				t.Errorf("/readyz: %d, want 503 while checks cannot reach the database", r.Status)
			}
			proxy.Clear()
			eventually(t, func() bool {
				r, a := s.check(`{"customer":"cold","metric":"api_calls"}`)
				return r.Status == http.StatusOK && !a.Degraded
			}, "checks to reach PostgreSQL again")
			eventually(t, func() bool { return s.do("GET", "/readyz", "").Status == http.StatusOK }, "/readyz to say ready")
		})
	}
}

// A counter is exhausted and no process holds units of it: with 200 ms
// added to every PostgreSQL round trip, 200 checks from 8 clients through
// two processes are denied from memory, without a single round trip.
func TestFaultSlowDatabaseDeniesFromMemory(t *testing.T) {
	_, proxy, servers := MustStartProxied(t, 2, nil)
	MustSeed(t, servers[0], "", `[{"metric":"api_calls","window":"day","limit":20}]`, "acme")
	if got, _ := checkAll(t, servers, 4, 40, "acme"); got[200] != 20 || got[429] != 20 {
		t.Fatalf("statuses %v, want 20 admitted and 20 denied", got)
	}
	// Each process, once refused with nothing to recall, denies from
	// memory.
	for _, s := range servers {
		eventually(t, func() bool {
			s.check(`{"customer":"acme","metric":"api_calls"}`)
			return s.metricValue("quotad_lease_denied_from_memory_total") > 0
		}, "the process to deny from memory")
	}
	type counts struct{ fromMemory, trips float64 }
	read := func() (c []counts) {
		for _, s := range servers {
			c = append(c, counts{s.metricValue("quotad_lease_denied_from_memory_total"), s.metricValue("quotad_check_store_round_trips_sum")})
		}
		return c
	}
	before := read()
	proxy.Latency(200 * time.Millisecond)
	tl := runChecks(t, servers, 8, 200, "acme", nil)
	t.Logf("with 200 ms of latency: %s", tl)
	if tl.statuses[http.StatusTooManyRequests] != 200 {
		t.Errorf("statuses %v, want 200 denials", tl.statuses)
	}
	after := read()
	var fromMemory, trips float64
	for i := range servers {
		fromMemory += after[i].fromMemory - before[i].fromMemory
		trips += after[i].trips - before[i].trips
	}
	if fromMemory != 200 || trips != 0 {
		t.Errorf("%v denials from memory and %v store round trips for 200 checks, want 200 and 0", fromMemory, trips)
	}
}
