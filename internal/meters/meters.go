// Package meters sends the usage quotad counts to Stripe Billing meters:
// every interval, the units each customer used of each configured metric
// since the last interval become one meter event, kept in an outbox in
// PostgreSQL (internal/store) until Stripe acknowledges it, and retried
// with webhooks' backoff. A meter event's identifier is fixed when it is
// cut, so that a retry never counts twice (Stripe deduplicates on it).
package meters

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/webhooks"
)

// DefaultAPIBase is Stripe's API.
const DefaultAPIBase = "https://api.stripe.com"

// Interval is how often usage is cut into meter events.
const Interval = time.Minute

// Event is one meter event: Value units of Metric used by Customer (whose
// Stripe customer is StripeCustomer) in the interval that ended at Minute.
type Event struct {
	Customer, Metric, StripeCustomer string
	Minute                           time.Time
	Value                            int64
	Identifier                       string
	Attempts                         int       // attempts made before this one
	CreatedAt                        time.Time // when it was cut
}

// Cut is what one cut did.
type Cut struct {
	Events  int // meter events written to the outbox
	Skipped int // customers' sums dropped: no metadata.stripe_customer_id
}

// Stats describe the outbox.
type Stats struct {
	Pending, Failed int
	Oldest          time.Time // the oldest pending event's cut; zero if none
}

// Outbox is the meter events' queue, kept in PostgreSQL by internal/store.
type Outbox interface {
	// CutMeterEvents turns the usage of metrics summed since the last cut
	// into one pending event per customer and metric at minute.
	CutMeterEvents(ctx context.Context, minute time.Time, metrics []string) (Cut, error)
	// DeliverMeterEvent claims one pending event due at now that no other
	// claimer holds, calls send with it while holding it and records the
	// outcome: a delivered event is deleted. False when none was due.
	DeliverMeterEvent(ctx context.Context, now time.Time, send func(context.Context, Event) webhooks.Outcome) (bool, error)
	MeterStats(ctx context.Context) (Stats, error)
}

// Sender cuts and sends meter events.
type Sender struct {
	Outbox  Outbox
	Client  *http.Client
	APIBase string // DefaultAPIBase if ""
	APIKey  string
	// Meters maps a metric to its meter's event name.
	Meters  map[string]string
	Clock   quota.Clock      // the system clock if nil
	Backoff webhooks.Backoff // webhooks.DefaultBackoff if zero
	Log     *slog.Logger
	// Observe, if set, hears every attempt's outcome and every cut.
	Observe    func(Event, webhooks.Outcome)
	ObserveCut func(Cut)
}

func (s *Sender) init() {
	if s.Clock == nil {
		s.Clock = quota.SystemClock{}
	}
	if s.Backoff.Base == 0 {
		s.Backoff = webhooks.DefaultBackoff
	}
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	if s.Client == nil {
		s.Client = &http.Client{Timeout: webhooks.DefaultTimeout}
	}
	if s.APIBase == "" {
		s.APIBase = DefaultAPIBase
	}
}

// Tick cuts the usage of the interval ending now (truncated to the
// minute) and sends every event due, until none is or ctx ends.
func (s *Sender) Tick(ctx context.Context) error {
	s.init()
	now := s.Clock.Now()
	cut, err := s.Outbox.CutMeterEvents(ctx, now.Truncate(Interval), slices.Sorted(maps.Keys(s.Meters)))
	if err != nil {
		return fmt.Errorf("cut meter events: %w", err)
	}
	if s.ObserveCut != nil {
		s.ObserveCut(cut)
	}
	for ctx.Err() == nil {
		found, err := s.Outbox.DeliverMeterEvent(ctx, s.Clock.Now(), s.attempt)
		if err != nil {
			return fmt.Errorf("deliver meter event: %w", err)
		}
		if !found {
			return nil
		}
	}
	return ctx.Err()
}

// Run ticks every Interval until ctx ends.
func (s *Sender) Run(ctx context.Context) {
	s.init()
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		if err := s.Tick(ctx); err != nil && ctx.Err() == nil {
			s.Log.Warn("stripe meter events: outbox unreachable; will retry", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Sender) attempt(ctx context.Context, e Event) webhooks.Outcome {
	o := s.post(ctx, e)
	o.At = s.Clock.Now()
	if o.Status != webhooks.Delivered {
		if next, ok := s.Backoff.Next(e.Attempts+1, e.CreatedAt, o.At); ok {
			o.Status, o.Next = webhooks.Pending, next
		} else {
			o.Status = webhooks.Failed
		}
		s.Log.Warn("stripe meter event not sent", "customer", e.Customer, "metric", e.Metric,
			"identifier", e.Identifier, "attempt", e.Attempts+1, "status", o.HTTPStatus, "outcome", string(o.Status), "error", o.Error)
	}
	if s.Observe != nil {
		s.Observe(e, o)
	}
	return o
}

// post sends e once: Delivered, or Pending with why.
func (s *Sender) post(ctx context.Context, e Event) webhooks.Outcome {
	fail := func(status int, err string) webhooks.Outcome {
		if len(err) > 500 {
			err = err[:500]
		}
		return webhooks.Outcome{Status: webhooks.Pending, HTTPStatus: status, Error: strings.ToValidUTF8(err, "?")}
	}
	form := url.Values{
		"event_name":                  {s.Meters[e.Metric]},
		"payload[stripe_customer_id]": {e.StripeCustomer},
		"payload[value]":              {strconv.FormatInt(e.Value, 10)},
		"identifier":                  {e.Identifier},
		"timestamp":                   {strconv.FormatInt(e.Minute.Unix(), 10)},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(s.APIBase, "/")+"/v1/billing/meter_events",
		strings.NewReader(form.Encode()))
	if err != nil {
		return fail(0, err.Error())
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+s.APIKey)
	req.Header.Set("User-Agent", "quotad")
	resp, err := s.Client.Do(req)
	if err != nil {
		return fail(0, err.Error())
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return webhooks.Outcome{Status: webhooks.Delivered, HTTPStatus: resp.StatusCode}
	}
	return fail(resp.StatusCode, fmt.Sprintf("stripe answered %d: %s", resp.StatusCode, answer))
}

// ParseMeters parses "metric=event_name,…" into metric → meter event name.
func ParseMeters(s string) (map[string]string, error) {
	m := map[string]string{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		metric, name, ok := strings.Cut(part, "=")
		metric, name = strings.TrimSpace(metric), strings.TrimSpace(name)
		if !ok || metric == "" || name == "" {
			return nil, fmt.Errorf("want metric=event_name, got %q", part)
		}
		if _, dup := m[metric]; dup {
			return nil, fmt.Errorf("metric %q named twice", metric)
		}
		m[metric] = name
	}
	return m, nil
}
