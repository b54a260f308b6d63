package webhooks

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// EventStore records events and says what the registered webhooks listen
// to; the PostgreSQL store implements it.
type EventStore interface {
	// Watches returns what the registered webhooks listen to.
	Watches(ctx context.Context) (Watch, error)
	// RecordEvents records events not recorded before (by any process)
	// and queues their deliveries, in one transaction; it returns how
	// many were new.
	RecordEvents(ctx context.Context, events []Event) (int, error)
}

// Detection timing.
const (
	// DetectFlushEvery is how often a Detector writes the events it
	// noticed: an event is recorded at most this long after the check
	// that caused it (while PostgreSQL answers).
	DetectFlushEvery = 250 * time.Millisecond
	// WatchRefreshEvery is how often a Detector reads what webhooks
	// listen to even when no change was announced.
	WatchRefreshEvery = 30 * time.Second
	// maxPending bounds the events held while PostgreSQL does not answer.
	maxPending = 10000
	// pruneEvery is how often marks of ended windows are dropped.
	pruneEvery = time.Minute
)

// Detector notices usage events as checks are decided. It implements
// quota.Watcher: Observe runs on the check path and only compares the
// window's count with what the webhooks listen to (one atomic load and
// nothing else while no webhook is registered, one map lookup once a
// window passed the lowest threshold); what it notices is written by Run,
// beside the check path.
//
// Each event happens once per customer, metric, window start, type and
// threshold: the store's unique key makes that hold across processes, and
// a per-window mark keeps this process from noticing it again. Detection
// looks at the window's state, not at one check's step, so an event that
// was noticed but not written (a crash within DetectFlushEvery, or the
// store unreachable until maxPending events piled up) is noticed again by
// the next check of that window, in any process.
type Detector struct {
	store EventStore
	watch atomic.Pointer[Watch]
	marks sync.Map // quota.CounterKey → *mark
	nmark atomic.Int64

	mu      sync.Mutex
	pending []pendingEvent

	changed chan struct{}
	dropped atomic.Uint64
	written atomic.Uint64
}

// mark is what this process noticed in one window.
type mark struct {
	end   time.Time
	mu    sync.Mutex
	top   atomic.Int32 // highest threshold percent noticed
	flags atomic.Uint32
}

const (
	markOverage uint32 = 1 << iota
	markLimit
)

type pendingEvent struct {
	Event
	mark *mark
	flag uint32 // for Threshold events: 0
}

// NewDetector returns a Detector that listens to nothing until Refresh
// or Run reads the webhooks.
func NewDetector(store EventStore) *Detector {
	d := &Detector{store: store, changed: make(chan struct{}, 1)}
	d.watch.Store(&Watch{})
	return d
}

