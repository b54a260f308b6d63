package quota

import (
	"context"
	"errors"
	"fmt"

	"github.com/quotad/quotad/internal/tiers"
)

// MaxBatch is the most checks one CheckAll decides together.
const MaxBatch = 64

// BatchError is CheckAll's error when some of its requests cannot be
// checked at all: Errs holds, at the index of each such request, why
// (tiers.ErrCustomerNotFound, tiers.ErrMetricNotFound, a
// *tiers.ValidationError), and nil at the others. Nothing was charged.
type BatchError struct {
	Errs []error
}

func (e *BatchError) Error() string {
	for i, err := range e.Errs {
		if err != nil {
			return fmt.Sprintf("check %d: %v", i, err)
		}
	}
	return "quota: batch error"
}

// Unwrap returns the requests' errors, so that errors.Is finds any of them.
func (e *BatchError) Unwrap() []error {
	var out []error
	for _, err := range e.Errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// errBatchRequestID: request ids are a single check's (see Check).
var errBatchRequestID = errors.New("quota: a batch of checks takes no request_id")

// CheckAll decides several checks together, all or nothing: each is
// decided as Check decides it, in order, and when one is denied, the
// units of those admitted before it are given back (the same undo a
// check uses when a long window denies after its short windows took
// their units) and the rest are only looked at, as dry runs. So either
// every request is charged, or none is.
//
// Exactness across processes is that of each check: the units a batch
// takes are taken as Check takes them (leases, the ledger, the shared
// store), so no limit is ever exceeded; a batch that is undone held its
// units for the time of the undo, so a concurrent check may be denied
// by units given back a moment later — never admitted beyond a limit.
//
// The decisions come in the order of rs. When the batch is denied, the
// requests that denied it have their denial; the others are answered as
// dry runs, after the undo: Allowed says whether they alone would pass.
// A DryRun request is only looked at, but denies the batch like any
// other. Requests carry no RequestID.
//
// Errors: *BatchError when requests are invalid or name an unknown
// customer or metric (every such request is listed; nothing is
// charged), tiers.ErrUnavailable (only when failing closed; what was
// taken is given back).
func (e *Engine) CheckAll(ctx context.Context, rs []Request) ([]Decision, error) {
	if len(rs) == 0 || len(rs) > MaxBatch {
		return nil, &tiers.ValidationError{Fields: []tiers.FieldError{{Field: "checks",
			Message: fmt.Sprintf("want 1 to %d checks", MaxBatch)}}}
	}
	errs := make([]error, len(rs))
	failed := false
	for i, r := range rs {
		if err := r.Validate(); err != nil {
			errs[i], failed = err, true
		} else if r.RequestID != "" {
			errs[i], failed = errBatchRequestID, true
		}
	}
	if failed {
		return nil, &BatchError{Errs: errs}
	}
	scopes := make([]*scope, len(rs))
	for i := range scopes {
		scopes[i] = e.scopes.Get().(*scope)
	}
	defer func() {
		for _, s := range scopes {
			e.freeScope(s)
		}
	}()
	b := scopes[0].budgetFor(ctx, e.storeTimeout)
	defer b.stop()
	ctx = b
	now := e.clock.Now().UTC()
	ds := make([]Decision, len(rs))
	accts := make([]tiers.Account, len(rs))
	metrics := make([]tiers.Metric, len(rs))
	for i, r := range rs {
		acct, m, err := e.lookup(ctx, r.Customer, r.Metric)
		switch {
		case errors.Is(err, tiers.ErrUnavailable):
			// The catalog cannot be read: as Check, the batch is
			// answered without the store (open), or fails (closed).
			return e.unconsultedAll(rs, err)
		case err != nil:
			errs[i], failed = err, true
			continue
		}
		accts[i], metrics[i] = acct, m
		scopes[i].resolve(acct, m, r.Cost, now)
	}
	if failed {
		return nil, &BatchError{Errs: errs}
	}

	overage := make([]int64, len(rs))
	took := make([]bool, len(rs))     // charged, to be undone if the batch is denied
	tookLong := make([]bool, len(rs)) // and its long windows too
	denied := -1
	for i, r := range rs {
		s := scopes[i]
		var err error
		if r.DryRun {
			ds[i], err = e.peek(ctx, r, s)
		} else {
			ds[i], overage[i], took[i], tookLong[i], err = e.takeOne(ctx, r, s)
		}
		if err != nil {
			e.undoAll(ctx, scopes, took, tookLong)
			return nil, err
		}
		ds[i].StoreTrips = s.short.Trips + s.long.Trips
		if !ds[i].Allowed {
			denied = i
			break
		}
	}
	if denied >= 0 {
		e.undoAll(ctx, scopes, took, tookLong)
		// Every other request is looked at as it stands now, nothing
		// counted: what it alone would get.
		for i, r := range rs {
			if i == denied {
				continue
			}
			s := scopes[i]
			s.resolve(accts[i], metrics[i], r.Cost, now)
			dry := r
			dry.DryRun = true
			d, err := e.peek(ctx, dry, s)
			if err != nil {
				return nil, err
			}
			d.StoreTrips = s.short.Trips + s.long.Trips
			ds[i] = d
		}
	}
	for i, r := range rs {
		switch {
		case r.DryRun:
		case denied < 0:
			e.record(r, ds[i], overage[i], now)
			if e.watcher != nil {
				e.watch(r, scopes[i], &ds[i])
			}
		case !ds[i].Allowed:
			// Denied by its own windows: a denied check in the history.
			e.record(r, ds[i], 0, now)
		}
	}
	return ds, nil
}

// takeOne charges one check of a batch as take does, and also reports
// whether its units were taken (short windows, and long ones), so that
// the batch can give them back.
func (e *Engine) takeOne(ctx context.Context, r Request, s *scope) (d Decision, overage int64, took, tookLong bool, err error) {
	degraded := false
	d, overage, err = e.takeThen(ctx, r, s, func(ctx context.Context, r Request, s *scope, err error) (Decision, int64, error) {
		// Degraded (open): the short units stay taken, the long windows
		// were not counted. Otherwise longFailed gave the short units
		// back.
		d, overage, err := e.longFailed(ctx, r, s, err)
		degraded = err == nil
		return d, overage, err
	})
	if err != nil {
		return Decision{}, 0, false, false, err
	}
	return d, overage, d.Allowed, d.Allowed && !degraded && s.hasLong(), nil
}

// undoAll gives back what takeOne took for the batch's checks. A give-back
// that fails leaves its units counted: too few admitted, never too many.
func (e *Engine) undoAll(ctx context.Context, scopes []*scope, took, tookLong []bool) {
	for i, s := range scopes {
		if tookLong[i] {
			if e.leases != nil {
				_ = e.leases.Undo(ctx, s.longs())
			} else {
				var out [maxLong]Outcome
				_ = e.long.GiveBack(ctx, undoCopy(s.long, out[:]))
			}
			tookLong[i] = false
		}
		if took[i] {
			e.undoShort(ctx, s)
			took[i] = false
		}
	}
}

// unconsultedAll answers a batch whose catalog could not be read.
func (e *Engine) unconsultedAll(rs []Request, err error) ([]Decision, error) {
	if err := e.storeDown(err); err != nil {
		return nil, err
	}
	ds := make([]Decision, len(rs))
	for i, r := range rs {
		ds[i] = Decision{Allowed: true, Customer: r.Customer, Metric: r.Metric, Cost: r.Cost,
			Degraded: true, Limits: []WindowResult{}}
	}
	return ds, nil
}
