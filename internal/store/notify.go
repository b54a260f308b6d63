package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// Notification payloads are "<kind>:<instance>:<key>", instance naming the
// process that sent it. They are sent inside the
// writing transaction, so listeners hear of a change only once it commits.
const (
	NotifyMetric   = "metric"   // key: metric
	NotifyPlan     = "plan"     // key: plan
	NotifyCustomer = "customer" // key: customer; its overrides changed too
	NotifyReset    = "reset"    // key: customer/metric, whose usage was reset (every subject's with the customer's)
	NotifyTotal    = "total"    // key: customer/metric, whose total was set: its leases ended
	NotifyForget   = "forget"   // key: customer, deleted
	NotifyRecall   = "recall"   // key: a counter (CounterKeyString, with its subject) whose leased units a process needs
	NotifyFreed    = "freed"    // key: a counter (CounterKeyString, with its subject) that units came back to, which a process knew full
	NotifyWebhook  = "webhook"  // key: webhook id, created, replaced or deleted
	NotifyDelivery = "delivery" // key: empty; webhook deliveries were queued
)

// CounterKeyString names a counter in a notification:
// customer/metric/window/start for a customer's own counter, and
// customer/metric/window/start/subject for a subject's, start in Unix
// seconds (window starts are whole seconds). Customer ids, metric keys,
// windows and starts hold no slash, so everything after the fourth slash
// is the subject, slashes and all. A customer's own counter is named as
// it was before counters had subjects: a key without a subject, from
// whichever version of quotad, is the customer's.
func CounterKeyString(k quota.CounterKey) string {
	s := k.Customer + "/" + k.Metric + "/" + k.Window.String() + "/" + strconv.FormatInt(k.Start.Unix(), 10)
	if k.Subject != "" {
		s += "/" + k.Subject
	}
	return s
}

// ParseCounterKey reads what CounterKeyString wrote, and nothing else: a
// key has one spelling. It reports false for a short window, a start that
// is not a number as FormatInt writes it, an empty customer, metric or
// subject (a customer's own counter names none), or an invalid subject.
func ParseCounterKey(s string) (quota.CounterKey, bool) {
	parts := strings.SplitN(s, "/", 5)
	if len(parts) < 4 || parts[0] == "" || parts[1] == "" {
		return quota.CounterKey{}, false
	}
	w, ok := tiers.ParseWindow(parts[2])
	start, err := strconv.ParseInt(parts[3], 10, 64)
	if !ok || err != nil || w.Short() || strconv.FormatInt(start, 10) != parts[3] {
		return quota.CounterKey{}, false
	}
	k := quota.CounterKey{Customer: parts[0], Metric: parts[1], Window: w, Start: time.Unix(start, 0).UTC()}
	if len(parts) == 5 {
		if !tiers.ValidSubject(parts[4]) {
			return quota.CounterKey{}, false
		}
		k.Subject = parts[4]
	}
	return k, true
}

// payload is the notification of kind about key, from this process.
func (c *core) payload(kind, key string) string { return kind + ":" + c.instance + ":" + key }

// auditAndNotify records e in the audit log as of at, then notifies
// kind/key, both in tx: the last two steps of every catalog write.
func (c *core) auditAndNotify(ctx context.Context, tx pgx.Tx, at time.Time, e auditEntry, kind, key string) error {
	if err := recordAudit(ctx, tx, at, e); err != nil {
		return err
	}
	return c.notify(ctx, tx, kind, key)
}

func (c *core) notify(ctx context.Context, tx pgx.Tx, kind, key string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, c.channel, c.payload(kind, key)); err != nil {
		return fmt.Errorf("notify %s %s: %w", kind, key, err)
	}
	return nil
}

// Notification is a change another quotad process (or this one) committed.
type Notification struct {
	Kind string // metric, plan, customer, reset, forget, recall, freed, webhook or delivery
	Key  string // the metric or plan key, customer id, customer/metric, or a counter
	// Local: this process sent it (and has already applied the change).
	Local bool
}

