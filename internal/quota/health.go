package quota

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// health is what the engine knows of its stores' reach. Every failed
// store call, on a check's path or in the background, is recorded in one
// place, unavailable, so that the error count and StoreDown (and so
// /readyz) see every outage.
type health struct {
	// failClosed: checks answer tiers.ErrUnavailable when the store
	// cannot be reached, rather than going on degraded.
	failClosed bool
	errs       atomic.Uint64
	// lastDown is when a call last could not reach a store (Unix ns, the
	// wall clock: it is about real outages).
	lastDown atomic.Int64
}

// storeDownFor is how long after a call could not reach the store
// StoreDown still says so.
const storeDownFor = time.Second

// unavailable records err, the error of a store call (nothing when nil):
// every failure counts; one of a store that could not be reached
// (tiers.ErrUnavailable) marks it down for a second. It returns err.
func (h *health) unavailable(err error) error {
	if err == nil {
		return nil
	}
	h.errs.Add(1)
	if errors.Is(err, tiers.ErrUnavailable) {
		h.lastDown.Store(time.Now().UnixNano())
	}
	return err
}

// degrade records err, the error of a store call on a check's path, and
// reports whether the check goes on without that store: it could not be
// reached and checks fail open.
func (h *health) degrade(err error) bool {
	return errors.Is(h.unavailable(err), tiers.ErrUnavailable) && !h.failClosed
}

// down reports whether a call could not reach a store within the last
// second.
func (h *health) down() bool {
	last := h.lastDown.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < storeDownFor
}
