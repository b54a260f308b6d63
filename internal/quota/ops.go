package quota

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	backgroundTimeout = DefaultBackgroundTimeout
)

// DefaultBackgroundTimeout bounds each store call of background work (the
// engine's, and the workers' beside it that are given no other bound).
const DefaultBackgroundTimeout = 5 * time.Second

// Run does the engine's background work until ctx ends: it charges what
// checks admitted degraded owe once their stores answer (see debts),
// flushes usage history and refunds' audit events kept while the store
// refused them, keeps leases (reports, settles, global usage; see
// LeasePool.Flush), evicts idle short-window counters, releases expired
// reservations and, in a goroutine of its own (a purge that takes long
// holds up none of the rest), purges what the ledger keeps no longer (see
// Purge). On return it settles every lease and flushes history one last
// time. Errors are passed to report and retried later.
func (e *Engine) Run(ctx context.Context, report func(error)) {
	flush := time.NewTicker(historyFlushEvery)
	leases := time.NewTicker(FlushEvery)
	evict := time.NewTicker(evictEvery)
	sweep := time.NewTicker(sweepEvery)
	defer sweep.Stop()
	defer flush.Stop()
	defer leases.Stop()
	defer evict.Stop()
	var purging sync.WaitGroup
	defer purging.Wait()
	purging.Go(func() {
		purge := time.NewTicker(purgeEvery)
		defer purge.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-purge.C:
				if err := e.Purge(ctx); err != nil && ctx.Err() == nil {
					report(err)
				}
			}
		}
	})
	// Every piece is bounded, and its failure recorded (see health); a
	// periodic call cut short by shutdown is not a failure: Close does its
	// work once more.
	try := func(what string, f func(ctx context.Context) error, record func(error) error) {
		bounded, cancel := context.WithTimeout(ctx, backgroundTimeout)
		defer cancel()
		if err := record(f(bounded)); err != nil && ctx.Err() == nil {
			report(fmt.Errorf("%s: %w", what, err))
		}
	}
	work := func(what string, f func(ctx context.Context) error) { try(what, f, e.health.unavailable) }
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
			work("repay degraded admissions", e.repay)
			// Not the ledger's: a Redis that cannot be reached leaves
			// /readyz alone (see repayShared).
			try("repay degraded admissions to Redis", func(ctx context.Context) error {
				return e.debts.repayShared(ctx, e.failover, e.clock.Now().UTC())
			}, func(err error) error { return err })
			work("flush history", e.history.flush)
			work("write refunds' audit events", e.audits.flush)
		case <-leases.C:
			if e.leases != nil {
				work("flush leases", func(ctx context.Context) error { return e.leases.Flush(ctx, e.clock.Now()) })
			}
		case <-evict.C:
			e.sliding.evict(e.clock.Now().UnixMilli())
			e.counters.rollovers.forget(e.clock.Now())
			if f := e.failover; f != nil {
				f.shared.Evict(e.clock.Now().UnixMilli())
			}
		case <-sweep.C:
			if e.reservations != nil {
				work("expire reservations", func(ctx context.Context) error { _, err := e.reservations.expireDue(ctx); return err })
			}
		}
	}
}

// Purge deletes, in small batches, what the ledger keeps no longer at the
// clock's now: counters of windows long past, request ids older than 24
// hours, and what the retention given to New keeps no longer. Each batch
// is bounded (see Retention.BatchTimeout), not the whole purge. OnPurge
// hears what went.
func (e *Engine) Purge(ctx context.Context) error {
	purged, err := e.maintenance.Purge(ctx, e.clock.Now(), e.retention)
	if e.onPurge != nil {
		e.onPurge(purged)
	}
	if err = e.health.unavailable(err); err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	return nil
}

// Close charges what checks admitted degraded owe, gives back the units
// this process holds in leases and writes what it buffered (history,
// refunds' audit events): on shutdown, after the last check.
func (e *Engine) Close(ctx context.Context) error {
	var errs []error
	if err := e.repay(ctx); err != nil {
		errs = append(errs, fmt.Errorf("repay degraded admissions: %w", err))
	}
	if err := e.debts.repayShared(ctx, e.failover, e.clock.Now().UTC()); err != nil {
		errs = append(errs, fmt.Errorf("repay degraded admissions to Redis: %w", err))
	}
	if e.leases != nil {
		if err := e.health.unavailable(e.leases.Close(ctx)); err != nil {
			errs = append(errs, fmt.Errorf("settle leases: %w", err))
		}
	}
	if err := e.FlushHistory(ctx); err != nil {
		errs = append(errs, fmt.Errorf("final history flush: %w", err))
	}
	if err := e.health.unavailable(e.audits.flush(ctx)); err != nil {
		errs = append(errs, fmt.Errorf("write refunds' audit events: %w", err))
	}
	return errors.Join(errs...)
}

