package redisstore_test

import (
	"testing"

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
	s, err := redisstore.New(redistest.ServerURL(t), redisstore.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
