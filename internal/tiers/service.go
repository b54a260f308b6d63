package tiers

import (
	"context"
	"fmt"
	"time"
)

// Kind names what kind of catalog entry changed.
type Kind uint8

// The kinds of change.
const (
	MetricChanged Kind = iota + 1
	PlanChanged
	// CustomerChanged covers the customer and its overrides, of limits
	// and of features.
	CustomerChanged
)

// Change announces a committed write to the catalog, so that caches of it
// can drop what they hold for Key.
type Change struct {
	Kind Kind
	Key  string
	// Deleted: the entry no longer exists.
	Deleted bool
}

// Service is the catalog's admin interface: it validates input, writes it
// through the Store, and announces each committed change to its listeners.
type Service struct {
	store    Store
	audit    AuditLog
	now      func() time.Time
	onChange func(Change)
}

// NewService returns a Service over store, reading the audit log from
// audit. now is its clock; onChange, if not nil, is called after every
// committed write.
func NewService(store Store, audit AuditLog, now func() time.Time, onChange func(Change)) *Service {
	if onChange == nil {
		onChange = func(Change) {}
	}
	return &Service{store: store, audit: audit, now: now, onChange: onChange}
}

// put validates an entry, stores it with w (already stamped) and announces
// change; what names the entry in a store error.
func put[T any](ctx context.Context, s *Service, w Write, what string, change Change,
	validate func() (T, error), store func(context.Context, Write, T) (T, bool, error)) (T, bool, error) {
	var zero T
	v, err := validate()
	if err != nil {
		return zero, false, err
	}
	v, created, err := store(ctx, w, v)
	if err != nil {
		return zero, false, fmt.Errorf("put %s: %w", what, err)
	}
	s.onChange(change)
	return v, created, nil
}

// remove returns invalid if the caller's check of the address failed, and
// otherwise deletes with del under a stamped w and announces change; what
// names the entry in a store error.
func (s *Service) remove(ctx context.Context, w Write, invalid error, what string, change Change,
	del func(context.Context, Write) error) error {
	if invalid != nil {
		return invalid
	}
	if err := del(ctx, s.stamp(w)); err != nil {
		return fmt.Errorf("delete %s: %w", what, err)
	}
	s.onChange(change)
	return nil
}

func (s *Service) stamp(w Write) Write {
	w.At = Instant(s.now())
	return w
}

// Metric returns the metric key.
func (s *Service) Metric(ctx context.Context, key string) (Metric, error) {
	if err := CheckKey("metric", key); err != nil {
		return Metric{}, err
	}
	return s.store.FindMetric(ctx, key)
}

// Metrics returns one page of metrics by key.
func (s *Service) Metrics(ctx context.Context, page Page) ([]Metric, bool, error) {
	return s.store.FindMetrics(ctx, page)
}

// PutMetric creates or replaces the metric key. The rules of credit pools
// that span metrics are the store's to check, in the write's transaction.
func (s *Service) PutMetric(ctx context.Context, w Write, key string, spec MetricSpec) (Metric, bool, error) {
	return put(ctx, s, s.stamp(w), "metric["+key+"]", Change{Kind: MetricChanged, Key: key},
		func() (Metric, error) { return spec.Validate(key) }, s.store.PutMetric)
}

// DeleteMetric deletes the metric key unless a plan or override uses it or
// a credit pool names it; a pool's schema goes with it.
func (s *Service) DeleteMetric(ctx context.Context, w Write, key string) error {
	return s.remove(ctx, w, CheckKey("metric", key), "metric["+key+"]", Change{Kind: MetricChanged, Key: key, Deleted: true},
		func(ctx context.Context, w Write) error { return s.store.DeleteMetric(ctx, w, key) })
}

// Plan returns the plan key.
func (s *Service) Plan(ctx context.Context, key string) (Plan, error) {
	if err := CheckKey("plan", key); err != nil {
		return Plan{}, err
	}
	return s.store.FindPlan(ctx, key)
}

