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

// Counters are kept per shard in an open-addressing hash index with
// linear probing: a slot holds the number of an entry (plus one; 0 is
// empty, tomb a deleted entry), and entries live in chunks the shard owns.
// An entry refers to the customer id and metric key strings the catalog
// holds already, so a key costs its entry (64 bytes) and a few bytes of
// index, whatever the length of the id, and counting allocates nothing.
// Go's maps cost about twice that per key (a measured 105 to 134 bytes).

// entry is one counter: a customer's metric (or one subject's of it) in
// one short window or, with an empty customer, the metric's global usage
// in this process.
type entry struct {
	customer string
	metric   string
	subject  string
	hash     uint32
	window   tiers.Window    // 0: a free entry
	algo     tiers.Algorithm // how bucket is read; global counters slide
	bucket
}

const (
	numShards  = 64
	chunkBits  = 10 // entries per chunk: 1024
	emptySlot  = 0
	tombSlot   = ^uint32(0)
	minSlots   = 64
	maxLoadPct = 75 // live and deleted slots, in percent of the index
)

// localCounters holds every short-window counter this process keeps in
// its own memory, of every algorithm (algorithms.go; shared.go keeps them
// in Redis instead). Keys
// are spread over shards by customer and metric, so the windows of one
// check share a lock and checks of different customers rarely contend.
// Global (per metric) counters live apart, under their own locks, taken
// only while a customer shard is held: the lock order is always customer
// shard, then global shard.
type localCounters struct {
	seed   maphash.Seed
	shards [numShards]shard
	global [numShards]shard
	keys   atomic.Int64
}

type shard struct {
	mu     sync.Mutex
	slots  []uint32
	chunks [][]entry
	free   []uint32 // numbers of free entries
	used   uint32   // entries handed out, free ones included
	live   int
	tombs  int
	logs   *logTable // the sliding logs of the shard's keys, made on first use
	_      [16]byte  // to 128 bytes, two cache lines: shards contend less for lines
}

func newLocalCounters() *localCounters {
	return &localCounters{seed: maphash.MakeSeed()}
}

// pairHash hashes a customer and a metric, and a subject if any; the
// shard and each window's slot derive from it. A customer's subjects
// spread over the shards.
func (s *localCounters) pairHash(customer, metric, subject string) uint64 {
	c, m := maphash.String(s.seed, customer), maphash.String(s.seed, metric)
	h := c ^ (m*0x9e3779b97f4a7c15 + 0x632be59bd9b4e019 + c<<6 + c>>2)
	if subject != "" {
		x := maphash.String(s.seed, subject)
		h ^= x*0xbf58476d1ce4e5b9 + 0x94d049bb133111eb + h<<6 + h>>2
	}
	return h
}

// windowHash mixes a window into a pair's hash.
func windowHash(pair uint64, w tiers.Window) uint32 {
	x := (pair ^ uint64(w)*0x9e3779b97f4a7c15) * 0xbf58476d1ce4e5b9
	return uint32(x >> 32)
}

func (sh *shard) entry(n uint32) *entry {
	return &sh.chunks[n>>chunkBits][n&(1<<chunkBits-1)]
}

// find returns the entry of a key, or nil. sh must be locked.
func (sh *shard) find(h uint32, l *lookup, w tiers.Window) *entry {
	if len(sh.slots) == 0 {
		return nil
	}
	mask := len(sh.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch n := sh.slots[i]; n {
		case emptySlot:
			return nil
		case tombSlot:
		default:
			e := sh.entry(n - 1)
			if e.hash == h && e.window == w && e.customer == l.customer && e.metric == l.metric && e.subject == l.subject {
				return e
			}
		}
	}
}

// add files a key find did not find and returns its entry, zeroed but for
// the key. sh must be locked.
func (sh *shard) add(h uint32, l *lookup, w tiers.Window) *entry {
	if (sh.live+sh.tombs+1)*100 > len(sh.slots)*maxLoadPct {
		sh.resize()
	}
	var n uint32
	if k := len(sh.free); k > 0 {
		n, sh.free = sh.free[k-1], sh.free[:k-1]
	} else {
		if sh.used>>chunkBits == uint32(len(sh.chunks)) {
			sh.chunks = append(sh.chunks, make([]entry, 1<<chunkBits))
		}
		n = sh.used
		sh.used++
	}
	e := sh.entry(n)
	*e = entry{customer: l.customer, metric: l.metric, subject: l.subject, hash: h, window: w}
	sh.place(h, n)
	sh.live++
	return e
}

