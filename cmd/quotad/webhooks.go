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
		Log:     log,
		Observe: func(r webhooks.Result) { outcomes[r.Outcome.Status].Inc() },
	}
}
