package quota_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/tiers"
)

// Every unit a check admits degraded is counted once the store answers
// again: in the windows still current, beyond the limit if it must be
// (the units were admitted), and in the history.
func TestDegradedAdmissionsAreCharged(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
		down := fmt.Errorf("%w: connection refused", tiers.ErrUnavailable)
		ctx := context.Background()
		check := func(f *fixture, cost int64) quota.Decision {
			t.Helper()
			d, err := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: cost})
			if err != nil {
				t.Fatal(err)
			}
			return d
		}

		t.Run("windows still current", func(t *testing.T) {
			f := newFixture(t, start, false, leases)
			f.catalog.PutMetric("api_calls", nil)
			f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{hard(tiers.Day, 10), hard(tiers.Month, 1000)})
			if d := check(f, 4); !d.Allowed || d.Degraded {
				t.Fatalf("before the outage: %+v", d)
			}
			f.ledger.Err = down
			var admitted int64
			for range 5 {
				d := check(f, 2)
				if !d.Allowed || !d.Degraded {
					t.Fatalf("during the outage: %+v, want allowed, degraded", d)
				}
				admitted += 2
			}
			if got := f.engine.Stats().Debts; got.Owed != admitted || got.Repaid != 0 {
				t.Fatalf("debts during the outage: %+v, want %d owed", got, admitted)
			}
			// Repaying while the store is still down keeps the debt.
			if err := f.engine.Repay(ctx); err == nil {
				t.Fatal("Repay succeeded with the store down")
			}
			if got := f.engine.Stats().Debts.Owed; got != admitted {
				t.Fatalf("owed %d after a failed repay, want %d", got, admitted)
			}
			f.ledger.Err = nil
			f.clock.Advance(time.Minute)
			if err := f.engine.Repay(ctx); err != nil {
				t.Fatal(err)
			}
			if got := f.engine.Stats().Debts; got.Owed != 0 || got.Repaid != admitted || got.Lost != 0 {
				t.Fatalf("debts after repaying: %+v, want all %d repaid", got, admitted)
			}
			// 4 + 10 admitted against a day limit of 10: counted all the same.
			if got := f.used(t, "acme", tiers.Day); got != 4+admitted {
				t.Errorf("day window counts %d, want %d", got, 4+admitted)
			}
			if got := f.used(t, "acme", tiers.Month); got != 4+admitted {
				t.Errorf("month window counts %d, want %d", got, 4+admitted)
			}
			if d := check(f, 1); d.Allowed {
				t.Errorf("the day window is beyond its limit once repaid, yet a check passed: %+v", d)
			}
			if err := f.engine.FlushHistory(ctx); err != nil {
				t.Fatal(err)
			}
			days, err := f.history.FindHistory(ctx, "acme", "api_calls", start.Truncate(24*time.Hour), start)
			if err != nil || len(days) != 1 || days[0].Used != 4+admitted {
				t.Errorf("history %+v, %v; want %d used today", days, err, 4+admitted)
			}
		})

		t.Run("windows that ended", func(t *testing.T) {
			f := newFixture(t, start, false, leases)
			f.catalog.PutMetric("api_calls", nil)
			f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{hard(tiers.Hour, 10), hard(tiers.Day, 100)})
			f.ledger.Err = down
			check(f, 3)
			f.ledger.Err = nil
			f.clock.Advance(time.Hour) // the hour ended, the day did not
			if err := f.engine.Repay(ctx); err != nil {
				t.Fatal(err)
			}
			if got := f.engine.Stats().Debts; got.Owed != 0 || got.Repaid != 3 {
				t.Fatalf("debts: %+v, want 3 repaid (to the day window)", got)
			}
			if got := f.used(t, "acme", tiers.Day); got != 3 {
				t.Errorf("day window counts %d, want 3", got)
			}
			if got := f.used(t, "acme", tiers.Hour); got != 0 {
				t.Errorf("the next hour counts %d, want 0: the units belong to the hour that ended", got)
			}
			f.clock.Advance(24 * time.Hour)
			f.ledger.Err = down
			check(f, 5)
			f.ledger.Err = nil
			f.clock.Advance(24 * time.Hour)
			if err := f.engine.Repay(ctx); err != nil {
				t.Fatal(err)
			}
			if got := f.engine.Stats().Debts; got.Owed != 0 || got.Lost != 5 {
				t.Errorf("debts: %+v, want 5 lost: every window of the charge ended", got)
			}
		})

		t.Run("customer not looked up", func(t *testing.T) {
			f := newFixture(t, start, false, leases)
			f.catalog.PutMetric("api_calls", nil)
			f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{hard(tiers.Minute, 100), hard(tiers.Day, 100)})
			f.catalog.Err = down
			if d := check(f, 7); !d.Allowed || !d.Degraded {
				t.Fatalf("unconsulted: %+v, want allowed, degraded", d)
			}
			if d, err := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 50, DryRun: true}); err != nil || !d.Degraded {
				t.Fatalf("dry run: %+v, %v", d, err)
			}
			if got := f.engine.Stats().Debts.Owed; got != 7 {
				t.Fatalf("owed %d, want 7 (a dry run owes nothing)", got)
			}
			if err := f.engine.Repay(ctx); err == nil {
				t.Fatal("Repay succeeded with the catalog down")
			}
			f.catalog.Err = nil
			if err := f.engine.Repay(ctx); err != nil {
				t.Fatal(err)
			}
			if got := f.used(t, "acme", tiers.Day); got != 7 {
				t.Errorf("day window counts %d, want 7", got)
			}
			if got := f.used(t, "acme", tiers.Minute); got != 7 {
				t.Errorf("minute window counts %d, want 7: it is still current", got)
			}
			if err := f.engine.FlushHistory(ctx); err != nil {
				t.Fatal(err)
			}
			days, err := f.history.FindHistory(ctx, "acme", "api_calls", start.Truncate(24*time.Hour), start)
			if err != nil || len(days) != 1 || days[0].Used != 7 {
				t.Errorf("history %+v, %v; want 7 used today", days, err)
			}
		})

		t.Run("a repayment whose answer was lost", func(t *testing.T) {
			ledger := &losingLedger{Ledger: quotafake.NewLedger()}
			catalog := quotafake.NewCatalog()
			catalog.PutMetric("api_calls", nil)
			catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{hard(tiers.Day, 100)})
			clock := quotafake.NewClock(start)
			engine := quota.New(quota.Options{Catalog: catalog, Counts: ledger, Requests: ledger, Maintenance: ledger,
				Audits: ledger, Clock: clock, Leases: leasesOf(leases, ledger, clock), StoreTimeout: testStoreTimeout})
			ledger.Err = down
			if d, err := engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 6}); err != nil || !d.Degraded {
				t.Fatalf("during the outage: %+v, %v", d, err)
			}
			ledger.Err = nil
			ledger.lose.Store(true)
			if err := engine.Repay(ctx); err == nil {
				t.Fatal("Repay succeeded, its answer lost")
			}
			if got := engine.Stats().Debts.Owed; got != 6 {
				t.Fatalf("owed %d once the answer was lost, want 6 (in doubt)", got)
			}
			if err := engine.Repay(ctx); err != nil {
				t.Fatal(err)
			}
			if got := engine.Stats().Debts; got.Owed != 0 || got.Repaid != 6 {
				t.Errorf("debts %+v, want 6 repaid", got)
			}
			day := quota.CounterKey{Customer: "acme", Metric: "api_calls", Window: tiers.Day, Start: start.Truncate(24 * time.Hour)}
			if got := ledger.Count(day); got != 6 {
				t.Errorf("the ledger counts %d, want 6: charged once, though tried twice", got)
			}
		})

		t.Run("close repays", func(t *testing.T) {
			f := newFixture(t, start, false, leases)
			f.catalog.PutMetric("api_calls", nil)
			f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{hard(tiers.Day, 100)})
			f.ledger.Err = down
			check(f, 9)
			f.ledger.Err = nil
			if err := f.engine.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if got := f.ledger.Count(quota.CounterKey{Customer: "acme", Metric: "api_calls", Window: tiers.Day,
				Start: start.Truncate(24 * time.Hour)}); got != 9 {
				t.Errorf("after Close the ledger counts %d, want 9", got)
			}
		})
	})
}

