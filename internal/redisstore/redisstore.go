// Package redisstore keeps quotad's short windows (second, minute) in
// Redis, where every quotad process shares them: a quota.SharedStore.
// Redis decides nothing: quota.SharedCounters decides each check, and one
// call of apply.lua writes the states the decision left only if the keys
// still hold what it saw; checks that come while calls are on their way
// share the next call (batch.go). docs/design.md, "Shared windows in
// Redis", describes once how, with the keys and a cluster's slots:
//
//	<prefix>{<metric>/<customer>}:s            a customer's metric, both short windows
//	<prefix>{<metric>}/<customer>:s            the same, for a metric with a short-window capacity
//	<prefix>{<metric>}:global:s                that metric's global usage
//	<prefix>{<metric>/<customer>}/<subject>:s  a subject's (<prefix>{<metric>}/<customer>/<subject>:s)
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

//go:embed apply.lua
var applyScript string

// Options configure a Store.
type Options struct {
	// Prefix begins every key (default "quotad:"), so that one Redis can
	// serve other applications, or several quotad deployments.
	Prefix string
	// Timeout (default 250ms) says when Redis is silent rather than slow:
	// a connection whose calls have had no answer for four times it (at
	// least a second) is closed, its calls fail, Redis counts as
	// unreachable and checks go on in process; a new connection waits as
	// long. A Redis that answers, however slowly, is waited for up to
	// Wait.
	Timeout time.Duration
	// Wait bounds each call to a Redis that answers (default: Timeout's
	// silence, four times it and at least a second): a busy machine makes
	// calls slow, not failed.
	Wait time.Duration
}

// KeyVersion names the format of quotad's keys in Redis: their names and
// what they hold. It changes when a quotad no longer reads the keys the
// one before it wrote, and quotad version prints it. Processes of two key
// versions never read each other's keys (their names differ), so while
// both run against one prefix each counts its own short windows; run one
// key version at a time per prefix, or give the new one a prefix of its
// own (see docs/operations.md, "Schema and Redis key versions").
//
//  1. a hash per short window (and a list for a sliding log's entries):
//     <prefix>{<metric>/<customer>}:<window>[:log]
//  2. a string per short window: <prefix>{<metric>/<customer>}:<window>:s
//  3. one string per customer's metric holding both short windows:
//     <prefix>{<metric>/<customer>}:s, then keys per subject beside it,
//     <prefix>{<metric>/<customer>}/<subject>:s, which a quotad of the
//     same version without limits per subject neither writes nor reads.
const KeyVersion = 3

// DefaultPrefix begins every key unless Options say otherwise.
const DefaultPrefix = "quotad:"

// DefaultTimeout is Options.Timeout unless they say otherwise.
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

	// lanes: the calls of each shard (see batch.go): one for a single
	// Redis, one per hash slot of a cluster, made on first use.
	single lane
	slots  [16384]atomic.Pointer[lane]
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
	// rueidis closes a connection whose calls (or its own pings of an idle
	// one) have had no answer for ConnWriteTimeout: that is silence.
	silence := max(4*o.Timeout, time.Second)
	option.Dialer.Timeout = silence
	option.ConnWriteTimeout = silence
	// Checks need no client-side cache; without it rueidis needs no
	// tracking either. A call that failed is not sent again: the engine
	// goes on in process instead, within the check's time.
	option.DisableCache = true
	option.DisableRetry = true
	// One connection to each Redis server: a process's calls share it
	// (rueidis pipelines them, and checks that come together share calls),
	// and a connection Redis closed, restarting, is found by the one check
	// that tries it again (see quota.Failover) rather than by one more
	// failed check per idle connection, each taking Redis out of use for a
	// second. rueidis's default for a single server is four, each call on
	// one of them at random; a cluster's is one per node already.
	option.PipelineMultiplex = -1
	return &Store{option: option, prefix: o.Prefix, timeout: max(o.Wait, silence),
		script: rueidis.NewLuaScript(applyScript)}, nil
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