// Listener hears the notifications of this schema's channel on a
// connection of its own.
type Listener struct {
	db *DB
	// Handle is called for every notification, in order.
	Handle func(Notification)
	// Resync is called after every (re)connection: notifications sent
	// while no connection listened are lost, so caches must start over.
	Resync func()
	// Report is told of connection failures.
	Report func(error)
	// Connected, if set, receives a value after each successful LISTEN.
	Connected chan<- struct{}
	// Lost, if set, is called when the others may take this process for
	// dead and reclaim its leases: once it has had no listening session
	// for LostAfter since it last heard from one, and when it had to take
	// its lock anew (its earlier session was gone, or ended by an admin's
	// release) — once per loss, before the session that follows is used.
	Lost      func()
	LostAfter time.Duration

	// heard is when the listening session last answered (sinceStart);
	// listening whether one listens now; lost whether Lost was called
	// since.
	heard     atomic.Int64
	listening atomic.Bool
	lost      atomic.Bool
}

// Listener returns a Listener for db.
func (db *DB) Listener(handle func(Notification), resync func(), report func(error)) *Listener {
	return &Listener{db: db, Handle: handle, Resync: resync, Report: report}
}

// hold takes the process's advisory lock on conn. While this session holds
// it, the other processes know this one runs: they wait for it to give back
// leased units they recall, count its leases as held, and read what it
// reports. When it dies, PostgreSQL releases the lock. If another process
// of the schema holds the key this one drew (before this one ever held
// it, so before any lease), this one draws another. If an earlier session
// of this process still holds it (a connection that went silent: the
// server may not notice for hours), that session is ended first: this
// process runs, and listens on this one now.
//
// It registers the key (see lease_holders): a key that another process
// registered and that no one reclaimed yet is not drawn. It reports
// whether it took the lock anew after this process had held it: the
// others may then have taken it for dead.
func (l *Listener) hold(ctx context.Context, conn *pgx.Conn) (anew bool, err error) {
	for attempt := 0; ; attempt++ {
		var ok bool
		err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(quotad_lock_class(), $1::integer)`,
			l.db.holderID()).Scan(&ok)
		switch {
		case err != nil:
			return false, err
		case ok:
			first := !l.db.held.Load()
			mine, err := register(ctx, conn, l.db.holderID(), first)
			if err != nil {
				return false, err
			}
			if mine {
				l.db.held.Store(true)
				return !first, nil
			}
			if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock(quotad_lock_class(), $1::integer)`, l.db.holderID()); err != nil {
				return false, err
			}
		case l.db.held.Load():
			return false, l.takeOver(ctx, conn)
		}
		if attempt == 8 {
			return false, errors.New("no free holder key for this process")
		}
		if err := l.db.drawHolder(); err != nil {
			return false, err
		}
	}
}

