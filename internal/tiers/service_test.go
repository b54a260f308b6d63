package tiers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// memStore is an in-memory Store: enough of the real one's rules
// (versions, If-Match, parents before children, declared metrics, known
// plans) to drive Service, plus a record of the writes it received.
type memStore struct {
	mu        sync.Mutex
	metrics   map[string]Metric
	plans     map[string]Plan
	customers map[string]Customer
	overrides map[string]map[LimitKey]Override
	features  map[string]map[string]FeatureOverride
	writes    []Write
	fail      error // when set, every write fails with it
}

func newMemStore() *memStore {
	return &memStore{
		metrics:   map[string]Metric{},
		plans:     map[string]Plan{},
		customers: map[string]Customer{},
		overrides: map[string]map[LimitKey]Override{},
		features:  map[string]map[string]FeatureOverride{},
	}
}

// write records w and runs the checks every write shares.
func (s *memStore) write(w Write, exists bool, version int64) error {
	s.writes = append(s.writes, w)
	if s.fail != nil {
		return s.fail
	}
	return w.IfMatch.Check(exists, version)
}

// stamp sets version and times as the store does on a put.
func stamp(w Write, exists bool, oldVersion int64, created time.Time) (version int64, createdAt time.Time) {
	if !exists {
		return 1, w.At
	}
	return oldVersion + 1, created
}

func sortedValues[K comparable, V any](m map[K]V, key func(V) string) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b V) int { return strings.Compare(key(a), key(b)) })
	return out
}

func (s *memStore) FindMetric(_ context.Context, key string) (Metric, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.metrics[key]
	if !ok {
		return Metric{}, ErrMetricNotFound
	}
	return m, nil
}

func (s *memStore) FindMetrics(_ context.Context, _ Page) ([]Metric, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedValues(s.metrics, func(m Metric) string { return m.Key }), false, nil
}

func (s *memStore) PutMetric(_ context.Context, w Write, m Metric) (Metric, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.metrics[m.Key]
	if err := s.write(w, exists, old.Version); err != nil {
		return Metric{}, false, err
	}
	m.Version, m.CreatedAt = stamp(w, exists, old.Version, old.CreatedAt)
	m.UpdatedAt = w.At
	s.metrics[m.Key] = m
	return m, !exists, nil
}

func (s *memStore) DeleteMetric(_ context.Context, w Write, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.metrics[key]
	if err := s.write(w, exists, old.Version); err != nil {
		return err
	}
	if !exists {
		return ErrMetricNotFound
	}
	for _, p := range s.plans {
		for _, l := range p.Limits {
			if l.Metric == key {
				return ErrMetricInUse
			}
		}
	}
	delete(s.metrics, key)
	return nil
}

func (s *memStore) FindPlan(_ context.Context, key string) (Plan, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.plans[key]
	if !ok {
		return Plan{}, ErrPlanNotFound
	}
	return p, nil
}

func (s *memStore) FindPlans(_ context.Context, _ Page) ([]Plan, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedValues(s.plans, func(p Plan) string { return p.Key }), false, nil
}

func (s *memStore) PutPlan(_ context.Context, w Write, p Plan, _ bool) (Plan, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.plans[p.Key]
	if err := s.write(w, exists, old.Version); err != nil {
		return Plan{}, false, err
	}
	for i, l := range p.Limits {
		if _, ok := s.metrics[l.Metric]; !ok {
			return Plan{}, false, Invalid(fmt.Sprintf("limits[%d].metric", i), "is not declared")
		}
	}
	p.Version, p.CreatedAt = stamp(w, exists, old.Version, old.CreatedAt)
	p.UpdatedAt = w.At
	s.plans[p.Key] = p
	return p, !exists, nil
}

// The fake keeps no versions: the store's tests cover them.

func (s *memStore) FindPlanVersion(context.Context, string, int64) (PlanVersion, error) {
	return PlanVersion{}, ErrPlanVersionNotFound
}

func (s *memStore) FindPlanVersions(context.Context, string, Page) ([]PlanVersion, bool, error) {
	return nil, false, nil
}

func (s *memStore) FindPlanMigration(context.Context, string, *int64, *int64) (PlanMigration, error) {
	return PlanMigration{}, ErrPlanVersionNotFound
}

func (s *memStore) MigratePlan(context.Context, Write, string, *int64, int64) ([]VersionedCustomer, error) {
	return nil, ErrPlanVersionNotFound
}