// Changed tells the detector that webhooks changed: Run reads them again.
func (d *Detector) Changed() {
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

// SetWatch sets what the detector looks for.
func (d *Detector) SetWatch(w Watch) {
	w.Thresholds = slices.Clone(w.Thresholds)
	slices.Sort(w.Thresholds)
	w.Thresholds = slices.Compact(w.Thresholds)
	d.watch.Store(&w)
}

// Refresh reads what the webhooks listen to from the store.
func (d *Detector) Refresh(ctx context.Context) error {
	w, err := d.store.Watches(ctx)
	if err != nil {
		return err
	}
	d.SetWatch(w)
	return nil
}

// DetectorStats are a Detector's counters.
type DetectorStats struct {
	Written uint64 // events noticed and handed to the store
	Dropped uint64 // events dropped while the store did not answer (noticed again by the window's next check)
	Windows int64  // windows with a mark held in memory
}

// Stats returns the detector's counters.
func (d *Detector) Stats() DetectorStats {
	return DetectorStats{Written: d.written.Load(), Dropped: d.dropped.Load(), Windows: d.nmark.Load()}
}

// Observe implements quota.Watcher.
func (d *Detector) Observe(o quota.Observation) {
	w := d.watch.Load()
	if w.Empty() {
		return
	}
	top := int32(0)
	if w.Types[Threshold] && o.Limit > 0 {
		top = int32(reached(w.Thresholds, o.Used, o.Limit))
	}
	var flags uint32
	if w.Types[OverageStarted] && o.Mode == tiers.Soft && o.Used > o.Limit {
		flags |= markOverage
	}
	if w.Types[LimitReached] && o.State == quota.StateExceeded {
		flags |= markLimit
	}
	if top == 0 && flags == 0 {
		return
	}
	m := d.mark(&o)
	if m.top.Load() >= top && m.flags.Load()&flags == flags {
		return
	}
	d.notice(w, m, &o, top, flags)
}

// reached returns the highest threshold percent of limit that used has
// reached (used × 100 >= limit × t), or 0.
func reached(thresholds []int, used, limit int64) int {
	// used and limit are at most 2^53-1 and thresholds at most 1000, so
	// neither side overflows 64 bits.
	best := 0
	for _, t := range thresholds {
		if used*100 < limit*int64(t) {
			break
		}
		best = t
	}
	return best
}

// mark returns the window's mark, made on first use.
func (d *Detector) mark(o *quota.Observation) *mark {
	if m, ok := d.marks.Load(o.Key); ok {
		return m.(*mark)
	}
	m, loaded := d.marks.LoadOrStore(o.Key, &mark{end: o.End})
	if !loaded {
		d.nmark.Add(1)
	}
	return m.(*mark)
}

// notice queues the events window o has reached that m does not hold yet.
func (d *Detector) notice(w *Watch, m *mark, o *quota.Observation, top int32, flags uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	base := Event{Customer: o.Key.Customer, Metric: o.Key.Metric, Window: o.Key.Window, Start: o.Key.Start,
		End: o.End, Limit: o.Limit, Used: o.Used, At: o.At}
	var out []pendingEvent
	if prev := m.top.Load(); top > prev {
		for _, t := range w.Thresholds {
			if int32(t) > prev && int32(t) <= top {
				e := base
				e.Type, e.Threshold = Threshold, t
				out = append(out, pendingEvent{Event: e, mark: m})
			}
		}
		m.top.Store(top)
	}
	have := m.flags.Load()
	for _, f := range []struct {
		flag uint32
		typ  EventType
	}{{markOverage, OverageStarted}, {markLimit, LimitReached}} {
		if flags&f.flag != 0 && have&f.flag == 0 {
			e := base
			e.Type = f.typ
			out = append(out, pendingEvent{Event: e, mark: m, flag: f.flag})
		}
	}
	m.flags.Store(have | flags)
	d.mu.Lock()
	d.pending = append(d.pending, out...)
	d.mu.Unlock()
}

// Run writes noticed events every DetectFlushEvery, reads the webhooks at
// start, when Changed is called and every WatchRefreshEvery, and drops the
// marks of ended windows every minute, until ctx ends; then it writes what
// is left once more. Each call to the store is bounded by timeout
// (quota.DefaultBackgroundTimeout if 0 or less), so that a store gone
// silent holds none up for long. Errors go to report; events that could
// not be written are tried again.
func (d *Detector) Run(ctx context.Context, now func() time.Time, timeout time.Duration, report func(error)) {
	if timeout <= 0 {
		timeout = quota.DefaultBackgroundTimeout
	}
	bounded := func(f func(context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return f(ctx)
	}
	if err := bounded(d.Refresh); err != nil && ctx.Err() == nil {
		report(err)
	}
	flush := time.NewTicker(DetectFlushEvery)
	refresh := time.NewTicker(WatchRefreshEvery)
	prune := time.NewTicker(pruneEvery)
	defer flush.Stop()
	defer refresh.Stop()
	defer prune.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
			if err := d.Flush(final); err != nil {
				report(err)
			}
			cancel()
			return
		case <-flush.C:
			if err := bounded(d.Flush); err != nil && ctx.Err() == nil {
				report(err)
			}
		case <-prune.C:
			d.Prune(now())
		case <-refresh.C:
			if err := bounded(d.Refresh); err != nil && ctx.Err() == nil {
				report(err)
			}
		case <-d.changed:
			if err := bounded(d.Refresh); err != nil && ctx.Err() == nil {
				report(err)
			}
		}
	}
}

// Flush writes the noticed events. When the store fails they are kept for
// the next Flush, up to maxPending; beyond that the oldest are dropped and
// their windows' marks cleared, so that the windows' next checks notice
// them again.
func (d *Detector) Flush(ctx context.Context) error {
	d.mu.Lock()
	batch := d.pending
	d.pending = nil
	d.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	events := make([]Event, len(batch))
	for i, p := range batch {
		events[i] = p.Event
	}
	if _, err := d.store.RecordEvents(ctx, events); err != nil {
		d.mu.Lock()
		d.pending = append(batch, d.pending...)
		if over := len(d.pending) - maxPending; over > 0 {
			for _, p := range d.pending[:over] {
				p.forget()
			}
			d.dropped.Add(uint64(over))
			d.pending = slices.Delete(d.pending, 0, over)
		}
		d.mu.Unlock()
		return err
	}
	d.written.Add(uint64(len(batch)))
	return nil
}

// forget clears what p marked, so that it is noticed again.
func (p pendingEvent) forget() {
	p.mark.mu.Lock()
	defer p.mark.mu.Unlock()
	if p.flag != 0 {
		p.mark.flags.And(^p.flag)
		return
	}
	if int(p.mark.top.Load()) >= p.Threshold {
		p.mark.top.Store(int32(p.Threshold - 1))
	}
}

// Prune drops the marks of windows that ended before now.
func (d *Detector) Prune(now time.Time) {
	d.marks.Range(func(k, v any) bool {
		if !now.Before(v.(*mark).end) {
			d.marks.Delete(k)
			d.nmark.Add(-1)
		}
		return true
	})
}
