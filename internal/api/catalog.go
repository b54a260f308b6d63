package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/tiers"
)

// MetricCatalog is the catalog's metrics. *tiers.Service implements it;
// its errors are tiers' sentinels and *tiers.ValidationError.
type MetricCatalog interface {
	Metric(ctx context.Context, key string) (tiers.Metric, error)
	Metrics(ctx context.Context, page tiers.Page) ([]tiers.Metric, bool, error)
	PutMetric(ctx context.Context, w tiers.Write, key string, spec tiers.MetricSpec) (tiers.Metric, bool, error)
	DeleteMetric(ctx context.Context, w tiers.Write, key string) error
}

// PlanCatalog is the catalog's plans, their versions and the migration of
// their customers. *tiers.Service implements it; its errors are tiers'
// sentinels and *tiers.ValidationError.
type PlanCatalog interface {
	Plan(ctx context.Context, key string) (tiers.Plan, error)
	Plans(ctx context.Context, page tiers.Page) ([]tiers.Plan, bool, error)
	PutPlan(ctx context.Context, w tiers.Write, key string, spec tiers.PlanSpec, grandfather bool) (tiers.Plan, bool, error)
	DeletePlan(ctx context.Context, w tiers.Write, key string) error
	PlanVersion(ctx context.Context, key string, n int64) (tiers.PlanVersion, error)
	PlanVersions(ctx context.Context, key string, page tiers.Page) ([]tiers.PlanVersion, bool, error)
	MigratePlan(ctx context.Context, w tiers.Write, key string, spec tiers.MigrationSpec, usage tiers.UsageReader) (tiers.Migration, error)
}

var (
	_ MetricCatalog = (*tiers.Service)(nil)
	_ PlanCatalog   = (*tiers.Service)(nil)
)

// catalogHandlers serve the metrics and plans, with the plans' versions
// and migrations; a migration reads its customers' usage from checker.
type catalogHandlers struct {
	metrics MetricCatalog
	plans   PlanCatalog
	checker Checker
}

// writeOf is the catalog write a request makes: its actor, and its
// If-Match.
func writeOf(c echo.Context) tiers.Write {
	return tiers.Write{Actor: actor(c), IfMatch: ifMatch(c)}
}

// list is the envelope of every paginated list.
func list(name string, items any, next string) map[string]any {
	out := map[string]any{name: items}
	if next != "" {
		out["next_cursor"] = next
	}
	return out
}

func nextCursor(more bool, last string) string {
	if !more {
		return ""
	}
	return encodeCursor(last)
}

// Metrics.

func (h *catalogHandlers) listMetrics(c echo.Context) error {
	p, err := page(c, tiers.ValidKey)
	if err != nil {
		return err
	}
	items, more, err := h.metrics.Metrics(c.Request().Context(), p)
	if err != nil {
		return err
	}
	last := ""
	if len(items) > 0 {
		last = items[len(items)-1].Key
	}
	return respond(c, http.StatusOK, list("metrics", items, nextCursor(more, last)))
}

func (h *catalogHandlers) getMetric(c echo.Context) error {
	m, err := h.metrics.Metric(c.Request().Context(), param(c, "metric"))
	if err != nil {
		return err
	}
	return respondResource(c, false, m.Version, m)
}

func (h *catalogHandlers) putMetric(c echo.Context) error {
	var spec tiers.MetricSpec
	if err := decodeBody(c, &spec); err != nil {
		return err
	}
	m, created, err := h.metrics.PutMetric(c.Request().Context(), writeOf(c), param(c, "metric"), spec)
	if err != nil {
		return err
	}
	return respondResource(c, created, m.Version, m)
}

func (h *catalogHandlers) deleteMetric(c echo.Context) error {
	if err := h.metrics.DeleteMetric(c.Request().Context(), writeOf(c), param(c, "metric")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// Plans.

func (h *catalogHandlers) listPlans(c echo.Context) error {
	p, err := page(c, tiers.ValidKey)
	if err != nil {
		return err
	}
	items, more, err := h.plans.Plans(c.Request().Context(), p)
	if err != nil {
		return err
	}
	last := ""
	if len(items) > 0 {
		last = items[len(items)-1].Key
	}
	return respond(c, http.StatusOK, list("plans", items, nextCursor(more, last)))
}

func (h *catalogHandlers) getPlan(c echo.Context) error {
	p, err := h.plans.Plan(c.Request().Context(), param(c, "plan"))
	if err != nil {
		return err
	}
	return respondResource(c, false, p.Version, p)
}

func (h *catalogHandlers) putPlan(c echo.Context) error {
	var spec tiers.PlanSpec
	if err := decodeBody(c, &spec); err != nil {
		return err
	}
	grandfather, err := boolQuery(c, "grandfather")
	if err != nil {
		return err
	}
	p, created, err := h.plans.PutPlan(c.Request().Context(), writeOf(c), param(c, "plan"), spec, grandfather)
	if err != nil {
		return err
	}
	return respondResource(c, created, p.Version, p)
}

func (h *catalogHandlers) deletePlan(c echo.Context) error {
	if err := h.plans.DeletePlan(c.Request().Context(), writeOf(c), param(c, "plan")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
