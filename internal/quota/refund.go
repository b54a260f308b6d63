package quota

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/quotad/quotad/internal/batch"
	"github.com/quotad/quotad/internal/tiers"
)

// chargedBy returns the units the check refund r names (by its request id)
// charged r's metric and subject: the check's cost, or, for a check of
// items, the cost of its item of that metric and subject. Only admitted
// checks keep their request id (a denied one charged nothing), for 24
// hours: any other id is tiers.ErrCheckNotFound. A check that charged
// nothing of that metric and subject is tiers.ErrConflict. It also returns
// when the check was made.
func chargedBy(ctx context.Context, requests Requests, r RefundRequest, now time.Time) (int64, time.Time, error) {
	rec, err := requests.Recorded(ctx, r.Customer, r.RequestID, now)
	if err != nil {
		return 0, time.Time{}, err
	}
	if rec == nil {
		return 0, time.Time{}, fmt.Errorf("%w: no check of %s admitted within 24 hours has request_id %q",
			tiers.ErrCheckNotFound, r.Customer, r.RequestID)
	}
	d, err := decodeAnswer(rec.Answer)
	if err != nil {
		return 0, time.Time{}, err
	}
	var charged int64
	switch {
	case !d.Allowed:
	case d.Items == nil:
		if rec.Metric == keyed(r.Metric, r.Subject) {
			charged = d.Cost
		}
	default:
		for _, it := range d.Items {
			if (it.Customer == r.Customer || it.Customer == "") && it.Metric == r.Metric && it.Subject == r.Subject {
				charged += it.Cost
			}
		}
	}
	if charged == 0 {
		return 0, time.Time{}, fmt.Errorf("%w: the check %q charged no units of %s", tiers.ErrConflict, r.RequestID, keyed(r.Metric, r.Subject))
	}
	return charged, rec.At, nil
}

// maxPendingAudits bounds the refunds' audit events a process keeps in
// memory while the store refuses them.
const maxPendingAudits = 10000

// refundAudits writes refunds' audit events: each in one statement with
// the events of the refunds made meanwhile (a group commit). An event the
// store does not take when its refund is made is kept in memory, up to
// maxPendingAudits, and written by the engine's background work (see
// Engine.Run): its units are back already, so the refund answers as made
// and its event is written late rather than never (at least once: an
// event whose answer was lost may be written twice).
type refundAudits struct {
	store Audits
	group *batch.Group[RefundEvent]

	mu      sync.Mutex
	pending []RefundEvent
	// lost counts events dropped beyond maxPendingAudits.
	lost uint64
}

func newRefundAudits(store Audits) *refundAudits {
	return &refundAudits{store: store, group: batch.New(store.RecordRefunds, auditBatch, auditsInFlight, backgroundTimeout)}
}

// AuditStats describe the refunds' audit events not yet written.
type AuditStats struct {
	Pending int64  // kept in memory, to be written
	Lost    uint64 // dropped: too many were pending
}

// record writes ev, or keeps it for flush; it returns the store's error.
func (a *refundAudits) record(ctx context.Context, ev RefundEvent) error {
	if a == nil {
		return nil
	}
	_, _, err := a.group.Do(ctx, ev)
	if err != nil {
		a.keep(ev)
	}
	return err
}

// flush writes the events kept while the store refused them. On failure
// they are kept again, for the next flush.
func (a *refundAudits) flush(ctx context.Context) error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	p := a.pending
	a.pending = nil
	a.mu.Unlock()
	if len(p) == 0 {
		return nil
	}
	if err := a.store.RecordRefunds(ctx, p); err != nil {
		a.keep(p...)
		return fmt.Errorf("%d refunds' audit events: %w", len(p), err)
	}
	return nil
}

func (a *refundAudits) keep(ev ...RefundEvent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	room := max(0, maxPendingAudits-len(a.pending))
	if len(ev) > room {
		a.lost += uint64(len(ev) - room)
		ev = ev[:room]
	}
	a.pending = append(a.pending, ev...)
}

func (a *refundAudits) stats() AuditStats {
	if a == nil {
		return AuditStats{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return AuditStats{Pending: int64(len(a.pending)), Lost: a.lost}
}
