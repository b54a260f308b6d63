package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/rlheaders"
	"github.com/quotad/quotad/internal/tiers"
)

// Checker is the check path. *quota.Engine implements it; its errors are
// tiers' sentinels and *tiers.ValidationError.
type Checker interface {
	Check(ctx context.Context, r quota.Request) (quota.Decision, error)
	Refund(ctx context.Context, r quota.RefundRequest) (quota.RefundResult, error)
	Usage(ctx context.Context, customer, subject string) (tiers.Account, []quota.Usage, error)
	Entitlements(ctx context.Context, customer, subject string) (quota.Entitlements, error)
	MetricUsage(ctx context.Context, metric string) (tiers.Metric, []quota.GlobalUsage, error)
	Reset(ctx context.Context, actor, customer, metric string) error
	SetTotal(ctx context.Context, actor, customer, metric string, used int64) (quota.Usage, error)
	History(ctx context.Context, customer, metric string, from, to time.Time) ([]quota.Day, error)
	// Today is the customer's current date in its time zone.
	Today(ctx context.Context, customer string) time.Time
	Stats() quota.Stats
}

var _ Checker = (*quota.Engine)(nil)

// checkRequest is the body of POST /v1/check: one metric (metric, cost,
// subject), or items.
type checkRequest struct {
	Customer  string      `json:"customer"`
	APIKey    string      `json:"api_key"`
	Metric    string      `json:"metric"`
	Cost      *int64      `json:"cost"`
	Subject   string      `json:"subject"`
	Items     []checkItem `json:"items"`
	DryRun    bool        `json:"dry_run"`
	RequestID string      `json:"request_id"`
}

// checkItem is one item of a check of items: a metric, its cost and its
// subject.
type checkItem struct {
	Metric  string `json:"metric"`
	Cost    *int64 `json:"cost"`
	Subject string `json:"subject"`
}

// refundRequest is the body of POST /v1/refund.
type refundRequest struct {
	Customer  string `json:"customer"`
	APIKey    string `json:"api_key"`
	Metric    string `json:"metric"`
	Cost      *int64 `json:"cost"`
	Subject   string `json:"subject"`
	RequestID string `json:"request_id"`
}

type usageEntry struct {
	Metric string `json:"metric"`
	// Subject is the subject a window of a limit per subject counts for;
	// absent on the customer's windows.
	Subject string       `json:"subject,omitempty"`
	Window  tiers.Window `json:"window"`
	Limit   int64        `json:"limit"`
	// Algorithm and Burst are shown as for the limit (tiers.Limit's JSON):
	// the algorithm on short windows, the size of token buckets.
	Algorithm *tiers.Algorithm `json:"algorithm,omitempty"`
	Burst     *int64           `json:"burst,omitempty"`
	Used      int64            `json:"used"`
	Remaining int64            `json:"remaining"`
	Overage   int64            `json:"overage"`
	// Granted: units of the window grants paid for (not in used).
	Granted int64 `json:"granted"`
	// ResetAt is null for a window that never resets (total).
	ResetAt *time.Time `json:"reset_at"`
	// Refunded is in a refund's answer only: the units it took off this
	// window.
	Refunded *int64 `json:"refunded,omitempty"`
}

type historyDay struct {
	Date    string `json:"date"`
	Metric  string `json:"metric"`
	Used    int64  `json:"used"`
	Overage int64  `json:"overage"`
	Denied  int64  `json:"denied"`
}

// checkMetrics are the check path's Prometheus metrics.
type checkMetrics struct {
	checks  *prometheus.CounterVec
	latency prometheus.Histogram
	trips   prometheus.Histogram

	decisions seriesCache[string, prometheus.Counter]
}

