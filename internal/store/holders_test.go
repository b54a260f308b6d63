package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/quota/leasetest"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
)

// holderKey is the counter every test of this file leases: acme's
// api_calls today.
var holderKey = quota.CounterKey{Customer: "acme", Metric: "api_calls", Window: tiers.Day,
	Start: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}

// grantTo has p lease need units of holderKey for a check and hold extra
// more, then report, once the check is answered, extra unused (as a pool
// does once its checks pause).
func grantTo(t *testing.T, p *leasetest.Process, need, extra int64) {
	t.Helper()
	ctx := context.Background()
	r := []lease.Request{{Key: holderKey, Seq: 1, Bound: 1000, Need: need, Extra: extra, InFlight: need}}
	if err := p.Store.Lease(ctx, r); err != nil || r[0].Granted != need+extra {
		t.Fatalf("grant: %+v, %v; want %d granted", r[0], err, need+extra)
	}
	rep := []lease.Settlement{{Key: holderKey, Seq: 2, Unused: extra}}
	if err := p.Store.Report(ctx, rep); err != nil || rep[0].Lost {
		t.Fatalf("report: %+v, %v", rep[0], err)
	}
}

// A dead holder's leases are taken back once it has been gone for the
// bound, by the clock of the process that reclaims: marked gone at the
// first round, reclaimed at the first round the bound after, forgotten
// then. A running holder keeps its leases, however long ago it was
// marked.
func TestReclaimDeadHolders(t *testing.T) {
	t.Parallel()
	db, s := MustOpenSchema(t)
	MustSeed(t, db, nil, "acme")
	h := pgStore{db: db, s: s}
	_, survivorDB := h.process(t) // runs, and reclaims
	dead := h.Process(t)
	running, runningDB := h.process(t)
	reclaim := store.NewHolders(survivorDB)
	ctx := context.Background()

	grantTo(t, dead, 3, 40)    // 3 admitted, 40 held unused
	grantTo(t, running, 2, 10) // 2 admitted, 10 held unused
	if got := MustRaw(t, s, holderKey); got != 55 {
		t.Fatalf("counter after the grants: %d, want 55", got)
	}
	dead.Kill()

	const after = 30 * time.Second
	now := leasetest.At
	for _, round := range []struct {
		at   time.Duration
		want lease.Reclaimed
		used int64
	}{
		{0, lease.Reclaimed{}, 55},                                     // first seen gone
		{after - time.Second, lease.Reclaimed{}, 55},                   // not yet gone for the bound
		{after, lease.Reclaimed{Holders: 1, Leases: 1, Units: 40}, 15}, // reclaimed
		{2 * after, lease.Reclaimed{}, 15},                             // once
	} {
		got, err := reclaim.ReclaimDead(ctx, now.Add(round.at), after)
		if err != nil || got != round.want {
			t.Fatalf("round at +%s: %+v, %v; want %+v", round.at, got, err, round.want)
		}
		if used := MustRaw(t, s, holderKey); used != round.used {
			t.Fatalf("round at +%s: counter %d, want %d", round.at, used, round.used)
		}
	}

	// A running holder marked gone long ago (its session was lost, then
	// came back) is not reclaimed, and its mark is cleared.
	if _, err := s.Pool.Exec(ctx, `UPDATE lease_holders SET gone_since = $1`, now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, err := reclaim.ReclaimDead(ctx, now.Add(3*after), after); err != nil || got != (lease.Reclaimed{}) {
		t.Fatalf("round with a running holder marked gone: %+v, %v; want nothing", got, err)
	}
	var marked int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM lease_holders WHERE gone_since IS NOT NULL`).Scan(&marked); err != nil || marked != 0 {
		t.Fatalf("holders still marked gone: %d, %v; want 0", marked, err)
	}
	list, err := reclaim.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var seen bool
	for _, x := range list {
		if x.ID == uint32(runningDB.Holder()) {
			seen = x.Running && x.Leases == 1 && x.Unused == 10 && !x.Self
		}
	}
	if !seen {
		t.Fatalf("holders %+v: want the running one with its lease of 10 unused", list)
	}
}

// An admin's release of a holder whose session is still there (a process
// PostgreSQL has not yet seen die: here a session that holds its lock)
// ends the session and takes the leases back at once; the release is
// audited, and the holder's next report finds its lease gone. Releasing
// this process, or a key no one holds, is refused.
func TestReleaseHolder(t *testing.T) {
	t.Parallel()
	db, s := MustOpenSchema(t)
	MustSeed(t, db, nil, "acme")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin, err := store.New(ctx, s.Pool)
	if err != nil {
		t.Fatal(err)
	}
	startListener(ctx, t, admin, nil)
	victim, err := store.New(ctx, s.Pool)
	if err != nil {
		t.Fatal(err)
	}
	session, err := s.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Release()
	for _, q := range []string{`SELECT pg_advisory_lock(quotad_lock_class(), $1::integer)`, `INSERT INTO lease_holders (holder) VALUES ($1)`} {
		if _, err := session.Exec(ctx, q, victim.Holder()); err != nil {
			t.Fatal(err)
		}
	}
	grantTo(t, &leasetest.Process{Store: victim.Ledger}, 5, 20)

	key := uint32(victim.Holder())
	got, err := store.NewHolders(admin).Reclaim(ctx, key, "ops", leasetest.At)
	if err != nil || got != (lease.Reclaimed{Holders: 1, Leases: 1, Units: 20}) {
		t.Fatalf("release: %+v, %v; want 1 lease and 20 units back", got, err)
	}
	if used := MustRaw(t, s, holderKey); used != 5 {
		t.Fatalf("counter after the release: %d, want the 5 admitted", used)
	}
	rep := []lease.Settlement{{Key: holderKey, Seq: 3, Unused: 20}}
	if err := victim.Ledger.Report(ctx, rep); err != nil || !rep[0].Lost {
		t.Fatalf("the released holder's report: %+v, %v; want its lease lost", rep[0], err)
	}
	var actor, resource string
	err = s.Pool.QueryRow(ctx, `SELECT actor, resource FROM audit_events WHERE action = 'release'`).Scan(&actor, &resource)
	if err != nil || actor != "ops" || resource != fmt.Sprintf("holders/%d", key) {
		t.Fatalf("audit of the release: %q %q, %v", actor, resource, err)
	}

	for _, c := range []struct {
		key  uint32
		want error
	}{
		{uint32(admin.Holder()), lease.ErrHolderSelf},
		{key + 1, lease.ErrHolderUnknown},
	} {
		if _, err := store.NewHolders(admin).Reclaim(ctx, c.key, "ops", leasetest.At); !errors.Is(err, c.want) {
			t.Fatalf("release of %d: %v; want %v", c.key, err, c.want)
		}
	}
}

// A process whose listening session was ended (by a release, by
// PostgreSQL) takes its lock anew: it is told (Lost) before it listens
// again, once, and stays registered, not marked gone.
func TestListenerLostWhenTakingItsLockAnew(t *testing.T) {
	t.Parallel()
	_, s := MustOpenSchema(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db, err := store.New(ctx, s.Pool)
	if err != nil {
		t.Fatal(err)
	}
	lost := make(chan struct{}, 2)
	connected := startListener(ctx, t, db, func() { lost <- struct{}{} })
	select {
	case <-lost:
		t.Fatal("Lost on the first session")
	default:
	}
	const end = `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND objid = ($1::bigint & 4294967295)::oid`
	var ended int
	if err := s.Pool.QueryRow(ctx, end, db.Holder()).Scan(&ended); err != nil || ended != 1 {
		t.Fatalf("ending the listening session: %d, %v", ended, err)
	}
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("not told after taking its lock anew")
	}
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		t.Fatal("did not listen again")
	}
	if len(lost) != 0 {
		t.Fatal("told twice")
	}
	var registered bool
	err = s.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM lease_holders WHERE holder = $1 AND gone_since IS NULL)`, db.Holder()).Scan(&registered)
	if err != nil || !registered {
		t.Fatalf("registered: %t, %v", registered, err)
	}
}

