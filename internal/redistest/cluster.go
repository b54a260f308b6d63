package redistest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// NodeTimeout is the cluster-node-timeout of a test's cluster: how long a
// master goes unanswered before the others suspect it, and about how long
// after that they agree it has failed. Long enough that a busy machine
// does not make a running node look failed.
const NodeTimeout = 3 * time.Second

// clusterTimeout bounds how long StartCluster, WaitHealthy and WaitFailed
// wait for the nodes to agree.
const clusterTimeout = time.Minute

// Cluster is a Redis Cluster of a test's own: masters without replicas on
// loopback ports, node i serving the i-th of equal ranges of the hash
// slots. It does not require full coverage
// (cluster-require-full-coverage no): while a master is stopped, the
// others go on serving their slots. Each node keeps its cluster
// configuration in a directory of the test's, so a stopped node started
// again (Server.Start) rejoins with its slots; it keeps no data. Its
// methods are for the test's goroutine.
type Cluster struct {
	t     testing.TB
	nodes []*Server
}

// StartCluster starts a cluster of masters nodes, forms it (every node
// its slots, every node met), waits until every node finds it whole
// (WaitHealthy), and stops its nodes when t ends. It needs redis-server
// 7.0 or later (cluster-port, CLUSTER ADDSLOTSRANGE).
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	mustHaveRedisServer(t)
	if masters < 1 {
		t.Fatalf("a cluster of %d masters", masters)
	}
	dir := t.TempDir()
	// A node listens on its port for clients and on a bus port for the
	// other nodes; both are chosen, as port+10000 may be taken or out of
	// range.
	c := &Cluster{t: t}
	buses := make([]int, masters)
	for i := range masters {
		for attempt := 0; ; attempt++ {
			if attempt == portAttempts {
				t.Fatalf("cluster node %d: %d pairs of free ports in a row were taken before it could listen", i, portAttempts)
			}
			ports := freePorts(t, 2)
			port, bus := ports[0], ports[1]
			s := &Server{t: t, port: port, args: []string{
				"--dir", dir,
				"--cluster-enabled", "yes",
				"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", port)),
				"--cluster-port", strconv.Itoa(bus),
				"--cluster-node-timeout", strconv.FormatInt(NodeTimeout.Milliseconds(), 10),
				"--cluster-require-full-coverage", "no",
			}}
			if s.startOnce() {
				continue
			}
			t.Cleanup(s.Stop)
			c.nodes = append(c.nodes, s)
			buses[i] = bus
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	for i, s := range c.nodes {
		first, last := c.slots(i)
		cl := s.Client()
		if err := cl.Do(ctx, cl.B().ClusterAddslotsrange().StartSlotEndSlot().
			StartSlotEndSlot(int64(first), int64(last)).Build()).Error(); err != nil {
			t.Fatalf("node %d: CLUSTER ADDSLOTSRANGE %d %d: %v", i, first, last, err)
		}
	}
	first := c.nodes[0].Client()
	for i, s := range c.nodes[1:] {
		bus := buses[i+1]
		if err := first.Do(ctx, first.B().ClusterMeet().Ip("127.0.0.1").Port(int64(s.port)).
			ClusterBusPort(int64(bus)).Build()).Error(); err != nil {
			t.Fatalf("CLUSTER MEET node %d: %v", i+1, err)
		}
	}
	c.WaitHealthy()
	return c
}

// slots returns the first and last slot of node i.
func (c *Cluster) slots(i int) (first, last int) {
	n := len(c.nodes)
	return i * Slots / n, (i+1)*Slots/n - 1
}

// URL returns the URL of the cluster's first node, from which a client
// discovers the others.
func (c *Cluster) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d", c.nodes[0].port) }

// Nodes returns the number of nodes.
func (c *Cluster) Nodes() int { return len(c.nodes) }

// Node returns node i, which the test may stop and start again.
func (c *Cluster) Node(i int) *Server { return c.nodes[i] }

