package quota

import (
	"time"
)

// verdict is a counted set seen as the Decision it answers: the methods
// that assemble a Decision's windows, waits and figures from what the
// set's counters found, apart from the methods that count.
type verdict struct{ *set }

// answer assembles the Decision of set s for r from what its counters
// found: every window of every item (the long ones left out when
// degraded: the store could not be consulted), each item's part of the
// decision for a check of items, and the figures of the whole. Windows
// count the set's units when allowed (a dry run's as if checked) or
// forced, and never for a look (see counted).
func (s verdict) answer(r *Request, allowed, degraded bool) Decision {
	s.unconsulted = degraded
	d := Decision{Allowed: allowed, Customer: r.Customer, Degraded: degraded}
	for i := range s.short {
		d.Degraded = d.Degraded || s.short[i].degraded
	}
	if r.Items == nil {
		d.Metric, d.Cost = r.Metric, r.Cost
		d.Limits = make([]WindowResult, 0, s.windows(0, degraded))
		var wait int64
		d.Limits, wait, d.Never, d.Overage, d.Elastic = s.itemWindows(0, allowed, degraded, d.Limits)
		d.RetryAfter = retryAfter(allowed, wait, d.Never)
		d.Never = d.Never && !allowed
		return d
	}
	// Every window is written into one array: the items' windows, then
	// the check's (each group's once), as many as the windows count.
	var union int
	per := 0
	for i := range s.items {
		per += s.windows(i, degraded)
	}
	for g := range s.groups {
		union += s.groupSpans(g, degraded)
	}
	buf := make([]WindowResult, 0, per+union)
	remaining := make([]int64, len(s.items))
	d.Items = make([]ItemResult, len(s.items))
	var listed bitset
	listed.init(len(s.groups))
	var wait int64
	for i := range s.items {
		it := &s.items[i]
		res := &d.Items[i]
		*res = ItemResult{Customer: it.Customer, Metric: it.Metric, Subject: it.Subject, Cost: it.Cost}
		var iwait int64
		var overage, elastic bool
		n := len(buf)
		res.Limits, iwait, res.Never, overage, elastic = s.itemWindows(i, allowed, degraded, buf[n:n:n+s.windows(i, degraded)])
		buf = buf[:n+len(res.Limits)]
		res.Allowed = allowed || passedAll(res.Limits)
		res.RetryAfter = retryAfter(res.Allowed, iwait, res.Never)
		res.Never = res.Never && !res.Allowed
		if least, ok := s.remaining(i, res.Limits); ok {
			remaining[i] = least
			res.Remaining = &remaining[i]
		}
		d.Overage, d.Elastic = d.Overage || overage, d.Elastic || elastic
		d.Never = d.Never || res.Never
		wait = max(wait, iwait)
	}
	d.Limits = buf[len(buf):]
	for i := range s.items {
		for _, g := range s.items[i].groups {
			if g >= 0 && !listed.has(g) {
				listed.set(g)
				d.Limits = s.groupWindows(g, allowed, degraded, d.Limits)
			}
		}
	}
	d.RetryAfter = retryAfter(allowed, wait, d.Never)
	d.Never = d.Never && !allowed
	return d
}

// bitset is a set of small numbers: a word for up to 64, a slice beyond.
type bitset struct {
	word uint64
	more []bool
}

func (b *bitset) init(n int) {
	if n > 64 {
		b.more = make([]bool, n)
	}
}

func (b *bitset) has(i int) bool {
	if b.more != nil {
		return b.more[i]
	}
	return b.word&(1<<i) != 0
}

func (b *bitset) set(i int) {
	if b.more != nil {
		b.more[i] = true
		return
	}
	b.word |= 1 << i
}

// retryAfter returns a denied check's retry_after from its longest wait
// (ms): whole seconds, at least 1; 0 when allowed or never.
func retryAfter(allowed bool, wait int64, never bool) int64 {
	if allowed || never {
		return 0
	}
	return retrySeconds(wait)
}

// passedAll reports whether every window of ws admitted its check.
func passedAll(ws []WindowResult) bool {
	for i := range ws {
		if ws[i].State == StateExceeded {
			return false
		}
	}
	return true
}

// windows returns how many windows item i reports.
func (s verdict) windows(i int, degraded bool) int {
	n := 0
	for _, g := range s.items[i].groups {
		if g >= 0 {
			n += s.groupSpans(g, degraded)
		}
	}
	return n
}

// groupSpans returns how many windows group g reports.
func (s verdict) groupSpans(g int, degraded bool) int {
	n := 0
	if c := s.groups[g].short; c >= 0 {
		n += len(s.short[c].Spans)
	}
	if c := s.groups[g].long; c >= 0 && !degraded {
		n += len(s.long[c].Spans)
	}
	return n
}

// itemWindows appends item i's windows to dst, and returns with them the
// longest wait of those that denied (ms), whether one never admits, and
// whether the check lands units above a soft limit or on spare capacity.
func (s verdict) itemWindows(i int, allowed, degraded bool, dst []WindowResult) (ws []WindowResult, wait int64, never, overage, elastic bool) {
	for _, g := range s.items[i].groups {
		if g < 0 {
			continue
		}
		first := len(dst)
		dst = s.groupWindows(g, allowed, degraded, dst)
		for j := first; j < len(dst); j++ {
			w := &dst[j]
			overage = overage || allowed && !s.look && w.State == StateOverage
			elastic = elastic || allowed && !s.look && w.State == StateElastic
		}
		gw, gn := s.groupWait(g, degraded)
		wait, never = max(wait, gw), never || gn
	}
	return dst, wait, never, overage, elastic
}

