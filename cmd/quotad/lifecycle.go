package main

import (
	"context"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// planChangesEvery is how often a process looks for scheduled plan
// changes and trial ends that are due. Checks do not wait for it: they
// resolve the plan in effect at their own time from the account they hold
// (see tiers.Account.At); applying writes the change into the customer's
// row, the audit log, the billing terms (at the change's instant) and the
// webhooks.
const planChangesEvery = time.Second

// applyPlanChanges starts the background work that applies customers' due
// plan changes; every process runs it, and each change is applied once.
func (p *instance) applyPlanChanges() {
	p.background.Go(func() {
		runPlanChanges(p.bg, planChangesEvery, func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, p.backgroundTimeout())
			defer cancel()
			return tiers.ApplyDue(ctx, p.db.Catalog, p.now(), p.cache.Invalidate)
		}, func(err error) { p.retrying("applying scheduled plan changes failed; will retry", err) })
	})
}

// runPlanChanges calls apply every interval until ctx ends, telling
// failed of its errors.
func runPlanChanges(ctx context.Context, every time.Duration, apply func(context.Context) error, failed func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := apply(ctx); err != nil && ctx.Err() == nil {
			failed(err)
		}
	}
}
