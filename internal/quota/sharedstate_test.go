package quota

import (
	"context"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// stateOf returns the shared state of customer's api_calls in s.
func stateOf(s *localCounters, customer string) string {
	l := s.lookupOf(&s.shards, customer, "api_calls", "")
	l.sh.mu.Lock()
	defer l.sh.mu.Unlock()
	return encodeState(&l)
}

// loadInto loads state v as customer's api_calls into s.
func loadInto(s *localCounters, customer, v string) error {
	l := s.lookupOf(&s.shards, customer, "api_calls", "")
	l.sh.mu.Lock()
	defer l.sh.mu.Unlock()
	return s.loadState(&l, v)
}

// takeOne takes c, filling out, on s.
func takeOne(s *localCounters, c *Charge, out []Outcome) bool {
	c.Out = out
	ok, _ := s.Take(context.Background(), []Charge{*c})
	return ok
}

// A state written by one counter and loaded by another reads back the
// same, for every algorithm, a sliding log of several entries included;
// and the counter that loaded it decides the next take as the first does.
func TestSharedStateRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	for _, alg := range []tiers.Algorithm{tiers.SlidingWindow, tiers.FixedWindow, tiers.SlidingLog, tiers.TokenBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			a, b := newLocalCounters(), newLocalCounters()
			charge := func(ms int64) *Charge {
				c := &Charge{Customer: "acme", Metric: "api_calls", Cost: 2, At: at.Add(time.Duration(ms) * time.Millisecond)}
				for _, w := range sharedWindows {
					c.Spans = append(c.Spans, Span{Key: CounterKey{Customer: "acme", Metric: "api_calls", Window: w},
						Rule: RuleFor(tiers.Limit{Metric: "api_calls", Window: w, Limit: 50, Algorithm: alg}, tiers.Metric{})})
				}
				return c
			}
			out := make([]Outcome, 2)
			for _, ms := range []int64{0, 7, 7, 400, 1300} {
				if ok := takeOne(a, charge(ms), out); !ok {
					t.Fatalf("take at +%dms denied", ms)
				}
			}
			v := stateOf(a, "acme")
			if v == "" {
				t.Fatal("no state after five takes")
			}
			if err := loadInto(b, "acme", v); err != nil {
				t.Fatalf("load %q: %v", v, err)
			}
			if got := stateOf(b, "acme"); got != v {
				t.Fatalf("loaded %q, reads back %q", v, got)
			}
			outA, outB := make([]Outcome, 2), make([]Outcome, 2)
			okA, okB := takeOne(a, charge(1500), outA), takeOne(b, charge(1500), outB)
			if okA != okB || outA[0] != outB[0] || outA[1] != outB[1] {
				t.Errorf("next take: %t %+v where it was written, %t %+v where it was loaded", okA, outA, okB, outB)
			}
			if err := loadInto(b, "acme", ""); err != nil || stateOf(b, "acme") != "" {
				t.Errorf("loading no state left %q (%v)", stateOf(b, "acme"), err)
			}
		})
	}
}

// Whatever a key holds, loading it fails or gives a state that reads back
// and loads again the same: never a panic, never a state half loaded.
func FuzzSharedState(f *testing.F) {
	for _, v := range []string{"", "0 1000 3 4|", "|3 5000 50 12", "2 1000 1 9 990:4 1000:5|1 60000 0 2",
		"2 1000 1 0|", "9 1 2 3|", "0 1000 3 4|9 1 2 3", "0 1 2|", "0 1 2 3", "2 1 1 3 x:y|", "0 1 2 3 4|"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		s := newLocalCounters()
		if err := loadInto(s, "acme", v); err != nil {
			if got := stateOf(s, "acme"); got != "" {
				t.Fatalf("%q refused (%v), yet the counter holds %q", v, err, got)
			}
			return
		}
		w := stateOf(s, "acme")
		again := newLocalCounters()
		if err := loadInto(again, "acme", w); err != nil {
			t.Fatalf("%q loaded as %q, which does not load: %v", v, w, err)
		}
		if got := stateOf(again, "acme"); got != w {
			t.Fatalf("%q loaded as %q, which loads as %q", v, w, got)
		}
	})
}
