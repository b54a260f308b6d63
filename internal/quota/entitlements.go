package quota

import (
	"context"
	"slices"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// Entitlements is what a customer may use at At, as this process knows
// it: its account (plan, overrides), its features, and the usage of each
// of its effective limits.
type Entitlements struct {
	Account  tiers.Account
	At       time.Time
	Features map[string]tiers.FeatureValue
	// Usage lists the customer's windows, metric by metric (the order of
	// tiers.Effective), shortest window first; with a subject, the
	// subject's windows follow its metric's.
	Usage []Usage
}

// Entitlements returns the customer's entitlements at the engine's now,
// the windows of limits per subject for subject when it names one (else
// none of them), each as a check of one unit would find it (nothing is
// counted). It is answered as checks are: the catalog from memory, short
// windows where they are counted, long windows from this process's
// leases where it holds them, so a customer this process checks costs no
// store round trip; other processes' checks since its leases last heard
// from the store are not counted then (at most their leases' units). A
// window without a lease here is read from the store.
//
// Errors: *tiers.ValidationError, tiers.ErrCustomerNotFound,
// tiers.ErrUnavailable.
func (e *Engine) Entitlements(ctx context.Context, customer, subject string) (Entitlements, error) {
	if err := tiers.CheckCustomerID("customer", customer); err != nil {
		return Entitlements{}, err
	}
	if subject != "" && !tiers.ValidSubject(subject) {
		return Entitlements{}, tiers.Invalid("subject", tiers.SubjectRule)
	}
	s, ctx := e.set(ctx, e.timeout)
	defer s.free(&e.sets)
	acct, err := e.catalog.Account(ctx, customer)
	if err != nil {
		return Entitlements{}, err
	}
	acct = acct.At(s.at)
	s.accts = append(s.accts, acct)
	// The metrics of the effective limits, in tiers.Effective's order.
	var buf [8]string
	metrics := buf[:0]
	for i := range acct.Plan.Limits {
		if m := acct.Plan.Limits[i].Metric; !slices.Contains(metrics, m) {
			metrics = append(metrics, m)
		}
	}
	for i := range acct.Overrides {
		if o := &acct.Overrides[i]; !o.ExpiredAt(s.at) && !slices.Contains(metrics, o.Metric) {
			metrics = append(metrics, o.Metric)
		}
	}
	slices.Sort(metrics)
	for _, key := range metrics {
		m, err := e.catalog.Metric(ctx, key)
		if err != nil {
			return Entitlements{}, err
		}
		s.mets = append(s.mets, m)
	}
	for _, m := range metrics {
		s.spansOf(s.group(customer, m, "", 1, 1, 1))
		if subject != "" {
			s.spansOf(s.group(customer, m, subject, 1, 1, 1))
		}
	}
	if err := e.counters.short.Peek(ctx, s.short); err != nil {
		return Entitlements{}, err
	}
	if s.hasLong() {
		if err := e.counters.long.Peek(ctx, s.long); err != nil {
			return Entitlements{}, e.health.unavailable(err)
		}
	}
	return Entitlements{Account: acct, At: s.at, Features: acct.Features(s.at), Usage: s.usage()}, nil
}
