package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/redistest"
)

// redisEnv returns the settings of quotad processes sharing short windows
// in the test Redis, under a key prefix of the test's.
func redisEnv(t *testing.T) map[string]string {
	return map[string]string{"QUOTAD_REDIS_URL": redistest.ServerURL(t), "QUOTAD_REDIS_PREFIX": redistest.Prefix(t)}
}

// A burst over 2 and 4 processes on one Redis admits what one process
// would: 400 checks at a minute limit of 100 admit exactly 100. (The
// sliding log is exact whatever the clock, so real time cannot make the
// burst straddle anything; every algorithm and both short windows are
// tested over a manual clock in internal/redisstore.) Without Redis each
// process admits up to 100.
func TestRedisBurstAcrossProcesses(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("%d processes", n), func(t *testing.T) {
			t.Parallel()
			servers := MustStartServers(t, n, redisEnv(t))
			MustSeed(t, servers[0], "", `[{"metric":"api_calls","window":"minute","limit":100,"algorithm":"sliding_log"}]`, "acme")
			got, _ := checkAll(t, servers, 32, 400, "acme")
			if got[200] != 100 || got[429] != 300 {
				t.Errorf("statuses = %v, want exactly 100 × 200 and 300 × 429", got)
			}
			for i, s := range servers {
				if _, a := s.check(`{"customer":"acme","metric":"api_calls","dry_run":true}`); a.Limits[0].Used != 100 {
					t.Errorf("process %d reads minute usage %d, want 100", i, a.Limits[0].Used)
				}
			}
		})
	}
}

