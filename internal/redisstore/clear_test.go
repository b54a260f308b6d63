package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/quotad/quotad/internal/redistest"
)

// owned names a customer's keys of a metric, its own or a subject's, under
// both tags, under the prefix of the Store they are read with.
type owned struct{ customer, metric, subject string }

func (o owned) keys(s *Store) []string {
	return []string{s.key(o.customer, o.metric, o.subject, false), s.key(o.customer, o.metric, o.subject, true)}
}

// A reset deletes the customer's keys of the metrics it names, under
// either tag, its subjects' (whose names no one keeps) included, and no
// other key: neither another customer's, nor another metric's, nor those
// of another prefix, even where a pattern that did not escape a glob
// character of the customer, the metric or the prefix would match them.
func TestClearDeletesTheSubjectsKeys(t *testing.T) {
	t.Parallel()
	base := redistest.Prefix(t)
	redis := redistest.Client(t)
	for i, c := range []struct {
		name     string
		prefix   string // after the test's
		customer string
		metrics  []string
		gone     []owned
		kept     []owned
		// other is another prefix, after the test's: its keys (kept) have
		// the customer's and the first metric's names.
		other string
	}{{
		name: "one metric", customer: "acme", metrics: []string{"api_calls"},
		gone: []owned{{"acme", "api_calls", ""}, {"acme", "api_calls", "alice"}, {"acme", "api_calls", "team/7:eu"}},
		kept: []owned{{"acme", "exports", "alice"}, {"acme:eu", "api_calls", "alice"}, {"bob", "api_calls", "acme"},
			{"bob", "api_calls", "acme/alice"}, {"acm", "api_calls", "e/alice"}},
	}, {
		name: "several metrics", customer: "acme", metrics: []string{"api_calls", "exports"},
		gone: []owned{{"acme", "api_calls", "alice"}, {"acme", "exports", ""}, {"acme", "exports", "alice"},
			{"acme", "exports", "team/7:eu"}},
		kept: []owned{{"acme", "tokens", "alice"}, {"acme", "api_calls.v2", "alice"}, {"acme:eu", "exports", "alice"},
			{"bob", "exports", "acme/alice"}},
	}, {
		// Valid ids have none, but the store does not rely on it.
		name: "glob characters in the customer and the metric", customer: "a*[c]?", metrics: []string{"m?"},
		gone: []owned{{"a*[c]?", "m?", "s"}},
		kept: []owned{{"ab[c]x", "m?", "s"}, {"a*cx", "m?", "s"}, {"a*[c]?", "mx", "s"}},
	}, {
		name: "glob characters, several metrics", customer: `a\*`, metrics: []string{"m?", "n*"},
		gone: []owned{{`a\*`, "m?", "s"}, {`a\*`, "n*", "s"}},
		kept: []owned{{`a\x`, "m?", "s"}, {`a\*`, "mx", "s"}, {`a\*`, "nx", "s"}},
	}, {
		name: "glob characters in the prefix", prefix: "p*:", other: "pq:", customer: "acme", metrics: []string{"api_calls"},
		gone: []owned{{"acme", "api_calls", "alice"}},
	}} {
		t.Run(c.name, func(t *testing.T) {
			prefix := fmt.Sprintf("%s%d:%s", base, i, c.prefix)
			s, err := New(redistest.ServerURL(t), Options{Prefix: prefix, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var gone, kept []string
			for _, o := range c.gone {
				gone = append(gone, o.keys(s)...)
			}
			for _, o := range c.kept {
				kept = append(kept, o.keys(s)...)
			}
			if c.other != "" {
				other := &Store{prefix: fmt.Sprintf("%s%d:%s", base, i, c.other)}
				for _, o := range append(c.gone, owned{c.customer, c.metrics[0], "zed"}) {
					kept = append(kept, o.keys(other)...)
				}
			}
			mustSet(t, redis, append(gone, kept...)...)
			if err := s.Clear(context.Background(), c.customer, c.metrics); err != nil {
				t.Fatal(err)
			}
			wantExist(t, redis, gone, false)
			wantExist(t, redis, kept, true)
		})
	}
}

// On a Redis Cluster, a reset finds the subjects' keys on every node (a
// node scans only its own): the keys of the metrics below fall on each of
// the cluster's three.
func TestClearOnACluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	s := connectedAt(t, cluster.URL())
	var metrics []string
	var gone, kept []string
	onNode := make([]int, cluster.Nodes())
	for i := range 12 {
		m := fmt.Sprintf("m%d", i)
		metrics = append(metrics, m)
		for _, subject := range []string{"", "alice", "team/7"} {
			for _, k := range (owned{"acme", m, subject}).keys(s) {
				gone = append(gone, k)
				onNode[cluster.NodeOf(k)]++
			}
		}
		kept = append(kept, owned{"bob", m, "alice"}.keys(s)...)
		kept = append(kept, owned{"acme", m + "x", "alice"}.keys(s)...)
	}
	for n, count := range onNode {
		if count == 0 {
			t.Fatalf("no key of acme on node %d: %v", n, onNode)
		}
	}
	set := func(keys []string) {
		for _, k := range keys {
			mustSet(t, cluster.Node(cluster.NodeOf(k)).Client(), k)
		}
	}
	exist := func(keys []string, want bool) {
		t.Helper()
		for _, k := range keys {
			wantExist(t, cluster.Node(cluster.NodeOf(k)).Client(), []string{k}, want)
		}
	}
	set(append(gone, kept...))
	// One metric (the pattern names it), then every metric (any metric
	// matches, and the keys are kept for those named).
	if err := s.Clear(context.Background(), "acme", metrics[:1]); err != nil {
		t.Fatal(err)
	}
	exist(gone[:6], false) // m0's: 3 subjects' ("" is acme's own), both tags
	exist(gone[6:], true)
	if err := s.Clear(context.Background(), "acme", metrics); err != nil {
		t.Fatal(err)
	}
	exist(gone, false)
	exist(kept, true)
}

// mustSet sets each key of keys.
func mustSet(t *testing.T, c rueidis.Client, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if err := c.Do(context.Background(), c.B().Set().Key(k).Value("0 0 0 1|").Build()).Error(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
}

// wantExist checks that each key of keys exists, or not.
func wantExist(t *testing.T, c rueidis.Client, keys []string, want bool) {
	t.Helper()
	for _, k := range keys {
		n, err := c.Do(context.Background(), c.B().Exists().Key(k).Build()).AsInt64()
		if err != nil {
			t.Fatalf("EXISTS %s: %v", k, err)
		}
		if got := n == 1; got != want {
			t.Errorf("key %s exists: %v, want %v", k, got, want)
		}
	}
}
