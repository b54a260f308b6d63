package quota

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// Intervals of the engine's background work.
const (
	historyFlushEvery = time.Second
	evictEvery        = 10 * time.Second
	purgeEvery        = 10 * time.Minute
	// backgroundTimeout bounds each piece of background work, so that a
	// store that went silent holds none of it up for long: the next tick
	// tries again.
	backgroundTimeout = 5 * time.Second
)

// Run does the engine's background work until ctx ends: it flushes usage
// history, keeps leases (reports, settles, global usage; see
// LeasePool.Flush), evicts idle short-window counters and purges old
// counters and request ids. On return it settles every lease and flushes
// history one last time. Errors are passed to report and retried later.
func (e *Engine) Run(ctx context.Context, report func(error)) {
	flush := time.NewTicker(historyFlushEvery)
	leases := time.NewTicker(FlushEvery)
	evict := time.NewTicker(evictEvery)
	purge := time.NewTicker(purgeEvery)
	sweep := time.NewTicker(sweepEvery)
	defer sweep.Stop()
	defer flush.Stop()
	defer leases.Stop()
	defer evict.Stop()
	defer purge.Stop()
	// A periodic call cut short by shutdown is not a failure: Close does
	// its work once more.
	periodic := func(err error) {
		if ctx.Err() == nil {
			report(err)
		}
	}
	bounded := func(f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, backgroundTimeout)
		defer cancel()
		return f(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if err := e.Close(final); err != nil {
				report(err)
			}
			cancel()
			return
		case <-flush.C:
			if err := bounded(e.FlushHistory); err != nil {
				periodic(fmt.Errorf("flush history: %w", err))
			}
		case <-leases.C:
			if err := bounded(e.FlushLeases); err != nil {
				periodic(fmt.Errorf("flush leases: %w", err))
			}
		case <-evict.C:
			e.sliding.evict(e.clock.Now().UnixMilli())
			if f := e.failover; f != nil {
				f.shared.Evict(e.clock.Now().UnixMilli())
			}
		case <-sweep.C:
			if err := bounded(func(ctx context.Context) error { _, err := e.ExpireReservations(ctx); return err }); err != nil {
				periodic(fmt.Errorf("expire reservations: %w", err))
			}
		case <-purge.C:
			if err := bounded(func(ctx context.Context) error { return e.ledger.Purge(ctx, e.clock.Now()) }); err != nil {
				e.storeErrs.Add(1)
				periodic(fmt.Errorf("purge counters: %w", err))
			}
		}
	}
}

// Close gives back the units this process holds in leases and writes
// what it buffered: on shutdown, after the last check.
func (e *Engine) Close(ctx context.Context) error {
	var errs []error
	if e.leases != nil {
		if err := e.leases.Close(ctx); err != nil {
			e.storeErrs.Add(1)
			errs = append(errs, fmt.Errorf("settle leases: %w", err))
		}
	}
	if err := e.FlushHistory(ctx); err != nil {
		errs = append(errs, fmt.Errorf("final history flush: %w", err))
	}
	return errors.Join(errs...)
}

// FlushLeases does the lease pool's periodic work now (see
// LeasePool.Flush); Run calls it every FlushEvery.
func (e *Engine) FlushLeases(ctx context.Context) error {
	if e.leases == nil {
		return nil
	}
	if err := e.leases.Flush(ctx, e.clock.Now()); err != nil {
		e.storeErrs.Add(1)
		return err
	}
	return nil
}

// FlushHistory writes buffered usage history now.
func (e *Engine) FlushHistory(ctx context.Context) error {
	if err := e.history.flush(ctx); err != nil {
		e.storeErrs.Add(1)
		return err
	}
	return nil
}

// EvictIdle drops short-window counters that count nothing any more and
// returns how many it dropped.
func (e *Engine) EvictIdle() int { return e.sliding.evict(e.clock.Now().UnixMilli()) }

