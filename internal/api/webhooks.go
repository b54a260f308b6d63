package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/tiers"
	"github.com/quotad/quotad/internal/webhooks"
)

// Webhooks is the admin side of webhooks. *webhooks.Service implements it;
// its errors are webhooks.ErrWebhookNotFound, tiers' sentinels and
// *tiers.ValidationError.
type Webhooks interface {
	Webhook(ctx context.Context, id string) (webhooks.Webhook, error)
	Webhooks(ctx context.Context, page tiers.Page) ([]webhooks.Webhook, bool, error)
	PutWebhook(ctx context.Context, w tiers.Write, id string, spec webhooks.Spec) (webhooks.Webhook, bool, error)
	DeleteWebhook(ctx context.Context, w tiers.Write, id string) error
	Deliveries(ctx context.Context, f webhooks.DeliveryFilter) ([]webhooks.Delivery, bool, error)
}

var _ Webhooks = (*webhooks.Service)(nil)

// createdWebhook is the answer to the PUT that created a webhook: the one
// answer that shows its secret.
type createdWebhook struct {
	webhooks.Webhook
	Secret string `json:"secret"`
}

// webhookHandlers serve /v1/webhooks; without webhooks they answer 404
// webhook_not_found.
type webhookHandlers struct {
	webhooks Webhooks
}

func (h *webhookHandlers) webhookService() (Webhooks, error) {
	if h.webhooks == nil {
		return nil, webhooks.ErrWebhookNotFound
	}
	return h.webhooks, nil
}

func (h *webhookHandlers) listWebhooks(c echo.Context) error {
	p, err := page(c, tiers.ValidKey)
	if err != nil {
		return err
	}
	svc, err := h.webhookService()
	if err != nil {
		return err
	}
	items, more, err := svc.Webhooks(c.Request().Context(), p)
	if err != nil {
		return err
	}
	last := ""
	if len(items) > 0 {
		last = items[len(items)-1].ID
	}
	return respond(c, http.StatusOK, list("webhooks", items, nextCursor(more, last)))
}

func (h *webhookHandlers) getWebhook(c echo.Context) error {
	svc, err := h.webhookService()
	if err != nil {
		return err
	}
	wh, err := svc.Webhook(c.Request().Context(), param(c, "webhook"))
	if err != nil {
		return err
	}
	return respondResource(c, false, wh.Version, wh)
}

func (h *webhookHandlers) putWebhook(c echo.Context) error {
	var spec webhooks.Spec
	if err := decodeBody(c, &spec); err != nil {
		return err
	}
	svc, err := h.webhookService()
	if err != nil {
		return err
	}
	wh, created, err := svc.PutWebhook(c.Request().Context(), writeOf(c), param(c, "webhook"), spec)
	if err != nil {
		return err
	}
	if created {
		return respondResource(c, true, wh.Version, createdWebhook{Webhook: wh, Secret: wh.Secret})
	}
	return respondResource(c, false, wh.Version, wh)
}

func (h *webhookHandlers) deleteWebhook(c echo.Context) error {
	svc, err := h.webhookService()
	if err != nil {
		return err
	}
	if err := svc.DeleteWebhook(c.Request().Context(), writeOf(c), param(c, "webhook")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h *webhookHandlers) listDeliveries(c echo.Context) error {
	limit, after, err := pageParams(c)
	if err != nil {
		return err
	}
	f := webhooks.DeliveryFilter{Webhook: param(c, "webhook"), Limit: limit}
	if after != "" {
		id, ok := parseID(after)
		if !ok {
			return invalid("cursor", "is not a cursor this service returned")
		}
		f.Before = id
	}
	svc, err := h.webhookService()
	if err != nil {
		return err
	}
	items, more, err := svc.Deliveries(c.Request().Context(), f)
	if err != nil {
		return err
	}
	last := ""
	if len(items) > 0 {
		if id, ok := webhooks.ParseMessageID(items[len(items)-1].ID); ok {
			last = formatID(id)
		}
	}
	return respond(c, http.StatusOK, list("deliveries", items, nextCursor(more, last)))
}