// Shard implements quota.SharedStore: in a Redis Cluster, the hash slot
// of c's keys (they share one, see call); 0 for a single Redis, or until
// connected.
func (s *Store) Shard(c *quota.Charge) int {
	if !s.cluster.Load() {
		return 0
	}
	var k string
	switch customer, global := c.SharedKeys(); {
	case customer:
		k = s.key(c.Customer, c.Metric, c.Subject, c.MetricCapacity)
	case global:
		k = s.globalKey(c.Metric)
	}
	return int(slot(k))
}

// call returns the keys and the arguments of one call of the script for
// batch (see apply.lua): the number of checks, then per check its number
// of keys n (-n to only read), then per key what to expect and, to
// write, what to write and its expiry.
func (s *Store) call(batch []*pending) (keys, args []string) {
	nkeys, nargs := 0, 1
	for _, p := range batch {
		n := len(p.op.Expect)
		nkeys += n
		nargs += 1 + n
		if p.op.Write {
			nargs += 2 * n
		}
	}
	words := make([]string, nkeys+nargs)
	keys, args = words[:0:nkeys], words[nkeys:nkeys]
	args = append(args, strconv.Itoa(len(batch)))
	for _, p := range batch {
		op := p.op
		keys = s.appendKeys(keys, op)
		n := len(op.Expect)
		if !op.Write {
			args = append(args, strconv.Itoa(-n))
			args = append(args, op.Expect...)
			continue
		}
		args = append(args, strconv.Itoa(n))
		for i := range n {
			args = append(args, op.Expect[i], op.Set[i], ttlText(op.TTLMs[i]))
		}
	}
	return keys, args
}

// appendKeys appends op's keys to keys, charge after charge (see
// quota.SharedOp).
func (s *Store) appendKeys(keys []string, op *quota.SharedOp) []string {
	for i := range op.Charges {
		c := &op.Charges[i]
		customer, global := c.SharedKeys()
		if customer {
			keys = append(keys, s.key(c.Customer, c.Metric, c.Subject, c.MetricCapacity))
		}
		if global {
			keys = append(keys, s.globalKey(c.Metric))
		}
	}
	return keys
}

// ttlText returns ms as the script's argument.
func ttlText(ms int64) string {
	if ms == 0 {
		return "0"
	}
	return strconv.FormatInt(ms, 10)
}

// key returns the key of a customer's metric, or of one of its subjects':
// tagged by the metric alone when the metric's global windows count with
// it, else by the metric and the customer, so that a customer's subjects
// share the slot of the customer's own key.
func (s *Store) key(customer, metric, subject string, byMetric bool) string {
	var b strings.Builder
	b.Grow(len(s.prefix) + len(metric) + len(customer) + len(subject) + 7)
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
	if subject != "" {
		// Customer ids hold no '/', subjects no '}': keys stay apart.
		b.WriteByte('/')
		b.WriteString(subject)
	}
	b.WriteString(":s")
	return b.String()
}

func (s *Store) globalKey(metric string) string {
	return s.prefix + "{" + metric + "}:global:s"
}

// Clear implements quota.SharedStore: it deletes the customer's key of
// each metric, under either tag, and its subjects' keys of those metrics,
// found by SCAN on every server (each node of a Redis Cluster; see
// subjectKeys). Each call to Redis has the store's timeout; ctx bounds
// them all.
func (s *Store) Clear(ctx context.Context, customer string, metrics []string) error {
	if len(metrics) == 0 {
		return nil
	}
	client, err := s.conn()
	if err != nil {
		return unavailable(err)
	}
	keys := make([]string, 0, 2*len(metrics))
	for _, m := range metrics {
		for _, byMetric := range []bool{false, true} {
			keys = append(keys, s.key(customer, m, "", byMetric))
		}
	}
	subjects, err := s.subjectKeys(ctx, client, customer, metrics)
	if err != nil {
		return unavailable(err)
	}
	keys = append(keys, subjects...)
	// A key a command (keys of several hash slots cannot share one), in
	// pipelines of clearBatch.
	for len(keys) > 0 {
		n := min(len(keys), clearBatch)
		cmds := make(rueidis.Commands, n)
		for i, k := range keys[:n] {
			cmds[i] = client.B().Unlink().Key(k).Build()
		}
		keys = keys[n:]
		if err := s.doMulti(ctx, client, cmds); err != nil {
			return unavailable(err)
		}
	}
	return nil
}

