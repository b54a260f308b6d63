// Package store keeps quotad's state in PostgreSQL. It is the only package
// that imports pgx: over one pool (DB), a small type per aggregate (the
// catalog, the ledger, reservations, grants, history and the rest)
// implements what its consumers take (tiers.Store, the quota engine's
// roles, ...); the package owns transactions, and maps database errors to
// the domain's sentinels at its boundary.
package store

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/quotad/quotad/internal/tiers"
)

// DB is quotad's PostgreSQL store: one pool, the schema's migrations and
// health, and the aggregates that keep the state over the pool, one small
// type each. Consumers take the aggregates they use. It is safe for
// concurrent use.
type DB struct {
	*core

	Catalog      *Catalog
	Ledger       *Ledger
	Reservations *Reservations
	Grants       *Grants
	History      *History
	Billing      *Billing
	Keys         *Keys
	Webhooks     *Webhooks
	Meters       *Meters
	Audit        *Audit
}

// Catalog holds the catalog: metrics, plans and their versions,
// customers with their pending plan changes, and their overrides of
// limits and of features. It implements tiers.Store.
type Catalog struct{ core *core }

// Ledger holds what every quotad process shares to count long windows:
// the counters, the leases on them, the metrics' global usage and request
// ids, with their resets and purges. It implements the quota engine's
// Counts, Requests and Maintenance roles and lease.Leaser.
type Ledger struct{ core *core }

// Reservations holds reservations; finishing one runs its ledger work in
// the reservation's own transaction. It implements quota.ReservationStore.
type Reservations struct {
	core   *core
	ledger *Ledger
}

// Grants holds customers' grants of units and the draws checks make on
// them. It implements grants.Store and quota.Grants.
type Grants struct{ core *core }

// History holds daily usage history, and queues the usage of the metrics
// that go to Stripe with it. It implements quota.HistoryStore and
// whatif.HistoryStore.
type History struct {
	core *core
	// stripeMetrics are the metrics whose usage goes to Stripe (see
	// DB.SetStripeMetrics).
	stripeMetrics map[string]bool
}

// Billing holds what statements are made of: customers' terms, their
// overage and their grants' use. It implements billing.Store.
type Billing struct{ core *core }

// Keys holds API keys. It implements keys.Store.
type Keys struct{ core *core }

// Webhooks holds webhooks, the usage events they are told of and the
// queue of their deliveries. It implements webhooks.Store,
// webhooks.EventStore and webhooks.Outbox.
type Webhooks struct{ core *core }

// Meters holds the queue of meter events that go to Stripe. It
// implements meters.Outbox.
type Meters struct{ core *core }

// Audit holds the audit log. It implements quota.Audits.
type Audit struct{ core *core }

// core is what the aggregates share: the pool, this process's names in
// notifications and leases, and the caps creations are held to. Each
// aggregate holds it in a field, not embedded, so that its helpers (inTx,
// notify, ...) do not join the aggregate's own methods.
type core struct {
	pool *pgxpool.Pool
	// channel is the LISTEN/NOTIFY channel of this schema: every quotad
	// process on the same database and schema shares it.
	channel string
	// instance tells this process's notifications from the others'.
	instance string
	// holder names this process in the leases it holds: an int4, the key
	// of the advisory lock its listening session holds while it runs.
	// It may change once, before any lease, if another process of the
	// schema drew the same (see Listener).
	holder atomic.Int64
	// held: the listening session has held the lock once; the holder is
	// fixed from then on.
	held atomic.Bool
	// caps bound the customers, keys per customer and webhooks writes
	// create (see SetCaps); none until set.
	caps tiers.Caps
}

// SetCaps sets the caps creations are held to (tiers.Caps: 0, no cap).
// Call it before the DB is used.
func (db *DB) SetCaps(c tiers.Caps) { db.caps = c }

