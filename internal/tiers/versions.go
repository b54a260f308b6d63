package tiers

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Plan versions. Every change of a plan's price, limits or features makes a
// new version of it, numbered from 1; a change of its name or description
// alone does not. A customer is on one version of its plan (its
// PlanVersion): the latest when it joins the plan, and the one it was on
// when a change was grandfathered, until a migration moves it. A change
// that is not grandfathered takes the customers on the latest version
// along to the new one; customers kept on older versions stay there.

// PlanVersion is a plan's price, limits and features as they were from
// CreatedAt on.
type PlanVersion struct {
	Plan     string                  `json:"plan"`
	Version  int64                   `json:"version"`
	Price    Price                   `json:"price"`
	Limits   []Limit                 `json:"limits"`
	Features map[string]FeatureValue `json:"features"`
	// Customers counts the customers on this version now.
	Customers int64     `json:"customers"`
	CreatedAt time.Time `json:"created_at"`
}

// MigrationSpec is the body of POST /v1/plans/{plan}/migrate: the version
// whose customers move (nil: every version older than ToVersion), the
// version they move to (nil: the latest), and whether to move them at all.
type MigrationSpec struct {
	FromVersion *int64 `json:"from_version" nullable:"true"`
	ToVersion   *int64 `json:"to_version" nullable:"true"`
	DryRun      *bool  `json:"dry_run"`
}

// Validate checks what can be checked without the plan: versions are
// positive, from before to, and dry_run is said.
func (s MigrationSpec) Validate(key string) error {
	var p problems
	if !ValidKey(key) {
		p.add("plan", keyRule)
	}
	if s.FromVersion != nil && *s.FromVersion < 1 {
		p.add("from_version", "must be a version number, 1 or more")
	}
	if s.ToVersion != nil && *s.ToVersion < 1 {
		p.add("to_version", "must be a version number, 1 or more")
	}
	if s.FromVersion != nil && s.ToVersion != nil && *s.FromVersion >= 1 && *s.ToVersion >= 1 &&
		*s.ToVersion <= *s.FromVersion {
		p.add("to_version", fmt.Sprintf("must be newer than from_version (%d)", *s.FromVersion))
	}
	if s.DryRun == nil {
		p.add("dry_run", "is required: true to see what the migration would do, false to do it")
	}
	return p.err()
}

// PlanMigration is a migration resolved against the plan: the versions
// whose customers move (From), the version they move to (To, the plan as
// it is at that version) and the customers, each with the version it is on.
type PlanMigration struct {
	From      []int64
	To        Plan
	ToVersion int64
	Customers []VersionedCustomer
}

// VersionedCustomer is a customer of a plan and the version it is on.
type VersionedCustomer struct {
	ID      string
	Version int64
}

// Migration is the answer of a migration: what moved, or would move.
type Migration struct {
	Plan         string             `json:"plan"`
	FromVersions []int64            `json:"from_versions"`
	ToVersion    int64              `json:"to_version"`
	DryRun       bool               `json:"dry_run"`
	Customers    []MigratedCustomer `json:"customers"`
}

// MigratedCustomer is one customer a migration moves, and the windows
// whose current usage is beyond the limit it moves to.
type MigratedCustomer struct {
	Customer    string      `json:"customer"`
	FromVersion int64       `json:"from_version"`
	OverLimit   []OverLimit `json:"over_limit"`
}

// OverLimit is one window whose current usage is beyond a limit.
type OverLimit struct {
	Metric string `json:"metric"`
	Window Window `json:"window"`
	Used   int64  `json:"used"`
	Limit  int64  `json:"limit"`
}

// WindowUsage is a customer's current usage of one customer-wide window,
// as its usage reports it.
type WindowUsage struct {
	Metric string
	Window Window
	Used   int64
}

// UsageReader returns the customer's account and its current usage, as
// GET /v1/customers/{id}/usage reports it.
type UsageReader func(ctx context.Context, customer string) (Account, []WindowUsage, error)

