package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// loggedDebugAddr is the address of quotad's "debug listening" log line,
// "" without one. quotad logs it before "listening", so by the time
// MustStartServer returns it is in the log.
func loggedDebugAddr(s *testServer) string {
	for line := range strings.Lines(s.logs.String()) {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "debug listening" {
			return rec.Addr
		}
	}
	return ""
}

func TestDebugListenServesPprof(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, map[string]string{"QUOTAD_DEBUG_LISTEN": "127.0.0.1:0"})
	addr := loggedDebugAddr(s)
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("debug address %q, want one on 127.0.0.1\n%s", addr, s.logs)
	}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	if status, body := get("/debug/pprof/goroutine?debug=1"); status != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Fatalf("GET /debug/pprof/goroutine: %d %.200q", status, body)
	}
	// The command line, which may carry --database-url's password and
	// tokens, is not served.
	if status, body := get("/debug/pprof/cmdline"); status != http.StatusNotFound || strings.Contains(body, "quotad") {
		t.Errorf("GET /debug/pprof/cmdline: %d %q, want 404", status, body)
	}
	// The main listener does not serve them.
	if r := s.do("GET", "/debug/pprof/cmdline", ""); r.Status != http.StatusNotFound {
		t.Errorf("main listener: GET /debug/pprof/cmdline = %d, want 404", r.Status)
	}
	if !strings.Contains(s.logs.String(), `"debug_listen":"127.0.0.1:0"`) {
		t.Errorf("the configuration logged at start-up lacks debug_listen")
	}

	// It stops with quotad.
	if err := s.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("debug address %s still accepts connections after quotad stopped", addr)
	}
}

func TestDebugListenIsOffByDefault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"default", nil, nil, ""},
		{"environment", nil, map[string]string{"QUOTAD_DEBUG_LISTEN": "127.0.0.1:6060"}, "127.0.0.1:6060"},
		{"flag over environment", []string{"-debug-listen", "127.0.0.1:7070"},
			map[string]string{"QUOTAD_DEBUG_LISTEN": "127.0.0.1:6060"}, "127.0.0.1:7070"},
	} {
		cfg, err := parseConfig(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if cfg.DebugListen != tc.want {
			t.Errorf("%s: debug listen %q, want %q", tc.name, cfg.DebugListen, tc.want)
		}
	}
	s := MustStartServer(t, nil, nil)
	if addr := loggedDebugAddr(s); addr != "" {
		t.Errorf("debug listening on %s without QUOTAD_DEBUG_LISTEN", addr)
	}
}

// pprof has no authentication: --debug-listen beyond loopback is refused
// at start-up, naming where the address came from, unless
// --debug-allow-remote says the operator means it.
func TestDebugListenLoopbackOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want []string // nil: accepted
	}{
		{"every interface", []string{"--debug-listen", "0.0.0.0:0"}, nil, []string{"--debug-listen", `"0.0.0.0:0"`, "--debug-allow-remote"}},
		{"every interface, from the variable", nil, map[string]string{"QUOTAD_DEBUG_LISTEN": ":6060"}, []string{"$QUOTAD_DEBUG_LISTEN", `":6060"`}},
		{"an IPv6 address", []string{"--debug-listen", "[2001:db8::1]:6060"}, nil, []string{"--debug-listen"}},
		{"a host name", []string{"--debug-listen", "quotad.internal:6060"}, nil, []string{"--debug-listen"}},
		{"allowed", []string{"--debug-listen", "0.0.0.0:0", "--debug-allow-remote"}, nil, nil},
		{"allowed by the variable", []string{"--debug-listen", "0.0.0.0:0"}, map[string]string{"QUOTAD_DEBUG_ALLOW_REMOTE": "true"}, nil},
		{"loopback", []string{"--debug-listen", "127.0.0.1:0"}, nil, nil},
		{"loopback, IPv6", []string{"--debug-listen", "[::1]:0"}, nil, nil},
		{"localhost", []string{"--debug-listen", "localhost:6060"}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want != nil {
				mustRefuseConfig(t, tc.args, tc.env, tc.want, nil)
				return
			}
			if _, err := parseConfig(tc.args, fakeEnv(tc.env), io.Discard); err != nil {
				t.Errorf("refused: %v", err)
			}
		})
	}
}