// place puts entry n in the first empty or deleted slot of its probe.
func (sh *shard) place(h, n uint32) {
	mask := len(sh.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch sh.slots[i] {
		case tombSlot:
			sh.tombs--
			fallthrough
		case emptySlot:
			sh.slots[i] = n + 1
			return
		}
	}
}

// remove deletes the entry in slot i. sh must be locked.
func (sh *shard) remove(i int) {
	n := sh.slots[i] - 1
	sh.slots[i] = tombSlot
	if e := sh.entry(n); e.algo == tiers.SlidingLog && e.prev > 0 {
		sh.logs.drop(uint32(e.prev - 1))
	}
	*sh.entry(n) = entry{}
	sh.free = append(sh.free, n)
	sh.live--
	sh.tombs++
}

// resize rebuilds the index for twice the live entries (at least
// minSlots), dropping deleted slots.
func (sh *shard) resize() {
	size := minSlots
	for size*maxLoadPct < (sh.live+1)*2*100 {
		size *= 2
	}
	old := sh.slots
	sh.slots = make([]uint32, size)
	sh.tombs = 0
	for _, n := range old {
		if n != emptySlot && n != tombSlot {
			sh.place(sh.entry(n-1).hash, n-1)
		}
	}
}

// scan calls drop for every live entry and removes those it reports.
func (sh *shard) scan(drop func(e *entry) bool) int {
	n := 0
	for i, slot := range sh.slots {
		if slot != emptySlot && slot != tombSlot && drop(sh.entry(slot-1)) {
			sh.remove(i)
			n++
		}
	}
	switch {
	case sh.used > 0 && sh.live*4 <= int(sh.used) && (sh.live == 0 || sh.used > 1<<chunkBits):
		sh.compact()
	case sh.tombs > 0 && sh.tombs*4 > len(sh.slots):
		sh.resize()
	}
	return n
}

// compact moves the live entries into as few chunks as hold them and
// rebuilds the index, so that the room of the entries dropped goes back to
// the collector: a shard whose keys all went idle (a million subjects
// seen once) holds no memory, one that kept a quarter of them a quarter.
func (sh *shard) compact() {
	old, oldSlots := sh.chunks, sh.slots
	sh.chunks, sh.free, sh.used, sh.tombs = nil, nil, 0, 0
	sh.slots = nil
	if sh.live == 0 {
		sh.logs = nil
		return
	}
	size := minSlots
	for size*maxLoadPct < (sh.live+1)*2*100 {
		size *= 2
	}
	sh.slots = make([]uint32, size)
	for _, slot := range oldSlots {
		if slot == emptySlot || slot == tombSlot {
			continue
		}
		e := &old[(slot-1)>>chunkBits][(slot-1)&(1<<chunkBits-1)]
		if sh.used>>chunkBits == uint32(len(sh.chunks)) {
			sh.chunks = append(sh.chunks, make([]entry, 1<<chunkBits))
		}
		n := sh.used
		sh.used++
		*sh.entry(n) = *e
		sh.place(e.hash, n)
	}
}

// lookup is a check's view of one customer's (or one of its subjects', or,
// customer "", the global) counters of a metric: their shard, its number
// and the pair's hash.
type lookup struct {
	sh       *shard
	shard    uint8
	pair     uint64
	customer string
	metric   string
	subject  string
}

func (s *localCounters) lookupOf(group *[numShards]shard, customer, metric, subject string) lookup {
	pair := s.pairHash(customer, metric, subject)
	n := uint8(pair >> 58)
	return lookup{sh: &group[n], shard: n, pair: pair, customer: customer, metric: metric, subject: subject}
}

