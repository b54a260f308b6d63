package main

import (
	"log/slog"
	"sync"
	"time"
)

// outageLog logs the outages of one store, PostgreSQL or Redis, as the
// process judges them: one ERROR when an outage begins and one INFO when
// it ends, with how long it lasted, however many calls failed meanwhile
// (those are counted in /metrics). Its methods may be called from any
// goroutine; a begin during an outage, or an end outside one, logs
// nothing.
type outageLog struct {
	log   *slog.Logger
	store string // the "store" attribute of its lines
	now   func() time.Time

	mu    sync.Mutex
	since time.Time // when the outage began; zero outside one
}

func newOutageLog(log *slog.Logger, store string) *outageLog {
	return &outageLog{log: log, store: store, now: time.Now}
}

// begin logs msg at ERROR, with args, unless an outage has begun already.
func (o *outageLog) begin(msg string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.since.IsZero() {
		return
	}
	o.since = o.now()
	o.log.Error(msg, append([]any{"store", o.store}, args...)...)
}

// end logs msg at INFO, with when the outage began and how long it
// lasted, and args, if one is under way.
func (o *outageLog) end(msg string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since.IsZero() {
		return
	}
	took := o.now().Sub(o.since)
	o.log.Info(msg, append([]any{"store", o.store, "outage_began", o.since.UTC(),
		"outage_ms", took.Milliseconds(), "outage", took.Round(time.Millisecond).String()}, args...)...)
	o.since = time.Time{}
}

// active reports whether an outage is under way (false for a nil o).
func (o *outageLog) active() bool {
	if o == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.since.IsZero()
}