// losingLedger commits a transaction and loses its answer, once, when
// lose is set.
type losingLedger struct {
	*quotafake.Ledger
	lose atomic.Bool
}

func (l *losingLedger) Atomically(ctx context.Context, fn func(ctx context.Context, tx quota.Tx) error) error {
	err := l.Ledger.Atomically(ctx, fn)
	if err == nil && l.lose.CompareAndSwap(true, false) {
		return fmt.Errorf("%w: the answer was lost", tiers.ErrUnavailable)
	}
	return err
}

// Repaying short windows' debts to a shared store that cannot be reached
// keeps them owed, and does not say the ledger is down: /readyz follows
// StoreDown, and a Redis outage is no reason for it to fail.
func TestSharedStoreDebtsLeaveTheLedgerUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	catalog := quotafake.NewCatalog()
	catalog.PutMetric("api_calls", nil)
	catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{hard(tiers.Minute, 100)})
	ledger := quotafake.NewLedger()
	e := quota.New(quota.Options{Catalog: catalog, Counts: ledger, Requests: ledger, Maintenance: ledger, Audits: ledger,
		History: quotafake.NewHistory(), Clock: quotafake.NewClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)),
		Shared: downStore{}, StoreTimeout: testStoreTimeout})
	d, err := e.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 3})
	if err != nil || !d.Allowed || !d.Degraded {
		t.Fatalf("check with the shared store down = %+v, %v; want allowed, degraded", d, err)
	}
	if err := e.Repay(ctx); !errors.Is(err, tiers.ErrUnavailable) {
		t.Fatalf("Repay with the shared store down = %v, want it unavailable", err)
	}
	if got := e.Stats().Debts.Owed; got != 3 {
		t.Errorf("owed %d after a failed repay, want 3", got)
	}
	if e.StoreDown() {
		t.Error("StoreDown() = true: the shared store's outage was taken for the ledger's")
	}
}