// get returns the bucket of window w rolled to nowMs, creating it when
// create; otherwise a missing key reads as scratch, set empty. The shard
// must be locked.
func (s *localCounters) get(l *lookup, w tiers.Window, nowMs int64, create bool, scratch *bucket) *bucket {
	length := w.Length().Milliseconds()
	start := nowMs - mod(nowMs, length)
	h := windowHash(l.pair, w)
	e := l.sh.find(h, l, w)
	switch {
	case e != nil:
	case create:
		e = l.sh.add(h, l, w)
		e.start = start
		s.keys.Add(1)
	default:
		*scratch = bucket{start: start}
		return scratch
	}
	e.roll(start, length)
	return &e.bucket
}

// meterOf returns span sp's meter over key state b.
func meterOf(sp *Span, b *bucket, logs *logTable, nowMs int64) meter {
	return meter{alg: sp.Rule.Algorithm, b: b, logs: logs, now: nowMs,
		length: sp.Key.Window.Length().Milliseconds(), rate: sp.Rule.Limit}
}

// state returns the customer's key state of span sp, brought to nowMs
// (see meter.roll), creating the key when create; otherwise a missing key
// reads as scratch, set empty. A key counted by another algorithm (or a
// token bucket for another rate) is converted first. The shard must be
// locked.
func (s *localCounters) state(l *lookup, sp *Span, nowMs int64, create bool, scratch *bucket) *bucket {
	w := sp.Key.Window
	alg := sp.Rule.Algorithm
	h := windowHash(l.pair, w)
	e := l.sh.find(h, l, w)
	switch {
	case e != nil:
		switch { // the common cases, kept short
		case e.algo == alg && alg <= tiers.FixedWindow:
			length := w.Length().Milliseconds()
			e.roll(nowMs-mod(nowMs, length), length)
			return &e.bucket
		case e.algo == alg && alg == tiers.TokenBucket && e.prev == sp.Rule.Limit:
			return &e.bucket // read at now as it is
		case e.algo == alg && alg == tiers.SlidingLog:
			m := meterOf(sp, &e.bucket, l.sh.logs, nowMs) // a log key made the table
			m.prune()
			return &e.bucket
		}
	case create:
		e = l.sh.add(h, l, w)
		e.algo = alg
		s.keys.Add(1)
		m := meterOf(sp, &e.bucket, l.sh.logTable(), nowMs)
		switch alg {
		case tiers.TokenBucket:
			m.setDebt(u128{})
		case tiers.SlidingWindow, tiers.FixedWindow:
			e.start = m.bucketStart()
		}
		return &e.bucket
	default:
		length := w.Length().Milliseconds()
		*scratch = bucket{start: nowMs - mod(nowMs, length)}
		return scratch
	}
	m := meterOf(sp, &e.bucket, l.sh.logTable(), nowMs)
	if e.algo != alg || alg == tiers.TokenBucket && e.prev != m.rate {
		m.convert(e.algo)
		e.algo = alg
	}
	m.roll()
	return &e.bucket
}

// logTable returns the shard's sliding logs, making the table on first
// use. The shard must be locked.
func (sh *shard) logTable() *logTable {
	if sh.logs == nil {
		sh.logs = &logTable{}
	}
	return sh.logs
}

// Keys returns how many counters the process holds.
func (s *localCounters) Keys() int64 { return s.keys.Load() }

// evict drops counters that count nothing any more, shard by shard.
func (s *localCounters) evict(nowMs int64) int {
	n := 0
	for _, group := range []*[numShards]shard{&s.shards, &s.global} {
		for i := range group {
			sh := &group[i]
			sh.mu.Lock()
			n += sh.scan(func(e *entry) bool {
				return idle(e.algo, &e.bucket, nowMs, e.window.Length().Milliseconds())
			})
			sh.mu.Unlock()
		}
	}
	s.keys.Add(-int64(n))
	return n
}

// forget drops a customer's counters, its subjects' included: of one
// metric, or of all when metric is empty. A customer's subjects spread
// over every shard: forgetting visits them all.
func (s *localCounters) forget(customer, metric string) {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.scan(func(e *entry) bool {
			return e.customer == customer && (metric == "" || e.metric == metric)
		})
		sh.mu.Unlock()
	}
	s.keys.Add(-int64(n))
}