// Plans returns one page of plans by key.
func (s *Service) Plans(ctx context.Context, page Page) ([]Plan, bool, error) {
	return s.store.FindPlans(ctx, page)
}

// PutPlan creates or replaces the plan key; a change of its price, limits
// or features makes a new version, which its customers follow unless
// grandfather keeps them on the version they are on.
func (s *Service) PutPlan(ctx context.Context, w Write, key string, spec PlanSpec, grandfather bool) (Plan, bool, error) {
	return put(ctx, s, s.stamp(w), "plan["+key+"]", Change{Kind: PlanChanged, Key: key},
		func() (Plan, error) { return spec.Validate(key) },
		func(ctx context.Context, w Write, p Plan) (Plan, bool, error) {
			return s.store.PutPlan(ctx, w, p, grandfather)
		})
}

// DeletePlan deletes the plan key unless customers are on it.
func (s *Service) DeletePlan(ctx context.Context, w Write, key string) error {
	return s.remove(ctx, w, CheckKey("plan", key), "plan["+key+"]", Change{Kind: PlanChanged, Key: key, Deleted: true},
		func(ctx context.Context, w Write) error { return s.store.DeletePlan(ctx, w, key) })
}

// Customer returns the customer id.
func (s *Service) Customer(ctx context.Context, id string) (Customer, error) {
	if err := CheckCustomerID("customer", id); err != nil {
		return Customer{}, err
	}
	return s.store.FindCustomer(ctx, id)
}

// Customers returns one page of customers by id.
func (s *Service) Customers(ctx context.Context, f CustomerFilter) ([]Customer, bool, error) {
	if f.Plan != "" {
		if err := CheckKey("plan", f.Plan); err != nil {
			return nil, false, err
		}
	}
	return s.store.FindCustomers(ctx, f)
}

// PutCustomer creates or replaces the customer id.
func (s *Service) PutCustomer(ctx context.Context, w Write, id string, spec CustomerSpec) (Customer, bool, error) {
	w = s.stamp(w)
	return put(ctx, s, w, "customer["+id+"]", Change{Kind: CustomerChanged, Key: id},
		func() (Customer, error) { return spec.Validate(id, w.At) }, s.store.PutCustomer)
}

// DeleteCustomer deletes the customer id with its overrides and live
// counters; its usage history stays.
func (s *Service) DeleteCustomer(ctx context.Context, w Write, id string) error {
	return s.remove(ctx, w, CheckCustomerID("customer", id), "customer["+id+"]", Change{Kind: CustomerChanged, Key: id, Deleted: true},
		func(ctx context.Context, w Write) error { return s.store.DeleteCustomer(ctx, w, id) })
}

// Override returns the customer's override on metric+window, customer-wide
// or per subject as per says ("" is "customer").
func (s *Service) Override(ctx context.Context, customer, metric, window, per string) (Override, error) {
	k, err := overrideKey(customer, metric, window, per)
	if err != nil {
		return Override{}, err
	}
	o, err := s.store.FindOverride(ctx, customer, k)
	if err != nil {
		return Override{}, err
	}
	o.Expired = o.ExpiredAt(s.now())
	return o, nil
}

// Overrides returns one page of the customer's overrides, expired ones
// included and marked.
func (s *Service) Overrides(ctx context.Context, customer string, page Page) ([]Override, bool, error) {
	if err := CheckCustomerID("customer", customer); err != nil {
		return nil, false, err
	}
	list, more, err := s.store.FindOverrides(ctx, customer, page)
	if err != nil {
		return nil, false, err
	}
	now := s.now()
	for i := range list {
		list[i].Expired = list[i].ExpiredAt(now)
	}
	return list, more, nil
}

