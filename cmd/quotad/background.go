package main

import (
	"context"
	"time"
)

// backgroundTimeout bounds each PostgreSQL (or Redis) call of the
// background work: the webhook worker's claims and records, the usage
// event detector's and the API keys' flushes and loads, a deleted
// customer's short windows cleared. A PostgreSQL that answers slowly is
// waited for as a request is, up to --request-timeout; one gone silent
// holds no goroutine for longer (the engine's own work is bounded by
// quota.DefaultBackgroundTimeout).
func (p *instance) backgroundTimeout() time.Duration { return p.cfg.RequestTimeout }

// bounded returns the background work's context bounded by
// backgroundTimeout.
func (p *instance) bounded() (context.Context, context.CancelFunc) {
	return context.WithTimeout(p.bg, p.backgroundTimeout())
}