func (s *memStore) DeletePlan(_ context.Context, w Write, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.plans[key]
	if err := s.write(w, exists, old.Version); err != nil {
		return err
	}
	if !exists {
		return ErrPlanNotFound
	}
	for _, c := range s.customers {
		if c.Plan == key {
			return ErrPlanInUse
		}
	}
	delete(s.plans, key)
	return nil
}

func (s *memStore) FindCustomer(_ context.Context, id string) (Customer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.customers[id]
	if !ok {
		return Customer{}, ErrCustomerNotFound
	}
	return c, nil
}

func (s *memStore) FindCustomers(_ context.Context, f CustomerFilter) ([]Customer, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Customer
	for _, c := range sortedValues(s.customers, func(c Customer) string { return c.ID }) {
		q := strings.ToLower(f.Query)
		if (f.Plan == "" || c.Plan == f.Plan) && (q == "" || strings.Contains(strings.ToLower(c.ID), q) || strings.Contains(strings.ToLower(c.Name), q)) {
			out = append(out, c)
		}
	}
	return out, false, nil
}

func (s *memStore) PutCustomer(_ context.Context, w Write, c Customer) (Customer, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.customers[c.ID]
	if err := s.write(w, exists, old.Version); err != nil {
		return Customer{}, false, err
	}
	if _, ok := s.plans[c.Plan]; !ok {
		return Customer{}, false, Invalid("plan", "does not exist")
	}
	if exists {
		c.Anchor = old.Anchor.Change(c.Anchor, w.At)
	}
	c.Version, c.CreatedAt = stamp(w, exists, old.Version, old.CreatedAt)
	c.UpdatedAt = w.At
	s.customers[c.ID] = c
	return c, !exists, nil
}

func (s *memStore) DeleteCustomer(_ context.Context, w Write, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.customers[id]
	if err := s.write(w, exists, old.Version); err != nil {
		return err
	}
	if !exists {
		return ErrCustomerNotFound
	}
	delete(s.customers, id)
	delete(s.overrides, id)
	return nil
}

func (s *memStore) FindOverride(_ context.Context, customer string, k LimitKey) (Override, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.customers[customer]; !ok {
		return Override{}, ErrCustomerNotFound
	}
	o, ok := s.overrides[customer][k]
	if !ok {
		return Override{}, ErrOverrideNotFound
	}
	return o, nil
}

func (s *memStore) overridesOf(customer string) []Override {
	return sortedValues(s.overrides[customer], func(o Override) string { return o.Key().String() })
}

func (s *memStore) FindOverrides(_ context.Context, customer string, _ Page) ([]Override, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.customers[customer]; !ok {
		return nil, false, ErrCustomerNotFound
	}
	return s.overridesOf(customer), false, nil
}

func (s *memStore) PutOverride(_ context.Context, w Write, o Override) (Override, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.overrides[o.Customer][o.Key()]
	if err := s.write(w, exists, old.Version); err != nil {
		return Override{}, false, err
	}
	if _, ok := s.customers[o.Customer]; !ok {
		return Override{}, false, ErrCustomerNotFound
	}
	if _, ok := s.metrics[o.Metric]; !ok {
		return Override{}, false, ErrMetricNotFound
	}
	o.Version, o.CreatedAt = stamp(w, exists, old.Version, old.CreatedAt)
	o.UpdatedAt = w.At
	if s.overrides[o.Customer] == nil {
		s.overrides[o.Customer] = map[LimitKey]Override{}
	}
	s.overrides[o.Customer][o.Key()] = o
	return o, !exists, nil
}

func (s *memStore) DeleteOverride(_ context.Context, w Write, customer string, k LimitKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.overrides[customer][k]
	if err := s.write(w, exists, old.Version); err != nil {
		return err
	}
	if _, ok := s.customers[customer]; !ok {
		return ErrCustomerNotFound
	}
	if !exists {
		return ErrOverrideNotFound
	}
	delete(s.overrides[customer], k)
	return nil
}

func (s *memStore) PutFeatureOverride(_ context.Context, w Write, o FeatureOverride) (FeatureOverride, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.features[o.Customer][o.Feature]
	if err := s.write(w, exists, old.Version); err != nil {
		return FeatureOverride{}, false, err
	}
	if _, ok := s.customers[o.Customer]; !ok {
		return FeatureOverride{}, false, ErrCustomerNotFound
	}
	o.Version, o.CreatedAt = stamp(w, exists, old.Version, old.CreatedAt)
	o.UpdatedAt = w.At
	if s.features[o.Customer] == nil {
		s.features[o.Customer] = map[string]FeatureOverride{}
	}
	s.features[o.Customer][o.Feature] = o
	return o, !exists, nil
}

