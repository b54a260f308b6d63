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
	Live(ctx context.Context, c tiers.Customer, at time.Time) ([]grants.Grant, error)
}

var _ Grants = (*grants.Service)(nil)

// codeGrantNotFound: no grant that is not voided has the id.
const codeGrantNotFound = "grant_not_found"

func (s *Server) registerGrants(v1 *echo.Group) {
	v1.POST("/customers/:customer/grants", s.createGrant)
	v1.GET("/customers/:customer/grants", s.listGrants)
	v1.DELETE("/grants/:grant", s.voidGrant)
}

func (s *Server) grantService() (Grants, error) {
	if s.grants == nil {
		return nil, grants.ErrGrantNotFound
	}
	return s.grants, nil
}

func (s *Server) createGrant(c echo.Context) error {
	var spec grants.Spec
	if err := decodeBody(c, &spec); err != nil {
		return err
	}
	svc, err := s.grantService()
	if err != nil {
		return err
	}
	customer := param(c, "customer")
	g, created, err := svc.CreateGrant(c.Request().Context(), s.write(c), customer, spec)
	if err != nil {
		return aboutCustomer(customer, err)
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK // a repeat of the request: the grant it made
	}
	return respond(c, status, g)
}

func (s *Server) listGrants(c echo.Context) error {
	all, err := boolParam(c, "all")
	if err != nil {
		return err
	}
	svc, err := s.grantService()
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

func (s *Server) voidGrant(c echo.Context) error {
	svc, err := s.grantService()
	if err != nil {
		return err
	}
	if err := svc.VoidGrant(c.Request().Context(), s.write(c), param(c, "grant")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
