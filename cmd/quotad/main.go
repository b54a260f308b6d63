// Command quotad serves quotas and billing tiers: an admin API for metrics,
// plans, customers and overrides, and POST /v1/check for backends.
//
// Usage:
//
//	quotad [serve] [flags]           serve (the default command)
//	quotad migrate up|down|version [flags]
//	quotad version                   print the version (also quotad --version)
//
// Every flag of serve and migrate falls back to a QUOTAD_* environment
// variable; see quotad --help. What was quotad simulate is the command
// quotasim.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quotad/quotad/internal/api"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/redisstore"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout)
	stop()
	if status := exitStatus(err, os.Stdout); status != 0 {
		os.Exit(status)
	}
}

// exitStatus returns the exit status of a run that returned err, which it
// logs to w, where the logs go, as one JSON line at ERROR (the error's
// own line breaks escaped): a bad configuration, a store that cannot be
// reached at start-up, a listener that fails.
func exitStatus(err error, w io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	slog.New(slog.NewJSONHandler(w, nil)).Error("quotad cannot go on", "error", err.Error())
	return 1
}

// run is quotad: it returns when ctx is canceled (after a graceful
// shutdown) or on a fatal error. Logs go to stdout as JSON, and so do
// --help and the version. The environment is read through getenv only.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 0 {
		args = args[1:]
	}
	cmd, c, err := parseArgs(args, getenv, stdout)
	if err != nil {
		return err
	}
	switch {
	case cmd == "": // --help or --version
		return nil
	case cmd == "serve":
		if err := c.Config.check(); err != nil {
			return err
		}
		return serve(ctx, &c.Config, stdout)
	case strings.HasPrefix(cmd, "migrate "):
		if err := c.Config.check(); err != nil {
			return err
		}
		return runMigrate(ctx, strings.TrimPrefix(cmd, "migrate "), c, stdout)
	case strings.HasPrefix(cmd, "simulate"):
		return errSimulateMoved
	case cmd == "version":
		_, err := io.WriteString(stdout, versionText())
		return err
	}
	return fmt.Errorf("unknown command %q", cmd)
}

// errSimulateMoved answers quotad simulate, which became a command of its
// own so that the server does not link the chart's plotting library.
var errSimulateMoved = errors.New("simulate is no longer a command of quotad: it is the command quotasim, with the same flags (go run ./cmd/quotasim -h)")

func newLogger(w io.Writer, level string) *slog.Logger {
	l, _ := parseLevel(level) // one of --log-level's enum
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}

