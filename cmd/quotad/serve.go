package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotad/quotad/internal/api"
	"github.com/quotad/quotad/internal/billing"
	"github.com/quotad/quotad/internal/forwardauth"
	"github.com/quotad/quotad/internal/gctune"
	"github.com/quotad/quotad/internal/grants"
	"github.com/quotad/quotad/internal/keys"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/redisstore"
	"github.com/quotad/quotad/internal/rls"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
	"github.com/quotad/quotad/internal/webhooks"
	"github.com/quotad/quotad/internal/whatif"
)

// serve runs quotad until ctx ends, in named steps: open the stores, build
// the engine, listen for other processes' changes, warm the cache, start
// the work checks need, and serve the API; then it shuts down, closing
// what it opened in the reverse order.
func serve(ctx context.Context, cfg *config, stdout io.Writer) error {
	log := newLogger(stdout, cfg.LogLevel)
	for _, w := range cfg.warnings {
		log.Warn(w.msg, w.args...)
	}
	forwardRules, err := loadForwardAuth(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.from("forward-auth-config"), err)
	}
	rlsRules, err := loadRLS(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.from("rls-config"), err)
	}
	tlsConfig, err := loadTLS(cfg, log)
	if err != nil {
		return err
	}
	if len(cfg.tokens) == 0 {
		if addr, changed := loopbackOnly(cfg.Listen); changed {
			log.Warn("no tokens configured: binding to loopback only", "requested", cfg.Listen, "listen", addr)
			cfg.Listen = addr
		}
		if addr, changed := loopbackOnly(cfg.GRPCListen); changed && cfg.GRPCListen != "" {
			log.Warn("no tokens configured: binding gRPC to loopback only", "requested", cfg.GRPCListen, "listen", addr)
			cfg.GRPCListen = addr
		}
		log.Warn("no QUOTAD_ADMIN_TOKENS or QUOTAD_CHECK_TOKENS configured: serving without authentication, on loopback only")
	}
	// The addresses are bound once now, before PostgreSQL and Redis are
	// connected to, migrated and warmed: one that cannot be is an error
	// in a second, not after all that.
	if err := tryListen(cfg); err != nil {
		return err
	}
	log.Info("starting quotad", "version", version, "config", cfg.logValue())
	defer gctune.Start(cfg.gcHeadroom()).Stop()

	// One clock stamps catalog writes and decides which billing periods
	// have begun.
	p := &instance{cfg: cfg, log: log, now: func() time.Time { return time.Now().UTC() },
		tls: tlsConfig, shutdownBegan: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- p.run(ctx, forwardRules, rlsRules) }()
	select {
	case err := <-done:
		return err
	case <-p.shutdownBegan:
	}
	// The drain is over: whatever PostgreSQL and Redis do, the process
	// ends within the shutdown timeout.
	timer := time.NewTimer(cfg.ShutdownTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		p.logUnreturned(slog.LevelError, "shutdown did not finish within --shutdown-timeout: exiting with it unfinished")
		return errShutdownUnfinished
	}
}

// errShutdownUnfinished ends a shutdown that outlasted its timeout.
var errShutdownUnfinished = errors.New("shutdown did not finish within the shutdown timeout")

// run opens, builds and serves, step by step, until ctx ends; then it
// drains, shuts down and closes what it opened in the reverse order.
func (p *instance) run(ctx context.Context, forwardRules *forwardauth.Rules, rlsRules *rls.Rules) error {
	defer p.close()
	if err := p.openStores(ctx); err != nil {
		return err
	}
	// Background work lives until the HTTP server has drained, so that the
	// last checks reach the history before the final flush.
	var stopBackground context.CancelFunc
	p.bg, stopBackground = context.WithCancel(context.WithoutCancel(ctx))
	p.stopBackground = func() { stopBackground(); p.background.Wait() }
	p.onClose(p.stopBackground)
	if err := p.buildEngine(ctx); err != nil {
		return err
	}
	p.listen()
	if err := p.warm(ctx); err != nil {
		return err
	}
	p.startCheckWork()
	return p.serveHTTP(ctx, p.api(forwardRules), rlsRules)
}

