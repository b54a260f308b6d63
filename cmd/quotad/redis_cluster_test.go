package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/redistest"
)

// checkBound bounds how long any check of TestRedisClusterNodeDown may
// take. The processes wait up to 10 s for Redis (QUOTAD_REDIS_TIMEOUT), so
// a check that waited on a dead node runs past it; a bound, not a measure.
const checkBound = 5 * time.Second

// tally is what the checks of one customer got.
type tally struct{ allowed, denied, degraded int }

// burst sends n cost-1 checks of each customer, all at once, taking the
// servers in turn, and returns what each customer got. A check that fails,
// or does not answer within checkBound, fails the test.
func burst(t *testing.T, servers []*testServer, n int, customers ...string) map[string]tally {
	t.Helper()
	type job struct {
		customer string
		i        int
	}
	jobs := make(chan job, n*len(customers))
	for i := range n {
		for _, c := range customers {
			jobs <- job{c, i}
		}
	}
	close(jobs)
	var mu sync.Mutex
	got := map[string]tally{}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for j := range jobs {
				status, degraded, err := checkWithin(servers[j.i%len(servers)], j.customer, false)
				mu.Lock()
				tl := got[j.customer]
				switch {
				case err != nil:
					t.Errorf("check of %s: %v", j.customer, err)
				case status == http.StatusOK:
					tl.allowed++
				case status == http.StatusTooManyRequests:
					tl.denied++
				default:
					t.Errorf("check of %s: status %d", j.customer, status)
				}
				if degraded {
					tl.degraded++
				}
				got[j.customer] = tl
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return got
}

// checkWithin sends one check of customer (a dry run if dry) to s and
// returns its status and whether it was degraded; it fails if s does not
// answer within checkBound.
func checkWithin(s *testServer, customer string, dry bool) (status int, degraded bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), checkBound)
	defer cancel()
	body := fmt.Sprintf(`{"customer":%q,"metric":"api_calls","dry_run":%t}`, customer, dry)
	req, err := http.NewRequestWithContext(ctx, "POST", s.URL+"/v1/check", strings.NewReader(body))
	if err != nil {
		return 0, false, err
	}
	req.Header.Set("Authorization", "Bearer "+checkToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false, err
	}
	var a struct {
		Degraded bool `json:"degraded"`
	}
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusTooManyRequests {
		if err := json.Unmarshal(b, &a); err != nil {
			return 0, false, fmt.Errorf("%w: %s", err, b)
		}
	}
	return resp.StatusCode, a.Degraded, nil
}

// metric returns the value of one series of s's /metrics (its name and
// labels as written there).
func (s *testServer) metric(series string) string {
	s.t.Helper()
	body := string(s.mustDo(http.StatusOK, "GET", "/metrics", "").Body)
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	s.t.Fatalf("/metrics has no %s:\n%s", series, body)
	return ""
}

// logLines counts the lines of s's log whose message begins with msg.
func (s *testServer) logLines(msg string) int {
	return strings.Count(s.logs.String(), `"msg":"`+msg)
}

// Log messages of the changes of short-window mode (see run).
const (
	logRedisDown = "Redis cannot be reached ("
	logRedisBack = "short windows are shared in Redis again"
)