// checkCount checks kind's cap against its count in object_counts (kept
// by triggers, see quotad_count_objects in the migrations), which the transaction's own insert
// has just raised and whose row it therefore holds locked: concurrent
// creations wait for it to commit, and then count its row.
func (c *core) checkCount(ctx context.Context, tx pgx.Tx, kind tiers.CapKind, table string) error {
	if c.caps.Of(kind) == 0 {
		return nil
	}
	var n int64
	if err := tx.QueryRow(ctx, `SELECT n FROM object_counts WHERE kind = $1`, table).Scan(&n); err != nil {
		return fmt.Errorf("count %s: %w", table, err)
	}
	return c.caps.Check(kind, n)
}

// holderID is this process's holder key.
func (c *core) holderID() int64 { return c.holder.Load() }

// Holder returns the key that names this process in the leases it holds
// (see Listener): for logs, and for tests that watch it.
func (db *DB) Holder() int64 { return db.holderID() }

// drawHolder draws a new holder key.
func (c *core) drawHolder() error {
	var id [4]byte
	if _, err := rand.Read(id[:]); err != nil {
		return err
	}
	c.holder.Store(int64(int32(binary.BigEndian.Uint32(id[:]))))
	return nil
}

// ErrBadURL is returned by Open and MaxConns for a database URL they
// cannot read; the error says why, without the password.
var ErrBadURL = errors.New("invalid database URL")

// ErrRejected is returned by Open, wrapped, when PostgreSQL answers but
// refuses the connection for a reason that waiting will not fix: the
// database does not exist, or the user or password is wrong.
var ErrRejected = errors.New("PostgreSQL refused the connection")

// DefaultMaxConns is the pool size when the URL sets no pool_max_conns.
// Checks with long windows hold a connection for one short transaction;
// enough of them in flight lets PostgreSQL commit them in groups.
const DefaultMaxConns = 24

// DefaultConnectTimeout bounds a new connection when the URL sets no
// connect_timeout.
const DefaultConnectTimeout = 5 * time.Second

// MaxConns returns the size of the pool Open makes for url and maxConns:
// maxConns if above 0, else the URL's pool_max_conns, else
// DefaultMaxConns.
func MaxConns(url string, maxConns int) (int, error) {
	cfg, err := poolConfig(url, maxConns)
	if err != nil {
		return 0, err
	}
	return int(cfg.MaxConns), nil
}

// poolConfig parses url into a pool configuration of the size MaxConns
// documents.
func poolConfig(url string, maxConns int) (*pgxpool.Config, error) {
	if i := strings.Index(url, "://"); i >= 0 {
		// pgx reads any other scheme as a key=value string and says so,
		// which helps nobody who typed mysql://.
		switch scheme := url[:i]; scheme {
		case "postgres", "postgresql":
		default:
			return nil, fmt.Errorf("%w: the URL must begin postgres:// or postgresql://, not %s://", ErrBadURL, scheme)
		}
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrBadURL, RedactURL(err.Error()))
	}
	switch {
	case maxConns > 0:
		cfg.MaxConns = int32(maxConns)
	case !strings.Contains(url, "pool_max_conns"):
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// A server that went silent would otherwise hold each new
		// connection for as long as the kernel retries.
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	return cfg, nil
}

// Open connects to the database at url and returns a DB over a new pool.
// maxConns <= 0 keeps the URL's pool_max_conns, or DefaultMaxConns.
func Open(ctx context.Context, url string, maxConns int) (*DB, error) {
	cfg, err := poolConfig(url, maxConns)
	if err != nil {
		return nil, err
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "quotad"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create pool: %w", err)
	}
	db, err := New(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return db, nil
}

// New returns a DB over an existing pool. The pool's search_path decides the
// schema quotad works in.
func New(ctx context.Context, pool *pgxpool.Pool) (*DB, error) {
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return nil, fmt.Errorf("read current schema: %w", mapErr(err))
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	c := &core{pool: pool, channel: "quotad_" + schema, instance: hex.EncodeToString(id[:])}
	if err := c.drawHolder(); err != nil {
		return nil, err
	}
	ledger := &Ledger{c}
	return &DB{core: c, Catalog: &Catalog{c}, Ledger: ledger, Reservations: &Reservations{core: c, ledger: ledger},
		Grants: &Grants{c}, History: &History{core: c}, Billing: &Billing{c}, Keys: &Keys{c},
		Webhooks: &Webhooks{c}, Meters: &Meters{c}, Audit: &Audit{c}}, nil
}

// Pool returns the underlying pool.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

// Close closes the pool.
func (db *DB) Close() { db.pool.Close() }

// Ping checks that PostgreSQL answers.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.pool.Ping(ctx); err != nil {
		return mapErr(err)
	}
	return nil
}

