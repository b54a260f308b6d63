package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/quotadtest"
)

// testStoreTimeout is how long test servers' checks wait for the stores,
// PostgreSQL and Redis, unless a test says otherwise.
const testStoreTimeout = "30s"

// Tokens every test server accepts.
const (
	adminToken = "adm-secret-for-tests"
	checkToken = "chk-secret-for-tests"
)

// testServer is quotad started by run, exactly as main starts it, on a
// fresh schema and a free port.
type testServer struct {
	t      testing.TB
	URL    string
	schema *dbtest.Schema
	logs   *quotadtest.LogTail
	stop   func() error
	// client sends do's requests; nil: http.DefaultClient.
	client *http.Client
}

// MustStartServer runs quotad on schema (a fresh one when nil) with env on
// top of the test defaults, and stops it when the test ends.
func MustStartServer(t testing.TB, schema *dbtest.Schema, env map[string]string) *testServer {
	t.Helper()
	if schema == nil {
		schema = dbtest.New(t)
	}
	vars := map[string]string{
		"QUOTAD_DATABASE_URL": schema.URL,
		"QUOTAD_LISTEN":       "127.0.0.1:0",
		"QUOTAD_ADMIN_TOKENS": "ops:" + adminToken,
		"QUOTAD_CHECK_TOKENS": "backend:" + checkToken,
		"QUOTAD_LOG_LEVEL":    "debug",
		"QUOTAD_DB_WAIT":      "0s",
		// No load balancer to wait for: a test's server stops at once.
		"QUOTAD_DRAIN_TIMEOUT": "0s",
		// Tests start many servers at once on one PostgreSQL: small
		// pools keep them within its connection limit.
		"QUOTAD_DB_MAX_CONNS": "6",
		// On a busy machine a check may wait long for PostgreSQL or
		// Redis without either being down: only tests of outages make
		// checks give up soon.
		"QUOTAD_STORE_TIMEOUT": testStoreTimeout,
		"QUOTAD_REDIS_TIMEOUT": testStoreTimeout,
	}
	for k, v := range env {
		vars[k] = v
	}
	getenv := func(k string) string { return vars[k] }

	ctx, cancel := context.WithCancel(context.Background())
	logs := quotadtest.NewLogTail()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"quotad"}, getenv, logs) }()

	s := &testServer{t: t, schema: schema, logs: logs}
	select {
	case addr := <-logs.Addr:
		s.URL = "http://" + addr
	case err := <-done:
		cancel()
		t.Fatalf("quotad exited before listening: %v\n%s", err, logs)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("quotad did not start listening\n%s", logs)
	}
	var once sync.Once
	var stopErr error
	s.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(30 * time.Second):
				t.Errorf("quotad did not stop")
			}
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("quotad stopped with error: %v", err)
		}
		if t.Failed() {
			t.Logf("quotad log:\n%s", logs)
		}
	})
	return s
}

// response is an HTTP answer read in full.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// mustSend sends req with client and reads the answer in full, failing
// the test if either fails.
func mustSend(t testing.TB, client *http.Client, req *http.Request) response {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.RequestURI(), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// JSON decodes the body into a generic value.
func (r response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("response body is not a JSON object: %v\n%s", err, r.Body)
	}
	return v
}

// do sends a request; body "" sends none. Headers come in name, value pairs;
// without an Authorization header the admin token is used, a header with
// an empty value is removed, a Host header sets the request's Host, and a
// body is sent as application/json unless a Content-Type is given.
func (s *testServer) do(method, path, body string, headers ...string) response {
	s.t.Helper()
	r, err := s.send(method, path, body, headers...)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// send is do reporting failures instead of ending the test, for use off
// the test's goroutine.
func (s *testServer) send(method, path, body string, headers ...string) (response, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		switch {
		case headers[i+1] == "":
			req.Header.Del(headers[i])
		case http.CanonicalHeaderKey(headers[i]) == "Host":
			req.Host = headers[i+1] // net/http sends req.Host, not the header
		default:
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	client := s.client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// mustDo sends a request and fails the test unless the status is want.
func (s *testServer) mustDo(want int, method, path, body string, headers ...string) response {
	s.t.Helper()
	r := s.do(method, path, body, headers...)
	if r.Status != want {
		s.t.Fatalf("%s %s: status %d, want %d\n%s", method, path, r.Status, want, r.Body)
	}
	return r
}

func TestRunServesAndStops(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(http.StatusOK, "GET", "/healthz", "", "Authorization", "")
	s.mustDo(http.StatusOK, "GET", "/readyz", "", "Authorization", "")
	r := s.mustDo(http.StatusOK, "GET", "/metrics", "", "Authorization", "")
	if !bytes.Contains(r.Body, []byte("quotad_http_requests_total")) {
		t.Errorf("/metrics lacks quotad_http_requests_total:\n%s", r.Body)
	}
	if err := s.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for _, want := range []string{`"msg":"shutting down"`, `"msg":"stopped"`} {
		if !strings.Contains(s.logs.String(), want) {
			t.Errorf("log lacks %s", want)
		}
	}
	if strings.Contains(s.logs.String(), adminToken) || strings.Contains(s.logs.String(), checkToken) {
		t.Errorf("log reveals a token secret")
	}
}

func TestRunWithoutTokensBindsLoopback(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, map[string]string{
		"QUOTAD_ADMIN_TOKENS": "", "QUOTAD_CHECK_TOKENS": "", "QUOTAD_LISTEN": ":0",
	})
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Errorf("listening on %s, want loopback", s.URL)
	}
	if !strings.Contains(s.logs.String(), "serving without authentication") {
		t.Errorf("no warning about running without auth in the log")
	}
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/m", `{}`, "Authorization", "")
	r := s.mustDo(http.StatusOK, "GET", "/v1/audit", "", "Authorization", "")
	events := r.JSON(t)["events"].([]any)
	if got := events[0].(map[string]any)["actor"]; got != "anonymous" {
		t.Errorf("actor = %v, want anonymous", got)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"unknown flag", []string{"quotad", "-nope"}, nil},
		{"bad store failure", []string{"quotad"}, map[string]string{"QUOTAD_STORE_FAILURE": "maybe"}},
		{"bad log level", []string{"quotad", "-log-level", "loud"}, nil},
		{"bad duration", []string{"quotad"}, map[string]string{"QUOTAD_SHUTDOWN_TIMEOUT": "soon"}},
		{"empty token name", []string{"quotad"}, map[string]string{"QUOTAD_ADMIN_TOKENS": ":secret"}},
		{"migrate without command", []string{"quotad", "migrate"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return tt.env[k] }
			var out bytes.Buffer
			if err := run(context.Background(), tt.args, getenv, &out); err == nil {
				t.Errorf("run succeeded, want a configuration error")
			}
		})
	}
}

func TestMigrateCommands(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	getenv := func(k string) string {
		if k == "QUOTAD_DATABASE_URL" {
			return schema.URL
		}
		return ""
	}
	ctx := context.Background()
	var out bytes.Buffer
	for _, cmd := range []string{"version", "down", "up", "version"} {
		out.Reset()
		if err := run(ctx, []string{"quotad", "migrate", cmd}, getenv, &out); err != nil {
			t.Fatalf("migrate %s: %v\n%s", cmd, err, out.String())
		}
	}
	if !strings.Contains(out.String(), "dirty: false") {
		t.Errorf("migrate version printed %q", out.String())
	}
}