// Refund gives r.Cost units back to the customer's current windows of
// r.Metric (never below zero, overage units first) and takes them off
// today's history. A refund id seen within 24 hours refunds nothing again.
// It returns how many units went back, and the metric's usage after the
// refund.
func (e *Engine) Refund(ctx context.Context, r RefundRequest) (RefundResult, error) {
	if err := r.Validate(); err != nil {
		return RefundResult{}, err
	}
	now := e.clock.Now().UTC()
	acct, m, err := e.lookup(ctx, r.Customer, r.Metric)
	if err != nil {
		return RefundResult{}, err
	}
	s := e.newScope(acct, m, r.Cost, now)
	defer e.freeScope(s)
	// A global window gets back what the customer's counter of the same
	// window gave back. Where the customer has no such counter (no limit
	// there, or a month anchored on another day) its share is not known:
	// counting too much there only makes elastic limits more cautious,
	// where counting too little would let them pass the declared capacity.
	s.short.Globals = knownShares(*s.short)
	s.long.Globals = knownShares(*s.long)
	replayed := false
	if e.leases != nil && s.hasLong() {
		// The ledger gives back admitted units only: leases of these
		// counters come home first.
		if err := e.leases.Reclaim(ctx, s.longs()); err != nil {
			if errors.Is(err, tiers.ErrUnavailable) {
				e.storeErrs.Add(1)
			}
			return RefundResult{}, err
		}
	}
	if s.hasLong() || r.RequestID != "" {
		err := e.ledger.Atomically(ctx, func(ctx context.Context, tx Tx) error {
			if r.RequestID != "" {
				rec, err := tx.Claim(ctx, Claim{Customer: r.Customer, Kind: KindRefund, ID: r.RequestID,
					Metric: r.Metric, Cost: r.Cost, At: now})
				if err != nil {
					return err
				}
				if rec != nil {
					if rec.Metric != r.Metric || rec.Cost != r.Cost {
						return fmt.Errorf("%w: request_id %q was used for a refund of %d %s",
							tiers.ErrConflict, r.RequestID, rec.Cost, rec.Metric)
					}
					replayed = true
					return errDecided
				}
			}
			if !s.hasLong() {
				return nil
			}
			return tx.GiveBack(ctx, s.longs())
		})
		if err != nil && !errors.Is(err, errDecided) {
			if errors.Is(err, tiers.ErrUnavailable) {
				e.storeErrs.Add(1)
			}
			return RefundResult{}, err
		}
	}
	var res RefundResult
	if !replayed {
		if err := e.short.GiveBack(ctx, s.shorts()); err != nil {
			return RefundResult{}, err
		}
		// The refund took back the most any window gave back: min(cost,
		// its count before). Overage units go first: the most any soft
		// window is above its limit.
		var overage int64
		for i := range s.short.Spans {
			res.Refunded = max(res.Refunded, min(r.Cost, max(0, s.short.Out[i].Used)))
			overage = max(overage, s.short.Spans[i].Rule.Overage(s.short.Out[i].Used, r.Cost))
		}
		for i := range s.long.Spans {
			res.Refunded = max(res.Refunded, min(r.Cost, max(0, s.long.Out[i].Used)))
			overage = max(overage, s.long.Spans[i].Rule.Overage(s.long.Out[i].Used, r.Cost))
		}
		// Today's history loses as many, so that a refund larger than what
		// was used takes no other units off the bill; a metric without a
		// window gives back the cost, as far as today's history has units.
		back := res.Refunded
		if len(s.short.Spans)+len(s.long.Spans) == 0 {
			back = r.Cost
		}
		e.history.add(HistoryDelta{Customer: r.Customer, Metric: r.Metric, Date: day(now),
			Used: -back, Overage: -min(overage, back)})
	}
	if res.Usage, err = e.usage(ctx, acct, now, r.Metric); err != nil {
		return RefundResult{}, err
	}
	if !replayed {
		for i := range res.Usage {
			u := &res.Usage[i]
			u.Refunded = refundedFrom(s.short.Spans, s.short.Out, u.Window, r.Cost) +
				refundedFrom(s.long.Spans, s.long.Out, u.Window, r.Cost)
		}
	}
	return res, nil
}

