package api

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// usageHandlers serve what customers have used and may use: usage, its
// history, the totals an operator sets, entitlements (with the live
// grants) and a metric's global usage.
type usageHandlers struct {
	checker Checker
	grants  LiveGrants
}

func (h *usageHandlers) usage(c echo.Context) error {
	q := c.QueryParams()
	subject := q.Get("subject")
	if q.Has("subject") && !tiers.ValidSubject(subject) {
		return invalid("subject", tiers.SubjectRule)
	}
	acct, usage, err := h.checker.Usage(c.Request().Context(), param(c, "customer"), subject)
	if err != nil {
		return err
	}
	return respond(c, http.StatusOK, map[string]any{
		"customer": acct.Customer.ID,
		"plan":     acct.Plan.Key,
		"usage":    toUsageEntries(usage),
	})
}

func (h *usageHandlers) resetUsage(c echo.Context) error {
	if err := h.checker.Reset(c.Request().Context(), actor(c), param(c, "customer"), param(c, "metric")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// totalRequest is the body of PUT /v1/customers/{id}/usage/{metric}/total.
type totalRequest struct {
	Used *int64 `json:"used"`
}

// totalAnswer is its answer: the customer's total of the metric as set.
type totalAnswer struct {
	Customer string `json:"customer"`
	usageEntry
}

// putTotal sets a customer's gauge (window total) of a metric outright.
func (h *usageHandlers) putTotal(c echo.Context) error {
	var req totalRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if req.Used == nil {
		return tiers.Invalid("used", "is required")
	}
	customer := param(c, "customer")
	u, err := h.checker.SetTotal(c.Request().Context(), actor(c), customer, param(c, "metric"), *req.Used)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, totalAnswer{Customer: customer, usageEntry: toUsageEntries([]quota.Usage{u})[0]})
}

const dateLayout = "2006-01-02"

// historyDefaultDays is how far back history goes without from.
const historyDefaultDays = 30

func (h *usageHandlers) history(c echo.Context) error {
	to := h.checker.Today(c.Request().Context(), param(c, "customer"))
	var from time.Time
	q := c.QueryParams()
	if q.Has("to") {
		t, err := time.Parse(dateLayout, q.Get("to"))
		if err != nil {
			return invalid("to", "must be a date, YYYY-MM-DD")
		}
		to = t
	}
	if q.Has("from") {
		f, err := time.Parse(dateLayout, q.Get("from"))
		if err != nil {
			return invalid("from", "must be a date, YYYY-MM-DD")
		}
		from = f
	} else {
		from = to.AddDate(0, 0, -(historyDefaultDays - 1))
	}
	days, err := h.checker.History(c.Request().Context(), param(c, "customer"), q.Get("metric"), from, to)
	if err != nil {
		return err
	}
	out := make([]historyDay, len(days))
	for i, d := range days {
		out[i] = historyDay{Date: d.Date.Format(dateLayout), Metric: d.Metric, Used: d.Used,
			Overage: d.Overage, Denied: d.Denied}
	}
	return respond(c, http.StatusOK, map[string]any{"days": out})
}