// querier is what pgxpool.Pool and pgx.Tx have in common.
// findPage runs sql, whose last argument (added here) is how many rows it
// returns at the most, limit+1, and returns the first limit rows, each
// converted by to, and whether there were more: one page of a list. what
// names the rows in errors.
func findPage[R, T any](ctx context.Context, q querier, what string, limit int, to func(R) T, sql string, args ...any) ([]T, bool, error) {
	rows, err := q.Query(ctx, sql, append(args, limit+1)...)
	if err != nil {
		return nil, false, fmt.Errorf("query %s: %w", what, mapErr(err))
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[R])
	if err != nil {
		return nil, false, fmt.Errorf("scan %s: %w", what, mapErr(err))
	}
	more := len(list) > limit
	if more {
		list = list[:limit]
	}
	out := make([]T, len(list))
	for i, r := range list {
		out[i] = to(r)
	}
	return out, more, nil
}

// findAll reads every row sql selects with args into row structs R and
// converts each with to.
func findAll[R, T any](ctx context.Context, q querier, to func(R) T, sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[R])
	if err != nil {
		return nil, err
	}
	out := make([]T, len(list))
	for i, r := range list {
		out[i] = to(r)
	}
	return out, nil
}

type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// findOne reads the one row sql selects with args into a row struct R
// and converts it with to; no row is notFound.
func findOne[R, T any](ctx context.Context, q querier, sql string, notFound error, to func(R) T, args ...any) (T, error) {
	var zero T
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return zero, err
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[R])
	if errors.Is(err, pgx.ErrNoRows) {
		return zero, notFound
	}
	if err != nil {
		return zero, err
	}
	return to(r), nil
}

// conn is a querier that also pipelines batches: the pool, or a
// transaction.
type conn interface {
	querier
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

type txKey struct{}

// errRetry asks inTx to run the transaction again: a concurrent writer
// created the row this one meant to create.
var errRetry = errors.New("retry transaction")

const maxTxAttempts = 4

// inTx runs fn in a transaction: it commits when fn returns nil and rolls
// back on an error or a panic. Serialization failures, deadlocks and
// errRetry run fn again, a bounded number of times. Transactions do not nest.
func (c *core) inTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if ctx.Value(txKey{}) != nil {
		return errors.New("store: nested transaction")
	}
	ctx = context.WithValue(ctx, txKey{}, true)
	var err error
	for attempt := 1; attempt <= maxTxAttempts; attempt++ {
		err = pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
			return fn(ctx, tx)
		})
		if !retryable(err) {
			break
		}
	}
	return mapErr(err)
}

// retry runs fn, one statement in a transaction of its own, again after
// a serialization failure or a deadlock, as inTx does.
func retry(fn func() error) error {
	var err error
	for attempt := 1; attempt <= maxTxAttempts; attempt++ {
		if err = fn(); !retryable(err) {
			break
		}
	}
	return err
}

func retryable(err error) bool {
	if errors.Is(err, errRetry) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", "40P01": // serialization_failure, deadlock_detected
			return true
		}
	}
	return false
}

