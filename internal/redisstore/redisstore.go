// Package redisstore keeps quotad's short windows (second, minute) in
// Redis, where every quotad process shares them: a quota.SharedStore.
//
// Each check is one call of one Lua script (shortwindows.lua), loaded once
// and then called by its SHA-1, that decides every short window of the
// check and the metric's global windows at once, atomically, with the
// in-process counter's algorithms and exact integer arithmetic.
//
// Keys. The windows of one customer's metric share a hash tag, so that one
// script call stays within one hash slot and a Redis Cluster can serve it:
//
//	<prefix>{<metric>/<customer>}:<window>       state (a hash)
//	<prefix>{<metric>/<customer>}:<window>:log   a sliding log's entries (a list)
//
// A metric that declares a short-window capacity counts its global usage
// with every check, so its keys share the metric's tag instead:
//
//	<prefix>{<metric>}/<customer>:<window>[:log]
//	<prefix>{<metric>}:global:<window>
//
// Every key expires once it counts nothing (a window's state after three
// windows; a token bucket once its debt is paid off), but for a token
// bucket of limit 0, which never refills: it lasts until a reset.
//
// Cluster. rueidis asks the server it connects to for the cluster's slots
// (CLUSTER SLOTS), and serves a Redis Cluster from any one node's URL; a
// server without cluster support is used alone. In a cluster the store's
// shards (quota.SharedStore.Shard) are the hash slots, so that a node out
// of reach degrades only the charges of its own slots.
package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

//go:embed shortwindows.lua
var shortWindows string

// Options configure a Store.
type Options struct {
	// Prefix begins every key (default "quotad:"), so that one Redis can
	// serve other applications, or several quotad deployments.
	Prefix string
	// Timeout bounds each call, connecting included (default 250ms): a
	// Redis that does not answer in time counts as unreachable, and checks
	// go on in process.
	Timeout time.Duration
}

// DefaultPrefix begins every key unless Options say otherwise.
const DefaultPrefix = "quotad:"

// DefaultTimeout bounds each call unless Options say otherwise.
const DefaultTimeout = 250 * time.Millisecond

// Store is a quota.SharedStore in Redis. It is safe for concurrent use.
type Store struct {
	option  rueidis.ClientOption
	prefix  string
	timeout time.Duration
	script  *rueidis.Lua

	// client is nil until a connection succeeds: Redis may be down when
	// quotad starts, and rueidis dials when a client is made. Calls wait
	// for the one connecting; after a failed attempt, they fail at once
	// for a while (failed: when it failed, with err).
	ready  atomic.Pointer[rueidis.Client]
	mu     sync.Mutex
	failed time.Time
	err    error
	// cluster: the client serves a Redis Cluster (known once connected).
	cluster atomic.Bool
}

// redialEvery is how long after a failed connection attempt calls fail
// without trying again.
const redialEvery = time.Second

var _ quota.SharedStore = (*Store)(nil)

// New returns a Store for the Redis at url (redis://[user:password@]host:port/db,
// or rediss:// for TLS). For a Redis Cluster, url names one node or more
// (redis://host:port?addr=host2:port2&addr=...), and no database but 0: a
// cluster has no other, and refuses to connect with one. It connects when
// first used: an unreachable Redis is not an error here, only a bad URL
// is.
func New(url string, o Options) (*Store, error) {
	option, err := rueidis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	option.Dialer.Timeout = o.Timeout
	option.ConnWriteTimeout = o.Timeout
	// Checks need no client-side cache; without it rueidis needs no
	// tracking either. A call that failed is not sent again: the engine
	// goes on in process instead, within the check's time.
	option.DisableCache = true
	option.DisableRetry = true
	return &Store{option: option, prefix: o.Prefix, timeout: o.Timeout,
		script: rueidis.NewLuaScript(shortWindows)}, nil
}

