package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/redistest"
	"github.com/quotad/quotad/internal/tiers"
)

// setAt is when the sets of these tests are decided: the shared counter
// follows the charges' clock, so that buckets do not roll on.
var setAt = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)

// setOwner is a charge of the sets of these tests: a customer's metric,
// or its subject's, in the minute, under a hard limit.
type setOwner struct {
	customer, metric, subject string
	limit                     int64
}

func (o setOwner) charge(cost int64) quota.Charge {
	start, end := quota.Bounds(tiers.Minute, setAt, tiers.Anchor{})
	return quota.Charge{Customer: o.customer, Metric: o.metric, Subject: o.subject, Cost: cost, At: setAt,
		Out: make([]quota.Outcome, 1), Spans: []quota.Span{{
			Key: quota.CounterKey{Customer: o.customer, Metric: o.metric, Subject: o.subject, Window: tiers.Minute, Start: start},
			End: end, Rule: quota.Rule{Mode: tiers.Hard, Limit: o.limit, Size: o.limit, Threshold: o.limit, Ceiling: tiers.MaxLimit}}}}
}

// setStep is a set of a step of these tests (a cost per owner, in their
// order), whether it is admitted, what the owners' counters hold after
// it, and how many calls of the script each group of owners' server runs
// for it.
type setStep struct {
	name  string
	costs []int64
	ok    bool
	after []int64
	calls []int
}

// runSetSteps takes each step's set on s and checks its outcome, the
// counts (as another process reads them: a counter of its own, no mirror)
// and the calls each server ran (calls reads them per group of owners).
func runSetSteps(t *testing.T, s *Store, owners []setOwner, steps []setStep, calls func() []int) {
	t.Helper()
	ctx := context.Background()
	counter := quota.NewShared(s, false)
	for _, st := range steps {
		cs := make([]quota.Charge, len(owners))
		for i, o := range owners {
			cs[i] = o.charge(st.costs[i])
		}
		before := calls()
		ok, err := counter.Take(ctx, cs)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		after := calls()
		for i := range after {
			if n := after[i] - before[i]; n != st.calls[i] {
				t.Errorf("%s: %d calls of the script to group %d's server, want %d", st.name, n, i, st.calls[i])
			}
		}
		if ok != st.ok {
			t.Errorf("%s: admitted %v, want %v", st.name, ok, st.ok)
		}
		look := make([]quota.Charge, len(owners))
		for i, o := range owners {
			look[i] = o.charge(1)
		}
		if err := quota.NewShared(s, false).Peek(ctx, look); err != nil {
			t.Fatal(err)
		}
		for i, c := range look {
			if c.Out[0].Used != st.after[i] {
				t.Errorf("%s: %s's %s (subject %q) counts %d, want %d", st.name, c.Customer, c.Metric, c.Subject,
					c.Out[0].Used, st.after[i])
			}
		}
	}
}

// A set of charges of one customer — its api_calls, its subject alice's
// api_calls, its exports — is decided on a single Redis in one call of
// the script, all or nothing: admitted, or denied by any charge, with
// nothing written.
func TestSetInOneCall(t *testing.T) {
	t.Parallel()
	server := redistest.StartServer(t)
	s := connectedAt(t, server.URL())
	owners := []setOwner{{"acme", "api_calls", "", 10}, {"acme", "api_calls", "alice", 4}, {"acme", "exports", "", 5}}
	runSetSteps(t, s, owners, []setStep{
		{name: "within every limit", costs: []int64{3, 3, 3}, ok: true, after: []int64{3, 3, 3}, calls: []int{1}},
		{name: "exports denies", costs: []int64{1, 1, 3}, after: []int64{3, 3, 3}, calls: []int{1}},
		{name: "alice denies", costs: []int64{1, 2, 1}, after: []int64{3, 3, 3}, calls: []int{1}},
		{name: "up to exports' limit", costs: []int64{1, 1, 2}, ok: true, after: []int64{4, 4, 5}, calls: []int{1}},
	}, func() []int { return []int{scriptCalls(t, server)} })
}

// On a Redis Cluster, a set whose keys are in two hash slots (here on two
// nodes: api_calls, acme's and its subject's, in one; exports in the
// other) is taken slot by slot, one call each, in the order of its
// charges; when the second denies, what the first took is given back (a
// call more); when the first denies, the second is only looked at. So a
// denied set keeps nothing.
func TestSetShardByShard(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	s := connectedAt(t, cluster.URL())
	// A customer whose two metrics' keys are on two nodes.
	customer, nodes := "", [2]int{}
	for i := 0; customer == ""; i++ {
		if i == 100 {
			t.Fatal("no customer of 100 has its api_calls and exports on two nodes")
		}
		c := fmt.Sprintf("c%d", i)
		nodes = [2]int{cluster.NodeOf(s.key(c, "api_calls", "", false)), cluster.NodeOf(s.key(c, "exports", "", false))}
		if nodes[0] != nodes[1] {
			customer = c
		}
	}
	owners := []setOwner{{customer, "api_calls", "", 10}, {customer, "api_calls", "alice", 4}, {customer, "exports", "", 5}}
	for _, o := range owners {
		if s.Shard(&[]quota.Charge{o.charge(1)}[0]) != cluster.Slot(s.key(o.customer, o.metric, o.subject, false)) {
			t.Fatalf("%+v: its charge's shard is not its key's slot", o)
		}
	}
	runSetSteps(t, s, owners, []setStep{
		{name: "within every limit", costs: []int64{3, 3, 3}, ok: true, after: []int64{3, 3, 3}, calls: []int{1, 1}},
		{name: "exports, in the second slot, denies", costs: []int64{1, 1, 3}, after: []int64{3, 3, 3}, calls: []int{2, 1}},
		{name: "alice, in the first slot, denies", costs: []int64{1, 2, 1}, after: []int64{3, 3, 3}, calls: []int{1, 1}},
		{name: "up to exports' limit", costs: []int64{1, 1, 2}, ok: true, after: []int64{4, 4, 5}, calls: []int{1, 1}},
	}, func() []int {
		return []int{scriptCalls(t, cluster.Node(nodes[0])), scriptCalls(t, cluster.Node(nodes[1]))}
	})
}

// storeAt returns a Store on the Redis at url, its keys under "p:", closed
// when t ends; a call has seconds to answer, as open's do.
func storeAt(t testing.TB, url string) *Store {
	t.Helper()
	s, err := New(url, Options{Prefix: "p:", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// connectedAt returns storeAt's Store, connected.
func connectedAt(t testing.TB, url string) *Store {
	t.Helper()
	s := storeAt(t, url)
	if err := s.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}