// openStore connects to PostgreSQL, retrying for up to cfg.DBWait so that
// quotad may start before its database.
func openStore(ctx context.Context, cfg *config, log *slog.Logger) (*store.DB, error) {
	deadline := time.Now().Add(cfg.DBWait)
	for {
		db, err := store.Open(ctx, cfg.DatabaseURL, cfg.DBMaxConns)
		if err == nil {
			if err = db.Ping(ctx); err == nil {
				return db, nil
			}
			db.Close()
		}
		if errors.Is(err, store.ErrBadURL) || errors.Is(err, store.ErrRejected) {
			// Waiting mends a server that is down or starting, not a
			// wrong URL, database name or password.
			return nil, fmt.Errorf("connect to database: %w; check %s", err, cfg.from("database-url"))
		}
		if !errors.Is(err, tiers.ErrUnavailable) || time.Now().After(deadline) {
			return nil, fmt.Errorf("connect to database: %w", err)
		}
		log.Warn("database not reachable yet; retrying", "error", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func openRedis(ctx context.Context, cfg *config, log *slog.Logger) (*redisstore.Store, error) {
	shared, err := redisstore.New(cfg.RedisURL, redisstore.Options{Prefix: cfg.RedisPrefix, Timeout: cfg.RedisTimeout,
		Wait: cfg.RequestTimeout})
	if err != nil {
		return nil, err
	}
	if err := shared.Connect(ctx); err != nil {
		log.Warn("Redis cannot be reached yet: short windows are counted in this process until it can", "error", redactRedis(err.Error(), cfg.RedisURL))
	} else {
		log.Info("short windows are shared in Redis", "prefix", cfg.RedisPrefix)
	}
	return shared, nil
}

// forgetShared deletes a deleted customer's short windows of every metric
// from the shared store.
func forgetShared(ctx context.Context, catalog *tiers.Service, shared *redisstore.Store, customer string) error {
	var metrics []string
	page := tiers.Page{Limit: 500}
	for {
		ms, more, err := catalog.Metrics(ctx, page)
		if err != nil {
			return err
		}
		for _, m := range ms {
			metrics = append(metrics, m.Key)
		}
		if !more || len(ms) == 0 {
			break
		}
		page.After = ms[len(ms)-1].Key
	}
	if len(metrics) == 0 {
		return nil
	}
	return shared.Clear(ctx, customer, metrics)
}

// releaseTimeout bounds the settlement of a lease another process
// recalled: a store that went silent holds up no recall for long (the
// periodic flush settles the lease later).
const releaseTimeout = 5 * time.Second

// applyNotification applies a change another process committed. A
// process's own changes were applied when they committed (see onChange and
// Engine.Reset), so their notifications are skipped: applied late, they
// would only drop cache entries loaded since. Work it starts in goroutines
// joins background, which counts the listener that calls it (so the count
// is above zero when it grows, as sync.WaitGroup requires), and which
// shutdown waits for.
func applyNotification(ctx context.Context, background *sync.WaitGroup, n store.Notification, cache *tiers.Cache, engine *quota.Engine,
	leases *lease.Pool) {
	if n.Kind == store.NotifyFreed {
		// Units came back to a counter that this process, like any other,
		// may deny from memory: its own give-backs included.
		if k, ok := store.ParseCounterKey(n.Key); ok && leases != nil {
			leases.Freed(k)
		}
		return
	}
	if n.Kind == store.NotifyGrants {
		// Whether the customer has live grants: a draw by this process
		// that used one up changes it too.
		cache.Invalidate(tiers.Change{Kind: tiers.CustomerChanged, Key: n.Key})
		return
	}
	if n.Local {
		return
	}
	switch n.Kind {
	case store.NotifyRecall:
		// Another process recalled units this one may hold: give them
		// back, without holding up the notifications that follow. A
		// failure leaves the lease to the periodic flush.
		if k, ok := store.ParseCounterKey(n.Key); ok && leases != nil {
			background.Go(func() {
				ctx, cancel := context.WithTimeout(ctx, releaseTimeout)
				defer cancel()
				_ = leases.Yield(ctx, k)
			})
		}
	case store.NotifyMetric:
		cache.Invalidate(tiers.Change{Kind: tiers.MetricChanged, Key: n.Key})
	case store.NotifyPlan:
		cache.Invalidate(tiers.Change{Kind: tiers.PlanChanged, Key: n.Key})
	case store.NotifyCustomer:
		cache.Invalidate(tiers.Change{Kind: tiers.CustomerChanged, Key: n.Key})
	case store.NotifyForget:
		engine.Forget(n.Key, "")
	case store.NotifyReset:
		if customer, metric, ok := strings.Cut(n.Key, "/"); ok {
			engine.Forget(customer, metric)
		}
	case store.NotifyTotal:
		// A set of a total ended its leases, and only them: the short
		// windows stay, and the metric's other leases are asked about.
		if customer, metric, ok := strings.Cut(n.Key, "/"); ok && leases != nil {
			leases.Forget(customer, metric)
		}
	}
}

// ready returns an error unless PostgreSQL answers within the time a check
// waits for it and the schema is current, and checks are not being
// answered degraded (or refused) for want of it: readiness and the
// answers agree.
func ready(ctx context.Context, cfg *config, db *store.DB, engine *quota.Engine) error {
	if engine.StoreDown() {
		return &api.NotReadyError{Reason: "checks cannot reach the database"}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StoreTimeout)
	defer cancel()
	return checkSchema(ctx, db)
}

// checkSchema returns an error unless PostgreSQL answers and its schema is
// at least this binary's version and not dirty. A newer schema is a
// rolling upgrade under way: a process that started on its own version
// goes on serving (start-up refuses one, see startSchema).
func checkSchema(ctx context.Context, db *store.DB) error {
	st, err := db.Migrations().Version(ctx)
	if err != nil {
		return &api.NotReadyError{Reason: "the database cannot be reached"}
	}
	if st.Dirty {
		return &api.NotReadyError{Reason: fmt.Sprintf("schema version %d is dirty: a migration failed halfway", st.Version)}
	}
	if store.PredatesBaseline(st.Version) {
		return &api.NotReadyError{Reason: schemaPredates(st.Version).Error()}
	}
	if st.Version < store.SchemaVersion {
		return &api.NotReadyError{Reason: fmt.Sprintf("schema version %d is older than %d; run quotad migrate up", st.Version, store.SchemaVersion)}
	}
	return nil
}

// runMigrate is quotad migrate up, down, force or version. up and down
// refuse a schema this binary cannot move (dirty; older than its baseline
// or newer than it carries: it lacks those migrations' files) with
// refuseSchema's sentences, not golang-migrate's.
func runMigrate(ctx context.Context, cmd string, c *cli, stdout io.Writer) error {
	cfg := &c.Config
	log := newLogger(stdout, cfg.LogLevel)
	db, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := db.Migrations().Version(ctx)
	if err != nil {
		return fmt.Errorf("read the schema version: %w", err)
	}
	switch {
	case cmd == "up":
		err = startSchema(ctx, db, "")
	case cmd == "down":
		if st.Dirty {
			// Maybe a migration under way: wait for it.
			if err = db.Migrations().Wait(ctx); err == nil {
				st, err = db.Migrations().Version(ctx)
			}
		}
		if err == nil {
			err = refuseSchema(st, "")
		}
		if err == nil {
			err = db.Migrations().Down(ctx)
		}
	case strings.HasPrefix(cmd, "force "):
		v := c.Migrate.Force.Version
		if v > store.SchemaVersion || store.PredatesBaseline(v) {
			return fmt.Errorf("migrate force: this quotad carries schemas %d to %d: force version %d with a quotad that carries it",
				store.BaselineVersion, store.SchemaVersion, v)
		}
		err = db.Migrations().Force(ctx, v)
	case cmd == "version":
	default:
		return fmt.Errorf("migrate: unknown command %q; want up, down, force or version", cmd)
	}
	if err != nil {
		return err
	}
	st, err = db.Migrations().Version(ctx)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "schema version %d (dirty: %t); this binary carries %d\n", st.Version, st.Dirty, store.SchemaVersion)
	return err
}

// versionText is what quotad version and quotad --version print: the
// build (as quotad_build_info says it), the newest schema version the
// binary carries and the version of its Redis keys' format.
func versionText() string {
	b := currentBuild()
	return fmt.Sprintf("quotad %s\nrevision: %s\ngo: %s\nschema: %d\nredis keys: %d\n",
		b.version, b.revision, b.goVersion, store.SchemaVersion, redisstore.KeyVersion)
}
