package quota

import (
	"github.com/quotad/quotad/internal/tiers"
)

// Rule is what decides one window of a check: how far a customer's count
// may go, and, beyond that, whether the metric's spare capacity admits
// more. It is the one home of the admit, state, overage and retry rules;
// every counter decides through it.
type Rule struct {
	Mode  tiers.Mode
	Limit int64
	// Algorithm is how a short window counts (long windows: the zero
	// value, ignored).
	Algorithm tiers.Algorithm
	// Size is what the count is measured against before any soft or
	// elastic allowance: the limit, or a token bucket's burst. Remaining,
	// overage and states are reckoned from it.
	Size int64
	// Threshold: a count admits cost while count + cost <= Threshold. It
	// is the limit, or a soft limit's floor(limit*(100+percent)/100).
	Threshold int64
	// Spare: an elastic limit in a window where the metric declares a
	// capacity. Beyond Threshold such a window admits cost while the
	// metric's global usage plus cost stays within Capacity and the count
	// plus cost within Ceiling.
	Spare    bool
	Capacity int64
	Ceiling  int64
	// Rollover is, for a limit with a rollover, the most unused units of
	// the window before that become a grant in this one; 0: none.
	Rollover int64
}

// RuleFor resolves a limit of metric m into its rule.
func RuleFor(l tiers.Limit, m tiers.Metric) Rule {
	r := Rule{Mode: l.Mode, Limit: l.Limit, Algorithm: l.Algorithm, Size: l.Size(),
		Threshold: min(threshold(l), tiers.MaxLimit), Ceiling: tiers.MaxLimit}
	if l.Ceiling != nil {
		r.Ceiling = *l.Ceiling
	}
	if capacity, ok := m.Capacity[l.Window]; ok && l.Mode == tiers.Elastic {
		r.Spare, r.Capacity = true, capacity
	}
	if l.Rollover != nil {
		r.Rollover = l.Rollover.Max
	}
	return r
}

// Admits reports whether a window whose count is used admits cost, given
// the metric's global usage in that window, and whether only spare
// capacity admits it.
func (r Rule) Admits(used, global, cost int64) (ok, elastic bool) {
	if used+cost <= r.Threshold {
		return true, false
	}
	if r.Spare && global+cost <= r.Capacity && used+cost <= r.Ceiling {
		return true, true
	}
	return false, false
}

// Beyond reports whether the window may admit beyond its limit: a soft
// limit's overage, or an elastic limit's spare capacity.
func (r Rule) Beyond() bool { return r.Threshold > r.Size || r.Spare }

// Overage returns how many of cost units at the top of a count lie above
// a soft limit: for a check, the count after it; for a refund, the count
// before it (refunds give overage units back first). Hard and elastic
// limits have no overage.
func (r Rule) Overage(count, cost int64) int64 {
	if r.Mode != tiers.Soft {
		return 0
	}
	return min(cost, max(0, count-r.Size))
}

// State is how a window stands with count after a check (before it, for
// a window that denied).
func (r Rule) State(count int64, passed, elastic bool) State {
	switch {
	case !passed:
		return StateExceeded
	case r.Mode == tiers.Soft && count > r.Size:
		return StateOverage
	case elastic || (r.Mode == tiers.Elastic && count > r.Size):
		return StateElastic
	}
	return StateOK
}

// Retry returns the milliseconds until a window that denied admits the
// same cost, or -1 for never, from how long its count takes to admit the
// cost within the threshold (toThreshold) and within the ceiling
// (toCeiling), and the metric's global usage within the capacity
// (toCapacity); each of them is -1 when it never does. Spare capacity
// helps only when both the ceiling and the capacity admit.
func (r Rule) Retry(toThreshold, toCeiling, toCapacity int64) int64 {
	wait := toThreshold
	if r.Spare && toCeiling >= 0 && toCapacity >= 0 {
		if spare := max(toCeiling, toCapacity); wait < 0 || spare < wait {
			wait = spare
		}
	}
	return wait
}

// retrySeconds turns a wait in milliseconds into whole seconds, at least 1.
func retrySeconds(ms int64) int64 { return max(1, ceilDiv(ms, 1000)) }
