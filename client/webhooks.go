package quotad

import (
	"context"
	"iter"
	"net/http"
	"time"
)

// Webhook event types.
const (
	EventThreshold      = "usage.threshold"
	EventOverageStarted = "usage.overage_started"
	EventLimitReached   = "usage.limit_reached"
	// EventGrantExhausted: checks drew the last unit of a grant.
	EventGrantExhausted = "grant.exhausted"
)

// WebhookSpec is the body of WebhooksService.Put.
type WebhookSpec struct {
	URL string `json:"url"`
	// Events: every event type when empty.
	Events []string `json:"events,omitempty"`
	// Thresholds are percents of a limit (1..1000) for usage.threshold;
	// [80, 100] when empty.
	Thresholds []int `json:"thresholds,omitempty"`
	// Secret signs deliveries ("whsec_" and the base64 of 24 to 64
	// bytes). Empty: quotad generates one on creation (returned in that
	// answer only) and keeps the current one on a replace.
	Secret string `json:"secret,omitempty"`
}

// Webhook is a receiver of usage events.
type Webhook struct {
	ID         string   `json:"id"`
	URL        string   `json:"url"`
	Events     []string `json:"events"`
	Thresholds []int    `json:"thresholds"`
	// Secret is set only in the answer to the WebhooksService.Put that created it.
	Secret string `json:"secret,omitempty"`
	// SecretHint is the secret's prefix, e.g. "whsec_AbCd…".
	SecretHint string `json:"secret_hint"`
	Meta
}

// WebhookDelivery is one event's delivery to one webhook.
type WebhookDelivery struct {
	// ID is the webhook-id header the receiver sees.
	ID    string `json:"id"`
	Event struct {
		Type     string `json:"type"`
		Customer string `json:"customer"`
		Metric   string `json:"metric"`
		// Window and WindowStart are a usage event's (empty and zero for
		// grant.exhausted, whose Grant is set).
		Window      string    `json:"window"`
		WindowStart time.Time `json:"window_start"`
		Threshold   int       `json:"threshold,omitempty"`
		Grant       string    `json:"grant,omitempty"`
	} `json:"event"`
	// Status is pending, delivered or failed.
	Status        string     `json:"status"`
	Attempts      int        `json:"attempts"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	LastAttemptAt *time.Time `json:"last_attempt_at,omitempty"`
	LastStatus    int        `json:"last_status,omitempty"`
	LastError     string     `json:"last_error,omitempty"`
	DeliveredAt   *time.Time `json:"delivered_at,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
}

// WebhooksService manages webhooks and reads their deliveries.
type WebhooksService service

// List lists the webhooks by id (without their secrets).
func (s *WebhooksService) List(ctx context.Context) iter.Seq2[Webhook, error] {
	return paginate(ctx, func(ctx context.Context, cursor string) (page[Webhook], error) {
		var out struct {
			Webhooks   []Webhook `json:"webhooks"`
			NextCursor string    `json:"next_cursor"`
		}
		_, err := s.client.do(ctx, call{method: http.MethodGet, path: "/v1/webhooks", query: listQuery(cursor, 0), retry: true, out: &out})
		fillETags(out.Webhooks, func(w *Webhook) *Meta { return &w.Meta })
		return page[Webhook]{out.Webhooks, out.NextCursor}, err
	})
}

// Get gets a webhook (without its secret); ErrNotFound if none has
// the id.
func (s *WebhooksService) Get(ctx context.Context, id string) (*Webhook, error) {
	var w Webhook
	if err := s.client.get(ctx, pathf("/v1/webhooks/%s", id), &w, &w.Meta); err != nil {
		return nil, err
	}
	return &w, nil
}

// Put creates or replaces a webhook, and says whether it created
// it; only a creation's answer carries the secret.
func (s *WebhooksService) Put(ctx context.Context, id string, spec WebhookSpec, opts ...WriteOption) (*Webhook, bool, error) {
	var w Webhook
	created, err := s.client.put(ctx, pathf("/v1/webhooks/%s", id), spec, &w, &w.Meta, opts)
	if err != nil {
		return nil, false, err
	}
	return &w, created, nil
}

// Delete deletes a webhook and its deliveries.
func (s *WebhooksService) Delete(ctx context.Context, id string, opts ...WriteOption) error {
	return s.client.del(ctx, pathf("/v1/webhooks/%s", id), opts)
}

// Deliveries lists a webhook's deliveries, newest first; pageSize
// is how many each request fetches (1..1000, quotad's default when 0).
func (s *WebhooksService) Deliveries(ctx context.Context, id string, pageSize int) iter.Seq2[WebhookDelivery, error] {
	return paginate(ctx, func(ctx context.Context, cursor string) (page[WebhookDelivery], error) {
		var out struct {
			Deliveries []WebhookDelivery `json:"deliveries"`
			NextCursor string            `json:"next_cursor"`
		}
		_, err := s.client.do(ctx, call{method: http.MethodGet, path: pathf("/v1/webhooks/%s/deliveries", id),
			query: listQuery(cursor, pageSize), retry: true, out: &out})
		return page[WebhookDelivery]{out.Deliveries, out.NextCursor}, err
	})
}
