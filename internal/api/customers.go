package api

import (
	"context"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/tiers"
)

// CustomerCatalog is the catalog's customers and their effective limits.
// *tiers.Service implements it; its errors are tiers' sentinels and
// *tiers.ValidationError.
type CustomerCatalog interface {
	Customer(ctx context.Context, id string) (tiers.Customer, error)
	Customers(ctx context.Context, f tiers.CustomerFilter) ([]tiers.Customer, bool, error)
	PutCustomer(ctx context.Context, w tiers.Write, id string, spec tiers.CustomerSpec) (tiers.Customer, bool, error)
	DeleteCustomer(ctx context.Context, w tiers.Write, id string) error
	Limits(ctx context.Context, id string) (tiers.Account, []tiers.EffectiveLimit, error)
}

// OverrideCatalog is the catalog's overrides of customers' limits.
// *tiers.Service implements it; its errors are tiers' sentinels and
// *tiers.ValidationError.
type OverrideCatalog interface {
	Override(ctx context.Context, customer, metric, window, per string) (tiers.Override, error)
	Overrides(ctx context.Context, customer string, page tiers.Page) ([]tiers.Override, bool, error)
	PutOverride(ctx context.Context, w tiers.Write, customer, metric, window, per string, spec tiers.OverrideSpec) (tiers.Override, bool, error)
	DeleteOverride(ctx context.Context, w tiers.Write, customer, metric, window, per string) error
}

var (
	_ CustomerCatalog = (*tiers.Service)(nil)
	_ OverrideCatalog = (*tiers.Service)(nil)
)

// customerHandlers serve the customers, their limits and the overrides
// of them.
type customerHandlers struct {
	customers CustomerCatalog
	overrides OverrideCatalog
}

// Customers.

// maxCustomerQuery bounds the search text of GET /v1/customers?q=: as
// long as a customer's name may be.
const maxCustomerQuery = 200

func (h *customerHandlers) listCustomers(c echo.Context) error {
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
	items, more, err := h.customers.Customers(c.Request().Context(), f)
	if err != nil {
		return err
	}
	last := ""
	if len(items) > 0 {
		last = items[len(items)-1].ID
	}
	return respond(c, http.StatusOK, list("customers", items, nextCursor(more, last)))
}

func (h *customerHandlers) getCustomer(c echo.Context) error {
	cu, err := h.customers.Customer(c.Request().Context(), param(c, "customer"))
	if err != nil {
		return err
	}
	return respondResource(c, false, cu.Version, cu)
}

func (h *customerHandlers) putCustomer(c echo.Context) error {
	var spec tiers.CustomerSpec
	if err := decodeBody(c, &spec); err != nil {
		return err
	}
	cu, created, err := h.customers.PutCustomer(c.Request().Context(), writeOf(c), param(c, "customer"), spec)
	if err != nil {
		return err
	}
	return respondResource(c, created, cu.Version, cu)
}

func (h *customerHandlers) deleteCustomer(c echo.Context) error {
	if err := h.customers.DeleteCustomer(c.Request().Context(), writeOf(c), param(c, "customer")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h *customerHandlers) getLimits(c echo.Context) error {
	a, limits, err := h.customers.Limits(c.Request().Context(), param(c, "customer"))
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

func (h *customerHandlers) listOverrides(c echo.Context) error {
	p, err := page(c, validOverrideCursor)
	if err != nil {
		return err
	}
	items, more, err := h.overrides.Overrides(c.Request().Context(), param(c, "customer"), p)
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

func (h *customerHandlers) getOverride(c echo.Context) error {
	per, err := overridePer(c)
	if err != nil {
		return err
	}
	o, err := h.overrides.Override(c.Request().Context(), param(c, "customer"), param(c, "metric"), param(c, "window"), per)
	if err != nil {
		return err
	}
	return respondResource(c, false, o.Version, o)
}

// putOverride writes the override its URL addresses, per included: the
// body's per, if any, must agree (tiers.OverrideSpec.Validate), so that a
// body never says which override it is.
func (h *customerHandlers) putOverride(c echo.Context) error {
	var spec tiers.OverrideSpec
	if err := decodeBody(c, &spec); err != nil {
		return err // 415 and 413 come before a 400 of the address
	}
	per, err := overridePer(c)
	if err != nil {
		return err
	}
	o, created, err := h.overrides.PutOverride(c.Request().Context(), writeOf(c),
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

func (h *customerHandlers) deleteOverride(c echo.Context) error {
	per, err := overridePer(c)
	if err != nil {
		return err
	}
	err = h.overrides.DeleteOverride(c.Request().Context(), writeOf(c),
		param(c, "customer"), param(c, "metric"), param(c, "window"), per)
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