func (s *memStore) DeleteFeatureOverride(_ context.Context, w Write, customer, feature string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.features[customer][feature]
	if err := s.write(w, exists, old.Version); err != nil {
		return err
	}
	if _, ok := s.customers[customer]; !ok {
		return ErrCustomerNotFound
	}
	if !exists {
		return ErrFeatureOverrideNotFound
	}
	delete(s.features[customer], feature)
	return nil
}

func (s *memStore) FindAccount(_ context.Context, id string) (Account, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.customers[id]
	if !ok {
		return Account{}, ErrCustomerNotFound
	}
	return Account{Customer: c, Plan: s.plans[c.Plan], Overrides: s.overridesOf(id),
		FeatureOverrides: sortedValues(s.features[id], func(o FeatureOverride) string { return o.Feature })}, nil
}

func (s *memStore) FindAuditEvents(_ context.Context, _ AuditFilter) ([]AuditEvent, bool, error) {
	return nil, false, nil
}

// testService is a Service over a memStore with a settable clock and a
// record of the changes it announced.
type testService struct {
	*Service
	store   *memStore
	now     time.Time
	changes []Change
}

func newTestService() *testService {
	ts := &testService{store: newMemStore(), now: t0}
	ts.Service = NewService(ts.store, ts.store, func() time.Time { return ts.now }, func(c Change) { ts.changes = append(ts.changes, c) })
	return ts
}

// seed declares metric api_calls, plan pro and customer acme on it.
func (ts *testService) seed(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := ts.PutMetric(ctx, Write{}, "api_calls", MetricSpec{}); err != nil {
		t.Fatalf("seed metric: %v", err)
	}
	if _, _, err := ts.PutPlan(ctx, Write{}, "pro", PlanSpec{Limits: []LimitSpec{
		limitSpec("api_calls", "second", 50), limitSpec("api_calls", "day", 1000),
	}}, false); err != nil {
		t.Fatalf("seed plan: %v", err)
	}
	if _, _, err := ts.PutCustomer(ctx, Write{}, "acme", CustomerSpec{Plan: ptr("pro")}); err != nil {
		t.Fatalf("seed customer: %v", err)
	}
	ts.changes = nil
	ts.store.writes = nil
}

