package store_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/quota/leasetest"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
)

// The lease protocol's contract, run against PostgreSQL (see leasetest).
func TestLeaseProtocol(t *testing.T) {
	t.Parallel()
	leasetest.Run(t, leasetest.Harness{New: func(t *testing.T) leasetest.Store {
		db, s := MustOpenSchema(t)
		MustSeed(t, db, map[tiers.Window]int64{tiers.Day: 1 << 40}, "acme", "globex")
		return pgStore{db: db, s: s}
	}})
}

// quotad_lease_all tells the counters it creates by their xmin (they hold
// their grant from the insert), so it refuses to run in a transaction that
// wrote before it: a counter inserted there would pass for its own.
func TestLeaseAllRunsInATransactionOfItsOwn(t *testing.T) {
	t.Parallel()
	db, s := MustOpenSchema(t)
	MustSeed(t, db, nil, "acme", "globex")
	ctx := context.Background()
	start := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	const grant = `SELECT o_granted FROM quotad_lease_all(ARRAY[$1::text], ARRAY['api_calls'], ARRAY[''],
		ARRAY['day'], ARRAY[$2::timestamptz], 1, ARRAY[1::bigint], ARRAY[10::bigint], ARRAY[1::bigint], ARRAY[0::bigint],
		ARRAY[1::bigint], ARRAY[false], ARRAY[NULL::timestamptz], NULL, ARRAY[''])`
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// Reads before it are fine.
	var granted int64
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM usage_counters`).Scan(&granted); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, grant, "acme", start).Scan(&granted); err != nil || granted != 1 {
		t.Fatalf("a grant after reads only: %d, %v; want 1 granted", granted, err)
	}
	// The grant wrote: the next one in the transaction is refused.
	err = tx.QueryRow(ctx, grant, "globex", start).Scan(&granted)
	if err == nil || !strings.Contains(err.Error(), "transaction of its own") {
		t.Fatalf("a grant after a write in its transaction: %d, %v; want it refused", granted, err)
	}
}

// pgStore is leasetest's Store over one schema; each process has a DB of
// its own over the schema's pool, and its listener.
type pgStore struct {
	db *store.DB
	s  *dbtest.Schema
}

func (p pgStore) Process(t *testing.T) *leasetest.Process {
	proc, _ := p.process(t)
	return proc
}

// process starts a process as Process does, and returns its DB too.
func (p pgStore) process(t *testing.T) (*leasetest.Process, *store.DB) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	db, err := store.New(ctx, p.s.Pool)
	if err != nil {
		t.Fatal(err)
	}
	recalls, freed := make(chan quota.CounterKey, 64), make(chan quota.CounterKey, 64)
	l := db.Listener(func(n store.Notification) {
		k, ok := store.ParseCounterKey(n.Key)
		switch {
		case !ok:
		case n.Kind == store.NotifyRecall && !n.Local:
			recalls <- k
		case n.Kind == store.NotifyFreed:
			freed <- k
		}
	}, func() {}, func(err error) { t.Log(err) })
	stopped := runListener(t, ctx, l)
	kill := func() {
		cancel()
		<-stopped
		// PostgreSQL releases the lock once the session's backend ends.
		for deadline := time.Now().Add(10 * time.Second); ; {
			var alive bool
			if err := p.s.Pool.QueryRow(context.Background(), `SELECT quotad_holder_alive($1)`, db.Holder()).Scan(&alive); err != nil {
				t.Fatal(err)
			}
			if !alive {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the killed process still passes for alive")
			}
			runtime.Gosched()
		}
	}
	return &leasetest.Process{Store: db.Ledger, Recalls: recalls, Freed: freed, Kill: kill}, db
}

func (p pgStore) Count(t *testing.T, k quota.CounterKey) int64 { return MustRaw(t, p.s, k) }

func (p pgStore) Reset(t *testing.T, customer string) {
	if err := p.db.Ledger.Reset(context.Background(), "ops", customer, "api_calls", leasetest.At); err != nil {
		t.Fatal(err)
	}
}

func (p pgStore) SetTotal(t *testing.T, customer string, used int64) int64 {
	before, err := p.db.Ledger.SetTotal(context.Background(), "ops", customer, "api_calls", used, leasetest.At)
	if err != nil {
		t.Fatal(err)
	}
	return before
}

// MustRaw reads a counter as stored: admitted units and leased ones.
func MustRaw(t testing.TB, s *dbtest.Schema, k quota.CounterKey) int64 {
	t.Helper()
	var used int64
	err := s.Pool.QueryRow(context.Background(), `
		SELECT coalesce((SELECT used FROM usage_counters
		WHERE customer_id = $1 AND metric = $2 AND subject = $3 AND quota_window = $4 AND window_start = $5), 0)`,
		k.Customer, k.Metric, k.Subject, k.Window.String(), k.Start).Scan(&used)
	if err != nil {
		t.Fatal(err)
	}
	return used
}

// Grants and settlements of the same counters, with global usage, from
// several processes at once never deadlock: every transaction that locks
// more than one row locks counters first, in one order, then global
// usage. A grant is one statement, never tried again, so a deadlock would
// fail it.
func TestLeaseAndSettleLockInOneOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.New(t)
	const procs, counters, rounds = 4, 6, 20
	ps := make([]*store.DB, procs)
	for i := range ps {
		db, err := store.New(ctx, s.Pool)
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = db
	}
	customers := make([]string, counters)
	for i := range customers {
		customers[i] = fmt.Sprintf("c%d", i)
	}
	MustSeed(t, ps[0], map[tiers.Window]int64{tiers.Day: 1 << 40}, customers...)
	global := quota.GlobalKey{Metric: "api_calls", Window: tiers.Day, Start: day0}
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			for r := range rounds {
				// Grants in an order of their own, each taking 1 unit and
				// holding 2 more; then one settlement of them all, in the
				// counters' order, as the lease pool sorts them.
				for j := range counters {
					k := daySpan(customers[(i+j+r)%counters], 0).Key
					lr := lease.Request{Key: k, Seq: int64(1 + 2*r), Bound: 1 << 40, Need: 1, Extra: 2, InFlight: 1, Global: global}
					if err := p.Ledger.Lease(ctx, []lease.Request{lr}); err != nil {
						t.Errorf("process %d, round %d: %v", i, r, err)
						return
					}
				}
				set := make([]lease.Settlement, counters)
				for j, c := range customers {
					set[j] = lease.Settlement{Key: daySpan(c, 0).Key, Seq: int64(2 + 2*r), Unused: 2, Global: global}
				}
				if err := p.Ledger.Settle(ctx, set); err != nil {
					t.Errorf("process %d, round %d: %v", i, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// What was held went back: each grant counts its 1 unit, in its
	// counter and in global usage.
	keys := make([]quota.CounterKey, counters)
	for i, c := range customers {
		keys[i] = daySpan(c, 0).Key
	}
	used, g, err := ps[0].Ledger.Read(ctx, keys, []quota.GlobalKey{global})
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range used {
		if u != procs*rounds {
			t.Errorf("counter %s = %d, want %d", customers[i], u, procs*rounds)
		}
	}
	if g[0] != counters*procs*rounds {
		t.Errorf("global usage = %d, want %d", g[0], counters*procs*rounds)
	}
}

// Settlements and reports, each one statement, have their own transaction
// commit without waiting for the disk, and no other.
func TestSettleAndReportCommitWithoutWaitingForTheDisk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.New(t)
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	show := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		t.Helper()
		var v string
		if err := q.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := show(conn)
	for _, call := range []string{
		`SELECT quotad_settle_all('{}', '{}', '{}', '{}', '{}', 1, '{}', '{}', '{}', NULL, '{}')`,
		`SELECT quotad_report('{}', '{}', '{}', '{}', '{}', 1, '{}', '{}', NULL, '{}')`,
	} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, call); err != nil {
			t.Fatal(err)
		}
		within := show(tx)
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, call); err != nil {
			t.Fatal(err)
		}
		if after := show(conn); within != "off" || after != before {
			t.Errorf("%s: synchronous_commit %s in its transaction, %s after it; want off, then %s", call, within, after, before)
		}
	}
}

// A batch of grants in which one customer was deleted grants the others,
// and says which one is gone.
func TestLeaseBatchWithADeletedCustomer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	MustSeed(t, db, nil, "acme", "globex")
	if err := db.Catalog.DeleteCustomer(ctx, write("ops"), "globex"); err != nil {
		t.Fatal(err)
	}
	batch := []lease.Request{
		{Key: daySpan("acme", 0).Key, Seq: 1, Bound: 100, Need: 1, Extra: 9, InFlight: 1},
		{Key: daySpan("globex", 0).Key, Seq: 2, Bound: 100, Need: 1, Extra: 9, InFlight: 1},
	}
	if err := db.Ledger.Lease(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if r := batch[0]; r.Granted != 10 || r.Gone {
		t.Errorf("acme: %+v, want 10 granted", r)
	}
	if r := batch[1]; r.Granted != 0 || !r.Gone {
		t.Errorf("globex, deleted: %+v, want gone", r)
	}
}

// runListener runs l until ctx ends, returning once it listens (failing t
// if it does not within seconds); the channel it returns is closed once l
// has stopped.
func runListener(t *testing.T, ctx context.Context, l *store.Listener) <-chan struct{} {
	t.Helper()
	connected, stopped := make(chan struct{}, 1), make(chan struct{})
	l.Connected = connected
	go func() { defer close(stopped); l.Run(ctx) }()
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		t.Fatal("listener did not connect")
	}
	return stopped
}
