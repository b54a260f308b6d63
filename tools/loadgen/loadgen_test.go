package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestTemplateExpansion(t *testing.T) {
	tmpl, err := parseTemplate(`{"customer":"c{{key}}","again":{{key}},"request_id":"r1-{{seq}}"}`)
	if err != nil {
		t.Fatal(err)
	}
	got := string(tmpl.expand(nil, 42, 3, 17))
	want := `{"customer":"c42","again":42,"request_id":"r1-3-17"}`
	if got != want {
		t.Errorf("expand = %s, want %s", got, want)
	}
	tmpl, err = parseTemplate(`{"customer":"c{{key/100}}","subject":"u{{key}}"}`)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[int]string{
		0:     `{"customer":"c0","subject":"u0"}`,
		99:    `{"customer":"c0","subject":"u99"}`,
		100:   `{"customer":"c1","subject":"u100"}`,
		54321: `{"customer":"c543","subject":"u54321"}`,
	} {
		if got := string(tmpl.expand(nil, key, 0, 0)); got != want {
			t.Errorf("expand key %d = %s, want %s", key, got, want)
		}
	}
	for _, s := range []string{"", "plain", "{}", "{ {key}}", "}}"} {
		tmpl, err := parseTemplate(s)
		if err != nil {
			t.Errorf("parseTemplate(%q): %v", s, err)
			continue
		}
		if got := string(tmpl.expand(nil, 1, 1, 1)); got != s {
			t.Errorf("expand(%q) = %q, want it unchanged", s, got)
		}
	}
	for _, bad := range []string{"{{keys}}", "{{ key }}", `{"a":"{{`, "{{seq}", "{{key/0}}", "{{key/-2}}", "{{key/x}}", "{{key/}}"} {
		if _, err := parseTemplate(bad); err == nil {
			t.Errorf("parseTemplate(%q) succeeded, want an error", bad)
		}
	}
}

// TestKeyRange draws keys as the workers do: every one in [0, keys), every
// value drawn, none far from its share.
func TestKeyRange(t *testing.T) {
	tmpl, _ := parseTemplate(`{{key}}`)
	const keys, draws = 7, 70000
	p := &plan{keys: keys, body: tmpl, seed: 9, keyed: true}
	counts := make([]int, keys)
	for i := range 2 {
		w := p.newWorker(i, &target{})
		for range draws / 2 {
			k, ok := w.nextKey(nil)
			if !ok || k < 0 || k >= keys {
				t.Fatalf("nextKey = %d, %t; want a key in [0, %d)", k, ok, keys)
			}
			counts[k]++
		}
	}
	for k, n := range counts {
		if share := float64(n) / (draws / keys); share < 0.9 || share > 1.1 {
			t.Errorf("key %d drawn %d times, %.2f of its share", k, n, share)
		}
	}
}

// TestZipfKeys draws keys as the workers of -zipf 1.1 do, seeded, and
// compares their spread with Zipf's law, P(k) = (k+1)^-1.1 / H over
// [0, keys): a chi-squared test over buckets from key 0 alone to the
// last 700 keys.
func TestZipfKeys(t *testing.T) {
	const keys, draws, s = 1000, 200000, 1.1
	p, _, err := parseFlags([]string{"-url", "http://127.0.0.1:1/", "-keys", fmt.Sprint(keys), "-zipf", fmt.Sprint(s),
		"-seed", "1", "-body", `{{key}}`}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, keys)
	for i := range 4 {
		w := p.newWorker(i, p.targets[0])
		for range draws / 4 {
			k, ok := w.nextKey(nil)
			if !ok || k < 0 || k >= keys {
				t.Fatalf("nextKey = %d, %t; want a key in [0, %d)", k, ok, keys)
			}
			counts[k]++
		}
	}
	weight := make([]float64, keys)
	var h float64
	for k := range weight {
		weight[k] = math.Pow(float64(k+1), -s)
		h += weight[k]
	}
	bounds := []int{0, 1, 2, 3, 4, 5, 10, 30, 100, 300, keys}
	var chi2 float64
	for i := range len(bounds) - 1 {
		var got int
		var p float64
		for k := bounds[i]; k < bounds[i+1]; k++ {
			got += counts[k]
			p += weight[k] / h
		}
		want := p * draws
		chi2 += (float64(got) - want) * (float64(got) - want) / want
		t.Logf("keys [%d, %d): %d drawn, %.0f expected", bounds[i], bounds[i+1], got, want)
	}
	// 9 degrees of freedom: chi-squared exceeds 27.88 with probability 0.001.
	if chi2 > 27.88 {
		t.Errorf("chi-squared %.1f over %d buckets: the draws do not follow Zipf(%v)", chi2, len(bounds)-1, s)
	}
	if counts[0] <= counts[1] || counts[1] <= counts[9] || counts[9] <= counts[999] {
		t.Errorf("counts of keys 0, 1, 9, 999: %d, %d, %d, %d; want them decreasing", counts[0], counts[1], counts[9], counts[999])
	}
	// Seeded: the same seed draws the same keys.
	a, b := p.newWorker(0, p.targets[0]), p.newWorker(0, p.targets[0])
	for range 100 {
		ka, _ := a.nextKey(nil)
		kb, _ := b.nextKey(nil)
		if ka != kb {
			t.Fatalf("two workers of one seed and id drew %d and %d", ka, kb)
		}
	}
}