// logUnreturned logs msg at level with the units this process still holds
// in leases and owes for degraded answers: what a process that ends now
// leaves counted without admitting (leases, until their windows end) or
// admitted without counting (debts).
func (p *instance) logUnreturned(level slog.Level, msg string) {
	if p.engine == nil {
		p.log.Log(context.Background(), level, msg)
		return
	}
	st := p.engine.Stats()
	p.log.Log(context.Background(), level, msg, "lease_units_not_given_back", st.Leases.Unreturned,
		"degraded_units_not_charged", st.Debts.Owed)
}

// instance is the quotad that serve builds, step by step.
type instance struct {
	cfg *config
	log *slog.Logger
	now func() time.Time
	tls *tls.Config // the API's and gRPC's, nil: plaintext

	db       *store.DB
	outbox   *store.Outbox
	cache    *tiers.Cache
	detector *webhooks.Detector
	engine   *quota.Engine
	leases   *lease.Pool       // nil without leases
	redis    *redisstore.Store // short windows are shared in Redis; nil when not
	catalog  *tiers.Service
	registry *prometheus.Registry
	// liveness tells a slow PostgreSQL from a silent one for the engine.
	liveness *store.Liveness
	// pgOutage and redisOutage log the stores' outages (redisOutage is
	// nil without Redis).
	pgOutage, redisOutage *outageLog
	// verifier holds the live API keys; keys issues and revokes them.
	verifier *keys.Verifier
	keys     *keys.Service
	grants   *grants.Service
	// onPurge hears what each retention purge deleted (see retention.go);
	// set with the registry, before the engine's work starts.
	onPurge func(quota.Purged)

	// bg is the background work's context; stopBackground ends the work
	// and waits for it.
	bg             context.Context
	stopBackground func()
	background     sync.WaitGroup
	listening      chan struct{} // told once other processes' changes are heard
	// draining: a signal came; readiness says 503 while requests are
	// still served. shutdownBegan is closed once the drain is over.
	draining      atomic.Bool
	shutdownBegan chan struct{}

	closers []func() // run by close, last first
}

// onClose has close run f.
func (p *instance) onClose(f func()) { p.closers = append(p.closers, f) }

// close closes what the steps opened, last first.
func (p *instance) close() {
	for i := len(p.closers) - 1; i >= 0; i-- {
		p.closers[i]()
	}
}

// openStores connects to PostgreSQL, migrates it if asked to, refuses a
// schema this binary cannot run on (see startSchema), and opens the webhook outbox's connections.
func (p *instance) openStores(ctx context.Context) error {
	db, err := openStore(ctx, p.cfg, p.log)
	if err != nil {
		return err
	}
	p.db = db
	p.onClose(db.Close)
	if err := startSchema(ctx, db, p.cfg.noMigrate()); err != nil {
		return err
	}
	// Webhook deliveries and Stripe's meter events use connections of
	// their own, closed after the worker and the sender stop.
	outbox, err := db.OpenOutbox(ctx, webhookWorkers+stripeSenders(p.cfg))
	if err != nil {
		return err
	}
	p.outbox = outbox
	p.onClose(outbox.Close)
	return nil
}

