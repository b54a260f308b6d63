package quota

import (
	"context"
	"time"
)

// The ledger keeps what every quotad process shares, in a store:
// long-window counters, the metrics' global usage in long windows, request
// ids, resets, refunds' audit events (and leases: package lease's Leaser,
// which the store implements beside it). The engine takes it as four
// roles, each a small interface, so that a part of quotad (or a test's
// fake) asks only for the role it needs: Counts (charging and reading
// counters), Requests (request ids), Maintenance (resets and purges) and
// Audits. Implementations are safe for concurrent use. Errors:
// tiers.ErrUnavailable when the store cannot be reached (for calls that
// change nothing but one row or one transaction, nothing was changed),
// tiers.ErrCustomerNotFound when the customer went away.

// Audits is the audit role of the ledger: the engine's own entries in the
// audit log (a reset writes its own, in Maintenance.Reset).
type Audits interface {
	// RecordRefunds adds an audit event (action "refund") for each of
	// events, in one round trip; on error none was added.
	RecordRefunds(ctx context.Context, events []RefundEvent) error
}

// Counts is the counting role of the ledger: a Counter over long windows
// that decides each charge with atomic conditional updates in one
// transaction, so hard limits stay exact across processes, and the reads
// and global usage writes that go with it.
type Counts interface {
	Counter
	// Read returns the counts of counters, as admitted units: units that
	// other live processes hold unused in leases are not counted (this
	// process's own leases are the caller's to account for), and the
	// global usage of globals.
	Read(ctx context.Context, counters []CounterKey, globals []GlobalKey) (used, global []int64, err error)
	// AddGlobal adds units (negative ones give back, never below zero) to
	// the metrics' global usage.
	AddGlobal(ctx context.Context, deltas []GlobalDelta) error
}

// Requests is the request-id role of the ledger: checks and refunds that
// carry an id are answered once.
type Requests interface {
	// Claim records each claim's request id with its answer (Answer), in
	// as few round trips as it can, or, where the id was recorded within
	// the last 24 hours, records nothing and fills in Found. Two claims of
	// one id: the first claims it, the second finds it. An error fails
	// every claim of c, each perhaps recorded.
	Claim(ctx context.Context, c []Claim) error
	// Recorded returns the answer kept under a check's request id within
	// the last 24 hours, or nil.
	Recorded(ctx context.Context, customer, requestID string, now time.Time) (*Recorded, error)
	// Atomically runs fn in one transaction: every call fn makes on tx
	// shares it, and it commits when fn returns nil. Otherwise it rolls
	// back and returns fn's error as it is.
	Atomically(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
}

// Maintenance is the housekeeping role of the ledger.
type Maintenance interface {
	// Reset zeroes the customer's counters of metric, ending every lease
	// on them, records an audit event for actor, and tells every quotad
	// process to forget its own counts of them.
	Reset(ctx context.Context, actor, customer, metric string, at time.Time) error
	// SetTotal sets the customer's own counter of metric in window total
	// to used, ending every lease on it (as Reset ends them), records an
	// audit event for actor, and tells every quotad process to forget its
	// leases of the metric. It returns the count it replaced, as admitted
	// units (what leases held unused left out).
	SetTotal(ctx context.Context, actor, customer, metric string, used int64, at time.Time) (before int64, err error)
	// Purge deletes, in small batches, counters of windows long past
	// (their leases with them), request ids older than 24 hours, and
	// whatever r keeps no longer (see Retention). It returns what it
	// deleted, by table, also when it fails part-way.
	Purge(ctx context.Context, now time.Time, r Retention) (Purged, error)
}

// Tx is the ledger within one transaction (see Requests.Atomically). Its
// Counter methods charge the ledger directly, within the transaction.
type Tx interface {
	Counter
	// Claim records c's request id, or returns what was recorded under it
	// within the last 24 hours (an id older than that is claimed anew). A
	// concurrent claim of the same id waits until this transaction ends.
	Claim(ctx context.Context, c Claim) (*Recorded, error)
	// Keep stores the answer to a claimed check.
	Keep(ctx context.Context, c Claim, answer []byte) error
}

// RequestKind tells checks' request ids from refunds': each kind has its
// own records. A refund's record is kept under the id of the check it
// gives back, so that the check is refunded once.
type RequestKind string

// The request kinds.
const (
	KindCheck  RequestKind = "check"
	KindRefund RequestKind = "refund"
)

// Claim is a request id being claimed for a check or a refund.
type Claim struct {
	Customer string
	Kind     RequestKind
	ID       string
	Metric   string
	Cost     int64
	At       time.Time
	// Answer, when known before the claim, is kept with it.
	Answer []byte

	// Found is what was recorded under the id before (Requests.Claim
	// fills it in): nil when this claim recorded it.
	Found *Recorded
}

// Recorded is what a request id was first used for: the metric, the cost
// and, for a check, its answer in the wire form of encodeAnswer.
type Recorded struct {
	Metric string
	Cost   int64
	Answer []byte
	// At is when the request was made.
	At time.Time
}

// GlobalDelta is a change to a metric's global usage in one window.
type GlobalDelta struct {
	Key   GlobalKey
	Units int64
}

// HistoryDelta is a change to one day of usage history.
type HistoryDelta struct {
	Customer string
	Metric   string
	Date     time.Time
	Used     int64 // may be negative (refunds); the store keeps days >= 0
	Overage  int64
	Denied   int64
}

// HistoryStore keeps daily usage history, beyond customers' lives.
type HistoryStore interface {
	AddHistory(ctx context.Context, deltas []HistoryDelta) error
	// FindHistory returns days from..to inclusive, by date then metric;
	// metric "" means every metric.
	FindHistory(ctx context.Context, customer, metric string, from, to time.Time) ([]Day, error)
}
