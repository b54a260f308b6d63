package quotafake_test

import (
	"context"
	"testing"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/leasetest"
	"github.com/quotad/quotad/internal/quota/quotafake"
)

// The test double keeps the lease protocol as the PostgreSQL store does.
func TestLeaseProtocol(t *testing.T) {
	t.Parallel()
	leasetest.Run(t, leasetest.Harness{New: func(*testing.T) leasetest.Store { return fakeStore{quotafake.NewStore()} }})
}

type fakeStore struct{ s *quotafake.Store }

func (f fakeStore) Process(*testing.T) *leasetest.Process {
	l := f.s.Process()
	recalls, freed := make(chan quota.CounterKey, 64), make(chan quota.CounterKey, 64)
	l.OnRecall(func(k quota.CounterKey) { recalls <- k })
	l.OnFreed(func(k quota.CounterKey) { freed <- k })
	return &leasetest.Process{Store: l, Recalls: recalls, Freed: freed, Kill: func() { f.s.Kill(l) }}
}

func (f fakeStore) Count(_ *testing.T, k quota.CounterKey) int64 { return f.s.Count(k) }

func (f fakeStore) Reset(t *testing.T, customer string) {
	l := f.s.Process()
	f.s.Kill(l) // an admin, not a process holding leases
	if err := l.Reset(context.Background(), "ops", customer, "api_calls", leasetest.At); err != nil {
		t.Fatal(err)
	}
}

func (f fakeStore) SetTotal(t *testing.T, customer string, used int64) int64 {
	l := f.s.Process()
	f.s.Kill(l) // an admin, not a process holding leases
	before, err := l.SetTotal(context.Background(), "ops", customer, "api_calls", used, leasetest.At)
	if err != nil {
		t.Fatal(err)
	}
	return before
}
