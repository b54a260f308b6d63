package api

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/rlheaders"
	"github.com/quotad/quotad/internal/tiers"
)

// Reservations is the reservation path (SPEC §6.5). *quota.Engine
// implements it; its errors are tiers' sentinels and
// *tiers.ValidationError.
type Reservations interface {
	Reserve(ctx context.Context, r quota.ReserveRequest) (quota.ReserveResult, error)
	Commit(ctx context.Context, id string, actual int64) (quota.CommitResult, error)
	ReleaseReservation(ctx context.Context, id string) error
	Reservation(ctx context.Context, id string) (quota.Reservation, error)
}

var _ Reservations = (*quota.Engine)(nil)

// reserveRequest is the body of POST /v1/reservations: the customer is
// named, or given by its API key.
type reserveRequest struct {
	Customer   *string `json:"customer"`
	APIKey     *string `json:"api_key"`
	Metric     string  `json:"metric"`
	Cost       *int64  `json:"cost"`
	Subject    string  `json:"subject"`
	TTLSeconds *int64  `json:"ttl_seconds"`
	RequestID  string  `json:"request_id"`
}

// commitRequest is the body of POST /v1/reservations/{id}/commit.
type commitRequest struct {
	Cost *int64 `json:"cost"`
}

// reservationView is GET /v1/reservations/{id}'s answer.
type reservationView struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Metric   string `json:"metric"`
	// Subject is the subject the reservation holds units for; absent
	// when none.
	Subject   string                 `json:"subject,omitempty"`
	Cost      int64                  `json:"cost"`
	State     quota.ReservationState `json:"state"`
	Committed *int64                 `json:"committed"`
	Over      int64                  `json:"over"`
	ExpiresAt time.Time              `json:"expires_at"`
	CreatedAt time.Time              `json:"created_at"`
	RequestID *string                `json:"request_id"`
}

// commitAnswer is the commit's answer.
type commitAnswer struct {
	ID        string       `json:"id"`
	Reserved  int64        `json:"reserved"`
	Committed int64        `json:"committed"`
	Released  int64        `json:"released"`
	Over      int64        `json:"over"`
	Limits    []usageEntry `json:"limits"`
}

// reservationHandlers serve /v1/reservations. A reserve is the check of
// its estimate: it is counted in the check metrics and answered as a
// check is.
type reservationHandlers struct {
	reservations Reservations
	ids          identifier
	metrics      *checkMetrics
	log          *slog.Logger
	forms        rlheaders.Forms
}

// reservationsOf returns the reservation path, or a 404 when the server
// has none.
func (h *reservationHandlers) reservationsOf() (Reservations, error) {
	if h.reservations == nil {
		return nil, echo.ErrNotFound
	}
	return h.reservations, nil
}