func TestSweepSendsEachKeyOnce(t *testing.T) {
	tmpl, _ := parseTemplate(`{{key}}`)
	p := &plan{keys: 100, body: tmpl, sweep: true}
	var next atomic.Int64
	seen := map[int]bool{}
	for i := 0; ; i++ {
		k, ok := p.newWorker(i%3, &target{}).nextKey(&next)
		if !ok {
			break
		}
		if seen[k] {
			t.Fatalf("key %d twice", k)
		}
		seen[k] = true
	}
	if len(seen) != 100 {
		t.Errorf("swept %d keys, want 100", len(seen))
	}
}

func TestSeqIsUniqueAcrossWorkers(t *testing.T) {
	tmpl, _ := parseTemplate(`{{seq}}`)
	p := &plan{keys: 1, body: tmpl, targets: []*target{{head: []byte("POST / HTTP/1.1\r\n")}}}
	seen := map[string]bool{}
	for id := range 12 {
		w := p.newWorker(id, p.targets[0])
		for range 1000 {
			w.build(0)
			if seen[string(w.body)] {
				t.Fatalf("{{seq}} %s twice", w.body)
			}
			seen[string(w.body)] = true
		}
	}
}

func TestPercentile(t *testing.T) {
	var hundred []time.Duration
	for i := 1; i <= 100; i++ {
		hundred = append(hundred, time.Duration(i))
	}
	tests := []struct {
		vals []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{[]time.Duration{7}, 50, 7},
		{[]time.Duration{7}, 100, 7},
		{[]time.Duration{1, 2}, 50, 1},
		{[]time.Duration{1, 2}, 51, 2},
		{[]time.Duration{1, 2, 3, 4}, 50, 2},
		{[]time.Duration{1, 2, 3, 4}, 75, 3},
		{[]time.Duration{1, 2, 3, 4}, 99, 4},
		{hundred, 1, 1},
		{hundred, 50, 50},
		{hundred, 90, 90},
		{hundred, 99, 99},
		{hundred, 99.5, 100},
		{hundred, 100, 100},
		{hundred, 0, 1},
	}
	for _, tt := range tests {
		if got := percentile(tt.vals, tt.p); got != tt.want {
			t.Errorf("percentile(%d values, %v) = %d, want %d", len(tt.vals), tt.p, got, tt.want)
		}
	}
}

func TestSpreadIsRoundRobin(t *testing.T) {
	a, b, c := &target{url: "a"}, &target{url: "b"}, &target{url: "c"}
	var got []string
	for _, t := range spread(7, []*target{a, b, c}) {
		got = append(got, t.url)
	}
	if want := "a b c a b c a"; strings.Join(got, " ") != want {
		t.Errorf("spread = %v, want %s", got, want)
	}
	if got := spread(4, []*target{a}); got[0] != a || got[3] != a {
		t.Errorf("one URL: every worker should get it")
	}
}

