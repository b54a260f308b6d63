package tiers

import (
	"fmt"
	"maps"
	"slices"
)

// CheckCreditPools returns a *ValidationError unless the credit schema of
// m, a metric about to be written (MetricSpec.Validate has checked what
// it says on its own), keeps the rules that involve the other metrics:
// every metric it names is declared, is no pool itself (a pool draws on
// none) and draws on no other pool (a metric draws on at most one); and
// m, if it is a pool, draws on none. metrics holds the declared metrics
// with their credit schemas; m's own entry, if any, is its old value and
// is not looked at.
func CheckCreditPools(m Metric, metrics map[string]Metric) error {
	if len(m.CreditSchema) == 0 {
		return nil
	}
	pools := drawsOn(m.Key, metrics)
	var p problems
	if pool, ok := pools[m.Key]; ok {
		p.add("credit_schema", fmt.Sprintf("must be empty: the metric draws on pool %q, and a pool draws on none", pool))
	}
	for i, r := range m.CreditSchema {
		field := fmt.Sprintf("credit_schema[%d].metric", i)
		other, declared := metrics[r.Metric]
		pool, draws := pools[r.Metric]
		switch {
		case !declared:
			p.add(field, fmt.Sprintf("metric %q is not declared", r.Metric))
		case len(other.CreditSchema) > 0:
			p.add(field, fmt.Sprintf("metric %q is a credit pool, and a pool draws on none", r.Metric))
		case draws:
			p.add(field, fmt.Sprintf("metric %q draws on pool %q already, and a metric draws on at most one", r.Metric, pool))
		}
	}
	return p.err()
}

// drawsOn returns, for every metric some pool of metrics other than
// except names, that pool (the first by key, should several name it).
func drawsOn(except string, metrics map[string]Metric) map[string]string {
	out := make(map[string]string)
	for _, key := range slices.Sorted(maps.Keys(metrics)) {
		if key == except {
			continue
		}
		for _, r := range metrics[key].CreditSchema {
			if _, ok := out[r.Metric]; !ok {
				out[r.Metric] = key
			}
		}
	}
	return out
}
