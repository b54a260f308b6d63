package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// gatewaysDoc is docs/gateways.md, whose nginx block the test runs.
var gatewaysDoc = filepath.Join("..", "..", "docs", "gateways.md")

// docBlock returns the first code block of docs/gateways.md in language
// lang (```nginx, ```caddyfile).
func docBlock(t testing.TB, lang string) string {
	t.Helper()
	doc, err := os.ReadFile(gatewaysDoc)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```" + regexp.QuoteMeta(lang) + "\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatalf("%s has no %s block", gatewaysDoc, lang)
	}
	return string(m[1])
}

// gatewayBlock returns the first lang block of docs/gateways.md with each
// placeholder replaced, failing unless each occurs in it exactly once.
func gatewayBlock(t testing.TB, lang string, repl map[string]string) string {
	t.Helper()
	block := docBlock(t, lang)
	for old, new := range repl {
		if n := strings.Count(block, old); n != 1 {
			t.Fatalf("the %s block of %s has %q %d times, want once", lang, gatewaysDoc, old, n)
		}
		block = strings.Replace(block, old, new, 1)
	}
	return block
}

// findGateway returns the binary name (on the PATH, or at debianPath,
// where Debian's package puts it), failing in CI and skipping elsewhere
// when there is none.
func findGateway(t testing.TB, name, debianPath string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if _, serr := os.Stat(debianPath); serr == nil {
			return debianPath
		}
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed (apt-get install %s); CI must run this test", name, name)
		}
		t.Skipf("%s is not installed (apt-get install %s): skipping the test behind a real one", name, name)
	}
	return path
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// mustStartDocsNginx starts an application and, in front of it, a real
// nginx configured with the docs' block, asking s; it returns the
// application and nginx's address.
func mustStartDocsNginx(t *testing.T, s *testServer) (*upstream, string) {
	t.Helper()
	app := &upstream{}
	appSrv := httptest.NewServer(app)
	t.Cleanup(appSrv.Close)
	return app, MustStartNginx(t, gatewayBlock(t, "nginx", map[string]string{
		"http://app:3000":    appSrv.URL,
		"http://quotad:8080": s.URL,
		"CHECK_TOKEN":        checkToken,
		"listen 80;":         "listen 80;", // MustStartNginx puts the port
	}))
}

// MustStartNginx runs nginx with the http-level block in a directory of its
// own, on a free port of 127.0.0.1, until the test ends, and returns its
// base URL. Everything nginx writes stays in that directory, which is
// readable by others so that workers running as another user (nginx
// started as root) can reach their temporary files.
func MustStartNginx(t testing.TB, httpBlock string) string {
	t.Helper()
	bin := findGateway(t, "nginx", "/usr/sbin/nginx")
	dir, err := os.MkdirTemp("", "quotad-nginx-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	block := strings.Replace(httpBlock, "listen 80;", fmt.Sprintf("listen 127.0.0.1:%d;", port), 1)
	conf := fmt.Sprintf(`worker_processes 1;
events { worker_connections 64; }
http {
    access_log %[1]s/access.log;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
%[2]s}
`, dir, block)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	errorLog := filepath.Join(dir, "error.log")
	cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", errorLog,
		"-g", "daemon off; pid "+filepath.Join(dir, "nginx.pid")+";")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	// SIGQUIT is graceful: workers finish, then the master exits.
	startGateway(t, "nginx", cmd, addr, syscall.SIGQUIT, func() string {
		log, _ := os.ReadFile(errorLog)
		return "\nnginx error log:\n" + string(log)
	})
	return "http://" + addr
}

// startGateway starts the gateway cmd (name says which) with its output
// collected, and waits until it listens on addr, failing the test if it
// exits first or is not listening after 10s. When the test ends it sends
// stop, and kills the gateway if it has not exited 10s later. extra, if
// not nil, returns what to show beside the output when the test fails.
func startGateway(t testing.TB, name string, cmd *exec.Cmd, addr string, stop os.Signal, extra func() string) {
	t.Helper()
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	more := func() string {
		if extra == nil {
			return ""
		}
		return extra()
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Signal(stop)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		}
		if t.Failed() {
			t.Logf("%s output:\n%s%s", name, out, more())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("%s exited: %v\n%s%s", name, err, out, more())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not listening on %s after 10s\n%s", name, addr, out)
		}
		// Poll again once the gateway exits or a short while has passed.
		select {
		case err := <-exited:
			exited <- err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// lockedBuffer collects a process's output from its copying goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// upstream is the application behind the gateway: it records what reaches
// it.
type upstream struct {
	mu   sync.Mutex
	hits []upstreamHit
}

type upstreamHit struct {
	method, uri, customer, body string
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.hits = append(u.hits, upstreamHit{r.Method, r.RequestURI, r.Header.Get("X-Quotad-Customer"), string(body)})
	u.mu.Unlock()
	fmt.Fprintln(w, "hello from upstream")
}

func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.hits)
}

func (u *upstream) last() upstreamHit {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.hits) == 0 {
		return upstreamHit{}
	}
	return u.hits[len(u.hits)-1]
}

// checkReached fails the test's step called name unless the upstream got a
// request since it had before hits exactly when reaches, and want as the
// last one when it did.
func (u *upstream) checkReached(t testing.TB, name string, before int, reaches bool, want upstreamHit) {
	t.Helper()
	reached := u.count() > before
	if reached != reaches {
		t.Errorf("%s: reached the upstream = %t, want %t", name, reached, reaches)
	}
	if reached {
		if hit := u.last(); hit != want {
			t.Errorf("%s: upstream got %+v, want %+v", name, hit, want)
		}
	}
}

// TestNginxForwardAuth runs quotad behind a real nginx configured with the
// nginx block of docs/gateways.md, API keys and a route table.
func TestNginxForwardAuth(t *testing.T) {
	t.Parallel()
	bobKey := "sk-bob-secret"
	bobDigest := sha256.Sum256([]byte(bobKey))
	s := mustStartForwardAuth(t, `
headers:
  api_key: X-Api-Key
api_keys:
  sk-acme: acme
  "sha256:`+hex.EncodeToString(bobDigest[:])+`": bob
routes:
  - match: POST /v1/jobs
    metric: jobs
    cost: 2
  - match: /v1/
    metric: api_calls
`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/api_calls", `{}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/jobs", `{}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/plans/gw", `{"name":"Gateway","limits":[
		{"metric":"api_calls","window":"day","limit":3},
		{"metric":"jobs","window":"day","limit":4}]}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme", `{"plan":"gw"}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/customers/bob", `{"plan":"gw"}`)

	app, gw := mustStartDocsNginx(t, s)

	client := &http.Client{Timeout: 10 * time.Second}
	send := func(method, path, key, body string) response {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, gw+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		// A client cannot choose who pays or what it costs.
		req.Header.Set("X-Quotad-Customer", "bob")
		req.Header.Set("X-Quotad-Cost", "1000")
		return mustSend(t, client, req)
	}

	type step struct {
		name, method, path, key, body string
		want                          int
		// reaches says whether the request must reach the upstream.
		reaches bool
		// header values the client must get; "" means absent, a final *
		// any rest.
		header map[string]string
		// customer the upstream must see, when it is reached.
		customer string
	}
	steps := []step{
		{name: "acme 1 of 3", method: "GET", path: "/v1/items?page=1", key: "sk-acme", want: 200, reaches: true, customer: "acme",
			header: map[string]string{"RateLimit-Policy": `"api_calls/day";q=3;w=86400`, "Retry-After": ""}},
		{name: "acme 2 of 3, a POST with a body", method: "POST", path: "/v1/items", key: "sk-acme", body: `{"name":"x"}`, want: 200, reaches: true, customer: "acme"},
		{name: "acme 3 of 3", method: "DELETE", path: "/v1/items/7", key: "sk-acme", want: 200, reaches: true, customer: "acme"},
		{name: "acme over the limit", method: "GET", path: "/v1/items", key: "sk-acme", want: 429, reaches: false,
			header: map[string]string{"RateLimit-Policy": `"api_calls/day";q=3;w=86400`, "Content-Type": "application/problem+json"}},
		{name: "bob's job costs 2", method: "POST", path: "/v1/jobs", key: bobKey, body: "{}", want: 200, reaches: true, customer: "bob"},
		{name: "bob's second job", method: "POST", path: "/v1/jobs", key: bobKey, body: "{}", want: 200, reaches: true, customer: "bob",
			header: map[string]string{"RateLimit": `"jobs/day";r=0;t=*`}},
		{name: "bob's third job is denied", method: "POST", path: "/v1/jobs", key: bobKey, body: "{}", want: 429, reaches: false},
		{name: "GET of jobs is an api call", method: "GET", path: "/v1/jobs", key: bobKey, want: 200, reaches: true, customer: "bob"},
		{name: "no key", method: "GET", path: "/v1/items", want: 401, reaches: false,
			header: map[string]string{"WWW-Authenticate": "", "RateLimit": "", "Content-Type": "application/problem+json"}},
		{name: "unknown key", method: "GET", path: "/v1/items", key: "sk-guess", want: 403, reaches: false},
		{name: "the digest is not the key", method: "GET", path: "/v1/items", key: "sha256:" + hex.EncodeToString(bobDigest[:]), want: 403, reaches: false},
		{name: "no route", method: "GET", path: "/healthz", key: "sk-acme", want: 403, reaches: false},
	}
	for _, st := range steps {
		before := app.count()
		r := send(st.method, st.path, st.key, st.body)
		if r.Status != st.want {
			t.Fatalf("%s: status %d, want %d\n%s", st.name, r.Status, st.want, r.Body)
		}
		app.checkReached(t, st.name, before, st.reaches, upstreamHit{st.method, st.path, st.customer, st.body})
		for name, want := range st.header {
			got := r.Header.Get(name)
			if prefix, ok := strings.CutSuffix(want, "*"); ok && strings.HasPrefix(got, prefix) && got != prefix {
				continue
			}
			if got != want {
				t.Errorf("%s: %s = %q, want %q", st.name, name, got, want)
			}
		}
		switch st.want {
		case http.StatusUnauthorized:
			if problemCode(r) != "unauthorized" {
				t.Errorf("%s: body %s, want an unauthorized problem", st.name, r.Body)
			}
		case http.StatusOK:
			if r.Header.Get("RateLimit") == "" || r.Header.Get("RateLimit-Policy") == "" {
				t.Errorf("%s: allowed without RateLimit headers: %v", st.name, r.Header)
			}
		case http.StatusTooManyRequests:
			if ra := r.Header.Get("Retry-After"); ra == "" || ra == "0" {
				t.Errorf("%s: Retry-After = %q, want seconds", st.name, ra)
			}
			if !strings.Contains(r.Header.Get("RateLimit"), ";r=0;t=") {
				t.Errorf("%s: RateLimit = %q, want none remaining", st.name, r.Header.Get("RateLimit"))
			}
			if problemCode(r) != "quota_exceeded" {
				t.Errorf("%s: body %s, want a quota_exceeded problem", st.name, r.Body)
			}
			// The wording of quotad's forward-auth 429 (which Caddy passes
			// on) and of the Go client's middleware.
			var p struct{ Detail string }
			_ = json.Unmarshal(r.Body, &p)
			if want := "the customer's limit on this metric is reached; retry after " + r.Header.Get("Retry-After") + " s"; p.Detail != want {
				t.Errorf("%s: detail %q, want %q", st.name, p.Detail, want)
			}
		}
	}

	// quotad counted what passed, and nothing of what did not.
	usage := s.mustDo(http.StatusOK, "GET", "/v1/customers/bob/usage", "").JSON(t)["usage"].([]any)
	got := map[string]float64{}
	for _, u := range usage {
		u := u.(map[string]any)
		got[u["metric"].(string)] = u["used"].(float64)
	}
	if want := map[string]float64{"api_calls": 1, "jobs": 4}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("bob's usage = %v, want %v", got, want)
	}
}

