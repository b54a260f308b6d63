package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/tiers"
)

// Plan versions and migrations (see tiers' versions.go).

// validVersionCursor reports whether s names a version: a positive
// integer as strconv writes it.
func validVersionCursor(s string) bool {
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n >= 1 && strconv.FormatInt(n, 10) == s
}

func (h *catalogHandlers) listPlanVersions(c echo.Context) error {
	p, err := page(c, validVersionCursor)
	if err != nil {
		return err
	}
	items, more, err := h.plans.PlanVersions(c.Request().Context(), param(c, "plan"), p)
	if err != nil {
		return err
	}
	last := ""
	if len(items) > 0 {
		last = strconv.FormatInt(items[len(items)-1].Version, 10)
	}
	if items == nil {
		items = []tiers.PlanVersion{}
	}
	return respond(c, http.StatusOK, list("versions", items, nextCursor(more, last)))
}

func (h *catalogHandlers) getPlanVersion(c echo.Context) error {
	n, err := strconv.ParseInt(param(c, "version"), 10, 64)
	if err != nil || n < 1 {
		return invalid("version", "must be a version number, 1 or more")
	}
	v, err := h.plans.PlanVersion(c.Request().Context(), param(c, "plan"), n)
	if err != nil {
		return err
	}
	return respond(c, http.StatusOK, v)
}

func (h *catalogHandlers) migratePlan(c echo.Context) error {
	var spec tiers.MigrationSpec
	if err := decodeBody(c, &spec); err != nil {
		return err
	}
	m, err := h.plans.MigratePlan(c.Request().Context(), writeOf(c), param(c, "plan"), spec, h.windowUsage)
	if err != nil {
		return err
	}
	return respond(c, http.StatusOK, m)
}

// windowUsage is a customer's account and the usage of its customer-wide
// windows, as GET /v1/customers/{id}/usage reports them.
func (h *catalogHandlers) windowUsage(ctx context.Context, customer string) (tiers.Account, []tiers.WindowUsage, error) {
	a, usage, err := h.checker.Usage(ctx, customer, "")
	if err != nil {
		return tiers.Account{}, nil, err
	}
	out := make([]tiers.WindowUsage, 0, len(usage))
	for _, u := range usage {
		if u.Subject == "" {
			out = append(out, tiers.WindowUsage{Metric: u.Metric, Window: u.Window, Used: u.Used})
		}
	}
	return a, out, nil
}
