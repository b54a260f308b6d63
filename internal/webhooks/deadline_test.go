package webhooks

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// outboxFunc is an Outbox of one function.
type outboxFunc func(ctx context.Context, now time.Time, send func(context.Context, Message) Outcome) (bool, error)

func (f outboxFunc) Deliver(ctx context.Context, now time.Time, send func(context.Context, Message) Outcome) (bool, error) {
	return f(ctx, now, send)
}

// A delivery under way when the worker's context ends is not cut short:
// the receiver's answer is heard and the outcome recorded, within the
// attempt's deadline.
func TestDeliveryUnderWayOutlivesTheWorker(t *testing.T) {
	t.Parallel()
	received := make(chan struct{})
	answer := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(received)
		<-answer
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	secret, _ := NewSecret()
	var outcome Outcome
	var recordErr error
	box := outboxFunc(func(ctx context.Context, now time.Time, send func(context.Context, Message) Outcome) (bool, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the outbox's call has no deadline")
		}
		outcome = send(ctx, Message{ID: MessageID(1), Webhook: "w", URL: srv.URL, Secret: secret,
			Event: sampleEvent(Threshold), CreatedAt: t0})
		recordErr = ctx.Err() // what recording the outcome would meet
		return true, nil
	})
	w := &Worker{Outbox: box, Client: NewClient(10*time.Second, true), Clock: &manualClock{now: t0}}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _, _ = w.DeliverOne(ctx) }()
	<-received
	stop()
	close(answer)
	<-done
	if outcome.Status != Delivered || recordErr != nil {
		t.Errorf("outcome %+v, context at the record %v; want delivered, and recorded", outcome, recordErr)
	}
}

// An outbox that never answers is given up at the attempt's deadline.
func TestDeliveryCallBoundedWhenTheStoreIsSilent(t *testing.T) {
	t.Parallel()
	box := outboxFunc(func(ctx context.Context, _ time.Time, _ func(context.Context, Message) Outcome) (bool, error) {
		<-ctx.Done() // a store that never answers
		return false, ctx.Err()
	})
	w := &Worker{Outbox: box, Client: NewClient(100*time.Millisecond, true), StoreTimeout: 50 * time.Millisecond}
	if got := w.AttemptTimeout(); got != 200*time.Millisecond {
		t.Fatalf("attempt timeout %s, want 200ms", got)
	}
	start := time.Now()
	_, err := w.DeliverOne(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want the deadline's", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("returned after %s, want at its 200ms deadline", took)
	}
}
