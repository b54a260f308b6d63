package quota

import (
	"fmt"
	"time"
)

// Retention says how long the store keeps the rows that grow with traffic
// and the catalog's history, beyond what the engine itself needs; each
// table is purged in batches by the background work (see Engine.Run), off
// the check path. A duration of 0 keeps those rows forever.
//
// What the engine needs is not configurable: counters (and the lease rows
// that go with them) are purged once their windows are long past, request
// ids after 24 hours (see Maintenance.Purge).
type Retention struct {
	// History keeps usage_history for this long after its day (statements
	// and GET .../history read it), and closed plan_assignments (the
	// billing terms statements read) for this long after they closed.
	History time.Duration
	// Audit keeps audit_events for this long after they happened.
	Audit time.Duration
	// Reservations keeps finished reservations (committed, released,
	// expired) for this long after they finished; held ones are never
	// purged. A purged reservation's request_id may be used again: it then
	// reserves anew.
	Reservations time.Duration
	// Deliveries keeps delivered and failed webhook deliveries for this
	// long after their last attempt (pending ones are never purged), and a
	// usage event for this long after its window ended, once no delivery
	// of it is left.
	Deliveries time.Duration
	// Batch is how many rows one DELETE statement takes at most;
	// DefaultPurgeBatch if 0 or less.
	Batch int
	// BatchTimeout bounds each statement; DefaultPurgeBatchTimeout if 0 or
	// less.
	BatchTimeout time.Duration
}

// Defaults of Retention.
const (
	DefaultRetainHistory      = 400 * 24 * time.Hour
	DefaultRetainAudit        = 400 * 24 * time.Hour
	DefaultRetainReservations = 7 * 24 * time.Hour
	DefaultRetainDeliveries   = 30 * 24 * time.Hour
	DefaultPurgeBatch         = 1000
	DefaultPurgeBatchTimeout  = 5 * time.Second
)

// DefaultRetention is the retention quotad runs with unless told otherwise.
var DefaultRetention = Retention{
	History:      DefaultRetainHistory,
	Audit:        DefaultRetainAudit,
	Reservations: DefaultRetainReservations,
	Deliveries:   DefaultRetainDeliveries,
}

// Validate rejects negative durations and a negative batch.
func (r Retention) Validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"history", r.History}, {"audit", r.Audit}, {"reservations", r.Reservations}, {"deliveries", r.Deliveries},
		{"batch timeout", r.BatchTimeout}} {
		if d.v < 0 {
			return fmt.Errorf("retention of %s: want a duration of 0 (keep forever) or more, got %s", d.name, d.v)
		}
	}
	if r.Batch < 0 {
		return fmt.Errorf("retention batch: want 0 or more rows, got %d", r.Batch)
	}
	return nil
}

// BatchSize is r.Batch, or DefaultPurgeBatch.
func (r Retention) BatchSize() int {
	if r.Batch <= 0 {
		return DefaultPurgeBatch
	}
	return r.Batch
}

// StatementTimeout is r.BatchTimeout, or DefaultPurgeBatchTimeout.
func (r Retention) StatementTimeout() time.Duration {
	if r.BatchTimeout <= 0 {
		return DefaultPurgeBatchTimeout
	}
	return r.BatchTimeout
}

// Cutoff returns the instant before which rows kept for d are purged at
// now, and false when d keeps them forever.
func Cutoff(now time.Time, d time.Duration) (time.Time, bool) {
	if d <= 0 {
		return time.Time{}, false
	}
	return now.Add(-d), true
}

// Purged counts the rows one purge deleted, by table.
type Purged map[string]int64

// Total is the number of rows purged from every table.
func (p Purged) Total() int64 {
	var n int64
	for _, v := range p {
		n += v
	}
	return n
}
