package redisstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/redistest"
	"github.com/quotad/quotad/internal/tiers"
)

// slot is Redis Cluster's: CRC16 (XMODEM) of the key's hash tag, or of
// the whole key without one, mod 16384, as the cluster specification's
// examples read tags.
func TestSlot(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Errorf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	for _, c := range []struct {
		name, key, tag string
	}{
		{"no tag", "acme", "acme"},
		{"a tag", "{user1000}.following", "user1000"},
		{"another key of the tag", "{user1000}.followers", "user1000"},
		{"an empty tag: the whole key", "foo{}{bar}", "foo{}{bar}"},
		{"from the first '{' to the first '}' after it", "foo{{bar}}zap", "{bar"},
		{"the first tag", "foo{bar}{zap}", "bar"},
		{"no '}'", "foo{bar", "foo{bar"},
		{"quotad's", "quotad:{api_calls/acme}:second", "api_calls/acme"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got, want := slot(c.key), crc16(c.tag)%slots; got != want {
				t.Errorf("slot(%q) = %d, want %d (of %q)", c.key, got, want, c.tag)
			}
		})
	}
}

// A store given one node of a Redis Cluster, or several, finds the
// others: checks count on every node, each customer's keys on the node of
// their hash slot; Shard is that slot, as the cluster computes it, for
// both tags and whatever the prefix. Before connecting, and on a single
// Redis, it is 0. A cluster has no database but 0.
func TestClusterShards(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	charge := func(customer string, byMetric bool) *quota.Charge {
		c := &quota.Charge{Customer: customer, Metric: "api_calls", Cost: 1, At: at, MetricCapacity: byMetric, Spans: []quota.Span{
			{Key: quota.CounterKey{Customer: customer, Metric: "api_calls", Window: tiers.Second, Start: at}},
			{Key: quota.CounterKey{Customer: customer, Metric: "api_calls", Window: tiers.Minute, Start: at}},
		}}
		if byMetric {
			c.Globals = []quota.GlobalKey{{Metric: "api_calls", Window: tiers.Second, Start: at}}
		}
		return c
	}
	for _, c := range []struct {
		name, url, prefix string
	}{
		{"one node", cluster.URL(), "p1:"},
		{"one node, database 0", cluster.URL() + "/0", "p2:"},
		{"several nodes", fmt.Sprintf("redis://127.0.0.1:%d?addr=127.0.0.1:%d",
			cluster.Node(1).Port(), cluster.Node(2).Port()), "p3:"},
		{"a prefix with a hash tag", cluster.URL(), "app{x}:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := New(c.url, Options{Prefix: c.prefix, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.Shard(charge("acme", false)); got != 0 {
				t.Errorf("shard before connecting: %d, want 0", got)
			}
			if err := s.Connect(context.Background()); err != nil {
				t.Fatal(err)
			}
			catalog := quotafake.NewCatalog()
			catalog.PutMetric("api_calls", nil)
			ledger := quotafake.NewLedger()
			engine := quota.New(quota.Options{Catalog: catalog, Counts: ledger, Requests: ledger, Maintenance: ledger, Audits: ledger,
				Shared: s, SharedClock: true})
			onNode := make([]int, cluster.Nodes())
			for i := range 30 {
				customer := fmt.Sprintf("c%d", i)
				catalog.PutCustomer(customer, tiers.Anchor{}, []tiers.Limit{{Metric: "api_calls", Window: tiers.Minute, Limit: 5}})
				d, err := engine.Check(context.Background(), quota.Request{Customer: customer, Metric: "api_calls", Cost: 1})
				if err != nil || !d.Allowed || d.Degraded {
					t.Fatalf("check of %s: %+v, %v; want allowed, not degraded", customer, d, err)
				}
				key := s.key(customer, "api_calls", "", false)
				n := cluster.NodeOf(key)
				onNode[n]++
				node := cluster.Node(n).Client()
				if got, err := node.Do(context.Background(), node.B().Exists().Key(key).Build()).AsInt64(); err != nil || got != 1 {
					t.Errorf("%s: EXISTS on node %d = %d, %v; want 1", key, n, got, err)
				}
				for _, byMetric := range []bool{false, true} {
					ch := charge(customer, byMetric)
					keys := s.appendKeys(nil, &quota.SharedOp{Charges: []quota.Charge{*ch}, Expect: make([]string, len(ch.Spans)+len(ch.Globals))})
					for _, k := range keys {
						if got, want := s.Shard(ch), cluster.Slot(k); got != want {
							t.Errorf("shard of %s's charge (by metric %t) %d; key %s is in slot %d", customer, byMetric, got, k, want)
						}
					}
				}
			}
			if c.prefix == "app{x}:" {
				return // every key in the prefix's slot
			}
			for n, count := range onNode {
				if count == 0 {
					t.Errorf("no customer of 30 on node %d: %v", n, onNode)
				}
			}
		})
	}

	t.Run("database 1", func(t *testing.T) {
		s, err := New(cluster.URL()+"/1", Options{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		err = s.Connect(context.Background())
		if !errors.Is(err, tiers.ErrUnavailable) {
			t.Fatalf("connect to a cluster with database 1: %v, want unavailable", err)
		}
		t.Logf("database 1: %v", err)
	})

	t.Run("single Redis", func(t *testing.T) {
		s, err := New(redistest.ServerURL(t), Options{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Connect(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			if got := s.Shard(charge(fmt.Sprintf("c%d", i), i%2 == 0)); got != 0 {
				t.Fatalf("shard of c%d on a single Redis: %d, want 0", i, got)
			}
		}
	})
}
