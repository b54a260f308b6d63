package redisstore_test

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/quotad/quotad/internal/redisstore"
)

// newStore returns a Store on the test Redis, its keys under a prefix of
// its own.
func newStore(t *testing.T) *redisstore.Store { return open(t, newPrefix()) }

func newPrefix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "test:" + hex.EncodeToString(b[:]) + ":"
}

// open returns a Store on the test Redis with its keys under prefix: with
// the prefix of another, another process's connections to its keys.
func open(t *testing.T, prefix string) *redisstore.Store {
	t.Helper()
	url := os.Getenv("QUOTAD_TEST_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	s, err := redisstore.New(url, redisstore.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