// refundedFrom returns how many of cost units a refund took off the span
// of window w, if spans has one: min(cost, its count before), as
// Counter.GiveBack takes them, never below zero.
func refundedFrom(spans []Span, before []Outcome, w tiers.Window, cost int64) int64 {
	for i := range spans {
		if spans[i].Key.Window == w {
			return min(cost, max(0, before[i].Used))
		}
	}
	return 0
}

// shortCapacity reports whether metric m declares a capacity for a short
// window.
func shortCapacity(m tiers.Metric) bool {
	for w := range m.Capacity {
		if w.Short() {
			return true
		}
	}
	return false
}

// knownShares returns the global windows of c in which one of its spans
// counts: the same window, from the same start.
func knownShares(c Charge) []GlobalKey {
	out := c.Globals[:0:0]
	for _, g := range c.Globals {
		if spanOf(c.Spans, g) >= 0 {
			out = append(out, g)
		}
	}
	return out
}

// Usage returns the customer's current count for every effective limit.
func (e *Engine) Usage(ctx context.Context, customer string) (tiers.Account, []Usage, error) {
	if err := tiers.CheckCustomerID("customer", customer); err != nil {
		return tiers.Account{}, nil, err
	}
	acct, err := e.catalog.Account(ctx, customer)
	if err != nil {
		return tiers.Account{}, nil, err
	}
	u, err := e.usage(ctx, acct, e.clock.Now().UTC(), "")
	return acct, u, err
}

// usage reads the counts of the account's effective limits, of one metric
// or (metric "") of all, ordered by metric and window.
func (e *Engine) usage(ctx context.Context, acct tiers.Account, now time.Time, metric string) ([]Usage, error) {
	var limits []tiers.EffectiveLimit
	for _, el := range tiers.Effective(acct.Plan, acct.Overrides, now) {
		if metric == "" || el.Metric == metric {
			limits = append(limits, el)
		}
	}
	out := make([]Usage, 0, len(limits))
	var keys []CounterKey
	var long []int // indexes into out of the long windows, as keys
	for _, el := range limits {
		start, end := Bounds(el.Window, now, acct.Customer.Anchor)
		key := CounterKey{Customer: acct.Customer.ID, Metric: el.Metric, Window: el.Window, Start: start}
		u := Usage{Metric: el.Metric, Window: el.Window, Algorithm: el.Algorithm, Burst: el.Burst,
			Limit: el.Limit.Limit, ResetAt: end}
		if el.Window.Short() {
			m, err := e.catalog.Metric(ctx, el.Metric)
			if err != nil {
				return nil, err
			}
			c := []Charge{{Customer: key.Customer, Metric: key.Metric, Cost: 1, At: now, MetricCapacity: shortCapacity(m),
				Spans: []Span{{Key: key, End: end, Rule: Rule{Algorithm: el.Algorithm, Limit: el.Limit.Limit,
					Size: el.Size(), Threshold: tiers.MaxLimit}}}, Out: make([]Outcome, 1)}}
			if err := e.short.Peek(ctx, c); err != nil {
				return nil, err
			}
			u.Used, u.ResetAt = c[0].Out[0].Used, c[0].Out[0].resetAt(&c[0].Spans[0], false)
		} else {
			keys = append(keys, key)
			long = append(long, len(out))
		}
		out = append(out, u)
	}
	if len(keys) > 0 {
		read := e.ledger.Read
		if e.leases != nil {
			read = e.leases.Read
		}
		used, _, err := read(ctx, keys, nil)
		if err != nil {
			if errors.Is(err, tiers.ErrUnavailable) {
				e.storeErrs.Add(1)
			}
			return nil, err
		}
		for i, j := range long {
			out[j].Used = used[i]
		}
	}
	for i := range out {
		u := &out[i]
		size := limits[i].Size()
		u.Remaining = max(0, size-u.Used)
		if limits[i].Mode == tiers.Soft {
			u.Overage = max(0, u.Used-size)
		}
	}
	return out, nil
}

