package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/whatif"
)

// WhatIf replays usage history against proposed limits. *whatif.Service
// implements it; its errors are *tiers.ValidationError,
// tiers.ErrPlanNotFound, tiers.ErrCustomerNotFound and
// tiers.ErrUnavailable.
type WhatIf interface {
	Run(ctx context.Context, spec whatif.Spec) (whatif.Answer, error)
}

var _ WhatIf = (*whatif.Service)(nil)

func (h *billingHandlers) whatIfReplay(c echo.Context) error {
	if h.whatIf == nil {
		return echo.ErrNotFound
	}
	var spec whatif.Spec
	if err := decodeBody(c, &spec); err != nil {
		return err
	}
	a, err := h.whatIf.Run(c.Request().Context(), spec)
	if err != nil {
		return err
	}
	return respond(c, http.StatusOK, a)
}
