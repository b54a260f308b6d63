package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/quota/lease"
)

// Holders serves /v1/admin/holders: the processes that hold leases, and
// the release of one known dead. *store.Holders implements it.
type Holders interface {
	List(ctx context.Context) ([]lease.Holder, error)
	Reclaim(ctx context.Context, holder uint32, actor string, now time.Time) (lease.Reclaimed, error)
}

// holderView is one holder of GET /v1/admin/holders.
type holderView struct {
	Holder    uint32     `json:"holder"`
	Running   bool       `json:"running"`
	Self      bool       `json:"self"`
	StartedAt *time.Time `json:"started_at"`
	GoneSince *time.Time `json:"gone_since"`
	Leases    int64      `json:"leases"`
	Unused    int64      `json:"unused"`
}

// releaseView is POST /v1/admin/holders/{holder}/release's answer.
type releaseView struct {
	Holder uint32 `json:"holder"`
	Leases int64  `json:"leases"`
	Units  int64  `json:"units"`
}

func (a *adminHandlers) listHolders(c echo.Context) error {
	if a.holders == nil {
		return echo.ErrNotFound
	}
	got, err := a.holders.List(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]holderView, len(got))
	for i, h := range got {
		out[i] = holderView{Holder: h.ID, Running: h.Running, Self: h.Self, GoneSince: h.GoneSince,
			Leases: h.Leases, Unused: h.Unused}
		if !h.StartedAt.IsZero() {
			out[i].StartedAt = &got[i].StartedAt
		}
	}
	return respond(c, http.StatusOK, list("holders", out, ""))
}

func (a *adminHandlers) releaseHolder(c echo.Context) error {
	if a.holders == nil {
		return echo.ErrNotFound
	}
	raw := c.Param("holder")
	key, err := strconv.ParseUint(raw, 10, 32)
	if err != nil || strconv.FormatUint(key, 10) != raw {
		return invalid("holder", "must be a holder's key as GET /v1/admin/holders lists it: a decimal integer from 0 to 4294967295")
	}
	got, err := a.holders.Reclaim(c.Request().Context(), uint32(key), actor(c), time.Now().UTC())
	switch {
	case errors.Is(err, lease.ErrHolderUnknown):
		return problemf(http.StatusNotFound, codeNotFound, fmt.Sprintf("no process holds or held leases as holder %d", key))
	case errors.Is(err, lease.ErrHolderSelf):
		return problemf(http.StatusConflict, codeConflict, fmt.Sprintf("holder %d is the process that answers: release a process known dead from another one", key))
	case errors.Is(err, lease.ErrHolderRunning):
		return problemf(http.StatusConflict, codeConflict, fmt.Sprintf("holder %d is running: its PostgreSQL session is there (or came back); it keeps its leases (%d taken back before it did)", key, got.Leases))
	case err != nil:
		return err
	}
	return respond(c, http.StatusOK, releaseView{Holder: uint32(key), Leases: got.Leases, Units: got.Units})
}
