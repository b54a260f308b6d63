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
// the prefix of another, another process's connections to its keys. A
// call has seconds to answer, not the default's 250ms: on a busy machine
// (the race detector, parallel tests) a slow answer is no outage, and these
// tests count on every call reaching Redis.
func open(t testing.TB, prefix string) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(redistest.ServerURL(t), redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
