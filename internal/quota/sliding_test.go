package quota

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/quotad/quotad/internal/tiers"
)

// TestShardIndex holds a shard's hash index to a map over random adds,
// lookups and removals: every key added and not removed is found, with
// its own bucket, and nothing else is.
func TestShardIndex(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		s := newSlidingCounters()
		var sh shard
		type key struct {
			customer string
			w        tiers.Window
		}
		model := map[key]int64{}
		customers := rapid.IntRange(1, 300).Draw(rt, "customers")
		for i := range rapid.IntRange(1, 2000).Draw(rt, "steps") {
			k := key{fmt.Sprintf("c%d", rapid.IntRange(0, customers-1).Draw(rt, "customer")),
				rapid.SampledFrom([]tiers.Window{tiers.Second, tiers.Minute}).Draw(rt, "window")}
			pair := s.pairHash(k.customer, "m")
			h := windowHash(pair, k.w)
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op < 6: // look up, adding when missing
				e := sh.find(h, k.customer, "m", k.w)
				want, ok := model[k]
				if (e != nil) != ok {
					rt.Fatalf("step %d: %v found %v, want %v", i, k, e != nil, ok)
				}
				if e == nil {
					e = sh.add(h, k.customer, "m", k.w)
					want = int64(i)
					e.cur = want
					model[k] = want
				}
				if e.cur != want || e.customer != k.customer || e.window != k.w {
					rt.Fatalf("step %d: %v holds %+v, want count %d", i, k, *e, want)
				}
			default: // remove one customer's keys
				n := sh.scan(func(e *entry) bool { return e.customer == k.customer })
				removed := 0
				for mk := range model {
					if mk.customer == k.customer {
						delete(model, mk)
						removed++
					}
				}
				if n != removed {
					rt.Fatalf("step %d: scan removed %d, want %d", i, n, removed)
				}
			}
			if sh.live != len(model) {
				rt.Fatalf("step %d: %d live entries, want %d", i, sh.live, len(model))
			}
		}
	})
}
