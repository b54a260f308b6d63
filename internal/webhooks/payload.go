package webhooks

import (
	"encoding/json"
	"fmt"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/quotad/quotad/internal/tiers"
)

// payload is the body of every delivery, in the Standard Webhooks shape:
// the event's type, when it happened, and its data. It is a wire form: its
// fields change only compatibly.
type payload struct {
	Type      EventType   `json:"type"`
	Timestamp time.Time   `json:"timestamp"`
	Data      payloadData `json:"data"`
}

type payloadData struct {
	Customer    string       `json:"customer"`
	Metric      string       `json:"metric"`
	Window      tiers.Window `json:"window"`
	WindowStart time.Time    `json:"window_start"`
	// WindowEnd is null for a total, which never ends.
	WindowEnd *time.Time `json:"window_end"`
	Threshold *int       `json:"threshold,omitempty"` // usage.threshold only
	Limit     int64      `json:"limit"`
	Used      int64      `json:"used"`
}

// grantPayload is the body of a grant.exhausted delivery: a wire form, as
// payload.
type grantPayload struct {
	Type      EventType        `json:"type"`
	Timestamp time.Time        `json:"timestamp"`
	Data      grantPayloadData `json:"data"`
}

type grantPayloadData struct {
	Customer string `json:"customer"`
	Metric   string `json:"metric"`
	Grant    string `json:"grant"`
	Amount   int64  `json:"amount"`
}

// trialPayload is the body of a trial.ended delivery: a wire form, as
// payload.
type trialPayload struct {
	Type      EventType        `json:"type"`
	Timestamp time.Time        `json:"timestamp"`
	Data      trialPayloadData `json:"data"`
}

type trialPayloadData struct {
	Customer string    `json:"customer"`
	Plan     string    `json:"plan"`
	NextPlan string    `json:"next_plan"`
	EndedAt  time.Time `json:"ended_at"`
}

// Payload returns the bytes delivered for e.
func Payload(e Event) ([]byte, error) {
	if e.Type == TrialEnded {
		b, err := json.Marshal(trialPayload{Type: e.Type, Timestamp: e.At.UTC(),
			Data: trialPayloadData{Customer: e.Customer, Plan: e.Plan, NextPlan: e.NextPlan, EndedAt: e.At.UTC()}})
		if err != nil {
			return nil, fmt.Errorf("encode webhook payload: %w", err)
		}
		return b, nil
	}
	if e.Type == GrantExhausted {
		b, err := json.Marshal(grantPayload{Type: e.Type, Timestamp: e.At.UTC(),
			Data: grantPayloadData{Customer: e.Customer, Metric: e.Metric, Grant: e.Grant, Amount: e.Limit}})
		if err != nil {
			return nil, fmt.Errorf("encode webhook payload: %w", err)
		}
		return b, nil
	}
	p := payload{
		Type: e.Type, Timestamp: e.At.UTC(),
		Data: payloadData{
			Customer: e.Customer, Metric: e.Metric, Window: e.Window,
			WindowStart: e.Start.UTC(), Limit: e.Limit, Used: e.Used,
		},
	}
	if e.Window.Resets() {
		end := e.End.UTC()
		p.Data.WindowEnd = &end
	}
	if e.Type == Threshold {
		t := e.Threshold
		p.Data.Threshold = &t
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode webhook payload: %w", err)
	}
	return b, nil
}

// Signature returns the webhook-signature header of a message, computed
// by the Standard Webhooks reference library.
func Signature(secret, msgID string, at time.Time, body []byte) (string, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return "", fmt.Errorf("webhook secret: %w", err)
	}
	return wh.Sign(msgID, at, body)
}
