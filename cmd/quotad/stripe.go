package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotad/quotad/internal/meters"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/webhooks"
)

// stripeSenders is how many connections of the outbox's pool the Stripe
// sender uses: one when it runs.
func stripeSenders(cfg *config) int {
	if len(cfg.stripeMeters) == 0 {
		return 0
	}
	return 1
}

// newStripeSender returns the sender of usage to Stripe Billing meters, or
// nil when --stripe-meters names no metric. Every quotad process runs one:
// cuts are serialized in PostgreSQL and each event is claimed by one
// sender; it works over the outbox's pool, so that a slow Stripe holds no
// connection checks wait for. It exports quotad_stripe_meter_events_total by outcome,
// quotad_stripe_skipped_total (usage of customers without
// metadata.stripe_customer_id) and the outbox's lag and size.
func newStripeSender(cfg *config, db *store.Outbox, log *slog.Logger, reg *prometheus.Registry) *meters.Sender {
	if len(cfg.stripeMeters) == 0 {
		return nil
	}
	sent := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "quotad_stripe_meter_events_total",
		Help: "Stripe meter event attempts by outcome: delivered, retry (failed, to be tried again) or failed (given up).",
	}, []string{"outcome"})
	skipped := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "quotad_stripe_skipped_total",
		Help: "Customer and metric sums not sent to Stripe: the customer has no metadata.stripe_customer_id.",
	})
	reg.MustRegister(sent, skipped)
	outcomes := map[webhooks.Status]prometheus.Counter{
		webhooks.Delivered: sent.WithLabelValues("delivered"),
		webhooks.Pending:   sent.WithLabelValues("retry"),
		webhooks.Failed:    sent.WithLabelValues("failed"),
	}
	stats := func() meters.Stats {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.RequestTimeout)
		defer cancel()
		s, err := db.MeterStats(ctx)
		if err != nil {
			log.Warn("stripe outbox unreadable", "error", err)
		}
		return s
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "quotad_stripe_outbox_lag_seconds",
			Help: "Age of the oldest meter event Stripe has not acknowledged; 0 when none waits.",
		}, func() float64 {
			if s := stats(); !s.Oldest.IsZero() {
				return time.Since(s.Oldest).Seconds()
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "quotad_stripe_outbox_pending",
			Help: "Meter events waiting to be sent to Stripe.",
		}, func() float64 { return float64(stats().Pending) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "quotad_stripe_outbox_failed",
			Help: "Meter events given up after the retry window, kept in the outbox for an operator.",
		}, func() float64 { return float64(stats().Failed) }),
	)
	backoff := webhooks.DefaultBackoff
	backoff.Base = cfg.WebhookRetryBase
	return &meters.Sender{
		Outbox: db, APIBase: cfg.StripeAPIBase, APIKey: cfg.StripeAPIKey, Meters: cfg.stripeMeters,
		Client:     webhooks.NewClient(cfg.WebhookTimeout, true), // an operator's URL
		Backoff:    backoff,
		Log:        log,
		Observe:    func(_ meters.Event, o webhooks.Outcome) { outcomes[o.Status].Inc() },
		ObserveCut: func(c meters.Cut) { skipped.Add(float64(c.Skipped)) },
	}
}