func newCheckMetrics(reg prometheus.Registerer, stats func() quota.Stats) *checkMetrics {
	m := &checkMetrics{
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quotad_checks_total",
			Help: "Checks by decision: allowed, denied, degraded (allowed without the store), rejected (refused input: a 4xx such as a bad body, an unknown customer or metric, a reused request_id) or error (not decided: a 5xx such as the store unreachable with QUOTAD_STORE_FAILURE=closed).",
		}, []string{"decision"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "quotad_check_duration_seconds",
			Help:    "Time to decide a check, from decoded request to decision.",
			Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .1},
		}),
		trips: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "quotad_check_store_round_trips",
			Help:    "Round trips to PostgreSQL or Redis a check made for its counters (0 when answered from memory).",
			Buckets: []float64{0, 1, 2, 3, 5, 8},
		}),
	}
	m.decisions.create = func(d string) prometheus.Counter { return m.checks.WithLabelValues(d) }
	counter := func(name, help string, v func(quota.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v(stats())) })
	}
	gauge := func(name, help string, v func(quota.Stats) int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return float64(v(stats())) })
	}
	reg.MustRegister(
		counter("quotad_lease_refills_total", "Blocks of long-window units this process reserved in PostgreSQL.",
			func(s quota.Stats) uint64 { return s.Leases.Refills }),
		counter("quotad_lease_recalls_total", "Checks that asked other processes to give back leased units.",
			func(s quota.Stats) uint64 { return s.Leases.Recalls }),
		counter("quotad_lease_recalled_total", "Leases this process gave back because another process recalled their units.",
			func(s quota.Stats) uint64 { return s.Leases.Yielded }),
		counter("quotad_lease_denied_from_memory_total", "Long windows denied without a round trip: their counter was full and no other process held units of it.",
			func(s quota.Stats) uint64 { return s.Leases.DeniedFromMemory }),
		gauge("quotad_lease_calls_in_doubt", "Leases with a call to PostgreSQL whose answer was lost, to be resolved.",
			func(s quota.Stats) int64 { return s.Leases.InDoubt }),
		counter("quotad_lease_grant_statements_total", "Statements lease grants went to PostgreSQL in (each carries every grant asked for while the ones before were in flight).",
			func(s quota.Stats) uint64 { return s.Leases.Grants.Batches }),
		counter("quotad_lease_grants_total", "Lease grants sent to PostgreSQL, whatever they granted.",
			func(s quota.Stats) uint64 { return s.Leases.Grants.Calls }),
		counter("quotad_request_id_claim_statements_total", "Statements request-id claims of checks went to PostgreSQL in (with leases).",
			func(s quota.Stats) uint64 { return s.Claims.Batches }),
		counter("quotad_request_id_claims_total", "Request-id claims of checks sent to PostgreSQL (with leases).",
			func(s quota.Stats) uint64 { return s.Claims.Calls }),
		gauge("quotad_leases", "Leases (blocks of long-window units) this process holds.",
			func(s quota.Stats) int64 { return s.Leases.Leases }),
		gauge("quotad_lease_units_held", "Units this process holds unused in its leases.",
			func(s quota.Stats) int64 { return s.Leases.Units }),
		gauge("quotad_degraded_units_owed", "Units of checks admitted degraded that PostgreSQL or Redis has not counted yet: charged once it answers again. A process that dies loses them.",
			func(s quota.Stats) int64 { return s.Debts.Owed }),
		counter("quotad_degraded_units_repaid_total", "Units of checks admitted degraded, counted late once their store answered again.",
			func(s quota.Stats) uint64 { return uint64(s.Debts.Repaid) }),
		gauge("quotad_refund_audit_events_pending", "Refunds' audit events PostgreSQL did not take when the refund was made, kept in memory to be written by the next flush.",
			func(s quota.Stats) int64 { return s.Audits.Pending }),
		counter("quotad_refund_audit_events_lost_total", "Refunds' audit events dropped because too many were pending: the refunds were made, unaudited.",
			func(s quota.Stats) uint64 { return s.Audits.Lost }),
		counter("quotad_degraded_units_lost_total", "Units of checks admitted degraded never counted: their windows ended before their store answered, or too many were owed.",
			func(s quota.Stats) uint64 { return uint64(s.Debts.Lost) }),
	)
	reg.MustRegister(m.checks, m.latency, m.trips,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "quotad_store_errors_total",
			Help: "Check-path calls to PostgreSQL that failed.",
		}, func() float64 { return float64(stats().StoreErrors) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "quotad_short_window_keys",
			Help: "Short-window (second, minute) counters held in memory.",
		}, func() float64 { return float64(stats().ShortKeys) }),
		counter("quotad_redis_errors_total", "Calls to Redis, for short windows, that failed or timed out.",
			func(s quota.Stats) uint64 { return s.Shared.Failures }),
		gauge("quotad_redis_shards_down", "Parts of Redis whose short windows this process counts in process, answers degraded, because their last call failed: hash slots of a Redis Cluster, or 1 for a single Redis; 0 in mode shared.",
			func(s quota.Stats) int64 { return s.Shared.ShardsDown }),
	)
	for _, mode := range []string{modeShared, modeFallback, modeLocal} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "quotad_short_window_mode",
			Help:        "Where this process counts short windows: 1 for the mode it is in. shared: in Redis; fallback: Redis is configured but unreachable, for all keys or (in a cluster) those of some hash slots, whose checks are counted in process (answers degraded; see quotad_redis_shards_down); local: no Redis configured.",
			ConstLabels: prometheus.Labels{"mode": mode},
		}, func() float64 {
			if shortWindowMode(stats().Shared) == mode {
				return 1
			}
			return 0
		}))
	}
	return m
}

