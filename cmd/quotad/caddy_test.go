package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// MustStartCaddy runs caddy with the Caddyfile in a directory of its own
// (its data and configuration too), without its admin endpoint, until the
// test ends. addr is where the Caddyfile listens; MustStartCaddy waits for it.
func MustStartCaddy(t testing.TB, caddyfile, addr string) {
	t.Helper()
	bin := findGateway(t, "caddy", "/usr/bin/caddy")
	dir := t.TempDir()
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte("{\n\tadmin off\n}\n\n"+caddyfile), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", path, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	startGateway(t, "caddy", cmd, addr, os.Kill, nil)
}

// caddyBlock is the Caddyfile of docs/gateways.md serving plain http on
// addr, asking the quotad at quotad and proxying to app (both URLs).
func caddyBlock(t testing.TB, addr, quotad, app string) string {
	t.Helper()
	return gatewayBlock(t, "caddyfile", map[string]string{
		"api.example.com {": "http://" + addr + " {",
		"quotad:8080":       strings.TrimPrefix(quotad, "http://"),
		"app:3000":          strings.TrimPrefix(app, "http://"),
		"CHECK_TOKEN":       checkToken,
	})
}

// TestCaddyForwardAuth runs quotad behind a real Caddy configured with the
// Caddyfile of docs/gateways.md (on plain http and loopback), API keys, a
// route table and unmatched requests let through.
func TestCaddyForwardAuth(t *testing.T) {
	t.Parallel()
	s := mustStartForwardAuth(t, `
headers:
  api_key: X-Api-Key
api_keys:
  sk-acme: acme
routes:
  - match: /v1/
    metric: api_calls
unmatched: allow
`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/api_calls", `{}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/plans/gw", `{"name":"Gateway","limits":[
		{"metric":"api_calls","window":"day","limit":2}]}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme", `{"plan":"gw"}`)

	app := &upstream{}
	appSrv := httptest.NewServer(app)
	t.Cleanup(appSrv.Close)

	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	MustStartCaddy(t, caddyBlock(t, addr, s.URL, appSrv.URL), addr)

	client := &http.Client{Timeout: 10 * time.Second}
	steps := []struct {
		name, method, path, key string
		want                    int
		reaches                 bool
		customer                string
		// header values the client must get; "" means absent.
		header map[string]string
		// problem code of the body, when not ""
		code string
	}{
		{name: "acme 1 of 2", method: "GET", path: "/v1/items", key: "sk-acme", want: 200, reaches: true, customer: "acme",
			header: map[string]string{"X-Quotad-Customer": ""}},
		{name: "acme 2 of 2, a POST", method: "POST", path: "/v1/items", key: "sk-acme", want: 200, reaches: true, customer: "acme"},
		{name: "acme over the limit", method: "GET", path: "/v1/items", key: "sk-acme", want: 429,
			header: map[string]string{"X-Quotad-Customer": "", "RateLimit-Policy": `"api_calls/day";q=2;w=86400`, "Content-Type": "application/problem+json"},
			code:   "quota_exceeded"},
		{name: "no key", method: "GET", path: "/v1/items", want: 401, code: "unauthorized"},
		{name: "unknown key", method: "GET", path: "/v1/items", key: "sk-guess", want: 403, code: "forbidden"},
		{name: "unmatched passes unchecked", method: "GET", path: "/healthz", key: "sk-acme", want: 200, reaches: true, customer: ""},
	}
	for _, st := range steps {
		before := app.count()
		req, err := http.NewRequest(st.method, "http://"+addr+st.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st.key != "" {
			req.Header.Set("X-Api-Key", st.key)
		}
		// A client cannot choose who pays.
		req.Header.Set("X-Quotad-Customer", "bob")
		r := mustSend(t, client, req)
		if r.Status != st.want {
			t.Fatalf("%s: status %d, want %d\n%s", st.name, r.Status, st.want, r.Body)
		}
		app.checkReached(t, st.name, before, st.reaches, upstreamHit{method: st.method, uri: st.path, customer: st.customer})
		for name, want := range st.header {
			if got := r.Header.Get(name); got != want {
				t.Errorf("%s: %s = %q, want %q", st.name, name, got, want)
			}
		}
		if st.code != "" && problemCode(r) != st.code {
			t.Errorf("%s: body %s, want a %s problem", st.name, r.Body, st.code)
		}
		if st.want == http.StatusTooManyRequests && r.Header.Get("Retry-After") == "" {
			t.Errorf("%s: no Retry-After", st.name)
		}
	}
}