// FlushHistory writes buffered usage history now.
func (e *Engine) FlushHistory(ctx context.Context) error {
	return e.health.unavailable(e.history.flush(ctx))
}

// Refund gives r.Cost units back to the customer's current windows of
// r.Metric — the customer's, the subject's, and the credit pool's it
// draws on, at its rate — never below zero, overage units first, and
// takes them off today's history. It returns how many units went back,
// and the usage of those windows after the refund; the refund is in the
// audit log (see RecordRefunds: a refund whose event cannot be written at
// once still answers, its event written later).
//
// A refund with a request id gives back the units of the check of the
// customer admitted within the last 24 hours under that id: at most what
// that check charged r's metric and subject (a larger cost is clamped to
// it), once. A repeat of the refund (same metric, subject and cost) gives
// nothing more; another refund of that check is tiers.ErrConflict, as is
// a refund of a metric or subject the check did not charge; an id that
// names no such check (never used, denied, another customer's, older
// than 24 hours) is tiers.ErrCheckNotFound.
func (e *Engine) Refund(ctx context.Context, r RefundRequest) (RefundResult, error) {
	if err := r.Validate(); err != nil {
		return RefundResult{}, err
	}
	s, ctx := e.set(ctx, e.timeout)
	defer s.free(&e.sets)
	cost := r.Cost
	var checkedAt time.Time
	if r.RequestID != "" {
		charged, at, err := chargedBy(ctx, e.requests, r, s.at)
		if err != nil {
			return RefundResult{}, e.health.unavailable(err)
		}
		cost, checkedAt = min(cost, charged), at
	}
	items := []Item{{Customer: r.Customer, Metric: r.Metric, Cost: cost, Subject: r.Subject}}
	if err := e.resolve(ctx, s, r.Customer, items, false); err != nil {
		return RefundResult{}, e.health.unavailable(err)
	}
	if !checkedAt.IsZero() {
		markAdmitted(s.long, checkedAt)
	}
	// A global window gets back what the customer's counter of the same
	// window gave back. Where the customer has no such counter (no limit
	// there, or a month anchored on another day) its share is not known:
	// counting too much there only makes elastic limits more cautious,
	// where counting too little would let them pass the declared capacity.
	for _, cs := range [2][]Charge{s.short, s.long} {
		for i := range cs {
			cs[i].Globals = knownShares(cs[i])
		}
	}
	replayed := false
	if r.RequestID != "" {
		// The refund is claimed under the check's id before any unit goes
		// back: of two refunds of one check, in any processes, one claims
		// it and the other finds it claimed.
		c, _, err := e.claims.Do(ctx, Claim{Customer: r.Customer, Kind: KindRefund, ID: r.RequestID,
			Metric: keyed(r.Metric, r.Subject), Cost: r.Cost, At: s.at})
		if err != nil {
			return RefundResult{}, e.health.unavailable(err)
		}
		if rec := c.Found; rec != nil {
			if rec.Metric != keyed(r.Metric, r.Subject) || rec.Cost != r.Cost {
				return RefundResult{}, fmt.Errorf("%w: the check %q was refunded before, %d %s",
					tiers.ErrConflict, r.RequestID, rec.Cost, rec.Metric)
			}
			replayed = true
		}
	}
	var res RefundResult
	if !replayed {
		if err := e.counters.giveBack(ctx, s); err != nil {
			return RefundResult{}, err
		}
		res.Refunded = s.refunded(e.history)
		// The units are back: a refund whose event the store does not
		// take now answers as made, its event written later.
		e.health.unavailable(e.audits.record(ctx, RefundEvent{At: s.at, Actor: r.Actor, Customer: r.Customer,
			Metric: r.Metric, Subject: r.Subject, RequestID: r.RequestID, Cost: r.Cost, Refunded: res.Refunded}))
	}
	acct := s.account(r.Customer)
	metrics := []string{r.Metric}
	if d := s.metric(r.Metric).Draws; d != nil {
		metrics = append(metrics, d.Pool)
	}
	usage, err := e.counters.usage(ctx, e.catalog, *acct, r.Subject, s.at, metrics...)
	if err != nil {
		return RefundResult{}, err
	}
	res.Usage = usage
	if !replayed {
		for i := range res.Usage {
			u := &res.Usage[i]
			u.Refunded = s.refundedFrom(u.Metric, u.Subject, u.Window)
		}
	}
	return res, nil
}

