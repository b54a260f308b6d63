package api

import (
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/tiers"
)

func (s *Server) write(c echo.Context) tiers.Write {
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

func (s *Server) listMetrics(c echo.Context) error {
	p, err := page(c, tiers.ValidKey)
	if err != nil {
		return err
	}
	items, more, err := s.catalog.Metrics(c.Request().Context(), p)
	if err != nil {
		return err
	}
	last := ""
	if len(items) > 0 {
		last = items[len(items)-1].Key
	}
	return respond(c, http.StatusOK, list("metrics", items, nextCursor(more, last)))
}

func (s *Server) getMetric(c echo.Context) error {
	m, err := s.catalog.Metric(c.Request().Context(), param(c, "metric"))
	if err != nil {
		return err
	}
	return respondResource(c, false, m.Version, m)
}

func (s *Server) putMetric(c echo.Context) error {
	var spec tiers.MetricSpec
	if err := decodeBody(c, &spec); err != nil {
		return err
	}
	m, created, err := s.catalog.PutMetric(c.Request().Context(), s.write(c), param(c, "metric"), spec)
	if err != nil {
		return err
	}
	return respondResource(c, created, m.Version, m)
}

func (s *Server) deleteMetric(c echo.Context) error {
	if err := s.catalog.DeleteMetric(c.Request().Context(), s.write(c), param(c, "metric")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// Plans.

func (s *Server) listPlans(c echo.Context) error {
	p, err := page(c, tiers.ValidKey)
	if err != nil {
		return err
	}
	items, more, err := s.catalog.Plans(c.Request().Context(), p)
	if err != nil {
		return err
	}
	last := ""
	if len(items) > 0 {
		last = items[len(items)-1].Key
	}
	return respond(c, http.StatusOK, list("plans", items, nextCursor(more, last)))
}

func (s *Server) getPlan(c echo.Context) error {
	p, err := s.catalog.Plan(c.Request().Context(), param(c, "plan"))
	if err != nil {
		return err
	}
	return respondResource(c, false, p.Version, p)
}

func (s *Server) putPlan(c echo.Context) error {
	var spec tiers.PlanSpec
	if err := decodeBody(c, &spec); err != nil {
		return err
	}
	grandfather, err := boolQuery(c, "grandfather")
	if err != nil {
		return err
	}
	p, created, err := s.catalog.PutPlan(c.Request().Context(), s.write(c), param(c, "plan"), spec, grandfather)
	if err != nil {
		return err
	}
	return respondResource(c, created, p.Version, p)
}

func (s *Server) deletePlan(c echo.Context) error {
	if err := s.catalog.DeletePlan(c.Request().Context(), s.write(c), param(c, "plan")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// Customers.

// maxCustomerQuery bounds the search text of GET /v1/customers?q=: as
// long as a customer's name may be.
const maxCustomerQuery = 200

func (s *Server) listCustomers(c echo.Context) error {
	p, err := page(c, tiers.ValidCustomerID)
	if err != nil {
		return err
	}
	f := tiers.CustomerFilter{Plan: c.QueryParam("plan"), Query: c.QueryParam("q"), Page: p}
	if c.QueryParams().Has("plan") {
		if err := tiers.CheckKey("plan", f.Plan); err != nil {
			return err
		}
	}
	if utf8.RuneCountInString(f.Query) > maxCustomerQuery || !utf8.ValidString(f.Query) {
		return tiers.Invalid("q", fmt.Sprintf("must be valid UTF-8 of at most %d characters", maxCustomerQuery))
	}
	items, more, err := s.catalog.Customers(c.Request().Context(), f)
	if err != nil {
		return err
	}
	last := ""
	if len(items) > 0 {
		last = items[len(items)-1].ID
	}
	return respond(c, http.StatusOK, list("customers", items, nextCursor(more, last)))
}

func (s *Server) getCustomer(c echo.Context) error {
	cu, err := s.catalog.Customer(c.Request().Context(), param(c, "customer"))
	if err != nil {
		return err
	}
	return respondResource(c, false, cu.Version, cu)
}

func (s *Server) putCustomer(c echo.Context) error {
	var spec tiers.CustomerSpec
	if err := decodeBody(c, &spec); err != nil {
		return err
	}
	cu, created, err := s.catalog.PutCustomer(c.Request().Context(), s.write(c), param(c, "customer"), spec)
	if err != nil {
		return err
	}
	return respondResource(c, created, cu.Version, cu)
}

func (s *Server) deleteCustomer(c echo.Context) error {
	if err := s.catalog.DeleteCustomer(c.Request().Context(), s.write(c), param(c, "customer")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) getLimits(c echo.Context) error {
	a, limits, err := s.catalog.Limits(c.Request().Context(), param(c, "customer"))
	if err != nil {
		return err
	}
	return respond(c, http.StatusOK, map[string]any{
		"customer": a.Customer.ID,
		"plan":     a.Plan.Key,
		"limits":   limits,
	})
}

// Overrides.

func validOverrideCursor(s string) bool {
	_, ok := tiers.ParseLimitKey(s)
	return ok
}

func (s *Server) listOverrides(c echo.Context) error {
	p, err := page(c, validOverrideCursor)
	if err != nil {
		return err
	}
	items, more, err := s.catalog.Overrides(c.Request().Context(), param(c, "customer"), p)
	if err != nil {
		return err
	}
	last := ""
	if len(items) > 0 {
		last = items[len(items)-1].Key().String()
	}
	return respond(c, http.StatusOK, list("overrides", items, nextCursor(more, last)))
}

// overridePer returns the per of the override a request addresses, its
// query's ?per= ("" when it has none: the customer-wide override). The
// service judges the value with the rest of the address; an empty one is
// refused here, as an empty limit or cursor is.
func overridePer(c echo.Context) (string, error) {
	per := c.QueryParam("per")
	if per == "" && c.QueryParams().Has("per") {
		return "", tiers.CheckPer("per", per)
	}
	return per, nil
}

func (s *Server) getOverride(c echo.Context) error {
	per, err := overridePer(c)
	if err != nil {
		return err
	}
	o, err := s.catalog.Override(c.Request().Context(), param(c, "customer"), param(c, "metric"), param(c, "window"), per)
	if err != nil {
		return err
	}
	return respondResource(c, false, o.Version, o)
}

// putOverride writes the override its URL addresses, per included: the
// body's per, if any, must agree (tiers.OverrideSpec.Validate), so that a
// body never says which override it is.
func (s *Server) putOverride(c echo.Context) error {
	var spec tiers.OverrideSpec
	if err := decodeBody(c, &spec); err != nil {
		return err // 415 and 413 come before a 400 of the address
	}
	per, err := overridePer(c)
	if err != nil {
		return err
	}
	o, created, err := s.catalog.PutOverride(c.Request().Context(), s.write(c),
		param(c, "customer"), param(c, "metric"), param(c, "window"), per, spec)
	if err != nil {
		return err
	}
	location := c.Request().URL.Path
	if o.Per != tiers.PerCustomer {
		location += "?per=" + o.Per.String()
	}
	return respondResourceAt(c, created, o.Version, o, location)
}

func (s *Server) deleteOverride(c echo.Context) error {
	per, err := overridePer(c)
	if err != nil {
		return err
	}
	err = s.catalog.DeleteOverride(c.Request().Context(), s.write(c),
		param(c, "customer"), param(c, "metric"), param(c, "window"), per)
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// Audit.

func (s *Server) listAudit(c echo.Context) error {
	limit, after, err := pageParams(c)
	if err != nil {
		return err
	}
	f := tiers.AuditFilter{Limit: limit, Customer: c.QueryParam("customer")}
	if after != "" {
		id, ok := parseID(after)
		if !ok {
			return invalid("cursor", "is not a cursor this service returned")
		}
		f.Before = id
	}
	if c.QueryParams().Has("customer") {
		if err := tiers.CheckCustomerID("customer", f.Customer); err != nil {
			return err
		}
	}
	events, more, err := s.catalog.AuditEvents(c.Request().Context(), f)
	if err != nil {
		return err
	}
	last := ""
	if len(events) > 0 {
		last = formatID(events[len(events)-1].ID)
	}
	return respond(c, http.StatusOK, list("events", events, nextCursor(more, last)))
}
