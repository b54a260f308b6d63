package tiers

import (
	"context"
	"slices"
	"time"
)

// Store persists the catalog. Every Put and Delete runs in one transaction
// that also records an AuditEvent for w.Actor and checks w.IfMatch against
// the current row; a Put that creates returns created == true.
//
// Errors: ErrMetricNotFound, ErrPlanNotFound, ErrCustomerNotFound,
// ErrOverrideNotFound, ErrFeatureOverrideNotFound for missing resources (a parent before its child);
// *ValidationError when the input names an undeclared metric or unknown plan,
// or a credit schema breaks CheckCreditPools;
// ErrMetricInUse and ErrPlanInUse on deletes that would orphan rows;
// ErrPreconditionFailed; ErrUnavailable when PostgreSQL cannot be reached.
// Implementations are safe for concurrent use.
type Store interface {
	FindMetric(ctx context.Context, key string) (Metric, error)
	FindMetrics(ctx context.Context, page Page) ([]Metric, bool, error)
	PutMetric(ctx context.Context, w Write, m Metric) (Metric, bool, error)
	DeleteMetric(ctx context.Context, w Write, key string) error

	FindPlan(ctx context.Context, key string) (Plan, error)
	FindPlans(ctx context.Context, page Page) ([]Plan, bool, error)
	// PutPlan makes a new version of the plan when its price, limits or
	// features change; grandfather keeps the customers on the plan at the
	// version they are on, else those on the latest move to the new one.
	PutPlan(ctx context.Context, w Write, p Plan, grandfather bool) (Plan, bool, error)
	DeletePlan(ctx context.Context, w Write, key string) error

	// FindPlanVersion returns version n of the plan key
	// (ErrPlanVersionNotFound when it has none); FindPlanVersions one
	// page of them, oldest first, Page.After being a version number.
	FindPlanVersion(ctx context.Context, key string, n int64) (PlanVersion, error)
	FindPlanVersions(ctx context.Context, key string, page Page) ([]PlanVersion, bool, error)
	// FindPlanMigration resolves a migration of the plan key from version
	// from (nil: every version older than to) to version to (nil: the
	// latest): ErrPlanVersionNotFound for a version the plan does not
	// have, a *ValidationError when to is not newer than from. It lists
	// the customers that would move.
	FindPlanMigration(ctx context.Context, key string, from, to *int64) (PlanMigration, error)
	// MigratePlan moves the customers on version from (nil: on any
	// version older than to) to version to, in one transaction that
	// records an audit event per customer moved (actor w.Actor), and
	// returns them with the versions they were on.
	MigratePlan(ctx context.Context, w Write, key string, from *int64, to int64) ([]VersionedCustomer, error)

	FindCustomer(ctx context.Context, id string) (Customer, error)
	FindCustomers(ctx context.Context, f CustomerFilter) ([]Customer, bool, error)
	PutCustomer(ctx context.Context, w Write, c Customer) (Customer, bool, error)
	DeleteCustomer(ctx context.Context, w Write, id string) error

	FindOverride(ctx context.Context, customer string, k LimitKey) (Override, error)
	FindOverrides(ctx context.Context, customer string, page Page) ([]Override, bool, error)
	PutOverride(ctx context.Context, w Write, o Override) (Override, bool, error)
	DeleteOverride(ctx context.Context, w Write, customer string, k LimitKey) error

	// PutFeatureOverride creates or replaces a customer's override of a
	// feature; DeleteFeatureOverride removes it (ErrFeatureOverrideNotFound
	// when there is none).
	PutFeatureOverride(ctx context.Context, w Write, o FeatureOverride) (FeatureOverride, bool, error)
	DeleteFeatureOverride(ctx context.Context, w Write, customer, feature string) error

	// FindAccount returns a customer with its plan and all its overrides,
	// of limits and of features (expired ones included).
	FindAccount(ctx context.Context, id string) (Account, error)
}

// AuditLog reads the audit log, which every write of the catalog (and of
// keys, webhooks, grants and usage) adds to.
type AuditLog interface {
	// FindAuditEvents returns one page of the events f selects, newest
	// first.
	FindAuditEvents(ctx context.Context, f AuditFilter) ([]AuditEvent, bool, error)
}

// Write carries what every admin write needs besides its data.
type Write struct {
	Actor   string
	IfMatch Precondition
	// At is the time of the write; the store stamps created_at, updated_at
	// and the audit event with it.
	At time.Time
}

// Precision is the precision of every instant quotad stores and answers:
// PostgreSQL's timestamptz keeps microseconds, so an instant is cut to
// them before it is stored or answered, and the answer to a write reads
// as every later read of what it wrote.
const Precision = time.Microsecond

// Instant returns t in UTC, truncated to Precision.
func Instant(t time.Time) time.Time { return t.UTC().Truncate(Precision) }

// Precondition is an If-Match request header, parsed.
type Precondition struct {
	Set      bool    // the header was sent
	Any      bool    // If-Match: *
	Versions []int64 // the versions named by its strong entity tags
}

// Check returns ErrPreconditionFailed unless the precondition holds for a
// resource that exists (at version) or not.
func (p Precondition) Check(exists bool, version int64) error {
	switch {
	case !p.Set:
		return nil
	case !exists:
		return ErrPreconditionFailed
	case p.Any || slices.Contains(p.Versions, version):
		return nil
	}
	return ErrPreconditionFailed
}

// Page selects one page of a list ordered by key: at most Limit items whose
// key sorts after After. Lists report whether more items follow.
type Page struct {
	Limit int
	After string
}

// CustomerFilter selects customers, optionally only those on Plan.
type CustomerFilter struct {
	Plan string
	// Query, when set, keeps the customers whose id or name contains it,
	// ignoring case.
	Query string
	Page  Page
}

// AuditFilter selects audit events, newest first: at most Limit events with
// an id below Before (0: from the newest), optionally about one Customer.
type AuditFilter struct {
	Customer string
	Limit    int
	Before   int64
}
