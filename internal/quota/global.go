package quota

import (
	"context"
	"errors"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// GlobalUsage is a metric's global usage in one window: every unit of the
// metric admitted in the window, all customers, as elastic admission
// measures spare capacity against it.
type GlobalUsage struct {
	Window   tiers.Window
	Capacity int64 // the metric's declared capacity for the window
	Used     int64
	// Remaining is Capacity less Used, never below zero.
	Remaining int64
	// ResetAt is when the window (for short ones, its current bucket) ends.
	// A short window's global count slides, as the sliding window counter
	// does: part of it still counts in the next bucket.
	ResetAt time.Time
	// Shared: the count is every quotad process's (long windows, and short
	// ones kept in the shared store); otherwise it is this process's own
	// (short windows without a shared store, or while it is out of reach).
	Shared bool
}

// globalPeeker reads a metric's global usage in short windows, counting
// nothing: what a Take measures spare capacity against.
type globalPeeker interface {
	// peekGlobals sets used[i] to the global usage in c.Globals[i]; c has
	// no spans. It reports whether the count is shared by every process.
	peekGlobals(ctx context.Context, c *Charge, used []int64) (shared bool, err error)
}

// MetricUsage returns the metric's global usage in every window for which
// it declares a capacity (quotad counts global usage only there), ordered
// by window. Long windows are read from the ledger (with this process's
// leases' counts not yet written); short ones from the short-window
// counter: the shared store when there is one and it answers, else this
// process. Errors: *tiers.ValidationError, tiers.ErrMetricNotFound,
// tiers.ErrUnavailable.
func (e *Engine) MetricUsage(ctx context.Context, metric string) (tiers.Metric, []GlobalUsage, error) {
	if err := tiers.CheckKey("metric", metric); err != nil {
		return tiers.Metric{}, nil, err
	}
	m, err := e.catalog.Metric(ctx, metric)
	if err != nil {
		return tiers.Metric{}, nil, err
	}
	now := e.clock.Now().UTC()
	out := []GlobalUsage{}
	short := Charge{Metric: m.Key, Cost: 1, At: now, MetricCapacity: true}
	var long []GlobalKey
	var shortAt, longAt []int // indexes into out
	for _, w := range tiers.Windows {
		capacity, ok := m.Capacity[w]
		if !ok {
			continue
		}
		start, end := Bounds(w, now, tiers.Anchor{})
		g := GlobalKey{Metric: m.Key, Window: w, Start: start}
		if w.Short() {
			short.Globals = append(short.Globals, g)
			shortAt = append(shortAt, len(out))
		} else {
			long = append(long, g)
			longAt = append(longAt, len(out))
		}
		out = append(out, GlobalUsage{Window: w, Capacity: capacity, ResetAt: end, Shared: !w.Short()})
	}
	if len(short.Globals) > 0 {
		p, ok := e.counters.short.(globalPeeker)
		if !ok {
			return tiers.Metric{}, nil, errors.New("quota: the short-window counter cannot read global usage")
		}
		used := make([]int64, len(short.Globals))
		shared, err := p.peekGlobals(ctx, &short, used)
		if err != nil {
			return tiers.Metric{}, nil, err
		}
		for i, j := range shortAt {
			out[j].Used, out[j].Shared = used[i], shared
		}
	}
	if len(long) > 0 {
		_, used, err := e.counters.read(ctx, nil, long)
		if err != nil {
			return tiers.Metric{}, nil, e.health.unavailable(err)
		}
		for i, j := range longAt {
			out[j].Used = used[i]
		}
	}
	for i := range out {
		out[i].Remaining = max(0, out[i].Capacity-out[i].Used)
	}
	return m, out, nil
}

// globalsLocked sets used[i] to the global usage in c.Globals[i] at nowMs,
// as decideLocked reads it for a span that borrows spare capacity. g's
// shard must be locked.
func (s *localCounters) globalsLocked(c *Charge, g *lookup, nowMs int64, used []int64) {
	for i, k := range c.Globals {
		var scratch bucket
		used[i] = s.get(g, k.Window, nowMs, false, &scratch).weighted(nowMs, k.Window.Length().Milliseconds())
	}
}

// peekGlobals implements globalPeeker: this process's global usage.
func (s *localCounters) peekGlobals(_ context.Context, c *Charge, used []int64) (bool, error) {
	cs := []Charge{*c}
	s.locked(cs, func(_, g []lookup) { s.globalsLocked(c, &g[0], c.At.UnixMilli(), used) })
	return false, nil
}

// peekGlobals implements globalPeeker: the global usage the store holds.
func (s *SharedCounters) peekGlobals(ctx context.Context, c *Charge, used []int64) (bool, error) {
	cs := []Charge{*c}
	err := s.run(ctx, cs, func(_, g []lookup, now int64) {
		s.mirror.globalsLocked(c, &g[0], now, used)
	})
	return err == nil, err
}

// peekGlobals implements globalPeeker: from the shared store while its
// shard answers, else from this process's counters.
func (f *Failover) peekGlobals(ctx context.Context, c *Charge, used []int64) (bool, error) {
	cs := []Charge{*c}
	if r := f.use(cs); r.shared {
		shared, err := f.shared.peekGlobals(ctx, c, used)
		f.done(cs, r, err)
		if !errors.Is(err, tiers.ErrUnavailable) {
			return shared, err
		}
	}
	c.degraded = true
	p, ok := f.local.(globalPeeker)
	if !ok {
		return false, errors.New("quota: the fallback counter cannot read global usage")
	}
	return p.peekGlobals(ctx, c, used)
}
