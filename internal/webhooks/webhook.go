package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// ErrWebhookNotFound: no webhook has the id.
var ErrWebhookNotFound = errors.New("webhook not found")

// Limits of a webhook's fields.
const (
	MaxURLLen        = 2048
	MaxThresholds    = 20
	MaxThreshold     = 1000
	SecretPrefix     = "whsec_"
	minSecretBytes   = 24
	maxSecretBytes   = 64
	newSecretBytes   = 32
	secretHintLength = 4
)

// DefaultThresholds are the threshold percents of a webhook that names
// none.
var DefaultThresholds = []int{80, 100}

// Webhook is a receiver of usage events. Its Secret signs deliveries and is
// shown to the client once, in the answer to the write that created it;
// SecretHint is what every other answer (and the audit log) shows of it.
type Webhook struct {
	ID         string      `json:"id"`
	URL        string      `json:"url"`
	Events     []EventType `json:"events"`
	Thresholds []int       `json:"thresholds"`
	Secret     string      `json:"-"`
	SecretHint string      `json:"secret_hint"`
	Version    int64       `json:"version"`
	CreatedAt  time.Time   `json:"created_at"`
	UpdatedAt  time.Time   `json:"updated_at"`
}

// Spec is the body of PUT /v1/webhooks/{id}: a full replace, except that
// an omitted secret keeps the current one (or, on creation, has quotad
// generate one).
type Spec struct {
	URL        string      `json:"url"`
	Events     []EventType `json:"events,omitempty"`
	Thresholds []int       `json:"thresholds,omitempty"`
	Secret     *string     `json:"secret,omitempty"`
}

// SecretHint returns what may be shown of secret: its prefix and first
// characters, e.g. "whsec_AbCd…".
func SecretHint(secret string) string {
	key := strings.TrimPrefix(secret, SecretPrefix)
	if len(key) > secretHintLength {
		key = key[:secretHintLength]
	}
	return SecretPrefix + key + "…"
}

// NewSecret returns a fresh signing secret: "whsec_" and the base64 of 32
// random bytes.
func NewSecret() (string, error) {
	var key [newSecretBytes]byte
	if _, err := rand.Read(key[:]); err != nil {
		return "", fmt.Errorf("generate webhook secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key[:]), nil
}

// CheckSecret returns a message about what is wrong with secret, or "".
func CheckSecret(secret string) string {
	key, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return `must start with "whsec_"`
	}
	b, err := base64.StdEncoding.Strict().DecodeString(key)
	if err != nil {
		return `must be "whsec_" followed by standard base64`
	}
	if len(b) < minSecretBytes || len(b) > maxSecretBytes {
		return fmt.Sprintf("must encode %d to %d bytes, not %d", minSecretBytes, maxSecretBytes, len(b))
	}
	return ""
}

// CheckURL returns a message about what is wrong with a receiver's URL, or
// "". Whether its host is a private address is judged when quotad connects
// (see NewClient), since a name may resolve differently then.
func CheckURL(raw string) string {
	switch {
	case raw == "":
		return "is required"
	case len(raw) > MaxURLLen:
		return fmt.Sprintf("must be at most %d characters", MaxURLLen)
	case !strings.HasPrefix(raw, "http://") && !strings.HasPrefix(raw, "https://"):
		return "must be an absolute http:// or https:// URL"
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "is not a valid URL"
	case u.Host == "" || u.Hostname() == "":
		return "must name a host"
	case u.User != nil:
		return "must not carry a user or password"
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "must not have a fragment"
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] <= ' ' || raw[i] == 0x7f {
			return "must not contain spaces or control characters"
		}
	}
	return ""
}

