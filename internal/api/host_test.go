package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/console"
	"github.com/quotad/quotad/internal/tiers"
)

// newRequest is httptest.NewRequest to a loopback Host, the only kind a
// server without tokens answers (httptest's is example.com).
func newRequest(method, target string, body io.Reader) *http.Request {
	req := httptest.NewRequest(method, target, body)
	req.Host = "localhost"
	return req
}

func TestLoopbackHost(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		host string
		want bool
	}{
		{"localhost", true},
		{"localhost:8080", true},
		{"LocalHost:8080", true},
		{"localhost.", true},
		{"localhost.:8080", true},
		{"console.localhost:8080", true},
		{"127.0.0.1", true},
		{"127.0.0.1:8080", true},
		{"127.1.2.3:80", true},
		{"[::1]", true},
		{"[::1]:8080", true},
		{"[0:0:0:0:0:0:0:1]:8080", true},
		{"[::ffff:127.0.0.1]:8080", true},

		{"", false},
		{"rebind.attacker.example", false},
		{"rebind.attacker.example:8080", false},
		{"localhost.attacker.example", false},
		{"evillocalhost", false},
		{"evillocalhost:8080", false},
		{".localhost", false},
		{"127.0.0.1.attacker.example", false},
		{"128.0.0.1:8080", false},
		{"127.0.0", false},
		{"127.0.0.1.", true}, // the absolute form, as localhost.
		{"127.0.0.256", false},
		{"127.0.0.01", false},
		{"127.0.0.1000", false},
		{"127..0.1", false},
		{"10.0.0.1:8080", false},
		{"0.0.0.0:8080", false},
		{"[::]:8080", false},
		{"[::2]:8080", false},
		{"::1", false},
		{"[::1", false},
		{"[::1]8080", false},
		{"[127.0.0.1]:8080", false},
		{"[fe80::1%25lo]:8080", false},
		{"localhost:", false},
		{"localhost:80a", false},
		{"localhost:123456", false},
		{"localhost:8080:9090", false},
	} {
		if got := loopbackHost(tt.host); got != tt.want {
			t.Errorf("loopbackHost(%q) = %t, want %t", tt.host, got, tt.want)
		}
	}
}

func TestLoopbackHostAllocatesNothing(t *testing.T) {
	for _, host := range []string{"localhost:8080", "[::1]:8080", "127.0.0.1:8080", "rebind.attacker.example", "1.2.3.4.attacker.example:80"} {
		if n := testing.AllocsPerRun(100, func() { loopbackHost(host) }); n != 0 {
			t.Errorf("loopbackHost(%q) allocates %v times, want none", host, n)
		}
	}
}

// Without tokens, a request whose Host is not loopback's is refused with a
// 421 problem before anything runs: the API, the console, forward-auth and
// the open paths alike. With tokens, the token decides.
func TestForeignHostWithoutTokens(t *testing.T) {
	t.Parallel()
	paths := []struct{ method, path, body string }{
		{http.MethodPut, "/v1/metrics/pwned", `{"description":"x"}`},
		{http.MethodPost, "/v1/check", `{"customer":"acme","metric":"api_calls"}`},
		{http.MethodGet, forwardAuthPath, ""},
		{http.MethodGet, console.Prefix, ""},
		{http.MethodGet, "/healthz", ""},
		{http.MethodGet, "/v1/nothing", ""},
	}
	serve := func(srv *Server, method, path, body, host, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec
	}
	fs := newFuzzServer()
	open := fs.srv
	for _, p := range paths {
		for _, host := range []string{"rebind.attacker.example", "rebind.attacker.example:8080", "example.com"} {
			rec := serve(open, p.method, p.path, p.body, host, "")
			var prob Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &prob); err != nil || rec.Code != http.StatusMisdirectedRequest || prob.Code != codeMisdirected {
				t.Errorf("%s %s, Host %s: answered %d %s, want 421 %s", p.method, p.path, host, rec.Code, rec.Body, codeMisdirected)
			}
			if ct := rec.Header().Get("Content-Type"); ct != contentTypeProblemJSON {
				t.Errorf("%s %s, Host %s: Content-Type %q, want %q", p.method, p.path, host, ct, contentTypeProblemJSON)
			}
		}
		for _, host := range []string{"localhost:8080", "127.0.0.1:8080", "[::1]:8080"} {
			if rec := serve(open, p.method, p.path, p.body, host, ""); rec.Code == http.StatusMisdirectedRequest || rec.Code >= 500 {
				t.Errorf("%s %s, Host %s: answered %d %s, want it served", p.method, p.path, host, rec.Code, rec.Body)
			}
		}
	}
	// Behind a gateway that keeps the client's Host, a server with tokens
	// answers any Host: the token is what it trusts.
	guarded := New(Config{Catalog: tiers.NewService(fuzzStore{fs}, fuzzStore{fs}, func() time.Time { return fuzzNow }, nil),
		Checker: fuzzChecker{fs}, Tokens: []Token{{Name: "ops", Secret: "an-admin-token-for-tests", Role: RoleAdmin}}})
	for _, p := range paths {
		rec := serve(guarded, p.method, p.path, p.body, "quotad.example.com", "an-admin-token-for-tests")
		if rec.Code == http.StatusMisdirectedRequest || rec.Code >= 500 {
			t.Errorf("%s %s with a token, Host quotad.example.com: answered %d %s, want it served", p.method, p.path, rec.Code, rec.Body)
		}
	}
}

// BenchmarkLoopbackHost is the cost the Host check adds to every request
// of a server without tokens.
func BenchmarkLoopbackHost(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if !loopbackHost("localhost:8080") || !loopbackHost("127.0.0.1:8080") {
			b.Fatal("refused")
		}
	}
}