// TestServiceRejectsBadInputBeforeTheStore checks that invalid input is a
// *ValidationError naming the field, and that nothing reaches the store or
// is announced.
func TestServiceRejectsBadInputBeforeTheStore(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		call      func(s *Service) error
		wantField string
	}{
		{"put metric, bad key", func(s *Service) error {
			_, _, err := s.PutMetric(ctx, Write{}, "API", MetricSpec{})
			return err
		}, "metric"},
		{"put metric, bad capacity", func(s *Service) error {
			_, _, err := s.PutMetric(ctx, Write{}, "m", MetricSpec{Capacity: map[string]*int64{"day": ptr[int64](-1)}})
			return err
		}, "capacity.day"},
		{"delete metric, bad key", func(s *Service) error { return s.DeleteMetric(ctx, Write{}, "a b") }, "metric"},
		{"get metric, bad key", func(s *Service) error { _, err := s.Metric(ctx, ""); return err }, "metric"},
		{"put plan, bad limit", func(s *Service) error {
			_, _, err := s.PutPlan(ctx, Write{}, "pro", PlanSpec{Limits: []LimitSpec{{Metric: "m", Window: "year", Limit: ptr[int64](1)}}}, false)
			return err
		}, "limits[0].window"},
		{"delete plan, bad key", func(s *Service) error { return s.DeletePlan(ctx, Write{}, "Pro") }, "plan"},
		{"get plan, bad key", func(s *Service) error { _, err := s.Plan(ctx, "Pro"); return err }, "plan"},
		{"put customer, anchor day 31", func(s *Service) error {
			_, _, err := s.PutCustomer(ctx, Write{}, "acme", CustomerSpec{Plan: ptr("pro"), BillingAnchorDay: ptr[int64](31)})
			return err
		}, "billing_anchor_day"},
		{"delete customer, bad id", func(s *Service) error { return s.DeleteCustomer(ctx, Write{}, "-x") }, "customer"},
		{"get customer, bad id", func(s *Service) error { _, err := s.Customer(ctx, "a b"); return err }, "customer"},
		{"list customers, bad plan filter", func(s *Service) error {
			_, _, err := s.Customers(ctx, CustomerFilter{Plan: "Pro"})
			return err
		}, "plan"},
		{"put override, expires now", func(s *Service) error {
			_, _, err := s.PutOverride(ctx, Write{}, "acme", "api_calls", "day", "", OverrideSpec{Limit: ptr[int64](1), ExpiresAt: ptr(t0)})
			return err
		}, "expires_at"},
		{"put override, bad window", func(s *Service) error {
			_, _, err := s.PutOverride(ctx, Write{}, "acme", "api_calls", "year", "", OverrideSpec{Limit: ptr[int64](1)})
			return err
		}, "window"},
		{"delete override, bad metric", func(s *Service) error {
			return s.DeleteOverride(ctx, Write{}, "acme", "API", "day", "")
		}, "metric"},
		{"put override, bad per", func(s *Service) error {
			_, _, err := s.PutOverride(ctx, Write{}, "acme", "api_calls", "day", "users", OverrideSpec{Limit: ptr[int64](1)})
			return err
		}, "per"},
		{"put override, a body that contradicts its address", func(s *Service) error {
			_, _, err := s.PutOverride(ctx, Write{}, "acme", "api_calls", "day", "", OverrideSpec{Limit: ptr[int64](1), Per: ptr("subject")})
			return err
		}, "per"},
		{"delete override, bad per", func(s *Service) error {
			return s.DeleteOverride(ctx, Write{}, "acme", "api_calls", "day", "SUBJECT")
		}, "per"},
		{"get override, bad per", func(s *Service) error {
			_, err := s.Override(ctx, "acme", "api_calls", "day", "customers")
			return err
		}, "per"},
		{"get override, bad customer", func(s *Service) error {
			_, err := s.Override(ctx, "", "api_calls", "day", "")
			return err
		}, "customer"},
		{"list overrides, bad customer", func(s *Service) error {
			_, _, err := s.Overrides(ctx, "a/b", Page{})
			return err
		}, "customer"},
		{"limits, bad customer", func(s *Service) error { _, _, err := s.Limits(ctx, "a b"); return err }, "customer"},
		{"audit, bad customer filter", func(s *Service) error {
			_, _, err := s.AuditEvents(ctx, AuditFilter{Customer: "a b"})
			return err
		}, "customer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestService()
			ts.seed(t)
			checkFields(t, tc.call(ts.Service), tc.wantField)
			if n := len(ts.store.writes); n != 0 {
				t.Errorf("the store received %d writes", n)
			}
			if len(ts.changes) != 0 {
				t.Errorf("changes announced: %+v", ts.changes)
			}
		})
	}
}

func TestServiceOverrideKeyNamesEveryBadPart(t *testing.T) {
	ts := newTestService()
	err := ts.DeleteOverride(context.Background(), Write{}, "", "", "", "")
	checkFields(t, err, "customer", "metric", "window")
	err = ts.DeleteOverride(context.Background(), Write{}, "", "", "", "all")
	checkFields(t, err, "customer", "metric", "per", "window")
}