// markAdmitted marks the long charges of a refund naming a check made at
// checkedAt whose every window began by then: the check's units are
// counted there, admitted, so they go back even where other processes'
// leases have not yet reported them (see Charge.Admitted). A window that
// began after the check holds none of its units: its count gives back only
// units known admitted, as a refund without a check's id does.
func markAdmitted(cs []Charge, checkedAt time.Time) {
	for i := range cs {
		c := &cs[i]
		c.Admitted = true
		for j := range c.Spans {
			if c.Spans[j].Key.Start.After(checkedAt) {
				c.Admitted = false
			}
		}
	}
}

// refunded returns what a refund of set s (of one item) took back, and
// takes the units given back off today's history: per group, the most any
// of its windows gave back, min(cost, its count before), overage units
// first; a group without windows gives back its cost, as far as today's
// history has units. The refund took back what its item's own metric
// gave back.
func (s *set) refunded(h *historyBuffer) int64 {
	var refunded int64
	for g := range s.groups {
		gr := &s.groups[g]
		back, overage, windows := int64(0), int64(0), false
		for _, c := range s.chargesOf(g) {
			if c == nil {
				continue
			}
			for j := range c.Spans {
				windows = true
				back = max(back, min(c.Cost, max(0, c.Out[j].Used)))
				overage = max(overage, c.Spans[j].Rule.Overage(c.Out[j].Used, c.Cost))
			}
		}
		if g == s.items[0].groups[0] || g == s.items[0].groups[1] {
			refunded = max(refunded, back)
		}
		if gr.subject != "" {
			continue
		}
		if !windows {
			back = gr.cost
		}
		// Today's history loses as many, so that a refund larger than
		// what was used takes no other units off the bill.
		h.add(HistoryDelta{Customer: gr.customer, Metric: gr.metric, Date: s.date(gr.customer, s.at),
			Used: -back, Overage: -min(overage, back)})
	}
	return refunded
}