func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-url", "https://127.0.0.1:1/"},
		{"-url", "127.0.0.1:1"},
		{"-url", "http://127.0.0.1:1/", "-url", "http://127.0.0.1:2/", "-c", "1"},
		{"-url", "http://127.0.0.1:1/", "-H", "Content-Length: 3"},
		{"-url", "http://127.0.0.1:1/", "-H", "no colon"},
		{"-url", "http://127.0.0.1:1/", "-body", "{{nope}}"},
		{"-url", "http://127.0.0.1:1/", "-keys", "0"},
		{"-url", "http://127.0.0.1:1/", "-zipf", "1"},
		{"-url", "http://127.0.0.1:1/", "-zipf", "0.5"},
		{"-url", "http://127.0.0.1:1/", "-zipf", "-2"},
		{"-url", "http://127.0.0.1:1/", "-zipf", "NaN"},
		{"-url", "http://127.0.0.1:1/", "-zipf", "+Inf"},
		{"-url", "http://127.0.0.1:1/", "-zipf", "1.1", "-sweep"},
		{"-url", "http://127.0.0.1:1/", "-seen", "f", "-body", "no key"},
		{"-url", "http://127.0.0.1:1/", "-method", "GET /x"},
		{"-url", "http://127.0.0.1:1/", "extra"},
	} {
		if _, _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) succeeded, want an error", args)
		}
	}
}

// server is an httptest server that checks and counts what loadgen sends:
// bodies {"k": key, "s": seq}, answered 429 when the key is a multiple of
// 3 (so that status counting is exercised), 200 otherwise.
type server struct {
	*httptest.Server
	keys     int
	answered atomic.Int64
	conns    atomic.Int64
	seqs     map[string]bool // shared by the servers of a test, under seqMu
	problems []string        // under seqMu
}

func newServer(t *testing.T, keys int, seqs map[string]bool) *server {
	s := &server{keys: keys, seqs: seqs}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.handle))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// seqMu guards the servers' seqs and problems.
var seqMu sync.Mutex

func (s *server) handle(w http.ResponseWriter, r *http.Request) {
	var body struct {
		K int
		S string
	}
	err := json.NewDecoder(r.Body).Decode(&body)
	seqMu.Lock()
	switch {
	case err != nil:
		s.problems = append(s.problems, "bad body: "+err.Error())
	case r.Method != http.MethodPost || r.Header.Get("X-Test") != "yes" || r.Header.Get("Content-Type") != "application/json":
		s.problems = append(s.problems, fmt.Sprintf("method %s, headers %v", r.Method, r.Header))
	case body.K < 0 || body.K >= s.keys:
		s.problems = append(s.problems, fmt.Sprintf("key %d out of range", body.K))
	case s.seqs[body.S]:
		s.problems = append(s.problems, "seq "+body.S+" twice")
	}
	s.seqs[body.S] = true
	seqMu.Unlock()
	s.answered.Add(1)
	w.Header().Set("Content-Type", "application/json")
	if body.K%3 == 0 {
		w.WriteHeader(http.StatusTooManyRequests)
	}
	_, _ = io.WriteString(w, `{"allowed":true,"padding":"`+strings.Repeat("x", 500)+`"}`)
}

func runJSON(t *testing.T, args ...string) *summary {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), append(args, "-json"), &out, io.Discard); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var s summary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("last line is not the JSON summary: %v\n%s", err, out.String())
	}
	if !strings.HasPrefix(out.String(), "requests ") {
		t.Errorf("no human summary before the JSON line:\n%s", out.String())
	}
	return &s
}

// TestRunAgainstServers loads two servers for about a second and checks
// that the counts add up: on the servers' side and in the summary.
// forClients runs f with each way of sending requests.
func forClients(t *testing.T, f func(t *testing.T, client string)) {
	for _, client := range []string{"net/http", "raw"} {
		t.Run(client, func(t *testing.T) { f(t, client) })
	}
}

func TestRunAgainstServers(t *testing.T) { forClients(t, runAgainstServers) }

