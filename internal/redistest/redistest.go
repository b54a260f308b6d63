// Package redistest gives tests a real Redis, isolated by key prefix.
//
// The server comes from QUOTAD_TEST_REDIS_URL when it is set (CI, and
// machines running Redis); otherwise one container is started with
// testcontainers-go for the whole test binary. Each test takes a fresh key
// prefix (Prefix), whose keys are deleted when it ends, so tests and
// packages run in parallel on one Redis. When no Redis can be had, tests
// fail: they are never skipped. A test that needs a Redis to stop starts
// its own server (StartServer), or its own Redis Cluster (StartCluster).
package redistest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/redis"

	"github.com/quotad/quotad/internal/testserver"
)

// EnvURL names the variable that points tests at a Redis server.
const EnvURL = "QUOTAD_TEST_REDIS_URL"

// server is the test Redis, looked up once per test binary.
var server = testserver.Source{
	EnvURL:  EnvURL,
	Server:  "Redis",
	Tests:   "Redis",
	Example: "redis://127.0.0.1:6379/0",
	Start:   startContainer,
}

// ServerURL returns the URL of the test Redis, starting a container if no
// URL is configured.
func ServerURL(t testing.TB) string {
	t.Helper()
	return server.URL(t)
}

// startContainer starts a Redis container and returns its URL. Like
// docker-compose.yml's, it keeps nothing on disk.
func startContainer(ctx context.Context) (string, error) {
	c, err := redis.Run(ctx, "redis:7-alpine",
		testcontainers.WithCmd("redis-server", "--save", "", "--appendonly", "no"))
	if err != nil {
		return "", err
	}
	return c.ConnectionString(ctx)
}

// Prefix returns a key prefix no other test uses; its keys are deleted
// when t ends.
func Prefix(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	prefix := "test:" + hex.EncodeToString(b[:]) + ":"
	url := ServerURL(t)
	t.Cleanup(func() {
		if err := deleteUnder(url, prefix); err != nil {
			t.Errorf("delete the keys under %s: %v", prefix, err)
		}
	})
	return prefix
}

// deleteUnder deletes every key of the Redis at url that begins with
// prefix.
func deleteUnder(url, prefix string) error {
	c, err := connect(url)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for cursor := uint64(0); ; {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
		if err != nil {
			return err
		}
		// One key a command (keys of several hash slots cannot share one),
		// the page's commands in one pipeline.
		cmds := make(rueidis.Commands, 0, len(e.Elements))
		for _, k := range e.Elements {
			cmds = append(cmds, c.B().Unlink().Key(k).Build())
		}
		for _, r := range c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				return err
			}
		}
		if cursor = e.Cursor; cursor == 0 {
			return nil
		}
	}
}

func connect(url string) (rueidis.Client, error) {
	o, err := rueidis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	o.DisableCache = true
	return rueidis.NewClient(o)
}

// connectNode connects to the one server at url, even a node of a
// cluster: commands go to it, never to another node.
func connectNode(url string) (rueidis.Client, error) {
	o, err := rueidis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	o.DisableCache = true
	o.ForceSingleClient = true
	return rueidis.NewClient(o)
}

// Client returns a client of the test Redis, closed when t ends.
func Client(t testing.TB) rueidis.Client {
	t.Helper()
	c, err := connect(ServerURL(t))
	if err != nil {
		t.Fatalf("connect to the test Redis: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// Server is a redis-server of a test's own, on a loopback port, which the
// test may stop and start again. Its methods are for the test's goroutine.
type Server struct {
	t      testing.TB
	port   int
	args   []string      // redis-server's arguments beyond the port's and persistence's
	cmd    *exec.Cmd     // nil while stopped
	exited chan struct{} // closed once cmd has exited
	client rueidis.Client
}

// startTimeout bounds how long Start waits for redis-server to answer.
const startTimeout = 10 * time.Second

// StartServer starts a redis-server (from PATH) on a free loopback port,
// without persistence, and stops it when t ends.
func StartServer(t testing.TB) *Server {
	t.Helper()
	mustHaveRedisServer(t)
	for range portAttempts {
		s := &Server{t: t, port: freePorts(t, 1)[0]}
		if !s.startOnce() {
			t.Cleanup(s.Stop)
			return s
		}
	}
	t.Fatalf("redis-server: %d free ports in a row were taken before it could listen", portAttempts)
	return nil
}

func mustHaveRedisServer(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not installed: %v", err)
	}
}

// freePorts returns n distinct loopback ports that were free a moment
// ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close() // held until all are chosen, so that they differ
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// URL returns the server's URL.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

// Port returns the server's port.
func (s *Server) Port() int { return s.port }

// Client returns a client of this server alone (of this node, in a
// cluster: no command is sent elsewhere, nor redirected), closed when the
// test ends. It reconnects by itself once a stopped server is started
// again.
func (s *Server) Client() rueidis.Client {
	s.t.Helper()
	if s.client == nil {
		c, err := connectNode(s.URL())
		if err != nil {
			s.t.Fatalf("connect to redis-server on port %d: %v", s.port, err)
		}
		s.client = c
		s.t.Cleanup(c.Close)
	}
	return s.client
}

// Running reports whether the server has been started and not stopped.
func (s *Server) Running() bool { return s.cmd != nil }

// Start starts the server on its port, if it is not running, and returns
// once it answers. It fails the test if redis-server exits first (its
// port taken, say) or does not answer within startTimeout; another server
// answering on the port does not count.
func (s *Server) Start() {
	s.t.Helper()
	if s.startOnce() {
		s.t.Fatalf("redis-server on port %d exited before answering: that port, or its cluster bus port, is taken", s.port)
	}
}

// startOnce starts the server, unless it runs, and waits until it answers.
// It reports whether the server could not listen because a port it was
// given was taken meanwhile (a port is free only until someone takes it:
// the caller may draw others); any other failure fails the test.
func (s *Server) startOnce() (portTaken bool) {
	s.t.Helper()
	if s.cmd != nil {
		return false
	}
	var out bytes.Buffer // read only once the process has exited
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no"}, s.args...)
	cmd := exec.Command("redis-server", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	deadline := time.Now().Add(startTimeout)
	for !s.answers(cmd.Process.Pid) {
		if time.Now().After(deadline) {
			s.Stop()
			s.t.Fatalf("redis-server on port %d does not answer after %v:\n%s", s.port, startTimeout, out.Bytes())
		}
		select {
		case <-exited:
			s.cmd = nil
			if bytes.Contains(out.Bytes(), []byte("Address already in use")) {
				return true
			}
			s.t.Fatalf("redis-server on port %d exited (%v) before answering:\n%s", s.port, cmd.ProcessState, out.Bytes())
		case <-time.After(10 * time.Millisecond): // polling a process that starts
		}
	}
	return false
}

// portAttempts bounds how many times a server is started on fresh ports
// after finding one taken.
const portAttempts = 5

// Stop kills the server and waits for it to exit. Its port stays the
// server's: Start starts it again there.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill() // fails only if it has exited already
	<-s.exited
	s.cmd = nil
}

// answers reports whether the server on s's port answers and is the
// process pid (not some other Redis that took the port).
func (s *Server) answers(pid int) bool {
	c, err := connectNode(s.URL())
	if err != nil {
		return false
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := c.Do(ctx, c.B().Info().Section("server").Build()).ToString()
	if err != nil {
		return false
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			return strings.TrimSpace(v) == strconv.Itoa(pid)
		}
	}
	return false
}
