package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
)

// warmDays is how many days of usage history, today's included, make a
// customer active for warming.
const warmDays = 2

// warmCache loads into cache, before quotad serves, the customers active
// today and yesterday (UTC), the most recently and most used first: up to
// --warm-customers of them, for at most --warm-timeout, in batches of the
// cache's. Without it, every first check of a customer after a restart
// waits for PostgreSQL. When the time runs out quotad serves anyway, with
// what was loaded; a failure only costs the warmth. It logs the outcome.
func warmCache(ctx context.Context, cfg *config, history *store.History, cache *tiers.Cache, now time.Time, log *slog.Logger) {
	if cfg.WarmCustomers == 0 {
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, cfg.WarmTimeout)
	defer cancel()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	ids, err := history.FindActiveCustomers(ctx, today.AddDate(0, 0, 1-warmDays), cfg.WarmCustomers)
	loaded := 0
	if err == nil {
		loaded, err = cache.Warm(ctx, ids)
	}
	attrs := []any{"customers", loaded, "active", len(ids), "duration_ms", time.Since(start).Milliseconds()}
	if err != nil {
		log.Warn("cache warming stopped early; serving anyway", append(attrs, "error", err)...)
		return
	}
	log.Info("cache warmed", attrs...)
}

// registerCacheMetrics exports what the catalog cache loads and holds.
func registerCacheMetrics(reg *prometheus.Registry, cache *tiers.Cache) {
	loads := func(kind string, v func(tiers.CacheStats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "quotad_catalog_loads_total",
			Help:        "Catalog entries the cache loaded from PostgreSQL, by kind: customer (each customer of every batch, warming included) or metric.",
			ConstLabels: prometheus.Labels{"kind": kind},
		}, func() float64 { return float64(v(cache.Stats())) })
	}
	reg.MustRegister(
		loads("customer", func(s tiers.CacheStats) uint64 { return s.CustomerLoads }),
		loads("metric", func(s tiers.CacheStats) uint64 { return s.MetricLoads }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "quotad_catalog_customer_batches_total",
			Help: "Loads of customers from PostgreSQL: one statement each, for up to 1000 customers.",
		}, func() float64 { return float64(cache.Stats().CustomerBatches) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "quotad_catalog_customers",
			Help: "Customers the cache holds, those known not to exist included.",
		}, func() float64 { return float64(cache.Stats().Customers) }),
	)
}