// The modes of quotad_short_window_mode.
const (
	modeShared   = "shared"
	modeFallback = "fallback"
	modeLocal    = "local"
)

func shortWindowMode(s quota.SharedStats) string {
	switch {
	case !s.Configured:
		return modeLocal
	case s.Up:
		return modeShared
	}
	return modeFallback
}

// checkHandlers serve POST /v1/check and POST /v1/refund: the check path.
type checkHandlers struct {
	decider *decider
	checker Checker
	ids     identifier
	log     *slog.Logger
	forms   rlheaders.Forms

	refundRequiresRequestID bool
}

func (h *checkHandlers) check(c echo.Context) error {
	req, err := decodeCall(c, false)
	if err != nil {
		h.decider.reject()
		return err
	}
	log := callLogOf(h.log, c)
	if err := h.ids.identify(c.Request().Context(), &req); err != nil {
		h.decider.reject()
		if log != nil {
			log.request(&req)
			log.failed(err)
		}
		return err
	}
	d, now, err := h.decider.decide(c.Request().Context(), quota.Request{
		Customer: req.Customer, Metric: req.Metric, Cost: req.Cost, Subject: req.Subject, Items: req.Items,
		DryRun: req.DryRun, RequestID: req.RequestID,
	})
	if log != nil {
		log.request(&req)
		log.decided(&d, err)
	}
	if err != nil {
		return byKey(&req, err)
	}
	status := http.StatusOK
	if !d.Allowed {
		status = http.StatusTooManyRequests
	}
	return writeCheckAnswer(c, h.forms, status, &d, now)
}

// decider decides checks and counts them in the check metrics: those of
// POST /v1/check and of forward-auth alike.
type decider struct {
	checker Checker
	metrics *checkMetrics
}

// decide runs one check and counts it in the check metrics. now is when
// it was decided.
func (dc *decider) decide(ctx context.Context, r quota.Request) (d quota.Decision, now time.Time, err error) {
	start := time.Now()
	d, err = dc.checker.Check(ctx, r)
	now = time.Now()
	dc.metrics.observe(now.Sub(start), &d, err)
	return d, now, err
}

// reject counts a check refused before it was decided, for its input.
func (dc *decider) reject() {
	dc.metrics.decisions.get(decisionRejected).Inc()
}

// observe counts a decision in the check metrics: the decision, how long
// it took and its round trips; err is the check's error, if any.
func (m *checkMetrics) observe(took time.Duration, d *quota.Decision, err error) {
	m.latency.Observe(took.Seconds())
	if err != nil {
		m.decisions.get(failedDecision(err)).Inc()
		return
	}
	decision := "allowed"
	switch {
	case !d.Allowed:
		decision = "denied"
	case d.Degraded:
		decision = "degraded"
	}
	m.decisions.get(decision).Inc()
	m.trips.Observe(float64(d.StoreTrips))
}

