package main

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/webhooks"
)

// webhookWorkers is how many deliveries a process makes at once.
const webhookWorkers = 4

// newWebhookWorker returns the worker that delivers webhooks from the
// outbox: every quotad process runs one, and they share the work. It
// counts attempts in quotad_webhook_deliveries_total by outcome.
func newWebhookWorker(cfg *config, outbox *store.Outbox, log *slog.Logger, reg *prometheus.Registry) *webhooks.Worker {
	deliveries := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "quotad_webhook_deliveries_total",
		Help: "Webhook delivery attempts by outcome: delivered, retry (failed, to be tried again) or failed (given up).",
	}, []string{"outcome"})
	reg.MustRegister(deliveries)
	outcomes := map[webhooks.Status]prometheus.Counter{
		webhooks.Delivered: deliveries.WithLabelValues("delivered"),
		webhooks.Pending:   deliveries.WithLabelValues("retry"),
		webhooks.Failed:    deliveries.WithLabelValues("failed"),
	}
	backoff := webhooks.DefaultBackoff
	backoff.Base = cfg.WebhookRetryBase
	return &webhooks.Worker{
		Outbox:  outbox,
		Workers: webhookWorkers,
		Client:  webhooks.NewClient(cfg.WebhookTimeout, cfg.WebhookAllowPrivate),
		Backoff: backoff,
		Poll:    min(time.Second, cfg.WebhookRetryBase),
		// The outbox's calls are bounded as the rest of the background
		// work's are (see backgroundTimeout).
		StoreTimeout: cfg.RequestTimeout,
		Log:          log,
		Observe:      func(r webhooks.Result) { outcomes[r.Outcome.Status].Inc() },
	}
}

// registerDetectorMetrics exports what the usage event detector counts.
func registerDetectorMetrics(reg *prometheus.Registry, d *webhooks.Detector) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "quotad_usage_events_detected_total",
			Help: "Usage events this process noticed and handed to PostgreSQL (each is recorded once across processes).",
		}, func() float64 { return float64(d.Stats().Written) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "quotad_usage_events_dropped_total",
			Help: "Usage events dropped while PostgreSQL did not answer; the window's next check notices them again.",
		}, func() float64 { return float64(d.Stats().Dropped) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "quotad_usage_event_windows",
			Help: "Long windows whose events this process remembers noticing, until they end.",
		}, func() float64 { return float64(d.Stats().Windows) }),
	)
}