func runAgainstServers(t *testing.T, client string) {
	const keys, workers = 50, 6
	seqs := map[string]bool{}
	a, b := newServer(t, keys, seqs), newServer(t, keys, seqs)
	s := runJSON(t, "-client", client, "-url", a.URL+"/v1/check", "-url", b.URL+"/v1/check",
		"-c", fmt.Sprint(workers), "-warmup", "200ms", "-d", "800ms", "-keys", fmt.Sprint(keys),
		"-H", "Content-Type: application/json", "-H", "X-Test: yes",
		"-body", `{"k":{{key}},"s":"{{seq}}"}`)

	for _, srv := range []*server{a, b} {
		if len(srv.problems) > 0 {
			t.Errorf("server saw: %v", srv.problems[:min(5, len(srv.problems))])
		}
		// One keep-alive connection per worker. net/http's Transport puts a
		// connection back in its idle pool just after the body is read, so
		// a worker's next request may now and then find none and dial
		// another: with it, a few more, never one per request.
		want := int64(workers / 2)
		if got := srv.conns.Load(); got < want || client == "raw" && got != want || got > 2*want {
			t.Errorf("server %s: %d connections, want %d (one keep-alive connection per worker)", srv.URL, got, want)
		}
		if srv.answered.Load() == 0 {
			t.Errorf("server %s got no request", srv.URL)
		}
	}
	// The summary counts the same dials from the client's side: raw's are
	// exactly one per worker, net/http's now and then one more (see
	// above), which a busy machine makes likelier.
	if got := s.Connections; got < workers || client == "raw" && got != workers || got > 2*workers {
		t.Errorf("%d connections opened, want %d (one keep-alive connection per worker)", got, workers)
	}
	if s.Errors != 0 || s.AllErrors != 0 {
		t.Errorf("errors = %d, all_errors = %d (first: %s), want none", s.Errors, s.AllErrors, s.FirstError)
	}
	if s.Requests == 0 {
		t.Fatal("no request measured")
	}
	var byStatus, byURL int64
	for _, n := range s.Status {
		byStatus += n
	}
	for _, n := range s.ByURL {
		byURL += n
	}
	if byStatus != s.Requests || byURL != s.Requests {
		t.Errorf("requests %d, by status %d, by URL %d: want all equal", s.Requests, byStatus, byURL)
	}
	if s.Non2xx != s.Status["429"] || s.Non2xx == 0 || s.Status["200"] == 0 {
		t.Errorf("status %v, non-2xx %d: want 200s and 429s, the 429s counted as non-2xx", s.Status, s.Non2xx)
	}
	if served := a.answered.Load() + b.answered.Load(); served != s.Total || s.Total < s.Requests {
		t.Errorf("servers answered %d, loadgen counted %d in all and %d measured", served, s.Total, s.Requests)
	}
	if int64(len(seqs)) != s.Total {
		t.Errorf("%d distinct {{seq}} for %d requests", len(seqs), s.Total)
	}
	if s.Seconds != 0.8 || s.RPS != round(float64(s.Requests)/0.8, 1) {
		t.Errorf("seconds %v, rps %v for %d requests", s.Seconds, s.RPS, s.Requests)
	}
	if !(0 < s.P50 && s.P50 <= s.P90 && s.P90 <= s.P99 && s.P99 <= s.Max && s.Mean <= s.Max) {
		t.Errorf("latencies out of order: p50 %v p90 %v p99 %v max %v mean %v", s.P50, s.P90, s.P99, s.Max, s.Mean)
	}
}

func TestRunSweep(t *testing.T) {
	seqs := map[string]bool{}
	srv := newServer(t, 300, seqs)
	s := runJSON(t, "-url", srv.URL, "-sweep", "-keys", "300", "-c", "4", "-d", "30s",
		"-H", "Content-Type: application/json", "-H", "X-Test: yes",
		"-body", `{"k":{{key}},"s":"{{seq}}"}`)
	if len(srv.problems) > 0 {
		t.Errorf("server saw: %v", srv.problems[:min(5, len(srv.problems))])
	}
	if s.Requests != 300 || srv.answered.Load() != 300 || s.Status["429"] != 100 {
		t.Errorf("sweep of 300 keys: %d measured, %d answered, status %v", s.Requests, srv.answered.Load(), s.Status)
	}
	if s.Seconds >= 30 {
		t.Errorf("sweep took the whole -d (%vs), want it to stop when done", s.Seconds)
	}
}

