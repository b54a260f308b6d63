package quota_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// A refund whose audit event the store refuses still answers (its units
// are back): the event is kept and written by a later flush, here the one
// Close makes.
func TestRefundAuditWrittenLate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), false, false)
	f.catalog.PutMetric("api_calls", nil)
	f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{hard(tiers.Day, 100)})
	ctx := context.Background()
	if _, err := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 10, RequestID: "c1"}); err != nil {
		t.Fatal(err)
	}
	f.ledger.AuditErr = errors.New("audit_events: no room")
	res, err := f.engine.Refund(ctx, quota.RefundRequest{Customer: "acme", Metric: "api_calls", Cost: 4, RequestID: "c1", Actor: "gw"})
	if err != nil || res.Refunded != 4 {
		t.Fatalf("refund = %+v, %v; want 4 refunded", res, err)
	}
	if got := f.engine.Stats().Audits.Pending; got != 1 {
		t.Errorf("audit events pending = %d, want 1", got)
	}
	if err := f.engine.Close(ctx); err == nil {
		t.Error("Close with the audit log refusing: no error, want the refusal reported")
	}
	f.ledger.AuditErr = nil
	if err := f.engine.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want := quota.RefundEvent{At: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), Actor: "gw", Customer: "acme",
		Metric: "api_calls", RequestID: "c1", Cost: 4, Refunded: 4}
	if got := f.ledger.Store().Refunds(); len(got) != 1 || got[0] != want {
		t.Errorf("audited = %+v, want [%+v]", got, want)
	}
	if got := f.engine.Stats().Audits.Pending; got != 0 {
		t.Errorf("audit events pending after the flush = %d, want 0", got)
	}
}