// buildEngine builds the catalog's cache, the quota engine (with Redis, if
// configured), the usage event detector and the catalog service.
func (p *instance) buildEngine(ctx context.Context) error {
	p.cache = tiers.NewCache(p.db.Catalog, 0)
	p.pgOutage = newOutageLog(p.log, "postgresql")
	p.liveness = store.NewLiveness(p.db, p.cfg.StoreTimeout, func(alive bool, err error) {
		if alive {
			p.pgOutage.end("PostgreSQL answers again")
		} else {
			p.pgOutage.begin("PostgreSQL is not answering: checks that need it are answered as --store-failure says", "error", err)
		}
	})
	p.detector = webhooks.NewDetector(p.db.Webhooks)
	opts := quota.Options{
		Catalog:      p.cache,
		Counts:       p.db.Ledger,
		Requests:     p.db.Ledger,
		Maintenance:  p.db.Ledger,
		Audits:       p.db.Audit,
		History:      p.db.History,
		FailClosed:   p.cfg.StoreFailure == "closed",
		Watcher:      p.detector,
		StoreTimeout: p.cfg.StoreTimeout,
		Reservations: p.db.Reservations,
		Grants:       p.db.Grants,
		// A slow PostgreSQL (a busy machine) is waited for up to the
		// request timeout; a silent one for the store timeout.
		Liveness:    p.liveness,
		WaitTimeout: p.cfg.RequestTimeout,
		// What grows is purged in the background (see retention.go).
		Retention: p.cfg.retention(),
		OnPurge:   func(pg quota.Purged) { p.onPurge(pg) },
	}
	if p.cfg.RedisURL != "" {
		shared, err := openRedis(ctx, p.cfg, p.log)
		if err != nil {
			return err
		}
		p.onClose(shared.Close)
		p.redis = shared
		opts.Shared, opts.SharedClock = shared, true
		// Heard once per change of mode, not per hash slot of a cluster.
		p.redisOutage = newOutageLog(p.log, "redis")
		opts.OnSharedChange = func(up bool, err error) {
			switch {
			case up && errors.Is(err, quota.ErrSharedIdle):
				p.redisOutage.end("Redis no longer judged down, untried: no check has needed it for a minute; the next one tries it")
			case up:
				p.redisOutage.end("short windows are shared in Redis again")
			default:
				p.redisOutage.begin("Redis cannot be reached (all of it, or a cluster node: then only the keys of its slots): their short windows are counted in this process, answers degraded; see quotad_redis_shards_down",
					"error", redactRedis(err.Error(), p.cfg.RedisURL))
			}
		}
	}
	if p.cfg.Leases {
		p.leases = lease.NewPool(p.db.Ledger, quota.SystemClock{})
		opts.Leases = p.leases
	}
	// Before the engine writes any history: usage to Stripe is summed
	// with it.
	p.db.SetStripeMetrics(slices.Sorted(maps.Keys(p.cfg.stripeMeters)))
	p.engine = quota.New(opts)
	p.db.SetCaps(p.cfg.caps())
	p.catalog = tiers.NewService(p.db.Catalog, p.db.Audit, p.now, p.catalogChanged)
	p.verifier = keys.NewVerifier(p.db.Keys, p.now)
	p.keys = keys.NewService(p.db.Keys, p.now, p.verifier)
	p.grants = grants.NewService(p.db.Grants, p.now)
	p.grants.Changed = func(customer string) {
		p.cache.Invalidate(tiers.Change{Kind: tiers.CustomerChanged, Key: customer})
	}
	return nil
}

// catalogChanged is told of every change committed by this process: it
// reaches the cache at once (other processes hear of it through the
// listener, see listen). A deleted customer's counters go with it.
func (p *instance) catalogChanged(ch tiers.Change) {
	p.cache.Invalidate(ch)
	if ch.Kind != tiers.CustomerChanged || !ch.Deleted {
		return
	}
	p.verifier.ForgetCustomer(ch.Key) // its keys went with it
	p.engine.Forget(ch.Key, "")
	if p.redis == nil {
		return
	}
	p.background.Go(func() {
		ctx, cancel := p.bounded()
		defer cancel()
		if err := forgetShared(ctx, p.catalog, p.redis, ch.Key); err != nil {
			p.log.Warn("deleted customer's short windows left in Redis; they expire by themselves", "customer", ch.Key, "error", err)
		}
	})
}