// TestRunReconnects: a server that closes every connection after its
// answer costs a new connection per request, and no error.
func TestRunReconnects(t *testing.T) { forClients(t, runReconnects) }

func runReconnects(t *testing.T, client string) {
	var conns, answered atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answered.Add(1)
		w.Header().Set("Connection", "close")
		_, _ = io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	s := runJSON(t, "-client", client, "-url", srv.URL, "-c", "2", "-warmup", "0s", "-d", "300ms")
	if s.AllErrors != 0 || s.Status["200"] != s.Requests {
		t.Errorf("errors %d (first: %s), status %v", s.AllErrors, s.FirstError, s.Status)
	}
	if conns.Load() != answered.Load() || answered.Load() != s.Total || s.Connections != s.Total {
		t.Errorf("%d connections, %d answered; loadgen counted %d answers and opened %d connections",
			conns.Load(), answered.Load(), s.Total, s.Connections)
	}
}

// TestHostHeader: -H Host names the host in every request, whichever the
// client.
func TestHostHeader(t *testing.T) { forClients(t, hostHeader) }

func hostHeader(t *testing.T, client string) {
	var mu sync.Mutex
	hosts := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts[r.Host]++
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	s := runJSON(t, "-client", client, "-url", srv.URL, "-c", "2", "-warmup", "0s", "-d", "200ms",
		"-H", "Host: quota.example")
	mu.Lock()
	defer mu.Unlock()
	if s.Total == 0 || len(hosts) != 1 || hosts["quota.example"] != int(s.Total) {
		t.Errorf("hosts seen %v for %d requests, want quota.example for all", hosts, s.Total)
	}
}

// TestDistinctKeys runs twice against a server that records the keys it
// is sent, keeping the set in a -seen file: each summary counts the
// distinct keys of its run, and the second the union of both.
func TestDistinctKeys(t *testing.T) {
	var mu sync.Mutex
	var got map[int]bool // this run's keys
	all := map[int]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ K int }
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got[body.K], all[body.K] = true, true
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	file := t.TempDir() + "/seen"
	for i, args := range [][]string{
		{"-seed", "1"},
		{"-seed", "2", "-zipf", "1.1"},
	} {
		got = map[int]bool{}
		s := runJSON(t, append(args, "-url", srv.URL, "-c", "3", "-warmup", "50ms", "-d", "200ms", "-keys", "100000",
			"-seen", file, "-body", `{"k":{{key}}}`)...)
		mu.Lock()
		if s.AllErrors != 0 || s.DistinctKeys != int64(len(got)) || s.SeenKeys != int64(len(all)) {
			t.Errorf("run %d: distinct_keys %d, seen_keys %d (%d errors); the server saw %d keys, %d in both runs",
				i+1, s.DistinctKeys, s.SeenKeys, s.AllErrors, len(got), len(all))
		}
		mu.Unlock()
		if i == 1 && s.SeenKeys <= s.DistinctKeys {
			t.Errorf("the second run's union (%d) adds nothing to its own keys (%d)", s.SeenKeys, s.DistinctKeys)
		}
	}
	if _, err := readSeen(file, 99999); err == nil {
		t.Error("a -seen file read with another -keys: no error")
	}
	s := runJSON(t, "-url", srv.URL, "-c", "1", "-warmup", "0s", "-d", "50ms", "-body", `{"k":1}`)
	if s.DistinctKeys != 0 {
		t.Errorf("a body without {{key}}: distinct_keys %d, want 0", s.DistinctKeys)
	}
}

