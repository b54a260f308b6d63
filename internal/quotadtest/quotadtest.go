// Package quotadtest runs a real quotad for a test: the quotad binary, built
// once per test binary from this module's cmd/quotad, started as a
// subprocess on a free loopback port over a fresh PostgreSQL schema (see
// internal/dbtest), with an admin and a check token, and stopped when the
// test ends.
//
// A test package that uses it should remove the built binary when its tests
// are done:
//
//	func TestMain(m *testing.M) { os.Exit(quotadtest.Main(m)) }
//
// Set QUOTAD_TEST_BINARY to the path of a quotad binary to use it instead of
// building one.
package quotadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
)

// EnvBinary names the variable that points tests at a prebuilt quotad.
const EnvBinary = "QUOTAD_TEST_BINARY"

// Tokens every server started here accepts, and the names the audit log
// gives them.
const (
	AdminToken     = "adm-secret-for-tests"
	AdminTokenName = "ops"
	CheckToken     = "chk-secret-for-tests"
	CheckTokenName = "backend"
)

// startTimeout bounds how long a server may take to start or stop.
const startTimeout = 30 * time.Second

// Server is a quotad process started for a test.
type Server struct {
	// URL is the base URL, e.g. http://127.0.0.1:41234.
	URL string
	// Addr is the host:port quotad listens on.
	Addr string
	// AdminToken and CheckToken are bearer tokens the server accepts.
	AdminToken string
	CheckToken string
	// DatabaseURL is the PostgreSQL URL the server uses.
	DatabaseURL string

	logs *LogTail
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // the process's exit, once done is closed
	once sync.Once
}

// MustStart runs quotad for t and stops it when t ends. env adds to or
// replaces the defaults: QUOTAD_DATABASE_URL (a fresh schema of
// dbtest.New(t) unless env names one, so that two servers can share a
// database), QUOTAD_LISTEN=127.0.0.1:0, QUOTAD_ADMIN_TOKENS,
// QUOTAD_CHECK_TOKENS, QUOTAD_LOG_LEVEL=debug, QUOTAD_DB_WAIT=0s, no
// drain on stop, a small connection pool, and store and Redis timeouts of
// 30s. No other
// QUOTAD_* variable of the test's environment reaches quotad.
func MustStart(t testing.TB, env map[string]string) *Server {
	t.Helper()
	bin := mustBinary(t)
	vars := map[string]string{
		"QUOTAD_LISTEN":       "127.0.0.1:0",
		"QUOTAD_ADMIN_TOKENS": AdminTokenName + ":" + AdminToken,
		"QUOTAD_CHECK_TOKENS": CheckTokenName + ":" + CheckToken,
		"QUOTAD_LOG_LEVEL":    "debug",
		"QUOTAD_DB_WAIT":      "0s",
		// No load balancer to wait for: a test's server stops at once.
		"QUOTAD_DRAIN_TIMEOUT": "0s",
		// Tests start many servers at once on one PostgreSQL: small pools
		// keep them within its connection limit.
		"QUOTAD_DB_MAX_CONNS": "6",
		// On a busy machine a check may wait long for PostgreSQL or Redis
		// without either being down: past the defaults (250ms) it would be
		// answered degraded, and admitted without being counted.
		"QUOTAD_STORE_TIMEOUT": "30s",
		"QUOTAD_REDIS_TIMEOUT": "30s",
	}
	for k, v := range env {
		vars[k] = v
	}
	if vars["QUOTAD_DATABASE_URL"] == "" {
		vars["QUOTAD_DATABASE_URL"] = dbtest.New(t).URL
	}

	logs := NewLogTail()
	cmd := exec.Command(bin)
	cmd.Env = environ(vars)
	cmd.Stdout = logs
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start quotad: %v", err)
	}
	s := &Server{
		AdminToken:  AdminToken,
		CheckToken:  CheckToken,
		DatabaseURL: vars["QUOTAD_DATABASE_URL"],
		logs:        logs,
		cmd:         cmd,
		done:        make(chan struct{}),
	}
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("quotad stopped with error: %v", err)
		}
		if t.Failed() {
			t.Logf("quotad log:\n%s", logs)
		}
	})

	select {
	case addr := <-logs.Addr:
		s.Addr = addr
		s.URL = "http://" + addr
	case <-s.done:
		t.Fatalf("quotad exited before listening: %v\n%s", s.err, logs)
	case <-time.After(startTimeout):
		t.Fatalf("quotad did not start listening within %v\n%s", startTimeout, logs)
	}
	return s
}

// Stop asks quotad to shut down (SIGINT), waits for it and kills it if it
// has not stopped in time. It returns how the process ended: nil for a clean
// shutdown. Stop may be called more than once; a stopped server refuses
// connections on its address.
func (s *Server) Stop() error {
	s.once.Do(func() {
		select {
		case <-s.done:
			return
		default:
		}
		if err := s.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
			_ = s.cmd.Process.Kill()
		}
		select {
		case <-s.done:
		case <-time.After(startTimeout):
			_ = s.cmd.Process.Kill()
			<-s.done
			s.err = fmt.Errorf("quotad did not stop within %v; killed", startTimeout)
		}
	})
	<-s.done
	return s.err
}

// Logs returns what quotad has written so far (its JSON log).
func (s *Server) Logs() string { return s.logs.String() }

// environ is the test's environment without its QUOTAD_* variables, plus
// vars.
func environ(vars map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "QUOTAD_") {
			env = append(env, kv)
		}
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}

var (
	buildOnce sync.Once
	buildDir  string
	buildPath string
	buildErr  error
)

// mustBinary returns the path of a quotad binary, building it on first use.
func mustBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv(EnvBinary); p != "" {
			buildPath = p
			return
		}
		buildDir, buildErr = os.MkdirTemp("", "quotadtest-")
		if buildErr != nil {
			return
		}
		buildPath = filepath.Join(buildDir, "quotad")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", buildPath, "github.com/quotad/quotad/cmd/quotad")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build quotad: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// Main runs m's tests and then removes the quotad binary they built, if
// any. It returns the exit code for os.Exit.
func Main(m *testing.M) int {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	return code
}

// LogTail collects quotad's JSON log, whether quotad runs as a process
// (its output) or in a test's own process (the writer its logger gets),
// and reports the address of its "listening" line on Addr. Each write
// lands in the buffer before it returns, so a line quotad wrote before it
// stopped is there to read.
type LogTail struct {
	// Addr receives the listening address, once.
	Addr <-chan string

	mu      sync.Mutex
	buf     bytes.Buffer
	scanned int // bytes of buf already looked at for the address
	addrC   chan string
	once    sync.Once
}

// NewLogTail returns an empty LogTail.
func NewLogTail() *LogTail {
	c := make(chan string, 1)
	return &LogTail{Addr: c, addrC: c}
}

// Write takes quotad's output, whole lines or not.
func (l *LogTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		rest := l.buf.Bytes()[l.scanned:]
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.scanned += i + 1
		var rec struct{ Msg, Addr string }
		if json.Unmarshal(rest[:i], &rec) == nil && rec.Msg == "listening" && rec.Addr != "" {
			l.once.Do(func() { l.addrC <- rec.Addr })
		}
	}
}

// String returns everything written so far.
func (l *LogTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
