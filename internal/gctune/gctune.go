// Package gctune lets the heap of a process whose live heap is small grow
// by a fixed headroom before the garbage collector runs, rather than by
// the runtime's default of the live heap's size (GOGC=100).
//
// A quota service keeps little live memory (tens of MB for ten thousand
// customers) and allocates at every request, so with GOGC=100 it
// collects many times a second, and the collector's work is a tenth of
// its CPU. With a headroom the next collection is set, after each one,
// where the heap reaches the live heap plus the headroom: fewer
// collections while the heap is small, the runtime's own pace once the
// live heap outgrows the headroom (its doubling is then the larger).
// The heap's peak is then about live + max(live, headroom).
package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// DefaultPercent is the runtime's GOGC when the environment sets none.
const DefaultPercent = 100

// Percent returns the GOGC that puts the next collection headroom bytes
// above a live heap of live bytes, and never below DefaultPercent.
func Percent(live, headroom uint64) int {
	live = max(live, 1)
	if headroom/live >= 1<<20 {
		return 100 << 20 // the runtime's goal is capped anyway
	}
	return max(DefaultPercent, int(headroom*100/live))
}

// Tuner sets the garbage collector's percent after every collection (see
// Start).
type Tuner struct {
	headroom uint64
	tunes    atomic.Int64
	mu       sync.Mutex // held by tune and Stop
	stopped  bool
	sample   [1]metrics.Sample
	last     int
}

// sentinel is an object that only the collector frees: its cleanup marks
// the end of a collection. It holds a pointer, so that the tiny allocator
// does not pack it with other objects that would keep it alive.
type sentinel struct{ t *Tuner }

// Start begins tuning: after each collection the percent becomes
// Percent(live heap, headroom). It returns nil, leaving the runtime as it
// is, when headroom is 0. Stop ends it.
func Start(headroom uint64) *Tuner {
	if headroom == 0 {
		return nil
	}
	t := &Tuner{headroom: headroom, last: DefaultPercent}
	t.sample[0].Name = "/gc/heap/live:bytes"
	t.arm()
	return t
}

// arm registers a cleanup on a new sentinel, run once the next collection
// finds it unreachable.
func (t *Tuner) arm() {
	runtime.AddCleanup(&sentinel{t: t}, (*Tuner).tune, t)
}

// tune sets the percent from the live heap the last collection marked,
// and arms the next tune.
func (t *Tuner) tune() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	metrics.Read(t.sample[:])
	var live uint64
	if s := t.sample[0]; s.Value.Kind() == metrics.KindUint64 {
		live = s.Value.Uint64()
	}
	if p := Percent(live, t.headroom); p != t.last {
		debug.SetGCPercent(p)
		t.last = p
	}
	t.tunes.Add(1)
	t.arm()
}

// Tunes returns how many collections the tuner has followed.
func (t *Tuner) Tunes() int64 { return t.tunes.Load() }

// Stop ends tuning and gives the runtime back DefaultPercent.
func (t *Tuner) Stop() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		debug.SetGCPercent(DefaultPercent)
	}
}