// startListener runs db's listener until ctx ends, lost as its Lost, and
// waits for it to hold its lock. The channel returned hears each later
// (re)connection.
func startListener(ctx context.Context, t *testing.T, db *store.DB, lost func()) <-chan struct{} {
	t.Helper()
	connected := make(chan struct{}, 1)
	l := db.Listener(func(store.Notification) {}, func() {}, func(err error) { t.Log(err) })
	l.Connected, l.Lost, l.LostAfter = connected, lost, time.Minute
	go l.Run(ctx)
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		t.Fatal("listener did not connect")
	}
	return connected
}

// A process without a listening session for LostAfter since one last
// answered is told (Lost), while still cut off, once: the others may
// take it for dead. Listening again does not tell it twice.
func TestListenerLostWhenCutOff(t *testing.T) {
	t.Parallel()
	db, proxy, schema := openThroughProxy(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lost := make(chan struct{}, 2)
	connected := make(chan struct{}, 1)
	l := db.Listener(func(store.Notification) {}, func() {}, func(err error) { t.Log(err) })
	l.Connected, l.Lost, l.LostAfter = connected, func() { lost <- struct{}{} }, 300*time.Millisecond
	stopped := make(chan struct{})
	go func() { defer close(stopped); l.Run(ctx) }()
	defer func() { cancel(); <-stopped }()
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		t.Fatal("listener did not connect")
	}

	// Cut off: the session ends, and every new one is reset.
	proxy.Reset()
	const end = `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND objid = ($1::bigint & 4294967295)::oid`
	if _, err := schema.Pool.Exec(ctx, end, db.Holder()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(30 * time.Second):
		t.Fatal("not told while cut off")
	}
	select {
	case <-connected:
		t.Fatal("listened through a proxy that resets every connection")
	default:
	}
	proxy.Clear()
	select {
	case <-connected:
	case <-time.After(30 * time.Second):
		t.Fatal("did not listen again")
	}
	if len(lost) != 0 {
		t.Fatal("told twice for one loss")
	}
}