// CountCheck counts a check another front end answered (Envoy's rate
// limit service, over gRPC) in quotad_checks_total, beside the HTTP
// checks: decision is one of its decisions, allowed, denied, degraded,
// rejected or error.
func (s *Server) CountCheck(decision string) {
	s.checkMetrics.decisions.get(decision).Inc()
}

// The decisions of quotad_checks_total for checks that got no answer: the
// client's request was refused (4xx), or quotad could not decide (5xx).
const (
	decisionRejected = "rejected"
	decisionError    = "error"
)

// failedDecision tells a check refused for its input from one quotad
// failed to decide, by the status its error is answered with.
func failedDecision(err error) string {
	if p, _ := toProblem(err); p.Status < http.StatusInternalServerError {
		return decisionRejected
	}
	return decisionError
}

// errRefundNeedsRequestID refuses a refund that names no check, where
// the operator requires one (Config.RefundRequiresRequestID).
var errRefundNeedsRequestID = problemf(http.StatusForbidden, codeForbidden,
	"a refund must name the request_id of the check whose units it gives back: "+
		"this server takes refunds without one from admin tokens only")

func (h *checkHandlers) refund(c echo.Context) error {
	req, err := decodeCall(c, true)
	if err != nil {
		return err
	}
	log := callLogOf(h.log, c)
	if log != nil {
		log.request(&req)
	}
	if err := h.mayRefund(c, &req); err != nil {
		if log != nil {
			log.failed(err)
		}
		return err
	}
	if err := h.ids.identify(c.Request().Context(), &req); err != nil {
		if log != nil {
			log.failed(err)
		}
		return err
	}
	// The audit log names who asked: the API key, for a refund by key
	// (the token only carried it), else the token.
	who := actor(c)
	if req.KeyID != "" {
		who = req.KeyID
	}
	res, err := h.checker.Refund(c.Request().Context(), quota.RefundRequest{
		Customer: req.Customer, Metric: req.Metric, Cost: req.Cost, Subject: req.Subject, RequestID: req.RequestID,
		Actor: who,
	})
	if log != nil {
		log.customer = req.Customer
		if err != nil {
			log.failed(err)
		} else {
			log.decision, log.refunded = "refunded", res.Refunded
		}
	}
	if err != nil {
		return byKey(&req, err)
	}
	usage := toUsageEntries(res.Usage)
	for i := range usage {
		usage[i].Refunded = &res.Usage[i].Refunded
	}
	return respond(c, http.StatusOK, refundAnswer{Customer: req.Customer, Refunded: res.Refunded, Usage: usage})
}

// mayRefund refuses, where the operator requires refunds to name their
// check, a refund without a request_id by a check token or by API key:
// only an admin token may still give units back without naming a check.
func (h *checkHandlers) mayRefund(c echo.Context, req *call) error {
	if !h.refundRequiresRequestID || req.RequestID != "" {
		return nil
	}
	if req.APIKey != "" || tokenOf(c).Role != RoleAdmin {
		return errRefundNeedsRequestID
	}
	return nil
}

// refundAnswer is the body of POST /v1/refund's answer.
type refundAnswer struct {
	// Customer is the customer refunded: the API key's, for a refund by key.
	Customer string       `json:"customer"`
	Refunded int64        `json:"refunded"`
	Usage    []usageEntry `json:"usage"`
}

// resetAt is a window's reset_at as answers show it: null (nil) for one
// that never resets, which quota reports as the zero time.
func resetAt(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func toUsageEntries(us []quota.Usage) []usageEntry {
	out := make([]usageEntry, len(us))
	for i, u := range us {
		l := tiers.Limit{Window: u.Window, Limit: u.Limit, Algorithm: u.Algorithm, Burst: u.Burst}
		out[i] = usageEntry{Metric: u.Metric, Subject: u.Subject, Window: u.Window, Limit: u.Limit,
			Algorithm: l.ShownAlgorithm(), Burst: l.ShownBurst(), Used: u.Used,
			Remaining: u.Remaining, Overage: u.Overage, Granted: u.Granted, ResetAt: resetAt(u.ResetAt)}
	}
	return out
}