// clearBatch bounds the keys of one SCAN page, and the UNLINKs of one
// pipeline.
const clearBatch = 1000

// doMulti sends cmds in one pipeline, within the store's timeout.
func (s *Store) doMulti(ctx context.Context, client rueidis.Client, cmds rueidis.Commands) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	for _, r := range client.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return err
		}
	}
	return nil
}

// subjectKeys returns the keys of the customer's subjects of metrics (see
// key), whose names no one keeps: it scans every server for the keys that
// match, under either tag,
//
//	<prefix>{<metric>/<customer>}/*:s
//	<prefix>{<metric>}/<customer>/*:s
//
// with the prefix, the metric and the customer escaped (a glob character
// in them matches only itself). For several metrics, each pattern matches
// any metric, and the keys found are kept for those named: one scan of
// each server per pattern, however many metrics, as when a customer is
// deleted. A Redis Cluster's nodes are each scanned (a node scans only
// its own keys), replicas included: a key found twice is listed once.
func (s *Store) subjectKeys(ctx context.Context, client rueidis.Client, customer string, metrics []string) ([]string, error) {
	metric := "*"
	if len(metrics) == 1 {
		metric = globEscape(metrics[0])
	}
	prefix, c := globEscape(s.prefix), globEscape(customer)
	patterns := [2]string{prefix + "{" + metric + "/" + c + "}/*:s", prefix + "{" + metric + "}/" + c + "/*:s"}
	named := make(map[string]bool, len(metrics))
	for _, m := range metrics {
		named[m] = true
	}
	seen := map[string]bool{}
	var keys []string
	for _, node := range client.Nodes() {
		for _, pattern := range patterns {
			for cursor := uint64(0); ; {
				callCtx, cancel := context.WithTimeout(ctx, s.timeout)
				e, err := node.Do(callCtx, node.B().Scan().Cursor(cursor).Match(pattern).Count(clearBatch).Build()).AsScanEntry()
				cancel()
				if err != nil {
					return nil, err
				}
				for _, k := range e.Elements {
					if !seen[k] && s.subjectKey(k, customer, named) {
						seen[k] = true
						keys = append(keys, k)
					}
				}
				if cursor = e.Cursor; cursor == 0 {
					break
				}
			}
		}
	}
	return keys, nil
}

// subjectKey reports whether k is the key of one of customer's subjects
// of a metric of metrics: <prefix>{<metric>/<customer>}/<subject>:s, or
// <prefix>{<metric>}/<customer>/<subject>:s (metrics and customer ids
// hold no '/' or '}'; see key).
func (s *Store) subjectKey(k, customer string, metrics map[string]bool) bool {
	rest, ok := strings.CutPrefix(k, s.prefix+"{")
	if !ok {
		return false
	}
	if rest, ok = strings.CutSuffix(rest, ":s"); !ok {
		return false
	}
	tag, after, ok := strings.Cut(rest, "}/")
	if !ok {
		return false
	}
	if metric, c, byCustomer := strings.Cut(tag, "/"); byCustomer {
		return metrics[metric] && c == customer && after != ""
	}
	c, subject, ok := strings.Cut(after, "/")
	return ok && metrics[tag] && c == customer && subject != ""
}

// globEscape returns s with the characters a Redis glob pattern gives a
// meaning to escaped, so that the pattern matches s itself.
func globEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`*?[]\`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
