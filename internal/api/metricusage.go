package api

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// globalUsageEntry is one window of GET /v1/metrics/{metric}/usage.
type globalUsageEntry struct {
	Window tiers.Window `json:"window"`
	// Capacity and Remaining are null for a window without capacity
	// (every window listed has one today: global usage is counted only
	// where the metric declares a capacity).
	Capacity  *int64    `json:"capacity"`
	Used      int64     `json:"used"`
	Remaining *int64    `json:"remaining"`
	ResetAt   time.Time `json:"reset_at"`
	// Scope is "shared" when used counts every quotad process's units,
	// "process" when only this process's (short windows without a shared
	// store, or while it is out of reach).
	Scope string `json:"scope"`
}

func toGlobalUsageEntries(us []quota.GlobalUsage) []globalUsageEntry {
	out := make([]globalUsageEntry, len(us))
	for i, u := range us {
		capacity, remaining := u.Capacity, u.Remaining
		scope := "process"
		if u.Shared {
			scope = "shared"
		}
		out[i] = globalUsageEntry{Window: u.Window, Capacity: &capacity, Used: u.Used,
			Remaining: &remaining, ResetAt: u.ResetAt, Scope: scope}
	}
	return out
}

// metricUsage answers GET /v1/metrics/{metric}/usage: the metric's global
// usage in each window with a capacity.
func (h *usageHandlers) metricUsage(c echo.Context) error {
	m, usage, err := h.checker.MetricUsage(c.Request().Context(), param(c, "metric"))
	if err != nil {
		return err
	}
	return respond(c, http.StatusOK, map[string]any{
		"metric": m.Key,
		"usage":  toGlobalUsageEntries(usage),
	})
}
