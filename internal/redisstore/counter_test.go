package redisstore_test

import (
	"testing"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/countertest"
)

// The counter contract, run against the shared counter over Redis, every
// algorithm: windows follow each charge's At (not Redis's clock), and
// each counter keeps its keys under a prefix of its own. Subjects have
// keys of their own.
func TestCounterContract(t *testing.T) {
	t.Parallel()
	windows, at := countertest.Short()
	countertest.Run(t, countertest.Harness{Windows: windows, At: at, ShortWindows: true, Subjects: true,
		New: func(t *testing.T, _ ...string) quota.Counter {
			return quota.NewShared(newStore(t), false)
		}})
}
