// Package testserver finds the server a package's integration tests run
// against: the URL in an environment variable when it is set (CI, and
// machines running the server), otherwise one container started for the
// whole test binary. In CI, where the variable must be set, a missing one
// fails the tests rather than starting a container. dbtest and redistest
// share it so that both say the same things the same way.
package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Source is one kind of test server. Its zero state is ready to use once
// the fields are set; URL looks the server up once per test binary.
type Source struct {
	EnvURL  string // the variable that points tests at a server
	Server  string // what the server is, in messages: "PostgreSQL"
	Tests   string // whose tests need it, in messages: "database"
	Example string // a URL for EnvURL, shown when no container starts
	// Start starts a container within ctx and returns its URL.
	Start func(ctx context.Context) (string, error)

	once sync.Once
	url  string
	err  error
}

// URL returns the URL of the test server, starting a container if no URL
// is configured; it fails t when there is no server to be had.
func (s *Source) URL(t testing.TB) string {
	t.Helper()
	s.once.Do(func() {
		if u := os.Getenv(s.EnvURL); u != "" {
			s.url = u
			return
		}
		if os.Getenv("CI") != "" {
			s.err = errors.New(s.EnvURL + " is not set and CI is: " + s.Tests + " tests need a " + s.Server + " server")
			return
		}
		s.url, s.err = s.startContainer()
		s.err = s.containerError(s.err)
	})
	if s.err != nil {
		t.Fatalf("test %s: %v", s.Tests, s.err)
	}
	return s.url
}

// startContainer starts the container, allowing it minutes to come up
// (an image to pull, a cold machine). The container lives as long as the
// test binary; testcontainers' reaper removes it when the process exits.
func (s *Source) startContainer() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return s.Start(ctx)
}

// containerError says, when no container could be started, which variable
// would have let the tests use a server of their own: testcontainers' own
// message ("rootless Docker not found") does not.
func (s *Source) containerError(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s is not set, and no %s container could be started (%w): set %s to a %s URL such as %s, or make Docker available", s.EnvURL, s.Server, err, s.EnvURL, s.Server, s.Example)
}

// CheckContainerError fails t unless s's error for a container that could
// not start names s.EnvURL, keeps the cause, and shows a URL with scheme
// (such as "redis://"); it is the test each Source's package runs.
func CheckContainerError(t *testing.T, s *Source, scheme string) {
	t.Helper()
	cause := errors.New("rootless Docker not found")
	err := s.containerError(cause)
	if err == nil {
		t.Fatal("got nil, want an error")
	}
	for _, want := range []string{s.EnvURL, "rootless Docker not found", scheme} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got %q, want it to contain %q", err, want)
		}
	}
	if !errors.Is(err, cause) {
		t.Errorf("got %v, want it to wrap %v", err, cause)
	}
	if err := s.containerError(nil); err != nil {
		t.Errorf("containerError(nil) = %v, want nil", err)
	}
}