// TestNginxForwardAuthFeatures runs quotad behind a real nginx configured
// with the nginx block of docs/gateways.md and routes that require
// features: a customer granted the feature passes (counted where the
// route has a metric), one without it gets 403 feature_not_granted, a
// problem document, and nothing is counted.
func TestNginxForwardAuthFeatures(t *testing.T) {
	t.Parallel()
	s := mustStartForwardAuth(t, `
headers:
  api_key: X-Api-Key
api_keys:
  sk-acme: acme
  sk-bob: bob
routes:
  - match: /v1/sso/
    feature: sso
  - match: POST /v1/projects
    metric: projects
    feature: max_projects
  - match: /v1/
    metric: api_calls
`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/api_calls", `{}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/projects", `{}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/plans/business", `{"name":"Business","features":{"sso":true,"max_projects":10},
		"limits":[{"metric":"projects","window":"month","limit":10}]}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/plans/free", `{"name":"Free","features":{"max_projects":0},
		"limits":[{"metric":"projects","window":"month","limit":1}]}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme", `{"plan":"business"}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/customers/bob", `{"plan":"free"}`)

	app, gw := mustStartDocsNginx(t, s)

	client := &http.Client{Timeout: 10 * time.Second}
	send := func(method, path, key string) response {
		t.Helper()
		req, err := http.NewRequest(method, gw+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Api-Key", key)
		return mustSend(t, client, req)
	}

	steps := []struct {
		name, method, path, key string
		want                    int
		feature                 string // the feature a 403 names
	}{
		{"acme has sso", "GET", "/v1/sso/login", "sk-acme", 200, ""},
		{"bob has not", "GET", "/v1/sso/login", "sk-bob", 403, "sso"},
		{"acme creates a project", "POST", "/v1/projects", "sk-acme", 200, ""},
		{"bob's max_projects is 0", "POST", "/v1/projects", "sk-bob", 403, "max_projects"},
		{"bob's other calls pass", "GET", "/v1/items", "sk-bob", 200, ""},
		{"an unknown key is still forbidden", "GET", "/v1/sso/login", "sk-guess", 403, ""},
	}
	for _, st := range steps {
		before := app.count()
		r := send(st.method, st.path, st.key)
		if r.Status != st.want {
			t.Fatalf("%s: status %d, want %d\n%s", st.name, r.Status, st.want, r.Body)
		}
		if reached := app.count() > before; reached != (st.want == 200) {
			t.Errorf("%s: reached the upstream = %t", st.name, reached)
		}
		if st.want != http.StatusForbidden {
			continue
		}
		var p struct{ Code, Detail string }
		if err := json.Unmarshal(r.Body, &p); err != nil || r.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s: %s %s, want a problem document", st.name, r.Header.Get("Content-Type"), r.Body)
		}
		switch {
		case st.feature != "" && (p.Code != "feature_not_granted" || !strings.HasSuffix(p.Detail, "the feature "+st.feature)):
			t.Errorf("%s: problem %+v, want feature_not_granted naming %s", st.name, p, st.feature)
		case st.feature == "" && p.Code != "forbidden":
			t.Errorf("%s: problem %+v, want forbidden", st.name, p)
		}
	}

	// A customer granted the feature by an override passes at once; only
	// what passed a route with a metric was counted.
	s.mustDo(http.StatusCreated, "PUT", "/v1/customers/bob/features/sso", `{"value":true,"reason":"pilot"}`)
	if r := send("GET", "/v1/sso/login", "sk-bob"); r.Status != http.StatusOK {
		t.Errorf("bob with an sso override: %d\n%s", r.Status, r.Body)
	}
	if got := s.metricUsageOf("bob", "projects"); got["month"] != 0 {
		t.Errorf("bob's projects = %v, want nothing counted", got)
	}
	if got := s.metricUsageOf("acme", "projects"); got["month"] != 1 {
		t.Errorf("acme's projects = %v, want 1", got)
	}
}