// takeOver ends the earlier sessions of this process that hold its
// advisory lock, and takes the lock on conn, waiting at most
// takeOverWait for them to go.
func (l *Listener) takeOver(ctx context.Context, conn *pgx.Conn) error {
	const q = `
		SELECT pg_terminate_backend(k.o_pid) FROM quotad_holder_sessions() k
		WHERE k.o_holder = ($1::bigint & 4294967295)::oid AND k.o_pid <> pg_backend_pid()`
	if _, err := conn.Exec(ctx, q, l.db.holderID()); err != nil {
		return fmt.Errorf("end this process's earlier session: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, takeOverWait)
	defer cancel()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(quotad_lock_class(), $1::integer)`, l.db.holderID()); err != nil {
		return fmt.Errorf("take the holder lock from this process's earlier session: %w", err)
	}
	return nil
}

// Listener timing.
const (
	// pingAfter: a listening connection quiet this long is asked whether
	// it still answers, within pingTimeout; one that went silent is
	// replaced, and caches and marks start over (Resync).
	pingAfter   = 5 * time.Second
	pingTimeout = 2 * time.Second
	// takeOverWait bounds how long a new listening session waits for an
	// earlier one of the process to end (see takeOver).
	takeOverWait = 5 * time.Second
	// setupTimeout bounds a listening session's start (connect, LISTEN,
	// the holder lock, a take-over included), so that a PostgreSQL gone
	// silent holds the listener for no longer: it tries again. Its close
	// is bounded by pingTimeout.
	setupTimeout = 15 * time.Second
)

// sessionKeepalives make PostgreSQL notice within about 20 s that the
// machine at the other end of a listening session is gone (by default
// the system's keepalives take hours): the session's end releases the
// process's lock, and the others may reclaim its leases.
var sessionKeepalives = []string{
	"SET tcp_keepalives_idle = 5", "SET tcp_keepalives_interval = 5",
	"SET tcp_keepalives_count = 3", "SET tcp_user_timeout = 20000",
}

// Run listens until ctx ends, reconnecting with backoff after failures.
func (l *Listener) Run(ctx context.Context) {
	if l.Lost != nil && l.LostAfter > 0 {
		go l.watch(ctx)
	}
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := l.listen(ctx)
		l.listening.Store(false)
		if ctx.Err() != nil {
			return
		}
		l.Report(fmt.Errorf("listen for changes: %w", mapErr(err)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (l *Listener) listen(ctx context.Context) error {
	setup, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(setup, l.db.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() {
		end, cancel := context.WithTimeout(context.WithoutCancel(ctx), pingTimeout)
		defer cancel()
		_ = conn.Close(end)
	}()
	for _, set := range sessionKeepalives {
		if _, err := conn.Exec(setup, set); err != nil {
			l.Report(fmt.Errorf("listening session: %s: %w", set, err))
			break
		}
	}
	if _, err := conn.Exec(setup, "LISTEN "+pgx.Identifier{l.db.channel}.Sanitize()); err != nil {
		return err
	}
	anew, err := l.hold(setup, conn)
	if err != nil {
		return err
	}
	cancel()
	if anew {
		l.loseOnce()
	}
	l.heard.Store(sinceStart())
	l.listening.Store(true)
	l.lost.Store(false)
	l.Resync()
	if l.Connected != nil {
		select {
		case l.Connected <- struct{}{}:
		default:
		}
	}
	for {
		wait, cancel := context.WithTimeout(ctx, pingAfter)
		n, err := conn.WaitForNotification(wait)
		cancel()
		if err != nil && ctx.Err() == nil && wait.Err() != nil && !conn.IsClosed() {
			// Quiet for pingAfter: is the connection still there?
			ping, cancel := context.WithTimeout(ctx, pingTimeout)
			err = conn.Ping(ping)
			cancel()
			if err == nil {
				l.heard.Store(sinceStart())
				continue
			}
		}
		if err != nil {
			return err
		}
		l.heard.Store(sinceStart())
		kind, rest, ok := strings.Cut(n.Payload, ":")
		if !ok {
			continue
		}
		instance, key, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		l.Handle(Notification{Kind: kind, Key: key, Local: instance == l.db.instance})
	}
}

// watch calls Lost once no session has listened for LostAfter since one
// last answered.
func (l *Listener) watch(ctx context.Context) {
	t := time.NewTicker(min(max(l.LostAfter/8, 10*time.Millisecond), time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		heard := l.heard.Load()
		if heard != 0 && !l.listening.Load() && time.Duration(sinceStart()-heard) >= l.LostAfter {
			l.loseOnce()
		}
	}
}

// loseOnce calls Lost, unless it was called since the last session.
func (l *Listener) loseOnce() {
	if l.Lost != nil && l.lost.CompareAndSwap(false, true) {
		l.Lost()
	}
}

// started is when this process started, by the monotonic clock.
var started = time.Now()

// sinceStart is the time since started, at least 1 ns.
func sinceStart() int64 { return max(int64(time.Since(started)), 1) }
