package quota

import (
	"context"

	"github.com/quotad/quotad/internal/tiers"
)

// upgrade returns the plan to offer with d, a denied check of one metric
// of set s, from catalog, or nil: only when every window that denied it is a hard limit
// of the check's metric (a credit pool's, a soft or an elastic limit's
// denial offers none), from the public plans the catalog holds in
// memory. A catalog that cannot list them offers none: the denial stands
// as it is.
func upgrade(ctx context.Context, catalog Catalog, s *set, d *Decision) *tiers.Upgrade {
	acct := s.account(d.Customer)
	if acct == nil || d.Degraded {
		return nil
	}
	tripped := -1
	for i := range d.Limits {
		w := &d.Limits[i]
		if w.State != StateExceeded {
			continue
		}
		if w.Mode != tiers.Hard || windowMetric(w, d.Metric) != d.Metric {
			return nil
		}
		if tripped < 0 || w.Remaining < d.Limits[tripped].Remaining {
			tripped = i // the window the answer's detail names
		}
	}
	if tripped < 0 {
		return nil
	}
	// Every window of the metric the check knows the usage of: the
	// tripped one first.
	needs := make([]tiers.Need, 0, len(d.Limits))
	needs = append(needs, need(&d.Limits[tripped], d.Metric, d.Cost))
	for i := range d.Limits {
		if w := &d.Limits[i]; i != tripped && windowMetric(w, d.Metric) == d.Metric {
			needs = append(needs, need(w, d.Metric, d.Cost))
		}
	}
	plans, err := catalog.PublicPlans(ctx)
	if err != nil {
		return nil
	}
	u, ok := tiers.CheapestUpgrade(plans, acct.Plan, needs)
	if !ok {
		return nil
	}
	return &u
}

// need is the room a check of metric and cost needs in window w.
func need(w *WindowResult, metric string, cost int64) tiers.Need {
	n := tiers.Need{Metric: windowMetric(w, metric), Window: w.Window, Units: w.Used + cost}
	if w.Subject != "" {
		n.Per = tiers.PerSubject
	}
	return n
}

// windowMetric is the metric window w counts: its own, or metric, the
// check's, where it names none.
func windowMetric(w *WindowResult, metric string) string {
	if w.Metric == "" {
		return metric
	}
	return w.Metric
}
