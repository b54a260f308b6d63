package quotad

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

// PlansService manages plans, their versions and the migration of
// customers between them, and replays a plan over recorded usage (WhatIf).
type PlansService service

// List lists the plans by key.
func (s *PlansService) List(ctx context.Context) iter.Seq2[Plan, error] {
	return paginate(ctx, func(ctx context.Context, cursor string) (page[Plan], error) {
		var out struct {
			Plans      []Plan `json:"plans"`
			NextCursor string `json:"next_cursor"`
		}
		_, err := s.client.do(ctx, call{method: http.MethodGet, path: "/v1/plans", query: listQuery(cursor, 0), retry: true, out: &out})
		fillETags(out.Plans, func(p *Plan) *Meta { return &p.Meta })
		return page[Plan]{out.Plans, out.NextCursor}, err
	})
}

// Get gets a plan; ErrPlanNotFound if there is none.
func (s *PlansService) Get(ctx context.Context, key string) (*Plan, error) {
	var p Plan
	if err := s.client.get(ctx, pathf("/v1/plans/%s", key), &p, &p.Meta); err != nil {
		return nil, err
	}
	return &p, nil
}

// Put creates or replaces a plan, and says whether it created it.
// Every metric its limits name must be declared (else ErrValidation).
func (s *PlansService) Put(ctx context.Context, key string, spec PlanSpec, opts ...WriteOption) (*Plan, bool, error) {
	var p Plan
	created, err := s.client.put(ctx, pathf("/v1/plans/%s", key), spec, &p, &p.Meta, opts)
	if err != nil {
		return nil, false, err
	}
	return &p, created, nil
}

// PutGrandfathered is Put keeping the plan's customers on the
// version they are on (PUT ?grandfather=true): a change of price, limits
// or features makes a new version that only customers new to the plan
// get, until Migrate moves the others.
func (s *PlansService) PutGrandfathered(ctx context.Context, key string, spec PlanSpec, opts ...WriteOption) (*Plan, bool, error) {
	var p Plan
	q := url.Values{"grandfather": {"true"}}
	created, err := s.client.putQuery(ctx, pathf("/v1/plans/%s", key), q, spec, &p, &p.Meta, opts)
	if err != nil {
		return nil, false, err
	}
	return &p, created, nil
}

// Versions lists a plan's versions, oldest first; ErrPlanNotFound if
// there is no plan.
func (s *PlansService) Versions(ctx context.Context, key string) iter.Seq2[PlanVersion, error] {
	return paginate(ctx, func(ctx context.Context, cursor string) (page[PlanVersion], error) {
		var out struct {
			Versions   []PlanVersion `json:"versions"`
			NextCursor string        `json:"next_cursor"`
		}
		_, err := s.client.do(ctx, call{method: http.MethodGet, path: pathf("/v1/plans/%s/versions", key),
			query: listQuery(cursor, 0), retry: true, out: &out})
		return page[PlanVersion]{out.Versions, out.NextCursor}, err
	})
}

// Version gets version n of a plan; ErrPlanVersionNotFound if it has
// none (ErrPlanNotFound if there is no plan).
func (s *PlansService) Version(ctx context.Context, key string, n int64) (*PlanVersion, error) {
	var v PlanVersion
	if err := s.client.get(ctx, pathf("/v1/plans/%s/versions/", key)+strconv.FormatInt(n, 10), &v, nil); err != nil {
		return nil, err
	}
	return &v, nil
}

// Migrate moves a plan's customers from older versions to a newer one
// (see MigrationSpec), or, with DryRun, only says what it would do: the
// customers, each with the windows whose current usage is beyond the
// limits it moves to. A dry run is retried like a read; a migration is
// not (a repeat moves nobody more, but answers differently).
func (s *PlansService) Migrate(ctx context.Context, key string, spec MigrationSpec) (*Migration, error) {
	var m Migration
	_, err := s.client.do(ctx, call{method: http.MethodPost, path: pathf("/v1/plans/%s/migrate", key), body: spec,
		retry: spec.DryRun, out: &m})
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// Delete deletes a plan; ErrConflict while customers are on it.
func (s *PlansService) Delete(ctx context.Context, key string, opts ...WriteOption) error {
	return s.client.del(ctx, pathf("/v1/plans/%s", key), opts)
}