// OverLimits returns the windows of usage whose count is beyond the
// customer-wide limit that limits would put on the same metric and window:
// what a move to those limits would leave over them. Windows without such
// a limit are not.
func OverLimits(usage []WindowUsage, limits []EffectiveLimit) []OverLimit {
	out := []OverLimit{}
	for _, u := range usage {
		for _, l := range limits {
			if l.Per == PerCustomer && l.Metric == u.Metric && l.Window == u.Window && u.Used > l.Limit.Limit {
				out = append(out, OverLimit{Metric: u.Metric, Window: u.Window, Used: u.Used, Limit: l.Limit.Limit})
			}
		}
	}
	return out
}

// PlanVersion returns version n of the plan key.
func (s *Service) PlanVersion(ctx context.Context, key string, n int64) (PlanVersion, error) {
	if err := CheckKey("plan", key); err != nil {
		return PlanVersion{}, err
	}
	return s.store.FindPlanVersion(ctx, key, n)
}

// PlanVersions returns one page of the plan's versions, oldest first
// (Page.After: a version number, "" from the first).
func (s *Service) PlanVersions(ctx context.Context, key string, page Page) ([]PlanVersion, bool, error) {
	if err := CheckKey("plan", key); err != nil {
		return nil, false, err
	}
	return s.store.FindPlanVersions(ctx, key, page)
}

// MigratePlan moves the customers of the plan key on spec's versions to
// its target version, unless spec says dry run, and answers, for each
// customer moved (or that would be), the windows whose current usage, read
// with usage, is beyond the limits it moves to (its overrides laid over
// the target version's).
func (s *Service) MigratePlan(ctx context.Context, w Write, key string, spec MigrationSpec, usage UsageReader) (Migration, error) {
	if err := spec.Validate(key); err != nil {
		return Migration{}, err
	}
	m, err := s.store.FindPlanMigration(ctx, key, spec.FromVersion, spec.ToVersion)
	if err != nil {
		return Migration{}, fmt.Errorf("find migration of plan[%s]: %w", key, err)
	}
	out := Migration{Plan: key, FromVersions: m.From, ToVersion: m.ToVersion, DryRun: *spec.DryRun,
		Customers: make([]MigratedCustomer, 0, len(m.Customers))}
	if out.FromVersions == nil {
		out.FromVersions = []int64{}
	}
	impact := func(c VersionedCustomer) (MigratedCustomer, error) {
		a, used, err := usage(ctx, c.ID)
		if err != nil {
			return MigratedCustomer{}, fmt.Errorf("usage of customer[%s]: %w", c.ID, err)
		}
		over := OverLimits(used, Effective(m.To, a.Overrides, s.now()))
		return MigratedCustomer{Customer: c.ID, FromVersion: c.Version, OverLimit: over}, nil
	}
	for _, c := range m.Customers {
		mc, err := impact(c)
		if errors.Is(err, ErrCustomerNotFound) {
			continue // deleted since it was listed
		}
		if err != nil {
			return Migration{}, err
		}
		out.Customers = append(out.Customers, mc)
	}
	if out.DryRun || len(m.Customers) == 0 {
		return out, nil
	}
	moved, err := s.store.MigratePlan(ctx, s.stamp(w), key, spec.FromVersion, m.ToVersion)
	if err != nil {
		return Migration{}, fmt.Errorf("migrate plan[%s]: %w", key, err)
	}
	s.onChange(Change{Kind: PlanChanged, Key: key})
	// The customers moved are those on the versions when the move
	// committed: a customer that joined or left them meanwhile is
	// answered as moved, or not.
	listed := make(map[string]MigratedCustomer, len(out.Customers))
	for _, c := range out.Customers {
		listed[c.Customer] = c
	}
	out.Customers = out.Customers[:0]
	for _, c := range moved {
		mc, ok := listed[c.ID]
		if !ok {
			if mc, err = impact(c); errors.Is(err, ErrCustomerNotFound) {
				continue
			} else if err != nil {
				return Migration{}, err
			}
		}
		out.Customers = append(out.Customers, mc)
	}
	return out, nil
}