// TestServiceAnnouncesCommittedWrites runs a sequence of writes and checks
// each one's result, the change it announced and how the store saw it.
func TestServiceAnnouncesCommittedWrites(t *testing.T) {
	ctx := context.Background()
	ts := newTestService()
	zone := time.FixedZone("UTC+2", 2*3600)
	ts.now = t0.In(zone) // the service stamps writes in UTC whatever its clock's zone
	w := Write{Actor: "ops", IfMatch: Precondition{}}

	steps := []struct {
		name        string
		call        func() (created bool, version int64, err error)
		wantCreated bool
		wantVersion int64
		wantChange  Change
	}{
		{"create metric", func() (bool, int64, error) {
			m, c, err := ts.PutMetric(ctx, w, "api_calls", MetricSpec{Capacity: map[string]*int64{"day": ptr[int64](100)}})
			return c, m.Version, err
		}, true, 1, Change{Kind: MetricChanged, Key: "api_calls"}},
		{"replace metric", func() (bool, int64, error) {
			m, c, err := ts.PutMetric(ctx, w, "api_calls", MetricSpec{})
			return c, m.Version, err
		}, false, 2, Change{Kind: MetricChanged, Key: "api_calls"}},
		{"create plan", func() (bool, int64, error) {
			p, c, err := ts.PutPlan(ctx, w, "pro", PlanSpec{Limits: []LimitSpec{limitSpec("api_calls", "day", 1000)}}, false)
			return c, p.Version, err
		}, true, 1, Change{Kind: PlanChanged, Key: "pro"}},
		{"create customer", func() (bool, int64, error) {
			cu, c, err := ts.PutCustomer(ctx, w, "acme", CustomerSpec{Plan: ptr("pro")})
			return c, cu.Version, err
		}, true, 1, Change{Kind: CustomerChanged, Key: "acme"}},
		{"create override", func() (bool, int64, error) {
			o, c, err := ts.PutOverride(ctx, w, "acme", "api_calls", "day", "", OverrideSpec{Limit: ptr[int64](5000)})
			return c, o.Version, err
		}, true, 1, Change{Kind: CustomerChanged, Key: "acme"}},
		{"replace override", func() (bool, int64, error) {
			o, c, err := ts.PutOverride(ctx, w, "acme", "api_calls", "day", "", OverrideSpec{Limit: ptr[int64](6000)})
			return c, o.Version, err
		}, false, 2, Change{Kind: CustomerChanged, Key: "acme"}},
		{"delete override", func() (bool, int64, error) {
			return false, 0, ts.DeleteOverride(ctx, w, "acme", "api_calls", "day", "")
		}, false, 0, Change{Kind: CustomerChanged, Key: "acme"}},
		{"delete customer", func() (bool, int64, error) {
			return false, 0, ts.DeleteCustomer(ctx, w, "acme")
		}, false, 0, Change{Kind: CustomerChanged, Key: "acme", Deleted: true}},
		{"delete plan", func() (bool, int64, error) {
			return false, 0, ts.DeletePlan(ctx, w, "pro")
		}, false, 0, Change{Kind: PlanChanged, Key: "pro", Deleted: true}},
		{"delete metric", func() (bool, int64, error) {
			return false, 0, ts.DeleteMetric(ctx, w, "api_calls")
		}, false, 0, Change{Kind: MetricChanged, Key: "api_calls", Deleted: true}},
	}
	for i, st := range steps {
		ts.now = ts.now.Add(time.Minute)
		created, version, err := st.call()
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if created != st.wantCreated || version != st.wantVersion {
			t.Errorf("%s: created %v, version %d; want %v, %d", st.name, created, version, st.wantCreated, st.wantVersion)
		}
		if len(ts.changes) != i+1 || ts.changes[i] != st.wantChange {
			t.Errorf("%s: changes announced %+v, want %+v last", st.name, ts.changes, st.wantChange)
		}
		if len(ts.store.writes) != i+1 {
			t.Fatalf("%s: the store saw %d writes, want %d", st.name, len(ts.store.writes), i+1)
		}
		got := ts.store.writes[i]
		if got.Actor != "ops" || !got.At.Equal(ts.now) || got.At.Location() != time.UTC {
			t.Errorf("%s: store saw write %+v, want actor ops at %v in UTC", st.name, got, ts.now.UTC())
		}
	}
}

// TestServiceStoreErrors checks that store errors come back recognisable
// with errors.Is, and that a write that did not commit is not announced.
func TestServiceStoreErrors(t *testing.T) {
	ctx := context.Background()
	ops := []struct {
		name string
		call func(s *Service) error
		what string // the resource the error must name
	}{
		{"put metric", func(s *Service) error { _, _, err := s.PutMetric(ctx, Write{}, "api_calls", MetricSpec{}); return err }, "[api_calls]"},
		{"delete metric", func(s *Service) error { return s.DeleteMetric(ctx, Write{}, "api_calls") }, "[api_calls]"},
		{"put plan", func(s *Service) error { _, _, err := s.PutPlan(ctx, Write{}, "pro", PlanSpec{}, false); return err }, "[pro]"},
		{"delete plan", func(s *Service) error { return s.DeletePlan(ctx, Write{}, "pro") }, "[pro]"},
		{"put customer", func(s *Service) error {
			_, _, err := s.PutCustomer(ctx, Write{}, "acme", CustomerSpec{Plan: ptr("pro")})
			return err
		}, "[acme]"},
		{"delete customer", func(s *Service) error { return s.DeleteCustomer(ctx, Write{}, "acme") }, "[acme]"},
		{"put override", func(s *Service) error {
			_, _, err := s.PutOverride(ctx, Write{}, "acme", "api_calls", "day", "", OverrideSpec{Limit: ptr[int64](1)})
			return err
		}, "[acme/api_calls/day]"},
		{"delete override", func(s *Service) error { return s.DeleteOverride(ctx, Write{}, "acme", "api_calls", "day", "") }, "[acme/api_calls/day]"},
	}
	for _, storeErr := range []error{ErrUnavailable, ErrPreconditionFailed, ErrConflict} {
		for _, op := range ops {
			t.Run(fmt.Sprintf("%s fails with %v", op.name, storeErr), func(t *testing.T) {
				ts := newTestService()
				ts.seed(t)
				ts.store.fail = storeErr
				err := op.call(ts.Service)
				if !errors.Is(err, storeErr) {
					t.Errorf("error = %v, want one wrapping %v", err, storeErr)
				}
				if err != nil && !strings.Contains(err.Error(), op.what) {
					t.Errorf("error = %v, want it to name %s", err, op.what)
				}
				if len(ts.changes) != 0 {
					t.Errorf("a failed write was announced: %+v", ts.changes)
				}
			})
		}
	}
}

