package redisstore_test

import (
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/countertest"
	"github.com/quotad/quotad/internal/redisstore"
	"github.com/quotad/quotad/internal/redistest"
)

// The counter contract, run against the shared counter over Redis, every
// algorithm: windows follow each charge's At (not Redis's clock), and
// each counter keeps its keys under a prefix of its own. A call has
// seconds to answer: a busy machine is no outage here.
func TestCounterContract(t *testing.T) {
	t.Parallel()
	windows, at := countertest.Short()
	countertest.Run(t, countertest.Harness{Windows: windows, At: at, ShortWindows: true,
		New: func(t *testing.T, _ ...string) quota.Counter {
			s, err := redisstore.New(redistest.ServerURL(t), redisstore.Options{Prefix: redistest.Prefix(t), Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			c := quota.NewShared(s, false)
			t.Cleanup(func() {
				if n := c.Mismatches(); n != 0 {
					t.Errorf("%d answers the script and the in-process arithmetic decided differently", n)
				}
			})
			return c
		}})
}
