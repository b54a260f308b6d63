package quotad

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// States of a reservation, as Reservation.State reports them.
const (
	// ReservationHeld: its units are counted and it awaits a commit or a
	// release.
	ReservationHeld = "held"
	// ReservationCommitted: settled at its actual cost.
	ReservationCommitted = "committed"
	// ReservationReleased: every unit went back (Release).
	ReservationReleased = "released"
	// ReservationExpired: not settled by its expiry; quotad released it.
	ReservationExpired = "expired"
)

// ReserveRequest holds an estimate of a cost known only afterwards (an LLM
// call's tokens, an export's rows) until Commit settles the actual cost.
// Exactly one of Customer and APIKey names who pays.
type ReserveRequest struct {
	Customer string `json:"customer,omitempty"`
	// APIKey names the customer by one of its API keys instead; an
	// unknown, revoked or expired key is ErrInvalidAPIKey.
	APIKey string `json:"api_key,omitempty"`
	Metric string `json:"metric"`
	// Cost is the estimate (1..10^9), counted in every window as an
	// admitted check's cost would be.
	Cost int64 `json:"cost"`
	// Subject is who the units are held for, as CheckRequest.Subject (by
	// key without one, the key's id).
	Subject string `json:"subject,omitempty"`
	// TTLSeconds (1..3600; quotad's default of 300 when 0): a reservation
	// neither committed nor released by then is released by quotad, and
	// its commit is ErrReservationExpired.
	TTLSeconds int `json:"ttl_seconds,omitempty"`
	// RequestID makes the reserve idempotent (a repeat returns the first
	// answer and holds nothing more), and lets the client retry it.
	RequestID string `json:"request_id,omitempty"`
}

// Reservation is quotad's answer to Reserve, and a reservation's state
// (Client.Reservation). A denied reserve is a result, as a denied check
// is: Allowed false, the check's fields saying why and until when, no ID,
// and nothing held.
type Reservation struct {
	// CheckResult is the decision, as a check of the estimate would have
	// had it: Allowed, RetryAfter, Limits, the RateLimit headers.
	CheckResult
	// ID names the reservation in Commit, Release and Reservation; empty
	// when denied.
	ID string `json:"id"`
	// ExpiresAt is when quotad releases the reservation if it is still
	// held.
	ExpiresAt time.Time `json:"expires_at"`
	// State is ReservationHeld, ReservationCommitted, ReservationReleased
	// or ReservationExpired, when quotad says (GET does; Reserve's answer
	// may leave it out: an allowed reservation starts held).
	State string `json:"state,omitempty"`
	// Committed is, once committed, the actual cost the windows kept
	// (GET).
	Committed *int64 `json:"committed,omitempty"`
	// Over is how many committed units went beyond a hard limit (GET).
	Over int64 `json:"over,omitempty"`
	// CreatedAt is when the reservation was made (GET).
	CreatedAt time.Time `json:"created_at,omitzero"`
	// RequestID is the reserve's request_id, if it had one (GET).
	RequestID string `json:"request_id,omitempty"`
	// Subject is who the units are held for, if anyone (GET).
	Subject string `json:"subject,omitempty"`
}

// Settlement is quotad's answer to Commit: how the estimate was settled.
type Settlement struct {
	ID string `json:"id"`
	// Reserved is the estimate that was held.
	Reserved int64 `json:"reserved"`
	// Committed is the actual cost the windows keep.
	Committed int64 `json:"committed"`
	// Released is how many of the reserved units went back (Reserved −
	// Committed when the actual cost was smaller, else 0).
	Released int64 `json:"released"`
	// Over is how many committed units went beyond a hard limit: the work
	// was done, so they are counted anyway, and later checks are denied
	// until the window resets.
	Over int64 `json:"over"`
	// Limits are the usage of the metric's windows after the commit, as
	// Usage reports them.
	Limits []UsageEntry `json:"limits"`
}

// Reserve holds req.Cost units of req.Metric in every window of the
// customer's limits, as an admitted check would count them, until Commit
// settles the actual cost, Release gives them back or they expire.
// Allowed and denied are both results: a denied reserve (quotad's 429)
// returns Allowed false, the check's RetryAfter and Limits, and a nil
// error; nothing is held. A reserve with a RequestID is retried as the
// RetryPolicy says (quotad answers a repeat with the first answer); one
// without is sent once, since a lost answer could otherwise hold twice.
func (c *Client) Reserve(ctx context.Context, req ReserveRequest) (*Reservation, error) {
	return c.reserve(ctx, req, req.RequestID != "")
}

func (c *Client) reserve(ctx context.Context, req ReserveRequest, retry bool) (*Reservation, error) {
	var res Reservation
	r, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/reservations", body: req, retry: retry,
		ok: []int{http.StatusCreated, http.StatusOK, http.StatusTooManyRequests}, out: &res})
	if err != nil {
		return nil, err
	}
	if r.status == http.StatusTooManyRequests && (res.Allowed || res.Customer == "") {
		// A 429 without a decision in it came from something in front of
		// quotad.
		return nil, &Problem{Status: r.status, Title: http.StatusText(r.status), Detail: "a 429 that is not quotad's decision"}
	}
	if res.Allowed && res.ID == "" {
		return nil, fmt.Errorf("quotad: POST /v1/reservations: an allowed answer %d without an id", r.status)
	}
	if res.Allowed && res.State == "" {
		res.State = ReservationHeld
	}
	res.RateLimit = r.header.Get("RateLimit")
	res.RateLimitPolicy = r.header.Get("RateLimit-Policy")
	return &res, nil
}

// Commit settles reservation id at its actual cost (0..10^9): the windows
// keep cost units, what was reserved beyond it goes back (to windows still
// current), and a cost above the estimate is counted too, beyond a hard
// limit if need be (Settlement.Over). A commit is idempotent by cost, so
// it is retried as the RetryPolicy says: a repeat with the same cost
// returns the same Settlement. Another cost than the first commit's is
// ErrConflict, and so is a commit of a released reservation; a
// reservation that expired (quotad released it) is ErrReservationExpired;
// an unknown id ErrReservationNotFound (and ErrNotFound).
func (c *Client) Commit(ctx context.Context, id string, cost int64) (*Settlement, error) {
	var s Settlement
	body := struct {
		Cost int64 `json:"cost"`
	}{cost}
	if _, err := c.do(ctx, call{method: http.MethodPost, path: pathf("/v1/reservations/%s/commit", id), body: body,
		retry: true, out: &s}); err != nil {
		return nil, err
	}
	return &s, nil
}

// Release gives every unit of reservation id back. Releasing a released
// or expired reservation does nothing, so it is retried as the
// RetryPolicy says; a committed one is ErrConflict, an unknown id
// ErrReservationNotFound (and ErrNotFound).
func (c *Client) Release(ctx context.Context, id string) error {
	return c.del(ctx, pathf("/v1/reservations/%s", id), nil)
}

// Reservation gets reservation id: its estimate (Cost), expiry and State;
// Allowed is true. An unknown id is ErrReservationNotFound (and
// ErrNotFound).
func (c *Client) Reservation(ctx context.Context, id string) (*Reservation, error) {
	var res Reservation
	if err := c.get(ctx, pathf("/v1/reservations/%s", id), &res, nil); err != nil {
		return nil, err
	}
	// Only an allowed reserve makes a reservation.
	res.Allowed = res.ID != ""
	return &res, nil
}
