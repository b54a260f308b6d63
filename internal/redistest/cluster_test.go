package redistest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/rueidis"

	"github.com/quotad/quotad/internal/redistest"
)

// A test's cluster is whole once started: a client given one node's URL
// finds every node, each key lands on the node NodeOf names, and every
// node serves some. With a node stopped, the others go on serving their
// slots, also once they agree it failed; started again, it rejoins with
// its slots.
func TestCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	o, err := rueidis.ParseURL(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	o.DisableCache = true
	o.DisableRetry = true
	cl, err := rueidis.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if cl.Mode() != rueidis.ClientModeCluster {
		t.Fatalf("a client of %s is in mode %s, want cluster", c.URL(), cl.Mode())
	}
	ctx := context.Background()
	set := func(key string) error { return cl.Do(ctx, cl.B().Set().Key(key).Value("1").Build()).Error() }

	byNode := make([][]string, c.Nodes())
	for i := 0; i < 60; i++ {
		key := fmt.Sprintf("{k%d}:x", i)
		if err := set(key); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		n := c.NodeOf(key)
		byNode[n] = append(byNode[n], key)
		node := c.Node(n).Client()
		if got, err := node.Do(ctx, node.B().Exists().Key(key).Build()).AsInt64(); err != nil || got != 1 {
			t.Errorf("key %s: EXISTS on node %d = %d, %v; want 1", key, n, got, err)
		}
	}
	for n, keys := range byNode {
		node := c.Node(n).Client()
		size, err := node.Do(ctx, node.B().Dbsize().Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if size != int64(len(keys)) || size == 0 {
			t.Fatalf("node %d holds %d keys, want the %d of its slots (of 60), at least one", n, size, len(keys))
		}
	}

	c.Node(1).Stop()
	check := func(when string) {
		t.Helper()
		for n, keys := range byNode {
			err := set(keys[0])
			if n == 1 && err == nil {
				t.Errorf("%s: SET %s on the stopped node succeeded", when, keys[0])
			}
			if n != 1 && err != nil {
				t.Errorf("%s: SET %s on running node %d: %v", when, keys[0], n, err)
			}
		}
	}
	check("node 1 stopped")
	c.WaitFailed(1)
	check("node 1 failed")

	c.Node(1).Start()
	c.WaitHealthy()
	for n, keys := range byNode {
		// The client's connection to node 1 broke: the first call may
		// fail with it, a second redials.
		if err := set(keys[0]); err != nil {
			if err = set(keys[0]); err != nil {
				t.Errorf("node 1 started again: SET %s on node %d: %v", keys[0], n, err)
			}
		}
	}
}