// Slot returns key's hash slot, as a running node computes it (CLUSTER
// KEYSLOT): the first that answers.
func (c *Cluster) Slot(key string) int {
	c.t.Helper()
	var errs []error
	for i, s := range c.nodes {
		if !s.Running() {
			continue
		}
		cl := s.Client()
		slot, err := cl.Do(context.Background(), cl.B().ClusterKeyslot().Key(key).Build()).AsInt64()
		if err == nil {
			return int(slot)
		}
		errs = append(errs, fmt.Errorf("node %d: %w", i, err))
	}
	c.t.Fatalf("CLUSTER KEYSLOT %s: no node of the cluster answers: %v", key, errors.Join(errs...))
	return -1
}

// NodeOf returns the node that serves key: the owner of its hash slot.
func (c *Cluster) NodeOf(key string) int {
	c.t.Helper()
	slot := c.Slot(key)
	for i := range c.nodes {
		if _, last := c.slots(i); slot <= last {
			return i
		}
	}
	c.t.Fatalf("slot %d of key %s beyond the last", slot, key)
	return -1
}

// WaitHealthy waits until every running node knows every node and finds
// every slot served (cluster_state:ok, cluster_slots_ok:16384): after
// StartCluster, and after a stopped node is started again.
func (c *Cluster) WaitHealthy() {
	c.t.Helper()
	want := map[string]string{
		"cluster_state":       "ok",
		"cluster_slots_ok":    strconv.Itoa(Slots),
		"cluster_known_nodes": strconv.Itoa(len(c.nodes)),
	}
	c.waitAll("every node to find the cluster whole", func(i int, s *Server) (bool, string) {
		info, err := c.info(s)
		if err != nil {
			return false, fmt.Sprintf("node %d: CLUSTER INFO: %v", i, err)
		}
		for k, v := range want {
			if info[k] != v {
				return false, fmt.Sprintf("node %d: %s:%s", i, k, info[k])
			}
		}
		return true, ""
	})
}

// WaitFailed waits until every other running node has flagged node i as
// failed (not merely suspected: the cluster agreed), as a long outage
// looks once the cluster has noticed it.
func (c *Cluster) WaitFailed(i int) {
	c.t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d@", c.nodes[i].port)
	c.waitAll(fmt.Sprintf("the other nodes to flag node %d failed", i), func(j int, s *Server) (bool, string) {
		if j == i {
			return true, ""
		}
		cl := s.Client()
		nodes, err := cl.Do(context.Background(), cl.B().ClusterNodes().Build()).ToString()
		if err != nil {
			return false, fmt.Sprintf("node %d: CLUSTER NODES: %v", j, err)
		}
		for line := range strings.Lines(nodes) {
			f := strings.Fields(line)
			if len(f) > 2 && strings.HasPrefix(f[1], addr) {
				for flag := range strings.SplitSeq(f[2], ",") {
					if flag == "fail" {
						return true, ""
					}
				}
				return false, fmt.Sprintf("node %d sees node %d as %s", j, i, f[2])
			}
		}
		return false, fmt.Sprintf("node %d does not know node %d", j, i)
	})
}

// waitAll polls ok for every running node until it holds for all of them
// at once, for at most clusterTimeout. ok also says what it found (or
// could not ask), for the failure message.
func (c *Cluster) waitAll(what string, ok func(i int, s *Server) (bool, string)) {
	c.t.Helper()
	deadline := time.Now().Add(clusterTimeout)
	for {
		all, last := true, ""
		for i, s := range c.nodes {
			if !s.Running() {
				continue
			}
			if good, found := ok(i, s); !good {
				all, last = false, found
				break
			}
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %v waiting for %s; last: %s", clusterTimeout, what, last)
		}
		<-time.After(20 * time.Millisecond) // polling the nodes' gossip
	}
}

// info returns a node's CLUSTER INFO fields. An error is no reason to
// stop waiting: a node started again breaks the connection its client
// had, which the next call makes afresh.
func (c *Cluster) info(s *Server) (map[string]string, error) {
	c.t.Helper()
	cl := s.Client()
	text, err := cl.Do(context.Background(), cl.B().ClusterInfo().Build()).ToString()
	if err != nil {
		return nil, err
	}
	info := map[string]string{}
	// RESP3 answers a verbatim string, which begins with its format.
	for line := range strings.Lines(strings.TrimPrefix(text, "txt:")) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			info[k] = v
		}
	}
	return info, nil
}
