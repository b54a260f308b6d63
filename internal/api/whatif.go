package api

import (
	"context"
	"errors"
	"net/http"
	"time"

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

// whatIfPath is the what-if's route. A what-if is not bound by the
// request timeout as a whole: it reads history a day at a time, each day
// within it (whatif.Service.DayTimeout), and may take as many as it
// replays; its answer may be written that much later.
const whatIfPath = "/v1/what-if"

func (h *billingHandlers) whatIfReplay(c echo.Context) error {
	if h.whatIf == nil {
		return echo.ErrNotFound
	}
	var spec whatif.Spec
	if err := decodeBody(c, &spec); err != nil {
		return err
	}
	if days := whatif.Days(spec); days > 0 {
		// The server's write timeout counts from the request's end: a
		// long replay pushes it back, by a request timeout per day.
		deadline := time.Now().Add(time.Duration(days+1) * h.requestTimeout)
		if err := http.NewResponseController(c.Response().Writer).SetWriteDeadline(deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
	}
	a, err := h.whatIf.Run(c.Request().Context(), spec)
	if err != nil {
		return err
	}
	return respond(c, http.StatusOK, a)
}
