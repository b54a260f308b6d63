package api

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/grants"
	"github.com/quotad/quotad/internal/tiers"
)

// Grants is the admin side of grants. *grants.Service implements it; its
// errors are grants.ErrGrantNotFound, tiers' sentinels and
// *tiers.ValidationError.
type Grants interface {
	CreateGrant(ctx context.Context, w tiers.Write, customer string, spec grants.Spec) (grants.Grant, bool, error)
	Grants(ctx context.Context, customer string, all bool) ([]grants.Grant, error)
	VoidGrant(ctx context.Context, w tiers.Write, id string) error
	LiveGrants
}

// LiveGrants is what entitlements read of grants: a customer's live ones.
type LiveGrants interface {
	Live(ctx context.Context, c tiers.Customer, at time.Time) ([]grants.Grant, error)
}

var _ Grants = (*grants.Service)(nil)

// grantHandlers serve the grants' routes; without grants they answer
// 404 grant_not_found.
type grantHandlers struct {
	grants Grants
}

// codeGrantNotFound: no grant that is not voided has the id.
const codeGrantNotFound = "grant_not_found"

func (h *grantHandlers) grantService() (Grants, error) {
	if h.grants == nil {
		return nil, grants.ErrGrantNotFound
	}
	return h.grants, nil
}

func (h *grantHandlers) createGrant(c echo.Context) error {
	var spec grants.Spec
	if err := decodeBody(c, &spec); err != nil {
		return err
	}
	svc, err := h.grantService()
	if err != nil {
		return err
	}
	customer := param(c, "customer")
	g, created, err := svc.CreateGrant(c.Request().Context(), writeOf(c), customer, spec)
	if err != nil {
		return aboutCustomer(customer, err)
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK // a repeat of the request: the grant it made
	}
	return respond(c, status, g)
}

func (h *grantHandlers) listGrants(c echo.Context) error {
	all, err := boolQuery(c, "all")
	if err != nil {
		return err
	}
	svc, err := h.grantService()
	if err != nil {
		return err
	}
	customer := param(c, "customer")
	list, err := svc.Grants(c.Request().Context(), customer, all)
	if err != nil {
		return aboutCustomer(customer, err)
	}
	if list == nil {
		list = []grants.Grant{}
	}
	return respond(c, http.StatusOK, map[string]any{"grants": list})
}

func (h *grantHandlers) voidGrant(c echo.Context) error {
	svc, err := h.grantService()
	if err != nil {
		return err
	}
	if err := svc.VoidGrant(c.Request().Context(), writeOf(c), param(c, "grant")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
