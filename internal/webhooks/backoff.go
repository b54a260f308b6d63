package webhooks

import (
	"math/rand/v2"
	"time"
)

// Backoff schedules the retries of a delivery: after the nth failed
// attempt, a delay drawn uniformly from [0, min(Base·2^(n-1), Cap)] ("full
// jitter", so that receivers coming back are not met by every retry at
// once), for at most Window after the event; an attempt that fails after
// that marks the delivery failed.
type Backoff struct {
	Base, Cap, Window time.Duration
	// Int64N draws from [0, n); rand.Int64N when nil.
	Int64N func(n int64) int64
}

// DefaultBackoff is quotad's retry policy: from 5 s doubling up to an
// hour, for 24 hours.
var DefaultBackoff = Backoff{Base: 5 * time.Second, Cap: time.Hour, Window: 24 * time.Hour}

// Ceiling is the largest delay after the nth failed attempt (n >= 1).
func (b Backoff) Ceiling(n int) time.Duration {
	d := b.Base
	for i := 1; i < n && d < b.Cap; i++ {
		d *= 2
	}
	return min(d, b.Cap)
}

// Delay draws the delay after the nth failed attempt.
func (b Backoff) Delay(n int) time.Duration {
	draw := b.Int64N
	if draw == nil {
		draw = rand.Int64N
	}
	return time.Duration(draw(int64(b.Ceiling(n)) + 1))
}

// Next returns when to try again after the nth attempt failed at now, for
// an event of created; ok is false when the delivery has failed for good.
// The last attempt comes at the window's end.
func (b Backoff) Next(n int, created, now time.Time) (next time.Time, ok bool) {
	deadline := created.Add(b.Window)
	if !now.Before(deadline) {
		return time.Time{}, false
	}
	next = now.Add(b.Delay(n))
	if next.After(deadline) {
		next = deadline
	}
	return next, true
}
