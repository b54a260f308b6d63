package quota

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/quotad/quotad/internal/tiers"
)

// The sliding window counter keeps, per key, two buckets aligned to
// multiples of the window length T since the Unix epoch: p, the count of
// the previous bucket, and c, the count of the current one. At e
// milliseconds into the current bucket its weighted count is
//
//	floor(p * (T - e) / T) + c
//
// and a check of cost k passes a threshold t iff weighted + k <= t. This
// is an approximation of a true sliding window that assumes the previous
// bucket's units were spread evenly; it never admits more than t in any
// bucket and keeps two integers per key.

// bucket is one key's counter state.
type bucket struct {
	start int64 // start of the current bucket, Unix ms
	prev  int64
	cur   int64
}

// roll moves b forward to the bucket that starts at start.
func (b *bucket) roll(start, length int64) {
	switch {
	case b.start == start:
	case b.start == start-length:
		b.prev, b.cur, b.start = b.cur, 0, start
	case b.start < start:
		b.prev, b.cur, b.start = 0, 0, start
	}
	// b.start > start: the clock stepped back; keep the newer state.
}

// weighted returns the weighted count at nowMs.
func (b *bucket) weighted(nowMs, length int64) int64 {
	e := nowMs - b.start
	if e < 0 {
		e = 0
	}
	if e >= length {
		e = length - 1
	}
	return addCap(mulDiv(b.prev, length-e, length), b.cur)
}

// idle reports whether b counts nothing at nowMs and later.
func (b *bucket) idle(nowMs, length int64) bool {
	return nowMs >= b.start+2*length || (b.prev == 0 && b.cur == 0)
}

// slidingKey names one counter: a customer's metric in one short window,
// or, with an empty customer, the metric's global usage in this process.
type slidingKey struct {
	customer string
	metric   string
	window   tiers.Window
}

const numShards = 64

// slidingCounters holds every short-window counter of the process. Keys
// are spread over shards by customer and metric, so the windows of one
// check share a lock and checks of different customers rarely contend.
// Global (per metric) counters live apart, under their own locks, taken
// only while a customer shard is held: the lock order is always customer
// shard, then global shard.
type slidingCounters struct {
	seed   maphash.Seed
	shards [numShards]shard
	global [numShards]shard
	keys   atomic.Int64
}

type shard struct {
	mu sync.Mutex
	m  map[slidingKey]*bucket
	_  [40]byte // keep shards on separate cache lines
}

func newSlidingCounters() *slidingCounters {
	s := &slidingCounters{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].m = make(map[slidingKey]*bucket)
		s.global[i].m = make(map[slidingKey]*bucket)
	}
	return s
}

func (s *slidingCounters) shardOf(customer, metric string) *shard {
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(customer)
	h.WriteByte(0)
	h.WriteString(metric)
	return &s.shards[h.Sum64()%numShards]
}

func (s *slidingCounters) globalShardOf(metric string) *shard {
	return &s.global[maphash.String(s.seed, metric)%numShards]
}

// get returns the key's bucket rolled to nowMs, creating it when create.
// The shard must be locked.
func (s *slidingCounters) get(sh *shard, k slidingKey, nowMs int64, create bool) *bucket {
	length := k.window.Length().Milliseconds()
	start := nowMs - mod(nowMs, length)
	b := sh.m[k]
	if b == nil {
		if !create {
			return &bucket{start: start}
		}
		b = &bucket{start: start}
		sh.m[k] = b
		s.keys.Add(1)
	}
	b.roll(start, length)
	return b
}

// Keys returns how many counters the process holds.
func (s *slidingCounters) Keys() int64 { return s.keys.Load() }

// evict drops counters that count nothing any more, shard by shard.
func (s *slidingCounters) evict(nowMs int64) int {
	n := 0
	for _, group := range []*[numShards]shard{&s.shards, &s.global} {
		for i := range group {
			sh := &group[i]
			sh.mu.Lock()
			for k, b := range sh.m {
				if b.idle(nowMs, k.window.Length().Milliseconds()) {
					delete(sh.m, k)
					n++
				}
			}
			sh.mu.Unlock()
		}
	}
	s.keys.Add(-int64(n))
	return n
}

// forget drops a customer's counters: of one metric, or of all when metric
// is empty.
func (s *slidingCounters) forget(customer, metric string) {
	n := 0
	drop := func(sh *shard) {
		sh.mu.Lock()
		for k := range sh.m {
			if k.customer == customer && (metric == "" || k.metric == metric) {
				delete(sh.m, k)
				n++
			}
		}
		sh.mu.Unlock()
	}
	if metric != "" {
		drop(s.shardOf(customer, metric))
	} else {
		for i := range s.shards {
			drop(&s.shards[i])
		}
	}
	s.keys.Add(-int64(n))
}
