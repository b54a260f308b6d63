// Package api is quotad's HTTP interface: the admin API, the check path and
// the operational endpoints, as openapi.yaml describes them. It is the only
// package that imports echo, and it sees the rest of quotad only through
// the interfaces below.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/quotad/quotad/internal/console"
	"github.com/quotad/quotad/internal/forwardauth"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/rlheaders"
	"github.com/quotad/quotad/internal/tiers"
)

// Catalog is the admin side of the tier catalog. *tiers.Service implements
// it; its errors are tiers' sentinels and *tiers.ValidationError.
type Catalog interface {
	Metric(ctx context.Context, key string) (tiers.Metric, error)
	Metrics(ctx context.Context, page tiers.Page) ([]tiers.Metric, bool, error)
	PutMetric(ctx context.Context, w tiers.Write, key string, spec tiers.MetricSpec) (tiers.Metric, bool, error)
	DeleteMetric(ctx context.Context, w tiers.Write, key string) error

	Plan(ctx context.Context, key string) (tiers.Plan, error)
	Plans(ctx context.Context, page tiers.Page) ([]tiers.Plan, bool, error)
	PutPlan(ctx context.Context, w tiers.Write, key string, spec tiers.PlanSpec, grandfather bool) (tiers.Plan, bool, error)
	DeletePlan(ctx context.Context, w tiers.Write, key string) error
	PlanVersion(ctx context.Context, key string, n int64) (tiers.PlanVersion, error)
	PlanVersions(ctx context.Context, key string, page tiers.Page) ([]tiers.PlanVersion, bool, error)
	MigratePlan(ctx context.Context, w tiers.Write, key string, spec tiers.MigrationSpec, usage tiers.UsageReader) (tiers.Migration, error)

	Customer(ctx context.Context, id string) (tiers.Customer, error)
	Customers(ctx context.Context, f tiers.CustomerFilter) ([]tiers.Customer, bool, error)
	PutCustomer(ctx context.Context, w tiers.Write, id string, spec tiers.CustomerSpec) (tiers.Customer, bool, error)
	DeleteCustomer(ctx context.Context, w tiers.Write, id string) error

	Override(ctx context.Context, customer, metric, window, per string) (tiers.Override, error)
	Overrides(ctx context.Context, customer string, page tiers.Page) ([]tiers.Override, bool, error)
	PutOverride(ctx context.Context, w tiers.Write, customer, metric, window, per string, spec tiers.OverrideSpec) (tiers.Override, bool, error)
	DeleteOverride(ctx context.Context, w tiers.Write, customer, metric, window, per string) error

	PutFeatureOverride(ctx context.Context, w tiers.Write, customer, feature string, spec tiers.FeatureOverrideSpec) (tiers.FeatureOverride, bool, error)
	DeleteFeatureOverride(ctx context.Context, w tiers.Write, customer, feature string) error
	Features(ctx context.Context, id string) (tiers.Account, map[string]tiers.FeatureValue, error)

	Limits(ctx context.Context, id string) (tiers.Account, []tiers.EffectiveLimit, error)
	AuditEvents(ctx context.Context, f tiers.AuditFilter) ([]tiers.AuditEvent, bool, error)
}

var _ Catalog = (*tiers.Service)(nil)

// Config configures a Server.
type Config struct {
	Catalog Catalog
	Checker Checker
	// Ready reports whether the service can serve: PostgreSQL answers and
	// the schema is current. nil means always ready.
	Ready func(ctx context.Context) error
	// Tokens are the admin and check tokens; none means no auth.
	Tokens []Token
	Logger *slog.Logger
	// Registry receives quotad's HTTP metrics and serves /metrics; nil
	// means a private registry.
	Registry *prometheus.Registry
	// ForwardAuth are the rules of GET /v1/forward-auth; nil means
	// forwardauth.Default().
	ForwardAuth *forwardauth.Rules
	// Billing makes statements; nil answers their routes 404.
	Billing Billing
	// Webhooks serves /v1/webhooks; nil answers 404 there.
	Webhooks Webhooks
	// Reservations serves /v1/reservations; nil answers 404 there.
	Reservations Reservations
	// Keys serves the API-key routes; nil answers 404 there.
	Keys Keys
	// Grants serves the grants' routes; nil answers 404 there.
	Grants Grants
	// KeyResolver resolves the api_key of checks, refunds and forward-auth;
	// nil refuses every key quotad would have issued.
	KeyResolver KeyResolver
	// Holders serves /v1/admin/holders; nil answers 404 there.
	Holders Holders
	// Features answers POST /v1/features/check and forward-auth routes
	// that require a feature, from memory; nil answers 404 not_found
	// there.
	Features FeatureChecker
	// WhatIf answers POST /v1/what-if; nil answers 404 there.
	WhatIf WhatIf
	// RequestTimeout bounds how long a request other than a check waits
	// for the stores (it then answers 503); 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// RefundRequiresRequestID refuses (403) a refund without a
	// request_id, naming the check it gives back, unless an admin token
	// makes it without an API key.
	RefundRequiresRequestID bool
	// RateLimitHeaders are the forms of the rate limit headers of checks'
	// answers (forward-auth's and reservations' too); 0 means
	// rlheaders.Default.
	RateLimitHeaders rlheaders.Forms
}

// DefaultRequestTimeout is Config.RequestTimeout's default.
const DefaultRequestTimeout = 5 * time.Second