// conn returns the client, connecting first if need be.
func (s *Store) conn() (rueidis.Client, error) {
	if c := s.ready.Load(); c != nil {
		return *c, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.ready.Load(); c != nil {
		return *c, nil
	}
	if time.Since(s.failed) < redialEvery {
		return nil, s.err
	}
	c, err := rueidis.NewClient(s.option)
	if err != nil {
		s.failed, s.err = time.Now(), err
		return nil, err
	}
	s.cluster.Store(c.Mode() == rueidis.ClientModeCluster)
	s.ready.Store(&c)
	return c, nil
}

// Connect connects now, if not yet connected: at start-up, to say early
// whether Redis answers. Calls connect by themselves otherwise.
func (s *Store) Connect(ctx context.Context) error {
	c, err := s.conn()
	if err != nil {
		return unavailable(err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return unavailable(c.Do(ctx, c.B().Ping().Build()).Error())
}

// Close closes the connections.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.ready.Swap(nil); c != nil {
		(*c).Close()
	}
}

// unavailable wraps a failed call: to quotad, Redis is then unreachable.
func unavailable(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: redis: %v", tiers.ErrUnavailable, err)
}

// Run implements quota.SharedStore: one call of the script.
func (s *Store) Run(ctx context.Context, op *quota.SharedOp) error {
	c := op.Charge
	keys, args := s.call(op)
	client, err := s.conn()
	if err != nil {
		return unavailable(err)
	}
	// Redis's own timeout, not what is left of the check's: a call is
	// judged by how Redis answers (a failure takes its shard out of use,
	// see quota.Failover), never by how long the check waited elsewhere
	// before it, nor by its client hanging up.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	v, err := s.script.Exec(ctx, client, keys, args).AsIntSlice()
	if err != nil {
		return unavailable(err)
	}
	if want := 2 + 4*len(c.Spans) + 3*len(c.Globals); len(v) != want {
		return unavailable(fmt.Errorf("the script answered %d numbers, not %d", len(v), want))
	}
	op.AnsweredMs, op.Allowed = v[0], v[1] == 1
	v = v[2:]
	for i := range c.Spans {
		copy(op.Spans[i][:], v[4*i:])
	}
	v = v[4*len(c.Spans):]
	for j := range c.Globals {
		copy(op.Globals[j][:], v[3*j:])
	}
	return nil
}

// Shard implements quota.SharedStore: in a Redis Cluster, the hash slot
// of c's keys (they share one, see call); 0 for a single Redis, or until
// connected.
func (s *Store) Shard(c *quota.Charge) int {
	if !s.cluster.Load() {
		return 0
	}
	var k string
	switch {
	case len(c.Spans) > 0:
		k = s.key(c.Customer, c.Metric, c.Spans[0].Key.Window, c.MetricCapacity)
	case len(c.Globals) > 0:
		k = s.globalKey(c.Globals[0].Metric, c.Globals[0].Window)
	}
	return int(slot(k))
}

// call returns the script's keys and arguments for op (see
// shortwindows.lua).
func (s *Store) call(op *quota.SharedOp) (keys, args []string) {
	c := op.Charge
	keys = make([]string, 0, 2*len(c.Spans)+len(c.Globals))
	args = make([]string, 0, 6+10*len(c.Spans)+2*len(c.Globals))
	i64 := func(n int64) { args = append(args, strconv.FormatInt(n, 10)) }
	i64(int64(op.Kind))
	i64(op.NowMs)
	i64(c.Cost)
	i64(op.AtMs)
	i64(int64(len(c.Spans)))
	i64(int64(len(c.Globals)))
	for i := range c.Spans {
		sp := &c.Spans[i]
		k := s.key(c.Customer, c.Metric, sp.Key.Window, c.MetricCapacity)
		keys = append(keys, k, k+":log")
		r := &sp.Rule
		i64(sp.Key.Window.Length().Milliseconds())
		i64(int64(r.Algorithm))
		i64(r.Threshold)
		i64(flag(r.Spare))
		i64(r.Capacity)
		i64(r.Ceiling)
		i64(r.Limit)
		i64(int64(c.GlobalOf(i) + 1))
		i64(op.Took[i].Hi)
		i64(op.Took[i].Lo)
	}
	for _, g := range c.Globals {
		keys = append(keys, s.globalKey(g.Metric, g.Window))
		i64(g.Window.Length().Milliseconds())
		i64(int64(c.SpanOf(g) + 1))
	}
	return keys, args
}

func flag(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// key returns the state key of a customer's metric in window w: tagged by
// the metric alone when the metric's global windows count with it.
func (s *Store) key(customer, metric string, w tiers.Window, byMetric bool) string {
	var b strings.Builder
	b.Grow(len(s.prefix) + len(metric) + len(customer) + 12)
	b.WriteString(s.prefix)
	b.WriteByte('{')
	b.WriteString(metric)
	if byMetric {
		b.WriteString("}/")
		b.WriteString(customer)
	} else {
		b.WriteByte('/')
		b.WriteString(customer)
		b.WriteByte('}')
	}
	b.WriteByte(':')
	b.WriteString(w.String())
	return b.String()
}

func (s *Store) globalKey(metric string, w tiers.Window) string {
	return s.prefix + "{" + metric + "}:global:" + w.String()
}

// Clear implements quota.SharedStore: it deletes the customer's keys of
// every short window of each metric, under either tag.
func (s *Store) Clear(ctx context.Context, customer string, metrics []string) error {
	client, err := s.conn()
	if err != nil {
		return unavailable(err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	cmds := make(rueidis.Commands, 0, 2*len(metrics))
	for _, m := range metrics {
		for _, byMetric := range []bool{false, true} {
			var keys []string // one hash slot
			for _, w := range tiers.Windows {
				if w.Short() {
					k := s.key(customer, m, w, byMetric)
					keys = append(keys, k, k+":log")
				}
			}
			cmds = append(cmds, client.B().Unlink().Key(keys...).Build())
		}
	}
	for _, r := range client.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return unavailable(err)
		}
	}
	return nil
}