// Validate checks spec for the webhook id and returns the webhook it
// describes, with defaults filled in and thresholds sorted; its Secret is
// the spec's, or "" when omitted. Errors are *tiers.ValidationError.
func (s Spec) Validate(id string) (Webhook, error) {
	var fields []tiers.FieldError
	add := func(field, msg string) { fields = append(fields, tiers.FieldError{Field: field, Message: msg}) }
	var ve *tiers.ValidationError
	if errors.As(tiers.CheckKey("id", id), &ve) {
		fields = append(fields, ve.Fields...)
	}
	if msg := CheckURL(s.URL); msg != "" {
		add("url", msg)
	}
	w := Webhook{ID: id, URL: s.URL}
	switch {
	case s.Events == nil:
		w.Events = slices.Clone(EventTypes)
	case len(s.Events) == 0:
		add("events", "must not be empty; omit it for every event type")
	default:
		for i, e := range s.Events {
			switch {
			case !e.Valid():
				add(fmt.Sprintf("events[%d]", i), `must be "usage.threshold", "usage.overage_started", "usage.limit_reached" or "grant.exhausted"`)
			case slices.Contains(s.Events[:i], e):
				add(fmt.Sprintf("events[%d]", i), "is named twice")
			}
		}
		// The order of EventTypes, whatever the request's.
		for _, e := range EventTypes {
			if slices.Contains(s.Events, e) {
				w.Events = append(w.Events, e)
			}
		}
	}
	switch {
	case s.Thresholds == nil:
		w.Thresholds = slices.Clone(DefaultThresholds)
	case len(s.Thresholds) == 0:
		add("thresholds", "must not be empty; omit it for [80, 100]")
	case len(s.Thresholds) > MaxThresholds:
		add("thresholds", fmt.Sprintf("must name at most %d thresholds", MaxThresholds))
	default:
		for i, t := range s.Thresholds {
			switch {
			case t < 1 || t > MaxThreshold:
				add(fmt.Sprintf("thresholds[%d]", i), fmt.Sprintf("must be a percent from 1 to %d", MaxThreshold))
			case slices.Contains(s.Thresholds[:i], t):
				add(fmt.Sprintf("thresholds[%d]", i), "is named twice")
			}
		}
		w.Thresholds = slices.Sorted(slices.Values(s.Thresholds))
	}
	if s.Secret != nil {
		if msg := CheckSecret(*s.Secret); msg != "" {
			add("secret", msg)
		}
		w.Secret = *s.Secret
	}
	if fields != nil {
		return Webhook{}, &tiers.ValidationError{Fields: fields}
	}
	return w, nil
}

// Status is where a delivery stands.
type Status string

// Delivery statuses.
const (
	Pending   Status = "pending"
	Delivered Status = "delivered"
	Failed    Status = "failed"
)

// DeliveryEvent is what a delivery listing shows of its event.
type DeliveryEvent struct {
	Type     EventType `json:"type"`
	Customer string    `json:"customer"`
	// Metric is absent on trial.ended, which concerns no metric.
	Metric string `json:"metric,omitempty"`
	// Window and WindowStart are a usage event's; nil for grant.exhausted
	// and trial.ended.
	Window      *tiers.Window `json:"window,omitempty"`
	WindowStart *time.Time    `json:"window_start,omitempty"`
	Threshold   int           `json:"threshold,omitempty"`
	// Grant is grant.exhausted's grant.
	Grant string `json:"grant,omitempty"`
	// Plan and NextPlan are trial.ended's: the trial's plan and the
	// customer's after it.
	Plan     string `json:"plan,omitempty"`
	NextPlan string `json:"next_plan,omitempty"`
}

// Delivery is one event's delivery to one webhook, as
// GET /v1/webhooks/{id}/deliveries lists it. Its ID is the message id the
// receiver sees in the webhook-id header.
type Delivery struct {
	ID            string        `json:"id"`
	Event         DeliveryEvent `json:"event"`
	Status        Status        `json:"status"`
	Attempts      int           `json:"attempts"`
	NextAttemptAt *time.Time    `json:"next_attempt_at,omitempty"` // pending ones only
	LastAttemptAt *time.Time    `json:"last_attempt_at,omitempty"`
	LastStatus    int           `json:"last_status,omitempty"` // the receiver's HTTP status, if it answered
	LastError     string        `json:"last_error,omitempty"`
	DeliveredAt   *time.Time    `json:"delivered_at,omitempty"`
	CreatedAt     time.Time     `json:"created_at"`
}

// MessageID is the webhook-id of the delivery with row id n.
func MessageID(n int64) string { return fmt.Sprintf("msg_%d", n) }

// ParseMessageID is MessageID's inverse.
func ParseMessageID(s string) (int64, bool) {
	var n int64
	digits, ok := strings.CutPrefix(s, "msg_")
	if !ok || digits == "" || len(digits) > 18 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, n > 0
}

// DeliveryFilter selects one webhook's deliveries, newest first: at most
// Limit of them with a row id below Before (0: from the newest).
type DeliveryFilter struct {
	Webhook string
	Limit   int
	Before  int64
}