func (h *reservationHandlers) reserve(c echo.Context) error {
	rs, err := h.reservationsOf()
	if err != nil {
		return err
	}
	var req reserveRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	var fields []tiers.FieldError
	switch {
	case req.Customer != nil && req.APIKey != nil:
		fields = append(fields, tiers.FieldError{Field: "api_key", Message: "give customer or api_key, not both"})
	case req.Customer == nil && req.APIKey == nil:
		fields = append(fields, tiers.FieldError{Field: "customer", Message: "is required (or api_key)"})
	}
	if req.Cost == nil {
		fields = append(fields, tiers.FieldError{Field: "cost", Message: "is required"})
	}
	ttl := int64(quota.DefaultReservationTTL / time.Second)
	if req.TTLSeconds != nil {
		ttl = *req.TTLSeconds
	}
	max := int64(quota.MaxReservationTTL / time.Second)
	if ttl < 1 || ttl > max {
		fields = append(fields, tiers.FieldError{Field: "ttl_seconds", Message: "must be an integer between 1 and " + strconv.FormatInt(max, 10)})
		ttl = 1 // reported above; the engine reports the other fields
	}
	if fields != nil {
		return &tiers.ValidationError{Fields: fields}
	}
	var customer, keyID string
	if req.Customer != nil {
		customer = *req.Customer
	} else if customer, keyID, err = h.ids.customerOfKey(c.Request().Context(), *req.APIKey); err != nil {
		return err
	}
	subject := req.Subject
	if subject == "" {
		subject = keyID // by key, the key is the subject, as for a check
	}
	start := time.Now()
	res, err := rs.Reserve(c.Request().Context(), quota.ReserveRequest{Customer: customer, Metric: req.Metric,
		Cost: *req.Cost, Subject: subject, TTL: time.Duration(ttl) * time.Second, RequestID: req.RequestID})
	now := time.Now()
	// A reserve is the check of its estimate: counted as one (a commit
	// is not).
	h.metrics.observe(now.Sub(start), &res.Decision, err)
	if log := callLogOf(h.log, c); log != nil {
		log.customer, log.metric, log.subject, log.cost, log.requestID = customer, req.Metric, subject, *req.Cost, req.RequestID
		log.decided(&res.Decision, err)
	}
	if err != nil {
		return aboutCaller(req.APIKey != nil, customer, aboutMetric(req.Metric, err))
	}
	if !res.Allowed {
		return writeCheckAnswer(c, h.forms, http.StatusTooManyRequests, &res.Decision, now)
	}
	return h.writeReserveAnswer(c, &res, now)
}

// writeReserveAnswer writes an allowed reserve's answer: the check's
// answer and headers, with the reservation's id and expiry first.
func (h *reservationHandlers) writeReserveAnswer(c echo.Context, res *quota.ReserveResult, now time.Time) error {
	b, ok := appendCheckAnswer(nil, &res.Decision)
	if !ok || len(b) < 2 || b[0] != '{' {
		return errAnswerNotEncoded
	}
	head := append([]byte(`{"id":`), appendJSONString(nil, res.ID)...)
	head = append(head, `,"expires_at":`...)
	if head, ok = appendJSONTime(head, res.ExpiresAt); !ok {
		return errAnswerNotEncoded
	}
	head = append(head, ',')
	r := c.Response()
	setCheckHeaders(r.Header(), h.forms, &res.Decision, now)
	r.Header().Set(echo.HeaderLocation, "/v1/reservations/"+res.ID)
	r.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	r.WriteHeader(http.StatusCreated)
	_, err := r.Write(append(head, b[1:]...))
	return err
}

func (h *reservationHandlers) getReservation(c echo.Context) error {
	rs, err := h.reservationsOf()
	if err != nil {
		return err
	}
	rsv, err := rs.Reservation(c.Request().Context(), param(c, "id"))
	if err != nil {
		return err
	}
	v := reservationView{ID: rsv.ID, Customer: rsv.Customer, Metric: rsv.Metric, Subject: rsv.Subject, Cost: rsv.Cost, State: rsv.State,
		Over: rsv.Over, ExpiresAt: rsv.ExpiresAt, CreatedAt: rsv.CreatedAt}
	if rsv.State == quota.ReservationCommitted {
		v.Committed = &rsv.Committed
	}
	if rsv.RequestID != "" {
		v.RequestID = &rsv.RequestID
	}
	return respond(c, http.StatusOK, v)
}

func (h *reservationHandlers) releaseReservation(c echo.Context) error {
	rs, err := h.reservationsOf()
	if err != nil {
		return err
	}
	if err := rs.ReleaseReservation(c.Request().Context(), param(c, "id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h *reservationHandlers) commitReservation(c echo.Context) error {
	rs, err := h.reservationsOf()
	if err != nil {
		return err
	}
	var req commitRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if req.Cost == nil {
		return invalid("cost", "is required")
	}
	res, err := rs.Commit(c.Request().Context(), param(c, "id"), *req.Cost)
	if err != nil {
		return err
	}
	return respond(c, http.StatusOK, commitAnswer{ID: res.ID, Reserved: res.Reserved, Committed: res.Committed,
		Released: res.Released, Over: res.Over, Limits: toUsageEntries(res.Usage)})
}
