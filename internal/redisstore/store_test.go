package redisstore_test

import (
	"testing"
	"time"

	"github.com/quotad/quotad/internal/redisstore"
	"github.com/quotad/quotad/internal/redistest"
)

// newStore returns a Store on the test Redis, its keys under a prefix of
// its own.
func newStore(t testing.TB) *redisstore.Store { return open(t, redistest.Prefix(t)) }

// open returns a Store on the test Redis with its keys under prefix: with
// the prefix of another, another process's connections to its keys.
func open(t testing.TB, prefix string) *redisstore.Store {
	t.Helper()
	// A busy machine can hold a call past the default timeout (250ms), and
	// a call timed out counts as Redis down: the check is then counted in
	// process, degraded. These tests are not about outages.
	s, err := redisstore.New(redistest.ServerURL(t), redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
