// Package redistest gives tests a real Redis, isolated by key prefix.
//
// The server comes from QUOTAD_TEST_REDIS_URL when it is set (CI, and
// machines running Redis); otherwise one container is started with
// testcontainers-go for the whole test binary. Each test takes a fresh key
// prefix (Prefix), whose keys are deleted when it ends, so tests and
// packages run in parallel on one Redis. When no Redis can be had, tests
// fail: they are never skipped. A test that needs a Redis to stop starts
// its own server (StartServer).
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/testcontainers/testcontainers-go/modules/redis"
)

// EnvURL names the variable that points tests at a Redis server.
const EnvURL = "QUOTAD_TEST_REDIS_URL"

var (
	serverOnce sync.Once
	serverURL  string
	serverErr  error
)

// ServerURL returns the URL of the test Redis, starting a container if no
// URL is configured.
func ServerURL(t testing.TB) string {
	t.Helper()
	serverOnce.Do(func() {
		if u := os.Getenv(EnvURL); u != "" {
			serverURL = u
			return
		}
		if os.Getenv("CI") != "" {
			serverErr = errors.New(EnvURL + " is not set and CI is: Redis tests need a Redis server")
			return
		}
		serverURL, serverErr = startContainer()
	})
	if serverErr != nil {
		t.Fatalf("test Redis: %v", serverErr)
	}
	return serverURL
}

func startContainer() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The container lives as long as the test binary; testcontainers'
	// reaper removes it when the process exits.
	c, err := redis.Run(ctx, "redis:7-alpine")
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
		for _, k := range e.Elements {
			// One key a command: keys of several hash slots cannot share one.
			if err := c.Do(ctx, c.B().Unlink().Key(k).Build()).Error(); err != nil {
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
// test may stop and start again.
type Server struct {
	t    testing.TB
	port int
	cmd  *exec.Cmd
}

// StartServer starts a redis-server (from PATH) on a free loopback port,
// without persistence, and stops it when t ends.
func StartServer(t testing.TB) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not installed: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{t: t, port: port}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// URL returns the server's URL.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

// Start starts the server on its port, if it is not running, and returns
// once it answers.
func (s *Server) Start() {
	s.t.Helper()
	if s.cmd != nil {
		return
	}
	s.cmd = exec.Command("redis-server", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !s.answers() {
		if time.Now().After(deadline) {
			s.Stop()
			s.t.Fatalf("redis-server on port %d does not answer", s.port)
		}
		time.Sleep(10 * time.Millisecond) // polling a process that starts
	}
}

// Stop kills the server and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

func (s *Server) answers() bool {
	c, err := connect(s.URL())
	if err != nil {
		return false
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return c.Do(ctx, c.B().Ping().Build()).Error() == nil
}