func TestServiceMissingResources(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		call func(s *Service) error
		want error
	}{
		{"metric", func(s *Service) error { _, err := s.Metric(ctx, "nope"); return err }, ErrMetricNotFound},
		{"plan", func(s *Service) error { _, err := s.Plan(ctx, "nope"); return err }, ErrPlanNotFound},
		{"customer", func(s *Service) error { _, err := s.Customer(ctx, "nope"); return err }, ErrCustomerNotFound},
		{"limits of unknown customer", func(s *Service) error { _, _, err := s.Limits(ctx, "nope"); return err }, ErrCustomerNotFound},
		{"override of unknown customer", func(s *Service) error {
			_, err := s.Override(ctx, "nope", "api_calls", "day", "")
			return err
		}, ErrCustomerNotFound},
		{"missing override", func(s *Service) error {
			_, err := s.Override(ctx, "acme", "api_calls", "hour", "")
			return err
		}, ErrOverrideNotFound},
		{"delete missing override", func(s *Service) error {
			return s.DeleteOverride(ctx, Write{}, "acme", "api_calls", "hour", "")
		}, ErrOverrideNotFound},
		{"override on undeclared metric", func(s *Service) error {
			_, _, err := s.PutOverride(ctx, Write{}, "acme", "tokens", "day", "", OverrideSpec{Limit: ptr[int64](1)})
			return err
		}, ErrMetricNotFound},
		{"delete a plan customers are on", func(s *Service) error { return s.DeletePlan(ctx, Write{}, "pro") }, ErrPlanInUse},
		{"delete a metric a plan uses", func(s *Service) error { return s.DeleteMetric(ctx, Write{}, "api_calls") }, ErrMetricInUse},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestService()
			ts.seed(t)
			if err := tc.call(ts.Service); !errors.Is(err, tc.want) {
				t.Errorf("error = %v, want %v", err, tc.want)
			}
			if len(ts.changes) != 0 {
				t.Errorf("changes announced: %+v", ts.changes)
			}
		})
	}
}

// TestServicePreconditions checks that If-Match travels with the write and
// decides it: 412 semantics for stale, missing and wildcard tags.
func TestServicePreconditions(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name        string
		key         string // "api_calls" exists at version 1
		ifMatch     Precondition
		wantErr     error
		wantVersion int64
	}{
		{"no If-Match", "api_calls", Precondition{}, nil, 2},
		{"current version", "api_calls", Precondition{Set: true, Versions: []int64{1}}, nil, 2},
		{"stale version", "api_calls", Precondition{Set: true, Versions: []int64{7}}, ErrPreconditionFailed, 0},
		{"star", "api_calls", Precondition{Set: true, Any: true}, nil, 2},
		{"star on a missing metric", "tokens", Precondition{Set: true, Any: true}, ErrPreconditionFailed, 0},
		{"version on a missing metric", "tokens", Precondition{Set: true, Versions: []int64{1}}, ErrPreconditionFailed, 0},
		{"create without If-Match", "tokens", Precondition{}, nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestService()
			ts.seed(t)
			m, _, err := ts.PutMetric(ctx, Write{IfMatch: tc.ifMatch}, tc.key, MetricSpec{Description: ptr("x")})
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("error = %v, want %v", err, tc.wantErr)
				}
				if len(ts.changes) != 0 {
					t.Errorf("a refused write was announced")
				}
			case err != nil:
				t.Errorf("PutMetric: %v", err)
			case m.Version != tc.wantVersion:
				t.Errorf("version = %d, want %d", m.Version, tc.wantVersion)
			}
			if len(ts.store.writes) == 1 && !reflect.DeepEqual(ts.store.writes[0].IfMatch, tc.ifMatch) {
				t.Errorf("store saw If-Match %+v, want %+v", ts.store.writes[0].IfMatch, tc.ifMatch)
			}
		})
	}
}