// listen starts the webhook worker and the listener of other processes'
// changes, and registers the metrics of what it built.
func (p *instance) listen() {
	p.registry = prometheus.NewRegistry()
	p.onPurge = newPurgeObserver(p.log, p.registry)
	worker := newWebhookWorker(p.cfg, p.outbox, p.log, p.registry)
	registerProcessMetrics(p.registry, p.db.Pool())
	registerDetectorMetrics(p.registry, p.detector)
	registerCacheMetrics(p.registry, p.cache)
	if sender := newStripeSender(p.cfg, p.outbox, p.log, p.registry); sender != nil {
		p.background.Go(func() { sender.Run(p.bg) })
	}
	listener := p.db.Listener(func(n store.Notification) {
		switch n.Kind {
		case store.NotifyDelivery:
			worker.Wake()
		case store.NotifyWebhook:
			p.detector.Changed()
		}
		p.applyKeyNotification(n)
		applyNotification(p.bg, &p.background, n, p.cache, p.engine, p.leases)
	}, func() {
		p.cache.Purge()
		if p.leases != nil {
			p.leases.ClearMarks()
		}
		worker.Wake()
		p.detector.Changed()
		p.loadKeys()
	},
		func(err error) { p.retrying("change notifications interrupted; reconnecting", err) })
	p.listening = make(chan struct{}, 1)
	listener.Connected = p.listening
	if p.leases != nil {
		// Taken for dead, this process's leases may be reclaimed: it
		// spends none of them until PostgreSQL says they still hold.
		listener.Lost, listener.LostAfter = p.leases.SuspectAll, p.cfg.ReclaimAfter/2
	}
	reclaimer := &lease.Reclaimer{Store: store.NewHolders(p.db), Clock: quota.SystemClock{}, After: p.cfg.ReclaimAfter,
		Reclaimed: registerReclaimMetrics(p.registry, func(r lease.Reclaimed) {
			p.log.Info("took back the leases of processes gone for --reclaim-after",
				"holders", r.Holders, "leases", r.Leases, "units", r.Units)
		})}
	p.background.Go(func() {
		reclaimer.Run(p.bg, p.cfg.StoreTimeout+p.cfg.RequestTimeout, func(err error) {
			p.retrying("taking back dead processes' leases failed; will retry", err)
		})
	})
	p.background.Add(2)
	go func() { defer p.background.Done(); worker.Run(p.bg) }()
	go func() { defer p.background.Done(); listener.Run(p.bg) }()
	p.background.Go(func() { p.liveness.Run(p.bg) })
}

// applyKeyNotification applies another process's change of API keys: a
// revocation at once, before the notifications that follow; a creation
// once the key is read (without holding up the notifications); a deleted
// customer's keys at once.
func (p *instance) applyKeyNotification(n store.Notification) {
	if n.Local {
		return // applied by the keys service before it answered
	}
	switch n.Kind {
	case store.NotifyKeyRevoked:
		p.verifier.Revoke(n.Key)
	case store.NotifyForget:
		p.verifier.ForgetCustomer(n.Key)
	case store.NotifyKeyCreated:
		p.background.Go(func() {
			ctx, cancel := p.bounded()
			defer cancel()
			if err := p.verifier.Created(ctx, n.Key); err != nil {
				p.log.Warn("a new API key could not be read; it is accepted after the next reload", "id", n.Key, "error", err)
			}
		})
	}
}

// loadKeys (re)loads the live API keys, after every (re)connection of the
// listener: changes made while no connection listened are not heard. It
// runs in the listener, before the notifications that follow are handled;
// a failure is retried in the background, every second, until a load
// succeeds.
func (p *instance) loadKeys() {
	load := func() (int, error) {
		ctx, cancel := p.bounded()
		defer cancel()
		return p.verifier.Load(ctx)
	}
	n, err := load()
	if err == nil {
		p.log.Info("API keys loaded", "keys", n)
		return
	}
	p.log.Warn("API keys could not be loaded; retrying", "error", err)
	p.background.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-p.bg.Done():
				return
			case <-t.C:
			}
			if n, err := load(); err == nil {
				p.log.Info("API keys loaded", "keys", n)
				return
			}
		}
	})
}