// The short windows in Redis are all or nothing with the long ones, and
// every process sees the same counts: a day limit that denies gives the
// minute's units back; dry runs count nothing; a refund at one process,
// a reset, and the customer's deletion at another reach them all.
func TestRedisSharedOperations(t *testing.T) {
	t.Parallel()
	env := redisEnv(t)
	servers := MustStartServers(t, 2, env)
	a, b := servers[0], servers[1]
	MustSeed(t, a, "", `[{"metric":"api_calls","window":"minute","limit":100,"algorithm":"sliding_log"},
		{"metric":"api_calls","window":"day","limit":5}]`, "acme")
	used := func(s *testServer) int64 { return s.usageOf("acme")["minute"] }
	check := func(i int) response {
		r, _ := []*testServer{a, b}[i%2].check(`{"customer":"acme","metric":"api_calls"}`)
		return r
	}
	for i := range 3 {
		if r := check(i); r.Status != 200 {
			t.Fatalf("check %d: %d %s, want 200", i+1, r.Status, r.Body)
		}
	}
	for range 3 {
		if r, ans := b.check(`{"customer":"acme","metric":"api_calls","dry_run":true}`); r.Status != 200 || ans.Limits[0].Used != 4 {
			t.Errorf("dry run: %d %s, want allowed, the minute at 4 had it counted", r.Status, r.Body)
		}
	}
	if ua := used(a); ua != 3 {
		t.Errorf("minute used after 3 checks and 3 dry runs: %d, want 3", ua)
	}
	for i := 3; i < 8; i++ {
		if r, want := check(i), map[bool]int{true: 200, false: 429}[i < 5]; r.Status != want {
			t.Fatalf("check %d: %d %s, want %d", i+1, r.Status, r.Body, want)
		}
	}
	if ua, ub := used(a), used(b); ua != 5 || ub != 5 {
		t.Errorf("minute used at the two processes: %d, %d; want 5 and 5 (the day denied 3, whose units went back)", ua, ub)
	}
	b.mustDo(http.StatusOK, "POST", "/v1/refund", `{"customer":"acme","metric":"api_calls","cost":2}`, "Authorization", "Bearer "+checkToken)
	if ua := used(a); ua != 3 {
		t.Errorf("minute used after a refund of 2 at the other process: %d, want 3", ua)
	}
	a.mustDo(http.StatusNoContent, "DELETE", "/v1/customers/acme/usage/api_calls", "")
	if ub := used(b); ub != 0 {
		t.Errorf("minute used at the other process after a reset: %d, want 0", ub)
	}

	// A deleted customer's keys go; one made again with its id starts from 0.
	a.check(`{"customer":"acme","metric":"api_calls"}`)
	prefix := env["QUOTAD_REDIS_PREFIX"]
	keys := func() []string {
		t.Helper()
		c := redistest.Client(t)
		ks, err := c.Do(context.Background(), c.B().Keys().Pattern(prefix+"*acme*").Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		return ks
	}
	if ks := keys(); len(ks) == 0 {
		t.Fatalf("no Redis keys of acme under %q after a check", prefix)
	}
	a.mustDo(http.StatusNoContent, "DELETE", "/v1/customers/acme", "")
	eventually(t, func() bool { return len(keys()) == 0 }, "the deleted customer's Redis keys to go")
	b.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme", `{"plan":"limited"}`)
	if ub := used(b); ub != 0 {
		t.Errorf("minute used by a customer made again with a deleted one's id: %d, want 0", ub)
	}
}

// Redis stopped in the middle of a load: no check fails, answers are
// degraded (short windows counted in process) while it is gone, /readyz
// stays 200 and /metrics says which mode each process is in; once Redis
// is back, each process goes back to it by itself.
func TestRedisOutage(t *testing.T) {
	t.Parallel()
	redis := redistest.StartServer(t)
	schema := dbtest.New(t)
	// A stopped Redis refuses connections at once: the outage needs no
	// short Redis timeout, and the test servers' long one keeps a slow
	// answer on a busy machine from passing for an outage before it.
	env := map[string]string{"QUOTAD_REDIS_URL": redis.URL()}
	servers := []*testServer{MustStartServer(t, schema, env), MustStartServer(t, schema, env)}
	MustSeed(t, servers[0], "", `[{"metric":"api_calls","window":"second","limit":1000000}]`, "acme")

	var (
		stop       atomic.Bool
		checks     atomic.Int64
		degraded   atomic.Int64
		mu         sync.Mutex
		unexpected []string
		wg         sync.WaitGroup
	)
	for w := range 8 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				r, err := servers[(w+i)%2].send("POST", "/v1/check", `{"customer":"acme","metric":"api_calls"}`, "Authorization", "Bearer "+checkToken)
				checks.Add(1)
				switch {
				case err != nil:
					mu.Lock()
					unexpected = append(unexpected, err.Error())
					mu.Unlock()
				case r.Status != http.StatusOK:
					mu.Lock()
					unexpected = append(unexpected, fmt.Sprintf("%d %s", r.Status, r.Body))
					mu.Unlock()
				case strings.Contains(string(r.Body), `"degraded":true`):
					degraded.Add(1)
				}
			}
		})
	}
	mode := func(s *testServer) string {
		t.Helper()
		body := string(s.mustDo(http.StatusOK, "GET", "/metrics", "").Body)
		for _, m := range []string{"shared", "fallback", "local"} {
			if strings.Contains(body, `quotad_short_window_mode{mode="`+m+`"} 1`) {
				return m
			}
		}
		t.Fatalf("/metrics has no quotad_short_window_mode at 1:\n%s", body)
		return ""
	}
	eventually(t, func() bool { return checks.Load() > 200 }, "checks under way")
	for i, s := range servers {
		if m := mode(s); m != "shared" {
			t.Errorf("process %d in mode %q before the outage, want shared", i, m)
		}
	}
	if degraded.Load() != 0 {
		t.Errorf("%d degraded answers before the outage", degraded.Load())
	}

	redis.Stop()
	eventually(t, func() bool { return degraded.Load() > 100 }, "degraded answers while Redis is down")
	for i, s := range servers {
		if m := mode(s); m != "fallback" {
			t.Errorf("process %d in mode %q while Redis is down, want fallback", i, m)
		}
		if n := s.metric("quotad_redis_shards_down"); n != "1" {
			t.Errorf("process %d: %s shards of Redis down while it is, want 1 (a single Redis)", i, n)
		}
		s.mustDo(http.StatusOK, "GET", "/readyz", "")
	}

	redis.Start()
	eventually(t, func() bool { return mode(servers[0]) == "shared" && mode(servers[1]) == "shared" },
		"both processes back on Redis")
	for i, s := range servers {
		if _, a := s.check(`{"customer":"acme","metric":"api_calls"}`); a.Degraded {
			t.Errorf("process %d still degraded after Redis came back", i)
		}
		if n := s.metric("quotad_redis_shards_down"); n != "0" {
			t.Errorf("process %d: %s shards of Redis down after it came back, want 0", i, n)
		}
		if d, b := s.logLines(logRedisDown), s.logLines(logRedisBack); d != 1 || b != 1 {
			t.Errorf("process %d logged %d × %q and %d × %q, want one each", i, d, logRedisDown, b, logRedisBack)
		}
		s.assertOutageLogged(t, "redis")
	}
	stop.Store(true)
	wg.Wait()
	if len(unexpected) > 0 {
		t.Errorf("%d checks failed during the outage (want none); first: %s", len(unexpected), unexpected[0])
	}
}