// TestServiceOverrideLifecycle follows an override from creation past its
// expiry: expires_at is checked against the service's clock, reads mark it
// expired once the clock passes it, and the effective limits fall back to
// the plan.
func TestServiceOverrideLifecycle(t *testing.T) {
	ctx := context.Background()
	ts := newTestService()
	ts.seed(t)
	expires := t0.Add(time.Hour)

	ts.now = expires // a write at the expiry instant is refused
	_, _, err := ts.PutOverride(ctx, Write{}, "acme", "api_calls", "day", "", OverrideSpec{Limit: ptr[int64](5000), ExpiresAt: &expires})
	checkFields(t, err, "expires_at")

	ts.now = t0
	o, created, err := ts.PutOverride(ctx, Write{}, "acme", "api_calls", "day", "",
		OverrideSpec{Limit: ptr[int64](5000), Mode: "soft", OveragePercent: ptr[int64](10), ExpiresAt: &expires, Reason: ptr("launch")})
	if err != nil || !created || o.Expired {
		t.Fatalf("PutOverride = %+v, created %v, %v; want a new unexpired override", o, created, err)
	}
	if _, _, err := ts.PutOverride(ctx, Write{}, "acme", "api_calls", "minute", "", OverrideSpec{Limit: ptr[int64](7)}); err != nil {
		t.Fatalf("PutOverride(minute): %v", err)
	}

	tests := []struct {
		name        string
		now         time.Time
		wantExpired bool
		wantLimits  []string // metric/window=limit(source)
	}{
		{"before expiry", t0.Add(30 * time.Minute), false,
			[]string{"api_calls/second=50(plan)", "api_calls/minute=7(override)", "api_calls/day=5000(override)"}},
		{"at expiry", expires, true,
			[]string{"api_calls/second=50(plan)", "api_calls/minute=7(override)", "api_calls/day=1000(plan)"}},
		{"after expiry", expires.Add(time.Hour), true,
			[]string{"api_calls/second=50(plan)", "api_calls/minute=7(override)", "api_calls/day=1000(plan)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts.now = tc.now
			o, err := ts.Override(ctx, "acme", "api_calls", "day", "")
			if err != nil {
				t.Fatalf("Override: %v", err)
			}
			if o.Expired != tc.wantExpired {
				t.Errorf("Override().Expired = %v, want %v", o.Expired, tc.wantExpired)
			}
			list, _, err := ts.Overrides(ctx, "acme", Page{Limit: 100})
			if err != nil {
				t.Fatalf("Overrides: %v", err)
			}
			if len(list) != 2 {
				t.Fatalf("Overrides lists %d, want 2 (expired ones included)", len(list))
			}
			for _, o := range list {
				want := tc.wantExpired && o.Window == Day
				if o.Expired != want {
					t.Errorf("Overrides: %s/%s expired = %v, want %v", o.Metric, o.Window, o.Expired, want)
				}
			}
			a, limits, err := ts.Limits(ctx, "acme")
			if err != nil {
				t.Fatalf("Limits: %v", err)
			}
			if a.Customer.ID != "acme" || a.Plan.Key != "pro" {
				t.Errorf("Limits account = %s on %s", a.Customer.ID, a.Plan.Key)
			}
			var got []string
			for _, l := range limits {
				got = append(got, fmt.Sprintf("%s/%s=%d(%s)", l.Metric, l.Window, l.Limit.Limit, l.Source))
			}
			if !slices.Equal(got, tc.wantLimits) {
				t.Errorf("Limits = %q, want %q", got, tc.wantLimits)
			}
		})
	}
}