// mapErr turns database errors into the domain's: connection trouble becomes
// tiers.ErrUnavailable. Errors that are already the domain's, and the
// caller's own cancellation, pass through.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, tiers.ErrUnavailable) {
		return err
	}
	var ve *tiers.ValidationError
	if errors.As(err, &ve) {
		return err
	}
	for _, sentinel := range []error{
		tiers.ErrMetricNotFound, tiers.ErrPlanNotFound, tiers.ErrCustomerNotFound,
		tiers.ErrOverrideNotFound, tiers.ErrMetricInUse, tiers.ErrPlanInUse,
		tiers.ErrConflict, tiers.ErrPreconditionFailed, errRetry,
	} {
		if errors.Is(err, sentinel) {
			return err
		}
	}
	if pgErr := rejected(err); pgErr != nil {
		return fmt.Errorf("%w: %s (SQLSTATE %s)", ErrRejected, pgErr.Message, pgErr.Code)
	}
	if unreachable(err) {
		return fmt.Errorf("%w: %s", tiers.ErrUnavailable, RedactURL(err.Error()))
	}
	return err
}

// rejected returns the server's error when err means PostgreSQL refused
// the connection for good, else nil.
func rejected(err error) *pgconn.PgError {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return nil
	}
	switch pgErr.Code {
	case "3D000", // invalid_catalog_name: no such database
		"28000", // invalid_authorization_specification: no pg_hba.conf entry, no such role
		"28P01": // invalid_password
		return pgErr
	}
	return nil
}

// unreachable reports whether err means PostgreSQL could not be reached or
// went away, as opposed to rejecting a statement.
func unreachable(err error) bool {
	// Failing to connect is unreachable whatever the server said (it may
	// refuse connections to the database, or be starting up).
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// 08: connection exception; 53: insufficient resources;
		// 57P01..57P05: shutdown, crash recovery, idle timeouts.
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "53") ||
			strings.HasPrefix(pgErr.Code, "57P")
	}
	var netErr net.Error
	var pgconnErr interface{ SafeToRetry() bool }
	switch {
	case errors.As(err, &netErr), errors.As(err, &pgconnErr),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF), pgconn.Timeout(err):
		return true
	}
	// The pool's and the connection's own closed states have no exported
	// sentinel.
	msg := err.Error()
	return strings.Contains(msg, "closed pool") || strings.Contains(msg, "conn closed")
}

// isCode reports whether err is a PostgreSQL error with SQLSTATE code.
func isCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}

// RedactURL hides the password in any URL or key=value DSN inside s.
func RedactURL(s string) string {
	out := s
	// Every scheme, not only PostgreSQL's: a URL quotad refuses
	// (mysql://) is still logged and quoted in errors.
	const sep = "://"
	for start := 0; ; {
		i := strings.Index(out[start:], sep)
		if i < 0 {
			break
		}
		i += start + len(sep)
		end := strings.IndexAny(out[i:], "/? \t\n\"'`")
		if end < 0 {
			end = len(out) - i
		}
		userinfo := out[i : i+end]
		if at := strings.LastIndexByte(userinfo, '@'); at >= 0 {
			if colon := strings.IndexByte(userinfo[:at], ':'); colon >= 0 {
				out = out[:i+colon+1] + "xxxxx" + out[i+at:]
			}
		}
		start = i
	}
	if i := strings.Index(out, "password="); i >= 0 {
		end := strings.IndexAny(out[i:], " \t\n&")
		if end < 0 {
			end = len(out) - i
		}
		out = out[:i] + "password=xxxxx" + out[i+end:]
	}
	return out
}

// utc normalizes a time read from PostgreSQL.
func utc(t time.Time) time.Time { return t.UTC() }

// utcPtr normalizes an optional time read from PostgreSQL.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// checkDelete checks a conditional delete against what looking up the row
// returned (err, notFound when there is none, and the row's version): a
// missing row fails any If-Match, as a present one must match it.
func checkDelete(w tiers.Write, err, notFound error, version int64) error {
	if errors.Is(err, notFound) && w.IfMatch.Set {
		return tiers.ErrPreconditionFailed
	}
	if err != nil {
		return err
	}
	return w.IfMatch.Check(true, version)
}
