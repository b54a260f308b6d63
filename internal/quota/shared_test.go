package quota_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/tiers"
)

// stuckStore is a SharedStore whose calls wait until release, then fail.
type stuckStore struct {
	calls   atomic.Int64
	entered chan struct{}
	release chan struct{}
}

func (s *stuckStore) Run(context.Context, *quota.SharedOp) error {
	s.calls.Add(1)
	s.entered <- struct{}{}
	<-s.release
	return fmt.Errorf("%w: no answer", tiers.ErrUnavailable)
}

func (s *stuckStore) Clear(context.Context, string, []string) error { return nil }
func (s *stuckStore) Shard(*quota.Charge) int                       { return 0 }

// Checks of one customer's metric wait for each other's call to the store;
// when that call fails, those that waited fail at once with it, without a
// call of their own: an unreachable store costs a check at most one call's
// time, however many of its customer's checks came before it.
func TestSharedWaitersFailWithTheCallTheyWaitedFor(t *testing.T) {
	t.Parallel()
	synctest.Test(t, waitersFail)
}

func waitersFail(t *testing.T) {
	store := &stuckStore{entered: make(chan struct{}, 1), release: make(chan struct{})}
	shared := quota.NewShared(store, false)
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	take := func() error {
		c := &quota.Charge{Customer: "acme", Metric: "api_calls", Cost: 1, At: at, Spans: []quota.Span{{
			Key:  quota.CounterKey{Customer: "acme", Metric: "api_calls", Window: tiers.Second, Start: at},
			Rule: quota.RuleFor(tiers.Limit{Metric: "api_calls", Window: tiers.Second, Limit: 10}, tiers.Metric{}),
		}}}
		_, err := shared.Take(context.Background(), quotafake.One(c, make([]quota.Outcome, 1)))
		return err
	}
	const waiting = 8
	errs := make(chan error, waiting+1)
	go func() { errs <- take() }()
	<-store.entered // the first check's call is under way
	for range waiting {
		go func() { errs <- take() }()
	}
	synctest.Wait() // every other check waits for its turn
	close(store.release)
	for range waiting + 1 {
		if err := <-errs; !errors.Is(err, tiers.ErrUnavailable) {
			t.Errorf("a check: %v, want the store unavailable", err)
		}
	}
	if n := store.calls.Load(); n != 1 {
		t.Errorf("%d calls to the store, want 1: the checks that waited called it again", n)
	}
}
