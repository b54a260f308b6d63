package quota

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// Intervals of the engine's background work.
const (
	historyFlushEvery = time.Second
	evictEvery        = 10 * time.Second
	purgeEvery        = 10 * time.Minute
)

// Run does the engine's background work until ctx ends: it flushes usage
// history, evicts idle short-window counters and purges old counters and
// request ids. On return it flushes history one last time. Errors are
// passed to report and retried later.
func (e *Engine) Run(ctx context.Context, report func(error)) {
	flush := time.NewTicker(historyFlushEvery)
	evict := time.NewTicker(evictEvery)
	purge := time.NewTicker(purgeEvery)
	defer flush.Stop()
	defer evict.Stop()
	defer purge.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if err := e.FlushHistory(final); err != nil {
				report(fmt.Errorf("final history flush: %w", err))
			}
			cancel()
			return
		case <-flush.C:
			if err := e.FlushHistory(ctx); err != nil {
				report(fmt.Errorf("flush history: %w", err))
			}
		case <-evict.C:
			e.short.evict(e.clock.Now().UnixMilli())
		case <-purge.C:
			if err := e.ledger.Purge(ctx, e.clock.Now()); err != nil {
				e.storeErrs.Add(1)
				report(fmt.Errorf("purge counters: %w", err))
			}
		}
	}
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
func (e *Engine) EvictIdle() int { return e.short.evict(e.clock.Now().UnixMilli()) }

// Refund gives r.Cost units back to the customer's current windows of
// r.Metric (never below zero, overage units first) and takes them off
// today's history. A refund id seen within 24 hours refunds nothing again.
// It returns the metric's usage after the refund.
func (e *Engine) Refund(ctx context.Context, r RefundRequest) ([]Usage, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	now := e.clock.Now().UTC()
	acct, m, err := e.lookup(ctx, r.Customer, r.Metric)
	if err != nil {
		return nil, err
	}
	p := planFor(acct, m, now)
	var (
		before   []int64
		replayed bool
	)
	if len(p.long) > 0 || len(p.longGlob) > 0 || r.RequestID != "" {
		before, replayed, err = e.ledger.Refund(ctx, RefundCharge{
			Customer: r.Customer, Metric: r.Metric, Cost: r.Cost, Counters: p.counterKeys(),
			Globals: p.longGlob, RequestID: r.RequestID, At: now,
		})
		if err != nil {
			if errors.Is(err, tiers.ErrUnavailable) {
				e.storeErrs.Add(1)
			}
			return nil, err
		}
	}
	if !replayed {
		shortBefore := e.short.refund(r.Customer, r.Metric, p.shortWindows(), p.shortGlob, r.Cost, now.UnixMilli())
		// Overage units go first: the most any soft window is above its limit.
		var overage int64
		for i, s := range p.short {
			if s.limit.Mode == tiers.Soft {
				overage = max(overage, min(r.Cost, shortBefore[i]-s.limit.Limit))
			}
		}
		for i, s := range p.long {
			if s.limit.Mode == tiers.Soft {
				overage = max(overage, min(r.Cost, before[i]-s.limit.Limit))
			}
		}
		e.history.add(HistoryDelta{Customer: r.Customer, Metric: r.Metric, Date: day(now),
			Used: -r.Cost, Overage: -max(0, overage)})
	}
	return e.usage(ctx, acct, now, r.Metric)
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
// or (metric "") of all.
func (e *Engine) usage(ctx context.Context, acct tiers.Account, now time.Time, metric string) ([]Usage, error) {
	type ref struct {
		l          tiers.Limit
		start, end time.Time
	}
	var shortRefs, longRefs []ref
	var keys []CounterKey
	for _, el := range tiers.Effective(acct.Plan, acct.Overrides, now) {
		if metric != "" && el.Metric != metric {
			continue
		}
		start, end := Bounds(el.Window, now, acct.Customer.Anchor)
		if el.Window.Short() {
			shortRefs = append(shortRefs, ref{el.Limit, start, end})
			continue
		}
		longRefs = append(longRefs, ref{el.Limit, start, end})
		keys = append(keys, CounterKey{Customer: acct.Customer.ID, Metric: el.Metric, Window: el.Window, Start: start})
	}
	var longUsed []int64
	if len(keys) > 0 {
		var err error
		if longUsed, _, err = e.ledger.Peek(ctx, keys, nil); err != nil {
			if errors.Is(err, tiers.ErrUnavailable) {
				e.storeErrs.Add(1)
			}
			return nil, err
		}
	}
	out := make([]Usage, 0, len(shortRefs)+len(longRefs))
	toUsage := func(rf ref, used int64) Usage {
		u := Usage{Metric: rf.l.Metric, Window: rf.l.Window, Limit: rf.l.Limit, Used: used,
			Remaining: max(0, rf.l.Limit-used), ResetAt: rf.end}
		if rf.l.Mode == tiers.Soft {
			u.Overage = max(0, used-rf.l.Limit)
		}
		return u
	}
	nowMs := now.UnixMilli()
	for _, rf := range shortRefs {
		used, _ := e.short.peek(acct.Customer.ID, rf.l.Metric, []tiers.Window{rf.l.Window}, nowMs)
		out = append(out, toUsage(rf, used[0]))
	}
	for i, rf := range longRefs {
		out = append(out, toUsage(rf, longUsed[i]))
	}
	sortUsage(out)
	return out, nil
}

func sortUsage(u []Usage) {
	slices.SortFunc(u, func(a, b Usage) int {
		return cmp.Or(cmp.Compare(a.Metric, b.Metric), cmp.Compare(a.Window, b.Window))
	})
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
	e.ForgetShort(customer, metric)
	return nil
}

// ForgetShort drops the customer's short-window counters of metric (all
// metrics when metric is ""). Other processes call it when told of a reset
// or a deleted customer.
func (e *Engine) ForgetShort(customer, metric string) { e.short.forget(customer, metric) }

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
