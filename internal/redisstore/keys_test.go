package redisstore

import (
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// Every key of one call carries one hash tag, so that the call stays in one
// hash slot of a Redis Cluster: the customer's metric's, or the metric's
// when the call reaches the metric's global windows. Resets delete the keys
// calls write, under either tag.
func TestKeysOfACallShareOneHashTag(t *testing.T) {
	s, err := New("redis://127.0.0.1:6379/0", Options{Prefix: "p:"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	spans := []quota.Span{
		{Key: quota.CounterKey{Customer: "acme:eu@1", Metric: "api_calls", Window: tiers.Second, Start: at}},
		{Key: quota.CounterKey{Customer: "acme:eu@1", Metric: "api_calls", Window: tiers.Minute, Start: at}},
	}
	for _, c := range []struct {
		name    string
		charge  quota.Charge
		wantTag string
	}{
		{"customer's", quota.Charge{Customer: "acme:eu@1", Metric: "api_calls", Cost: 1, At: at, Spans: spans},
			"api_calls/acme:eu@1"},
		{"metric's", quota.Charge{Customer: "acme:eu@1", Metric: "api_calls", Cost: 1, At: at, Spans: spans,
			MetricCapacity: true, Globals: []quota.GlobalKey{{Metric: "api_calls", Window: tiers.Second, Start: at}}},
			"api_calls"},
	} {
		t.Run(c.name, func(t *testing.T) {
			keys := s.appendKeys(nil, &quota.SharedOp{Charges: []quota.Charge{c.charge}, Expect: make([]string, 1+len(c.charge.Globals))})
			if len(keys) != 1+len(c.charge.Globals) { // the customer's, and the metric's if it counts
				t.Fatalf("keys %q", keys)
			}
			for _, k := range keys {
				if got := tag(k); got != c.wantTag {
					t.Errorf("key %q has tag %q, want %q", k, got, c.wantTag)
				}
				if !strings.HasPrefix(k, "p:") {
					t.Errorf("key %q without the prefix", k)
				}
			}
			cleared := map[string]bool{}
			for _, byMetric := range []bool{false, true} {
				cleared[s.key("acme:eu@1", "api_calls", "", byMetric)] = true
			}
			if !cleared[keys[0]] {
				t.Errorf("key %q is not among those a reset deletes", keys[0])
			}
		})
	}
}

// tag returns a key's hash tag as Redis Cluster reads it: between the first
// '{' and the first '}' after it, if not empty; else the whole key.
func tag(k string) string {
	i := strings.IndexByte(k, '{')
	if i < 0 {
		return k
	}
	j := strings.IndexByte(k[i+1:], '}')
	if j <= 0 {
		return k
	}
	return k[i+1 : i+1+j]
}
