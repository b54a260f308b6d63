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
	m, err := spec.Validate(key)
	if err != nil {
		return Metric{}, false, err
	}
	m, created, err := s.store.PutMetric(ctx, s.stamp(w), m)
	if err != nil {
		return Metric{}, false, fmt.Errorf("put metric[%s]: %w", key, err)
	}
	s.onChange(Change{Kind: MetricChanged, Key: key})
	return m, created, nil
}

// DeleteMetric deletes the metric key unless a plan or override uses it or
// a credit pool names it; a pool's schema goes with it.
func (s *Service) DeleteMetric(ctx context.Context, w Write, key string) error {
	if err := CheckKey("metric", key); err != nil {
		return err
	}
	if err := s.store.DeleteMetric(ctx, s.stamp(w), key); err != nil {
		return fmt.Errorf("delete metric[%s]: %w", key, err)
	}
	s.onChange(Change{Kind: MetricChanged, Key: key, Deleted: true})
	return nil
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
	p, err := spec.Validate(key)
	if err != nil {
		return Plan{}, false, err
	}
	p, created, err := s.store.PutPlan(ctx, s.stamp(w), p, grandfather)
	if err != nil {
		return Plan{}, false, fmt.Errorf("put plan[%s]: %w", key, err)
	}
	s.onChange(Change{Kind: PlanChanged, Key: key})
	return p, created, nil
}

// DeletePlan deletes the plan key unless customers are on it.
func (s *Service) DeletePlan(ctx context.Context, w Write, key string) error {
	if err := CheckKey("plan", key); err != nil {
		return err
	}
	if err := s.store.DeletePlan(ctx, s.stamp(w), key); err != nil {
		return fmt.Errorf("delete plan[%s]: %w", key, err)
	}
	s.onChange(Change{Kind: PlanChanged, Key: key, Deleted: true})
	return nil
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
	c, err := spec.Validate(id, w.At)
	if err != nil {
		return Customer{}, false, err
	}
	c, created, err := s.store.PutCustomer(ctx, w, c)
	if err != nil {
		return Customer{}, false, fmt.Errorf("put customer[%s]: %w", id, err)
	}
	s.onChange(Change{Kind: CustomerChanged, Key: id})
	return c, created, nil
}

// DeleteCustomer deletes the customer id with its overrides and live
// counters; its usage history stays.
func (s *Service) DeleteCustomer(ctx context.Context, w Write, id string) error {
	if err := CheckCustomerID("customer", id); err != nil {
		return err
	}
	if err := s.store.DeleteCustomer(ctx, s.stamp(w), id); err != nil {
		return fmt.Errorf("delete customer[%s]: %w", id, err)
	}
	s.onChange(Change{Kind: CustomerChanged, Key: id, Deleted: true})
	return nil
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
	o, created, err := s.store.PutOverride(ctx, w, o)
	if err != nil {
		return Override{}, false, fmt.Errorf("put override[%s/%s]: %w", customer, o.Key(), err)
	}
	o.Expired = o.ExpiredAt(w.At)
	s.onChange(Change{Kind: CustomerChanged, Key: customer})
	return o, created, nil
}

// DeleteOverride deletes the customer's override on metric+window,
// customer-wide or per subject as per says ("" is "customer").
func (s *Service) DeleteOverride(ctx context.Context, w Write, customer, metric, window, per string) error {
	k, err := overrideKey(customer, metric, window, per)
	if err != nil {
		return err
	}
	if err := s.store.DeleteOverride(ctx, s.stamp(w), customer, k); err != nil {
		return fmt.Errorf("delete override[%s/%s]: %w", customer, k, err)
	}
	s.onChange(Change{Kind: CustomerChanged, Key: customer})
	return nil
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
	o, err := spec.Validate(customer, feature, w.At)
	if err != nil {
		return FeatureOverride{}, false, err
	}
	o, created, err := s.store.PutFeatureOverride(ctx, w, o)
	if err != nil {
		return FeatureOverride{}, false, fmt.Errorf("put feature override[%s/%s]: %w", customer, feature, err)
	}
	o.Expired = o.ExpiredAt(w.At)
	s.onChange(Change{Kind: CustomerChanged, Key: customer})
	return o, created, nil
}

// DeleteFeatureOverride deletes the customer's override of feature.
func (s *Service) DeleteFeatureOverride(ctx context.Context, w Write, customer, feature string) error {
	if err := CheckFeatureAddress(customer, feature); err != nil {
		return err
	}
	if err := s.store.DeleteFeatureOverride(ctx, s.stamp(w), customer, feature); err != nil {
		return fmt.Errorf("delete feature override[%s/%s]: %w", customer, feature, err)
	}
	s.onChange(Change{Kind: CustomerChanged, Key: customer})
	return nil
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
