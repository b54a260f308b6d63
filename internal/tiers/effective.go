package tiers

import (
	"cmp"
	"slices"
	"time"
)

// Source tells where an effective limit comes from.
type Source string

// The sources of an effective limit.
const (
	FromPlan     Source = "plan"
	FromOverride Source = "override"
)

// EffectiveLimit is one limit that applies to a customer now.
type EffectiveLimit struct {
	Limit
	Source    Source     `json:"source"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// Effective lays the customer's unexpired overrides over its plan's limits:
// an override replaces the plan's limit on its metric+window+per (a
// per-subject override the plan's limit per subject, a customer-wide one
// the customer-wide limit), or adds one. The result is ordered by metric,
// then window from shortest to longest, then the customer's limit before
// the one per subject. It is a pure function of its inputs, so callers
// may run it on cached values.
func Effective(plan Plan, overrides []Override, now time.Time) []EffectiveLimit {
	out := make([]EffectiveLimit, 0, len(plan.Limits)+len(overrides))
	live := make(map[LimitKey]Override, len(overrides))
	for _, o := range overrides {
		if !o.ExpiredAt(now) {
			live[o.Key()] = o
		}
	}
	for _, l := range plan.Limits {
		if _, replaced := live[l.Key()]; replaced {
			continue
		}
		out = append(out, EffectiveLimit{Limit: l, Source: FromPlan})
	}
	for _, o := range overrides {
		if o.ExpiredAt(now) {
			continue
		}
		out = append(out, EffectiveLimit{Limit: o.Limit, Source: FromOverride, ExpiresAt: o.ExpiresAt})
	}
	slices.SortFunc(out, func(a, b EffectiveLimit) int {
		return CompareLimitKeys(a.Key(), b.Key())
	})
	return out
}

// CompareLimitKeys orders limit keys as the catalog lists limits: by
// metric, then window from shortest to longest, then the customer's before
// the one per subject.
func CompareLimitKeys(a, b LimitKey) int {
	return cmp.Or(cmp.Compare(a.Metric, b.Metric), cmp.Compare(a.Window, b.Window), cmp.Compare(a.Per, b.Per))
}

// NextExpiry returns the earliest expiry after now among overrides, or the
// zero time: until then, Effective's answer does not change.
func NextExpiry(overrides []Override, now time.Time) time.Time {
	var next time.Time
	for _, o := range overrides {
		if o.ExpiresAt == nil || !o.ExpiresAt.After(now) {
			continue
		}
		if next.IsZero() || o.ExpiresAt.Before(next) {
			next = *o.ExpiresAt
		}
	}
	return next
}