// refundedFrom returns how many units a refund of set s took off the
// window w of metric's counter (of subject's, if any): min(cost, its count
// before), as Counter.GiveBack takes them, never below zero; 0 where the
// set has no such window.
func (s *set) refundedFrom(metric, subject string, w tiers.Window) int64 {
	for _, cs := range [2][]Charge{s.short, s.long} {
		for i := range cs {
			c := &cs[i]
			if c.Metric != metric || c.Subject != subject {
				continue
			}
			for j := range c.Spans {
				if c.Spans[j].Key.Window == w {
					return min(c.Cost, max(0, c.Out[j].Used))
				}
			}
		}
	}
	return 0
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

// Usage returns the customer's current count for every effective limit of
// the customer's, and, with a subject, for each limit per subject, the
// subject's.
func (e *Engine) Usage(ctx context.Context, customer, subject string) (tiers.Account, []Usage, error) {
	if err := tiers.CheckCustomerID("customer", customer); err != nil {
		return tiers.Account{}, nil, err
	}
	if subject != "" && !tiers.ValidSubject(subject) {
		return tiers.Account{}, nil, tiers.Invalid("subject", tiers.SubjectRule)
	}
	acct, err := e.catalog.Account(ctx, customer)
	if err != nil {
		return tiers.Account{}, nil, err
	}
	now := e.clock.Now().UTC()
	acct = acct.At(now)
	u, err := e.counters.usage(ctx, e.catalog, acct, subject, now)
	return acct, u, err
}

// Reset zeroes the customer's current windows of metric, short and long,
// its subjects' included, in every quotad process; actor is recorded in
// the audit log.
func (e *Engine) Reset(ctx context.Context, actor, customer, metric string) error {
	if err := tiers.CheckCustomerID("customer", customer); err != nil {
		return err
	}
	if err := tiers.CheckKey("metric", metric); err != nil {
		return err
	}
	if _, err := e.catalog.Account(ctx, customer); err != nil {
		return err
	}
	if _, err := e.catalog.Metric(ctx, metric); err != nil {
		return err
	}
	if err := e.maintenance.Reset(ctx, actor, customer, metric, e.clock.Now().UTC()); err != nil {
		return e.health.unavailable(err)
	}
	e.Forget(customer, metric)
	if f := e.failover; f != nil {
		return f.shared.store.Clear(ctx, customer, []string{metric})
	}
	return nil
}

// ValidateTotal returns the *tiers.ValidationError of a set of customer's
// total of metric to used (see Engine.SetTotal), or nil: used is a count,
// 0..tiers.MaxLimit.
func ValidateTotal(customer, metric string, used int64) error {
	var fields []tiers.FieldError
	if err := tiers.CheckCustomerID("customer", customer); err != nil {
		fields = append(fields, err.(*tiers.ValidationError).Fields...)
	}
	if err := tiers.CheckKey("metric", metric); err != nil {
		fields = append(fields, err.(*tiers.ValidationError).Fields...)
	}
	if used < 0 || used > tiers.MaxLimit {
		fields = append(fields, tiers.FieldError{Field: "used", Message: fmt.Sprintf("must be an integer between 0 and %d", tiers.MaxLimit)})
	}
	if fields != nil {
		return &tiers.ValidationError{Fields: fields}
	}
	return nil
}

// SetTotal sets the customer's count of metric in window total, its
// gauge (seats, projects), to used, in every quotad process: to sync it
// with the application's own records. The customer must have a
// customer-wide limit of window total on metric in effect
// (tiers.ErrNoTotalLimit otherwise); used may be above it (the limit was
// lowered, the records say more): later checks are then denied until
// refunds bring the count below. Checks admitted by other processes from
// their leases before they hear of the set count as before it, as for a
// reset. It returns the total's usage after the set; actor is recorded
// in the audit log.
func (e *Engine) SetTotal(ctx context.Context, actor, customer, metric string, used int64) (Usage, error) {
	if err := ValidateTotal(customer, metric, used); err != nil {
		return Usage{}, err
	}
	acct, err := e.catalog.Account(ctx, customer)
	if err != nil {
		return Usage{}, err
	}
	if _, err := e.catalog.Metric(ctx, metric); err != nil {
		return Usage{}, err
	}
	now := e.clock.Now().UTC()
	acct = acct.At(now)
	var limit *tiers.EffectiveLimit
	for _, el := range tiers.Effective(acct.Plan, acct.Overrides, now) {
		if el.Metric == metric && el.Window == tiers.Total && el.Per == tiers.PerCustomer {
			limit = &el
		}
	}
	if limit == nil {
		return Usage{}, fmt.Errorf("set total %s/%s: %w", customer, metric, tiers.ErrNoTotalLimit)
	}
	if _, err := e.maintenance.SetTotal(ctx, actor, customer, metric, used, now); err != nil {
		return Usage{}, e.health.unavailable(err)
	}
	if e.leases != nil {
		// The store ended this process's lease of the total too.
		e.leases.Forget(customer, metric)
	}
	return Usage{Metric: metric, Window: tiers.Total, Mode: limit.Mode, Limit: limit.Limit.Limit, Used: used,
		Remaining: max(0, limit.Limit.Limit-used)}, nil
}

// Forget drops what this process counts of the customer's metric (of all
// its metrics when metric is ""), its subjects' included: its short
// windows, and its leases, which a reset or the customer's deletion ended
// in the store. Other processes call it when told of a reset or a deleted
// customer.
func (e *Engine) Forget(customer, metric string) {
	e.sliding.forget(customer, metric)
	if f := e.failover; f != nil {
		f.shared.mirror.forget(customer, metric)
	}
	if e.leases != nil {
		e.leases.Forget(customer, metric)
	}
}

// MaxHistoryDays bounds one history query.
const MaxHistoryDays = 366

// History returns the customer's daily usage from..to (inclusive; dates
// of the customer's time zone, as 00:00 UTC of each: history counts a
// check in the customer's local day), of one metric or all. Any valid customer id answers, deleted or
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

// Today returns the customer's current date in its time zone (UTC for a
// customer it cannot find), for callers choosing history ranges.
func (e *Engine) Today(ctx context.Context, customer string) time.Time {
	now := e.clock.Now()
	if acct, err := e.catalog.Account(ctx, customer); err == nil {
		return acct.Customer.Anchor.LocalDate(now)
	}
	return day(now)
}