func TestKeySetFile(t *testing.T) {
	file := t.TempDir() + "/seen"
	s := newKeySet(130)
	for _, k := range []int{0, 63, 64, 129, 64} {
		s.add(k)
	}
	if s.count() != 4 {
		t.Errorf("count = %d, want 4", s.count())
	}
	if err := s.write(file); err != nil {
		t.Fatal(err)
	}
	r, err := readSeen(file, 130)
	if err != nil {
		t.Fatal(err)
	}
	o := newKeySet(130)
	o.add(1)
	o.add(129)
	r.union(o)
	if r.count() != 5 {
		t.Errorf("union count = %d, want 5", r.count())
	}
	if e, err := readSeen(t.TempDir()+"/none", 130); err != nil || e.count() != 0 {
		t.Errorf("missing file: %v, %v; want an empty set", e, err)
	}
	for _, content := range []string{"", "something else\n", "loadgen seen keys v1 130\n", "loadgen seen keys v1 130\n" + strings.Repeat("x", 25)} {
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readSeen(file, 130); err == nil {
			t.Errorf("readSeen of %q: no error", content)
		}
	}
}

// With -commit-below, each request is a reservation then its commit, at a
// cost below the bound: a pair counts once, with the commit's status.
func TestReserveCommitPairs(t *testing.T) {
	var mu sync.Mutex
	var problems []string
	var reserves, commits int64
	ids := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/reservations":
			reserves++
			if reserves%4 == 0 { // a denied reserve is not committed
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			id := fmt.Sprintf("rsv_%d", reserves)
			ids[id] = true
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"`+id+`","allowed":true}`)
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/commit"):
			commits++
			id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/reservations/"), "/commit")
			var body struct{ Cost int64 }
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Cost < 0 || body.Cost >= 10 {
				problems = append(problems, fmt.Sprintf("commit body cost %d (%v)", body.Cost, err))
			}
			if !ids[id] {
				problems = append(problems, "commit of "+id+", never reserved or committed twice")
			}
			delete(ids, id)
			_, _ = io.WriteString(w, `{}`)
		default:
			problems = append(problems, r.Method+" "+r.URL.Path)
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	s := runJSON(t, "-url", srv.URL+"/v1/reservations", "-commit-below", "10", "-c", "3", "-warmup", "0s", "-d", "500ms",
		"-H", "Content-Type: application/json", "-body", `{"customer":"c{{key}}","metric":"m","cost":10}`)
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("server saw: %v", problems[:min(5, len(problems))])
	}
	if s.Total != reserves || commits != reserves-reserves/4 {
		t.Errorf("%d pairs counted, %d reserves and %d commits served, want a commit per allowed reserve", s.Total, reserves, commits)
	}
	if s.Status["200"] == 0 || s.Status["429"] == 0 || s.Status["201"] != 0 {
		t.Errorf("status %v: want the commits' 200s and the denied reserves' 429s", s.Status)
	}
}

// TestURLTemplate: a URL's path may draw {{key}} as a body does, each
// request its own, whichever the client; a GET without a body.
func TestURLTemplate(t *testing.T) { forClients(t, urlTemplate) }

func urlTemplate(t *testing.T, client string) {
	var mu sync.Mutex
	keys := map[int]int{}
	var problems []string
	path := regexp.MustCompile(`^/v1/customers/c([0-9]+)/entitlements$`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		m := path.FindStringSubmatch(r.URL.Path)
		if m == nil || r.Method != http.MethodGet || r.ContentLength > 0 {
			problems = append(problems, r.Method+" "+r.URL.Path)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		k, _ := strconv.Atoi(m[1])
		keys[k]++
		_, _ = io.WriteString(w, "{}")
	}))
	t.Cleanup(srv.Close)
	s := runJSON(t, "-client", client, "-url", srv.URL+"/v1/customers/c{{key}}/entitlements", "-c", "2",
		"-warmup", "0s", "-d", "300ms", "-keys", "20")
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 || s.AllErrors != 0 || s.Total == 0 {
		t.Fatalf("requests the server refused: %v; %d errors (first: %s), %d answered", problems, s.AllErrors, s.FirstError, s.Total)
	}
	for k := range keys {
		if k < 0 || k >= 20 {
			t.Errorf("key %d drawn, want [0, 20)", k)
		}
	}
	if len(keys) < 2 || s.DistinctKeys != int64(len(keys)) {
		t.Errorf("the server saw %d distinct keys (%v), the summary counts %d", len(keys), keys, s.DistinctKeys)
	}
}