// Store keeps webhooks. Put and Delete run in one transaction that records
// an audit event (showing the secret's hint, never the secret) and checks
// w.IfMatch. Errors: ErrWebhookNotFound, tiers.ErrPreconditionFailed,
// tiers.ErrUnavailable. Implementations are safe for concurrent use.
type Store interface {
	FindWebhook(ctx context.Context, id string) (Webhook, error)
	// FindWebhooks returns one page of webhooks ordered by id.
	FindWebhooks(ctx context.Context, page tiers.Page) ([]Webhook, bool, error)
	// PutWebhook creates or replaces wh. keepSecret keeps an existing
	// webhook's secret instead of wh.Secret (which a creation uses).
	PutWebhook(ctx context.Context, w tiers.Write, wh Webhook, keepSecret bool) (Webhook, bool, error)
	DeleteWebhook(ctx context.Context, w tiers.Write, id string) error
	// FindDeliveries returns ErrWebhookNotFound for an unknown webhook.
	FindDeliveries(ctx context.Context, f DeliveryFilter) ([]Delivery, bool, error)
}

// Service is the admin side of webhooks: validation, secrets, the time of
// writes.
type Service struct {
	store Store
	now   func() time.Time
	// allowPrivate: deliveries may go to private addresses (see Refused),
	// so a URL may name one.
	allowPrivate bool
}

// NewService returns a Service over store; now stamps writes. Unless
// allowPrivate, a webhook's URL may not name an address Refused names
// literally: quotad would refuse every delivery to it.
func NewService(store Store, now func() time.Time, allowPrivate bool) *Service {
	return &Service{store: store, now: now, allowPrivate: allowPrivate}
}

// refusedURL returns why deliveries to raw, a URL CheckURL accepts, would
// all be refused, or "": its host is an address Refused names. A host name
// is checked when a delivery connects, whatever it resolves to then.
func refusedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	addr, err := netip.ParseAddr(u.Hostname())
	if err != nil || !Refused(addr) {
		return ""
	}
	return fmt.Sprintf("names %s, %s, to which quotad does not deliver (QUOTAD_WEBHOOK_ALLOW_PRIVATE=true on every process allows it)", addr.Unmap(), notPublic)
}

// Webhook returns the webhook id.
func (s *Service) Webhook(ctx context.Context, id string) (Webhook, error) {
	if err := tiers.CheckKey("id", id); err != nil {
		return Webhook{}, err
	}
	return s.store.FindWebhook(ctx, id)
}

// Webhooks lists the webhooks by id, one page at a time.
func (s *Service) Webhooks(ctx context.Context, page tiers.Page) ([]Webhook, bool, error) {
	return s.store.FindWebhooks(ctx, page)
}

// PutWebhook creates or replaces the webhook id. created tells a creation,
// whose answer alone shows the secret.
func (s *Service) PutWebhook(ctx context.Context, w tiers.Write, id string, spec Spec) (Webhook, bool, error) {
	wh, err := spec.Validate(id)
	if err != nil {
		return Webhook{}, false, err
	}
	if msg := refusedURL(wh.URL); msg != "" && !s.allowPrivate {
		return Webhook{}, false, &tiers.ValidationError{Fields: []tiers.FieldError{{Field: "url", Message: msg}}}
	}
	keep := spec.Secret == nil
	if keep {
		if wh.Secret, err = NewSecret(); err != nil {
			return Webhook{}, false, err
		}
	}
	w.At = tiers.Instant(s.now())
	return s.store.PutWebhook(ctx, w, wh, keep)
}

// DeleteWebhook deletes the webhook id and its deliveries.
func (s *Service) DeleteWebhook(ctx context.Context, w tiers.Write, id string) error {
	if err := tiers.CheckKey("id", id); err != nil {
		return err
	}
	w.At = tiers.Instant(s.now())
	return s.store.DeleteWebhook(ctx, w, id)
}

// Deliveries lists one webhook's deliveries, newest first.
func (s *Service) Deliveries(ctx context.Context, f DeliveryFilter) ([]Delivery, bool, error) {
	if err := tiers.CheckKey("id", f.Webhook); err != nil {
		return nil, false, err
	}
	return s.store.FindDeliveries(ctx, f)
}