// groupWindows appends group g's windows, as its charges' outcomes report
// them, to dst.
func (s verdict) groupWindows(g int, allowed, degraded bool, dst []WindowResult) []WindowResult {
	cs := s.chargesOf(g)
	counted := s.counted(allowed)
	if cs[0] != nil {
		dst = chargeWindows(cs[0], counted, s.look, dst)
	}
	if cs[1] != nil && !degraded {
		dst = chargeWindows(cs[1], counted, s.look, dst)
	}
	return dst
}

// counted reports whether the windows of set s, allowed or not, count
// its units: allowed (a dry run as if checked), or forced; never for a
// look.
func (s verdict) counted(allowed bool) bool {
	return allowed && !s.look || s.forced
}

// chargesOf returns group g's short and long charges (nil where it has
// none).
func (s *set) chargesOf(g int) [2]*Charge {
	var cs [2]*Charge
	if gr := &s.groups[g]; gr.short >= 0 {
		cs[0] = &s.short[gr.short]
	}
	if gr := &s.groups[g]; gr.long >= 0 {
		cs[1] = &s.long[gr.long]
	}
	return cs
}

// groupWait returns the longest wait (ms) of group g's windows that did
// not admit, and whether one never will.
func (s verdict) groupWait(g int, degraded bool) (wait int64, never bool) {
	cs := s.chargesOf(g)
	if degraded {
		cs[1] = nil
	}
	for _, c := range cs {
		if c == nil {
			continue
		}
		for _, o := range c.Out {
			switch {
			case o.Passed:
			case o.Wait < 0:
				never = true
			default:
				wait = max(wait, o.Wait)
			}
		}
	}
	return wait, never
}

// chargeWindows appends c's windows to dst: each with its count (with the
// check's units when counted), what remains, when it resets and how it
// stands (with the check's units, but for a look: as it stands).
func chargeWindows(c *Charge, counted, look bool, dst []WindowResult) []WindowResult {
	for i := range c.Spans {
		sp, o := &c.Spans[i], &c.Out[i]
		after := addCap(o.Used, c.Cost)
		if look {
			after = o.Used
		}
		length := sp.Key.Window.Length()
		if length == 0 && sp.Key.Window.Resets() {
			length = sp.End.Sub(sp.Key.Start)
		}
		w := WindowResult{Metric: c.Metric, Subject: c.Subject, Window: sp.Key.Window, Mode: sp.Rule.Mode,
			Limit: sp.Rule.Limit, Used: o.Used, ResetAt: o.resetAt(sp, counted),
			State: sp.Rule.State(after, o.Passed, o.Elastic), Length: length}
		if counted && !o.Granted {
			w.Used = after
		}
		w.Remaining = max(0, sp.Rule.Size-w.Used)
		dst = append(dst, w)
	}
	return dst
}

// remaining returns the fewest units of item i's metric its windows ws
// still admit: its own windows' remaining, and a credit pool's converted
// into the metric's units (what the credits left buy); false when no
// window limits the item.
func (s verdict) remaining(i int, ws []WindowResult) (int64, bool) {
	it := &s.items[i]
	var least int64 = -1
	for j := range ws {
		w := &ws[j]
		r := w.Remaining
		if w.Metric != it.Metric {
			if it.draws == nil {
				continue
			}
			r = mulDiv(r, it.draws.Per, it.draws.Credits)
		}
		if least < 0 || r < least {
			least = r
		}
	}
	if least < 0 {
		return 0, false
	}
	return least, true
}

// overage returns, per metric the set charged, the most of its units this
// check landed above a soft limit in any of its windows (for history).
func (s verdict) overage(metric, customer string) int64 {
	var n int64
	for _, cs := range [2][]Charge{s.short, s.long} {
		for i := range cs {
			c := &cs[i]
			if c.Metric != metric || c.Customer != customer {
				continue
			}
			for j := range c.Spans {
				n = max(n, c.Spans[j].Rule.Overage(addCap(c.Out[j].Used, c.Cost), c.Cost))
			}
		}
	}
	return n
}

// record adds a decided check of set s to the usage history: per metric
// it charged (a credit pool's included), the admitted units and their
// overage, or one denied check.
func (s verdict) record(h *historyBuffer, allowed bool, at time.Time) {
	for i := range s.groups {
		g := &s.groups[i]
		if g.subject != "" {
			continue
		}
		delta := HistoryDelta{Customer: g.customer, Metric: g.metric, Date: s.date(g.customer, at)}
		if allowed {
			delta.Used = g.cost
			delta.Overage = s.overage(g.metric, g.customer)
		} else {
			delta.Denied = 1
		}
		h.add(delta)
	}
}

// Item returns item i's part of a decision of items as a Decision of its
// own: its windows, its retry, as a client of one metric reads one.
func (d *Decision) Item(i int) Decision {
	it := &d.Items[i]
	return Decision{Allowed: it.Allowed, Customer: it.Customer, Metric: it.Metric, Cost: it.Cost,
		RetryAfter: it.RetryAfter, Never: it.Never, Degraded: d.Degraded, Limits: it.Limits,
		Replayed: d.Replayed, StoreTrips: d.StoreTrips}
}