// PutOverride creates or replaces the customer's override on metric+window,
// customer-wide or per subject as per says ("" is "customer").
func (s *Service) PutOverride(ctx context.Context, w Write, customer, metric, window, per string, spec OverrideSpec) (Override, bool, error) {
	w = s.stamp(w)
	o, err := spec.Validate(customer, metric, window, per, w.At)
	if err != nil {
		return Override{}, false, err
	}
	saved, created, err := s.store.PutOverride(ctx, w, o)
	if err != nil {
		// Named by the override asked for: a failed store returns none.
		return Override{}, false, fmt.Errorf("put override[%s/%s]: %w", customer, o.Key(), err)
	}
	saved.Expired = saved.ExpiredAt(w.At)
	s.onChange(Change{Kind: CustomerChanged, Key: customer})
	return saved, created, nil
}

// DeleteOverride deletes the customer's override on metric+window,
// customer-wide or per subject as per says ("" is "customer").
func (s *Service) DeleteOverride(ctx context.Context, w Write, customer, metric, window, per string) error {
	k, err := overrideKey(customer, metric, window, per)
	return s.remove(ctx, w, err, fmt.Sprintf("override[%s/%s]", customer, k), Change{Kind: CustomerChanged, Key: customer},
		func(ctx context.Context, w Write) error { return s.store.DeleteOverride(ctx, w, customer, k) })
}

func overrideKey(customer, metric, window, per string) (LimitKey, error) {
	var p problems
	k := p.overrideKey(customer, metric, window, per)
	return k, p.err()
}

// Limits returns the customer's account and its effective limits now.
func (s *Service) Limits(ctx context.Context, id string) (Account, []EffectiveLimit, error) {
	if err := CheckCustomerID("customer", id); err != nil {
		return Account{}, nil, err
	}
	a, err := s.store.FindAccount(ctx, id)
	if err != nil {
		return Account{}, nil, err
	}
	now := s.now()
	a = a.At(now)
	return a, Effective(a.Plan, a.Overrides, now), nil
}

// PutFeatureOverride creates or replaces the customer's override of
// feature.
func (s *Service) PutFeatureOverride(ctx context.Context, w Write, customer, feature string, spec FeatureOverrideSpec) (FeatureOverride, bool, error) {
	w = s.stamp(w)
	o, created, err := put(ctx, s, w, "feature override["+customer+"/"+feature+"]", Change{Kind: CustomerChanged, Key: customer},
		func() (FeatureOverride, error) { return spec.Validate(customer, feature, w.At) }, s.store.PutFeatureOverride)
	if err != nil {
		return FeatureOverride{}, false, err
	}
	o.Expired = o.ExpiredAt(w.At)
	return o, created, nil
}

// DeleteFeatureOverride deletes the customer's override of feature.
func (s *Service) DeleteFeatureOverride(ctx context.Context, w Write, customer, feature string) error {
	return s.remove(ctx, w, CheckFeatureAddress(customer, feature), "feature override["+customer+"/"+feature+"]", Change{Kind: CustomerChanged, Key: customer},
		func(ctx context.Context, w Write) error {
			return s.store.DeleteFeatureOverride(ctx, w, customer, feature)
		})
}

// Features returns the customer's account, read from the store, and the
// features it is granted now (see Account.Features); its feature
// overrides come marked Expired as of now.
func (s *Service) Features(ctx context.Context, id string) (Account, map[string]FeatureValue, error) {
	if err := CheckCustomerID("customer", id); err != nil {
		return Account{}, nil, err
	}
	a, err := s.store.FindAccount(ctx, id)
	if err != nil {
		return Account{}, nil, err
	}
	now := s.now()
	a = a.At(now)
	for i := range a.FeatureOverrides {
		a.FeatureOverrides[i].Expired = a.FeatureOverrides[i].ExpiredAt(now)
	}
	return a, a.Features(now), nil
}

// AuditEvents returns audit events, newest first.
func (s *Service) AuditEvents(ctx context.Context, f AuditFilter) ([]AuditEvent, bool, error) {
	if f.Customer != "" {
		if err := CheckCustomerID("customer", f.Customer); err != nil {
			return nil, false, err
		}
	}
	return s.audit.FindAuditEvents(ctx, f)
}