// Reset zeroes the customer's current windows of metric, short and long,
// in every quotad process; actor is recorded in the audit log.
func (e *Engine) Reset(ctx context.Context, actor, customer, metric string) error {
	if err := tiers.CheckCustomerID("customer", customer); err != nil {
		return err
	}
	if err := tiers.CheckKey("metric", metric); err != nil {
		return err
	}
	if _, _, err := e.lookup(ctx, customer, metric); err != nil {
		return err
	}
	if err := e.ledger.Reset(ctx, actor, customer, metric, e.clock.Now().UTC()); err != nil {
		return err
	}
	e.Forget(customer, metric)
	return e.ForgetShared(ctx, customer, metric)
}

// ForgetShared deletes the customer's short windows of each metric named
// from the shared store, if there is one: a reset, or the customer's
// deletion, ends them for every process.
func (e *Engine) ForgetShared(ctx context.Context, customer string, metrics ...string) error {
	if e.shared == nil || len(metrics) == 0 {
		return nil
	}
	return e.shared.Clear(ctx, customer, metrics)
}

// Forget drops what this process counts of the customer's metric (of all
// its metrics when metric is ""): its short windows, and its leases, which
// a reset or the customer's deletion ended in the store. Other processes
// call it when told of a reset or a deleted customer.
func (e *Engine) Forget(customer, metric string) {
	e.sliding.forget(customer, metric)
	if e.leases != nil {
		e.leases.Forget(customer, metric)
	}
}

// Release gives back this process's unused units of a counter that
// another process recalled (it was told through the store).
func (e *Engine) Release(ctx context.Context, k CounterKey) error {
	if e.leases == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, backgroundTimeout)
	defer cancel()
	return e.leases.Release(ctx, k)
}

// Freed tells the engine that units came back to counter k: a lease that
// knew it full asks the store again (see LeasePool.Freed).
func (e *Engine) Freed(k CounterKey) {
	if e.leases != nil {
		e.leases.Freed(k)
	}
}

// ClearMarks forgets every counter known full: notifications that units
// came back may have been missed (see LeasePool.ClearMarks).
func (e *Engine) ClearMarks() {
	if e.leases != nil {
		e.leases.ClearMarks()
	}
}

// MaxHistoryDays bounds one history query.
const MaxHistoryDays = 366

// History returns the customer's daily usage from..to (inclusive, UTC
// dates), of one metric or all. Any valid customer id answers, deleted or
// never seen.
func (e *Engine) History(ctx context.Context, customer, metric string, from, to time.Time) ([]Day, error) {
	var fields []tiers.FieldError
	if err := tiers.CheckCustomerID("customer", customer); err != nil {
		fields = append(fields, err.(*tiers.ValidationError).Fields...)
	}
	if metric != "" && !tiers.ValidKey(metric) {
		fields = append(fields, tiers.FieldError{Field: "metric", Message: "must match ^[a-z0-9][a-z0-9_.-]{0,62}$"})
	}
	if to.Before(from) {
		fields = append(fields, tiers.FieldError{Field: "to", Message: "must not be before from"})
	} else if to.Sub(from) > (MaxHistoryDays-1)*24*time.Hour {
		fields = append(fields, tiers.FieldError{Field: "to", Message: fmt.Sprintf("must be at most %d days after from", MaxHistoryDays-1)})
	}
	if fields != nil {
		return nil, &tiers.ValidationError{Fields: fields}
	}
	if err := e.FlushHistory(ctx); err != nil {
		return nil, err
	}
	return e.history.store.FindHistory(ctx, customer, metric, day(from), day(to))
}

// Today returns the current UTC date, for callers choosing history ranges.
func (e *Engine) Today() time.Time { return day(e.clock.Now()) }