// warm waits until changes from other processes are heard, so that
// nothing is cached that a missed notification could leave stale, then
// warms the cache (listening again purges it). After 10 s it serves
// anyway, the cache cold.
func (p *instance) warm(ctx context.Context) error {
	select {
	case <-p.listening:
		p.log.Info("listening for changes; this process holds leases as", "holder", uint32(p.db.Holder()))
		warmCache(ctx, p.cfg, p.db.History, p.cache, p.now(), p.log)
		return ctx.Err()
	case <-time.After(10 * time.Second):
		p.log.Warn("not yet listening for changes from other processes; serving anyway, the cache cold")
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startCheckWork starts the work done for checks: usage event detection
// and the engine's flushes. It starts after warming, which then has the
// pool to itself: start-up opens no more connections than it did before
// it warmed.
func (p *instance) startCheckWork() {
	p.applyPlanChanges()
	p.background.Go(func() {
		p.verifier.Run(p.bg, keys.FlushEvery, p.backgroundTimeout(), func(err error) { p.retrying("recording API keys' last use failed; will retry", err) })
	})
	p.background.Add(2)
	go func() {
		defer p.background.Done()
		p.detector.Run(p.bg, p.now, p.backgroundTimeout(), func(err error) { p.retrying("recording usage events failed; will retry", err) })
	}()
	go func() {
		defer p.background.Done()
		p.engine.Run(p.bg, func(err error) { p.retrying("background work failed; will retry", err) })
	}()
}

// api returns the API's handler.
func (p *instance) api(forwardRules *forwardauth.Rules) *api.Server {
	return api.New(api.Config{
		Metrics:          p.catalog,
		Plans:            p.catalog,
		Customers:        p.catalog,
		Overrides:        p.catalog,
		FeatureOverrides: p.catalog,
		Audit:            p.catalog,

		Checker:  p.engine,
		Features: tiers.NewFeatureChecker(p.cache, p.now),
		Ready: func(ctx context.Context) error {
			if p.draining.Load() {
				return &api.NotReadyError{Reason: "shutting down"}
			}
			return ready(ctx, p.cfg, p.db, p.engine)
		},

		RequestTimeout: p.cfg.RequestTimeout,
		Tokens:         p.cfg.tokens,
		Logger:         p.log,

		RefundRequiresRequestID: p.cfg.RefundRequiresRequestID,
		RateLimitHeaders:        p.cfg.rateLimitHeaders,

		Registry:    p.registry,
		ForwardAuth: forwardRules,
		Billing:     billing.NewService(p.db.Billing, p.now),
		Webhooks:    webhooks.NewService(p.db.Webhooks, p.now, p.cfg.WebhookAllowPrivate),

		Reservations: p.engine,
		Keys:         p.keys,
		Grants:       p.grants,
		KeyResolver:  p.verifier,
		Holders:      store.NewHolders(p.db),
		WhatIf:       &whatif.Service{Catalog: p.catalog, History: p.db.History, DayTimeout: p.cfg.RequestTimeout},
	})
}

// serveHTTP serves handler (and the debug listener and the gRPC rate
// limit service, if configured) until ctx ends, then drains the servers
// within the shutdown timeout and stops the background work.
func (p *instance) serveHTTP(ctx context.Context, handler *api.Server, rlsRules *rls.Rules) error {
	stopDebug, err := startDebug(p.cfg.DebugListen, p.log)
	if err != nil {
		return err
	}
	defer stopDebug()
	grpcSrv, err := p.startGRPC(rlsRules, handler.CountCheck)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", p.cfg.Listen)
	if err != nil {
		grpcSrv.shutdown(context.Background())
		return fmt.Errorf("%s: %w", p.cfg.from("listen"), err)
	}
	httpSrv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
	}
	serverErrors := make(chan error, 1)
	if p.tls != nil {
		httpSrv.TLSConfig = p.tls // ServeTLS offers HTTP/2 as well
		go func() { serverErrors <- httpSrv.ServeTLS(ln, "", "") }()
	} else {
		go func() { serverErrors <- httpSrv.Serve(ln) }()
	}
	p.log.Info("listening", "addr", ln.Addr().String(), "tls", p.tls != nil)

	select {
	case err := <-serverErrors:
		grpcSrv.shutdown(context.Background())
		return fmt.Errorf("serve: %w", err)
	case err := <-grpcSrv.Err():
		httpSrv.Close()
		return fmt.Errorf("grpc serve: %w", err)
	case <-ctx.Done():
	}
	// Readiness fails at once; requests are served for the drain, each
	// keep-alive connection closed after its next answer, so that load
	// balancers take the process out of rotation before it stops
	// listening and no client sends on a connection about to close.
	p.draining.Store(true)
	httpSrv.SetKeepAlivesEnabled(false)
	if d := p.cfg.DrainTimeout; d > 0 {
		p.log.Info("draining: /readyz answers 503, requests are still served", "drain_timeout", d.String())
		drain := time.NewTimer(d)
		<-drain.C
	}
	close(p.shutdownBegan)
	p.log.Info("shutting down", "timeout", p.cfg.ShutdownTimeout.String())
	// Requests in flight (and gRPC streams) get the shutdown timeout but a
	// quarter of it, at most 2 s, which giving back leases and flushing
	// keep. (net/http waits up to 5 s for a connection that sent nothing
	// yet: a client's spare one.)
	reserve := min(p.cfg.ShutdownTimeout/4, 2*time.Second)
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.ShutdownTimeout-reserve)
	defer cancel()
	grpcDone := make(chan struct{})
	go func() { grpcSrv.shutdown(shutdownCtx); close(grpcDone) }()
	err = httpSrv.Shutdown(shutdownCtx)
	if err != nil {
		httpSrv.Close()
		err = fmt.Errorf("shutdown: %w", err)
	}
	<-grpcDone
	p.stopBackground()
	if st := p.engine.Stats(); st.Leases.Unreturned > 0 || st.Debts.Owed > 0 {
		p.logUnreturned(slog.LevelError, "stopped with units not given back: leased ones stay counted until their windows end, degraded ones are never charged")
	}
	p.log.Info("stopped")
	return err
}