// A Redis Cluster of three masters shared by two processes, each given
// one node's URL or two: with one master killed, every check of customers
// whose keys live on the other two is still counted in Redis, exactly,
// never degraded, before the cluster notices and once it agrees the node
// failed; the checks of customers whose keys live on the dead master are
// counted in each process (degraded) and answered at once. The processes
// log the change once, and /metrics counts the slots down. Once the node
// is back, those customers go back to Redis by themselves.
func TestRedisClusterNodeDown(t *testing.T) {
	t.Parallel()
	const (
		dead  = 0  // the master killed, the only node one process was given
		limit = 20 // a minute's sliding log: exact whatever the timing
		n     = 60 // checks of each customer in a burst
	)
	cluster := redistest.StartCluster(t, 3)
	schema := dbtest.New(t)
	urls := []string{cluster.URL(),
		fmt.Sprintf("redis://127.0.0.1:%d?addr=127.0.0.1:%d", cluster.Node(1).Port(), cluster.Node(2).Port())}
	servers := make([]*testServer, len(urls))
	for i, u := range urls {
		servers[i] = MustStartServer(t, schema, map[string]string{"QUOTAD_REDIS_URL": u, "QUOTAD_REDIS_TIMEOUT": "10s"})
	}

	// Each phase checks fresh customers, one whose keys live on each node
	// ({api_calls/<customer>}: see redisstore).
	phases := []string{"up", "killed", "failed", "back"}
	onNode := map[string][]string{}
	var all []string
	for i := 0; len(all) < len(phases)*cluster.Nodes(); i++ {
		customer := fmt.Sprintf("cust%d", i)
		node := cluster.NodeOf("{api_calls/" + customer + "}")
		for _, p := range phases {
			if onNode[p] == nil {
				onNode[p] = make([]string, cluster.Nodes())
			}
			if onNode[p][node] == "" {
				onNode[p][node] = customer
				all = append(all, customer)
				break
			}
		}
	}
	MustSeed(t, servers[0], "", fmt.Sprintf(`[{"metric":"api_calls","window":"minute","limit":%d,"algorithm":"sliding_log"}]`, limit), all...)

	// shared: the customers' checks are counted in Redis, once for both
	// processes. inProcess: counted by each process alone, degraded.
	shared := tally{allowed: limit, denied: n - limit}
	inProcess := tally{allowed: len(servers) * limit, denied: n - len(servers)*limit, degraded: n}
	run := func(phase string, deadCounted tally) {
		t.Helper()
		got := burst(t, servers, n, onNode[phase]...)
		for node, customer := range onNode[phase] {
			want := shared
			if node == dead {
				want = deadCounted
			}
			if got[customer] != want {
				t.Errorf("%s: %s, keys on node %d: %+v, want %+v", phase, customer, node, got[customer], want)
			}
		}
	}
	mode := func(phase, want string, shardsDown int) {
		t.Helper()
		for i, s := range servers {
			if got := s.metric(`quotad_short_window_mode{mode="` + want + `"}`); got != "1" {
				t.Errorf("%s: process %d: mode %s at %s, want 1", phase, i, want, got)
			}
			if got := s.metric("quotad_redis_shards_down"); got != fmt.Sprint(shardsDown) {
				t.Errorf("%s: process %d: %s shards down, want %d", phase, i, got, shardsDown)
			}
		}
	}
	logged := func(phase string, down, back int) {
		t.Helper()
		for i, s := range servers {
			if d, b := s.logLines(logRedisDown), s.logLines(logRedisBack); d != down || b != back {
				t.Errorf("%s: process %d logged %d × %q and %d × %q, want %d and %d", phase, i, d, logRedisDown, b, logRedisBack, down, back)
			}
		}
	}

	run("up", shared)
	for node, customer := range onNode["up"] {
		c := cluster.Node(node).Client()
		keys, err := c.Do(context.Background(), c.B().Keys().Pattern("quotad:{api_calls/"+customer+"}*").Build()).AsStrSlice()
		if err != nil || len(keys) == 0 {
			t.Errorf("node %d holds no key of %s: %q, %v", node, customer, keys, err)
		}
	}
	mode("up", "shared", 0)
	logged("up", 0, 0)

	cluster.Node(dead).Stop()
	run("killed", inProcess)
	// The slots down are those of the dead node's customers checked so
	// far; a dry run of each keeps them down (tried again, failing).
	slotsDown := map[int]bool{}
	probe := func(phase string, wantDegraded bool, customers ...string) bool {
		t.Helper()
		ok := true
		for _, s := range servers {
			for _, c := range customers {
				status, degraded, err := checkWithin(s, c, true)
				if err != nil || status != http.StatusOK && status != http.StatusTooManyRequests {
					t.Fatalf("%s: dry run of %s: %d, %v", phase, c, status, err)
				}
				ok = ok && degraded == wantDegraded
			}
		}
		return ok
	}
	slotsDown[cluster.Slot("{api_calls/"+onNode["killed"][dead]+"}")] = true
	mode("killed", "fallback", len(slotsDown))
	logged("killed", 1, 0)

	cluster.WaitFailed(dead)
	run("failed", inProcess)
	slotsDown[cluster.Slot("{api_calls/"+onNode["failed"][dead]+"}")] = true
	deadCustomers := []string{onNode["killed"][dead], onNode["failed"][dead]}
	if !probe("failed", true, deadCustomers...) {
		t.Errorf("failed: a dry run of a customer of the dead node was not degraded")
	}
	mode("failed", "fallback", len(slotsDown))
	logged("failed", 1, 0)

	cluster.Node(dead).Start()
	cluster.WaitHealthy()
	deadline := time.Now().Add(time.Minute)
	for !probe("back", false, deadCustomers...) {
		if time.Now().After(deadline) {
			t.Fatalf("the dead node's customers still degraded a minute after it came back")
		}
		<-time.After(50 * time.Millisecond) // polling: a slot down is tried again once a second
	}
	mode("back", "shared", 0)
	logged("back", 1, 1)
	run("back", shared)
}

// Two processes given the same node of a Redis Cluster of three masters
// share the short windows of 50 customers whose keys spread over every
// node: a burst of twice the limit per customer, taking the processes in
// turn, admits exactly the limit of each, every check decided in Redis.
func TestRedisClusterSharedLimits(t *testing.T) {
	t.Parallel()
	const (
		customers = 50
		limit     = 10 // a minute's sliding log: exact whatever the timing
		n         = 2 * limit
	)
	cluster := redistest.StartCluster(t, 3)
	schema := dbtest.New(t)
	servers := make([]*testServer, 2)
	for i := range servers {
		servers[i] = MustStartServer(t, schema, map[string]string{"QUOTAD_REDIS_URL": cluster.URL(), "QUOTAD_REDIS_TIMEOUT": "10s"})
	}
	ids := make([]string, customers)
	onNode := make([]int, cluster.Nodes())
	for i := range ids {
		ids[i] = fmt.Sprintf("spread%d", i)
		onNode[cluster.NodeOf("{api_calls/"+ids[i]+"}")]++
	}
	for node, k := range onNode {
		if k == 0 {
			t.Fatalf("no customer's keys on node %d (%v): the test would not spread over the cluster", node, onNode)
		}
	}
	MustSeed(t, servers[0], "", fmt.Sprintf(`[{"metric":"api_calls","window":"minute","limit":%d,"algorithm":"sliding_log"}]`, limit), ids...)
	got := burst(t, servers, n, ids...)
	want := tally{allowed: limit, denied: n - limit}
	for _, c := range ids {
		if got[c] != want {
			t.Errorf("%s (keys on node %d): %+v, want %+v", c, cluster.NodeOf("{api_calls/"+c+"}"), got[c], want)
		}
	}
}