// Server is quotad's HTTP handler.
type Server struct {
	echo    *echo.Echo
	catalog Catalog
	checker Checker
	ready   func(ctx context.Context) error
	auth    *authenticator
	log     *slog.Logger
	metrics *httpMetrics

	checkMetrics   *checkMetrics
	forwardRules   *forwardauth.Rules
	billing        Billing
	webhooks       Webhooks
	reservations   Reservations
	keys           Keys
	grants         Grants
	keyResolver    KeyResolver
	holders        Holders
	features       FeatureChecker
	whatIf         WhatIf
	requestTimeout time.Duration

	refundRequiresRequestID bool
	rateLimitHeaders        rlheaders.Forms
}

// New returns a Server with every route registered.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Ready == nil {
		cfg.Ready = func(context.Context) error { return nil }
	}
	if cfg.ForwardAuth == nil {
		cfg.ForwardAuth = forwardauth.Default()
	}
	s := &Server{
		echo:    echo.New(),
		catalog: cfg.Catalog,
		checker: cfg.Checker,
		ready:   cfg.Ready,
		auth:    newAuthenticator(cfg.Tokens),
		log:     cfg.Logger,
		metrics: newHTTPMetrics(cfg.Registry),

		forwardRules:   cfg.ForwardAuth,
		billing:        cfg.Billing,
		webhooks:       cfg.Webhooks,
		reservations:   cfg.Reservations,
		keys:           cfg.Keys,
		grants:         cfg.Grants,
		keyResolver:    cfg.KeyResolver,
		holders:        cfg.Holders,
		features:       cfg.Features,
		whatIf:         cfg.WhatIf,
		requestTimeout: cfg.RequestTimeout,

		refundRequiresRequestID: cfg.RefundRequiresRequestID,
		rateLimitHeaders:        cfg.RateLimitHeaders,
	}
	if s.rateLimitHeaders == 0 {
		s.rateLimitHeaders = rlheaders.Default
	}
	if s.requestTimeout <= 0 {
		s.requestTimeout = DefaultRequestTimeout
	}
	stats := func() quota.Stats { return quota.Stats{} }
	if cfg.Checker != nil {
		stats = cfg.Checker.Stats
	}
	s.checkMetrics = newCheckMetrics(cfg.Registry, stats)
	e := s.echo
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.errorHandler
	e.Use(s.middleware)

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{})))

	v1 := e.Group("/v1")
	v1.GET("/metrics", s.listMetrics)
	v1.GET("/metrics/:metric", s.getMetric)
	v1.PUT("/metrics/:metric", s.putMetric)
	v1.DELETE("/metrics/:metric", s.deleteMetric)
	v1.GET("/metrics/:metric/usage", s.metricUsage)

	v1.GET("/plans", s.listPlans)
	v1.GET("/plans/:plan", s.getPlan)
	v1.PUT("/plans/:plan", s.putPlan)
	v1.DELETE("/plans/:plan", s.deletePlan)
	v1.GET("/plans/:plan/versions", s.listPlanVersions)
	v1.GET("/plans/:plan/versions/:version", s.getPlanVersion)
	v1.POST("/plans/:plan/migrate", s.migratePlan)

	v1.GET("/customers", s.listCustomers)
	v1.GET("/customers/:customer", s.getCustomer)
	v1.PUT("/customers/:customer", s.putCustomer)
	v1.DELETE("/customers/:customer", s.deleteCustomer)
	v1.GET("/customers/:customer/limits", s.getLimits)

	v1.GET("/customers/:customer/overrides", s.listOverrides)
	v1.GET("/customers/:customer/overrides/:metric/:window", s.getOverride)
	v1.PUT("/customers/:customer/overrides/:metric/:window", s.putOverride)
	v1.DELETE("/customers/:customer/overrides/:metric/:window", s.deleteOverride)

	v1.GET("/customers/:customer/usage", s.usage)
	v1.GET("/customers/:customer/entitlements", s.entitlements)
	v1.DELETE("/customers/:customer/usage/:metric", s.resetUsage)
	v1.PUT("/customers/:customer/usage/:metric/total", s.putTotal)
	v1.GET("/customers/:customer/usage/history", s.history)
	v1.POST("/check", s.check)
	v1.POST("/refund", s.refund)
	v1.GET("/forward-auth", s.forwardAuth)
	v1.Match(forwardAuthMethods, "/forward-auth/*", s.forwardAuth)

	v1.GET("/audit", s.listAudit)

	v1.GET("/customers/:customer/statement", s.getStatement)
	v1.GET("/statements", s.listStatements)
	s.registerFeatures(v1)
	s.registerWebhooks(v1)
	s.registerKeys(v1)
	s.registerGrants(v1)
	s.registerReservations(v1)
	s.registerHolders(v1)
	v1.POST("/what-if", s.whatIfReplay)

	// The admin console: static files, open to all; every datum it shows
	// comes from the API above, with the admin's token.
	e.GET(console.Prefix+"*", echo.WrapHandler(console.Handler()))
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// Route is one registered method and path (echo's :param syntax).
type Route struct{ Method, Path string }

// Routes lists every registered route.
func (s *Server) Routes() []Route {
	var out []Route
	for _, r := range s.echo.Routes() {
		out = append(out, Route{Method: r.Method, Path: r.Path})
	}
	return out
}

func (s *Server) healthz(c echo.Context) error {
	return respond(c, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		s.log.Warn("not ready", "error", err)
		return problemf(http.StatusServiceUnavailable, codeUnavailable, "not ready: "+readinessReason(err))
	}
	return respond(c, http.StatusOK, map[string]string{"status": "ready"})
}

// NotReadyError explains why the service is not ready, in words safe for
// any client.
type NotReadyError struct{ Reason string }

func (e *NotReadyError) Error() string { return e.Reason }

func readinessReason(err error) string {
	if nr, ok := err.(*NotReadyError); ok {
		return nr.Reason
	}
	return "the database cannot be reached"
}