// tryListen binds each address quotad is to listen on, and lets it go: an
// address in use, not this host's or not allowed is refused before any
// store is connected to. (The listeners are bound for good once the stores
// are ready: bound now, a connection would wait, unanswered, until then.)
func tryListen(cfg *config) error {
	for _, a := range []struct{ name, addr string }{
		{"listen", cfg.Listen}, {"grpc-listen", cfg.GRPCListen}, {"debug-listen", cfg.DebugListen},
	} {
		if a.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", a.addr)
		if err != nil {
			return fmt.Errorf("%s: %w", cfg.from(a.name), err)
		}
		if err := ln.Close(); err != nil {
			return fmt.Errorf("%s: %w", cfg.from(a.name), err)
		}
	}
	return nil
}

// retrying logs msg, the failure of background work that will be retried,
// with err: at WARN, but at DEBUG when err is a store's unavailability (or
// a call's deadline) during an outage already logged at ERROR, so that an
// outage is not a line per retry.
func (p *instance) retrying(msg string, err error) {
	level := slog.LevelWarn
	unavailable := errors.Is(err, tiers.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
	if unavailable && (p.pgOutage.active() || p.redisOutage.active()) {
		level = slog.LevelDebug
	}
	p.log.Log(context.Background(), level, msg, "error", err)
}