// A customer's override per subject and its customer-wide override on the
// same metric+window are two resources, each addressed by its per.
func TestServiceOverridePerSubject(t *testing.T) {
	ctx := context.Background()
	ts := newTestService()
	ts.seed(t)
	put := func(per string, limit int64) {
		t.Helper()
		o, created, err := ts.PutOverride(ctx, Write{}, "acme", "api_calls", "day", per, OverrideSpec{Limit: ptr(limit)})
		if err != nil || !created {
			t.Fatalf("PutOverride(%q) = %+v, created %v, %v; want a new override", per, o, created, err)
		}
		if want, _ := ParsePer(cmp.Or(per, "customer")); o.Per != want {
			t.Fatalf("PutOverride(%q).Per = %v, want %v", per, o.Per, want)
		}
	}
	put("subject", 10)

	steps := []struct {
		name       string
		before     func()
		per        string
		wantLimit  int64 // 0: not found
		wantLimits []string
	}{
		{name: "the override per subject", per: "subject", wantLimit: 10,
			wantLimits: []string{"api_calls/second=50(plan)", "api_calls/day=1000(plan)", "api_calls/day/subject=10(override)"}},
		{name: "no customer-wide one yet", per: "",
			wantLimits: []string{"api_calls/second=50(plan)", "api_calls/day=1000(plan)", "api_calls/day/subject=10(override)"}},
		{name: "a customer-wide one beside it", before: func() { put("customer", 5000) }, per: "customer", wantLimit: 5000,
			wantLimits: []string{"api_calls/second=50(plan)", "api_calls/day=5000(override)", "api_calls/day/subject=10(override)"}},
		{name: "deleting the one per subject keeps the customer's",
			before: func() {
				if err := ts.DeleteOverride(ctx, Write{}, "acme", "api_calls", "day", "subject"); err != nil {
					t.Fatalf("DeleteOverride(subject): %v", err)
				}
			},
			per: "", wantLimit: 5000,
			wantLimits: []string{"api_calls/second=50(plan)", "api_calls/day=5000(override)"}},
		{name: "the one per subject is gone", per: "subject",
			wantLimits: []string{"api_calls/second=50(plan)", "api_calls/day=5000(override)"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.before != nil {
				st.before()
			}
			o, err := ts.Override(ctx, "acme", "api_calls", "day", st.per)
			switch {
			case st.wantLimit == 0 && !errors.Is(err, ErrOverrideNotFound):
				t.Errorf("Override(%q) = %+v, %v; want ErrOverrideNotFound", st.per, o, err)
			case st.wantLimit != 0 && (err != nil || o.Limit.Limit != st.wantLimit):
				t.Errorf("Override(%q) = %+v, %v; want limit %d", st.per, o, err, st.wantLimit)
			}
			_, limits, err := ts.Limits(ctx, "acme")
			if err != nil {
				t.Fatalf("Limits: %v", err)
			}
			var got []string
			for _, l := range limits {
				got = append(got, fmt.Sprintf("%s=%d(%s)", l.Key(), l.Limit.Limit, l.Source))
			}
			if !slices.Equal(got, st.wantLimits) {
				t.Errorf("Limits = %q, want %q", got, st.wantLimits)
			}
		})
	}
}

// TestServiceCustomerAnchorChange checks, through a store that carries the
// anchor over as the real one does, that a new billing anchor day applies
// from the next period.
func TestServiceCustomerAnchorChange(t *testing.T) {
	ctx := context.Background()
	ts := newTestService()
	ts.seed(t)
	ts.now = date(2026, 3, 10)
	c, created, err := ts.PutCustomer(ctx, Write{}, "acme", CustomerSpec{Plan: ptr("pro"), BillingAnchorDay: ptr[int64](15)})
	if err != nil || created {
		t.Fatalf("PutCustomer = created %v, %v", created, err)
	}
	if c.BillingAnchorDay == nil || *c.BillingAnchorDay != 15 || c.Version != 2 {
		t.Errorf("customer = %+v, want anchor day 15 at version 2", c)
	}
	tests := []struct {
		at   time.Time
		want period
	}{
		{date(2026, 3, 20), period{date(2026, 3, 1), date(2026, 4, 1)}},
		{date(2026, 4, 2), period{date(2026, 4, 1), date(2026, 4, 15)}},
		{date(2026, 4, 20), period{date(2026, 4, 15), date(2026, 5, 15)}},
	}
	for _, tc := range tests {
		if got := monthOf(c.Anchor, tc.at); !got.equal(tc.want) {
			t.Errorf("at %v: period %v, want %v", tc.at, got, tc.want)
		}
	}
}

func TestNewServiceWithoutListener(t *testing.T) {
	s := NewService(newMemStore(), nil, func() time.Time { return t0 }, nil)
	if _, _, err := s.PutMetric(context.Background(), Write{}, "m", MetricSpec{}); err != nil {
		t.Errorf("PutMetric without a change listener: %v", err)
	}
}
