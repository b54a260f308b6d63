// Package api is quotad's HTTP interface: the admin API, the check path and
// the operational endpoints, as openapi.yaml describes them. It is the only
// package that imports echo, and it sees the rest of quotad only through
// the interfaces it declares, each beside the handlers that use it.
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
)

// Config configures a Server.
type Config struct {
	// The tier catalog's roles, each used by its own routes;
	// *tiers.Service plays them all. A role may be nil only where its
	// routes are not called (tests).
	Metrics          MetricCatalog
	Plans            PlanCatalog
	Customers        CustomerCatalog
	Overrides        OverrideCatalog
	FeatureOverrides FeatureCatalog
	Audit            AuditLog

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

// Server is quotad's HTTP handler: the router, and the middleware every
// request goes through (authentication, timeouts, metrics, logs, the
// problem documents of errors). The routes' handlers are in groups, by
// resource, each holding only what it uses (see New).
type Server struct {
	echo           *echo.Echo
	auth           *authenticator
	log            *slog.Logger
	metrics        *httpMetrics
	checkMetrics   *checkMetrics
	requestTimeout time.Duration
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
	if cfg.RateLimitHeaders == 0 {
		cfg.RateLimitHeaders = rlheaders.Default
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	stats := func() quota.Stats { return quota.Stats{} }
	if cfg.Checker != nil {
		stats = cfg.Checker.Stats
	}
	s := &Server{
		echo:           echo.New(),
		auth:           newAuthenticator(cfg.Tokens),
		log:            cfg.Logger,
		metrics:        newHTTPMetrics(cfg.Registry),
		checkMetrics:   newCheckMetrics(cfg.Registry, stats),
		requestTimeout: cfg.RequestTimeout,
	}

	// The groups of handlers, and what they share: who a call by API key
	// is for, how a check is decided and counted, whether a customer has
	// a feature.
	ids := identifier{resolver: cfg.KeyResolver}
	decider := &decider{checker: cfg.Checker, metrics: s.checkMetrics}
	gate := featureGate{features: cfg.Features}
	checks := &checkHandlers{decider: decider, checker: cfg.Checker, ids: ids, log: cfg.Logger,
		forms: cfg.RateLimitHeaders, refundRequiresRequestID: cfg.RefundRequiresRequestID}
	forward := &forwardAuthHandler{rules: cfg.ForwardAuth, keys: cfg.KeyResolver, decider: decider, gate: gate,
		log: cfg.Logger, forms: cfg.RateLimitHeaders}
	reservations := &reservationHandlers{reservations: cfg.Reservations, ids: ids, metrics: s.checkMetrics,
		log: cfg.Logger, forms: cfg.RateLimitHeaders}
	usage := &usageHandlers{checker: cfg.Checker, grants: cfg.Grants}
	catalog := &catalogHandlers{metrics: cfg.Metrics, plans: cfg.Plans, checker: cfg.Checker}
	customers := &customerHandlers{customers: cfg.Customers, overrides: cfg.Overrides}
	features := &featureHandlers{catalog: cfg.FeatureOverrides, gate: gate, ids: ids}
	keys := &keyHandlers{keys: cfg.Keys}
	grants := &grantHandlers{grants: cfg.Grants}
	hooks := &webhookHandlers{webhooks: cfg.Webhooks}
	billing := &billingHandlers{billing: cfg.Billing, whatIf: cfg.WhatIf, log: cfg.Logger,
		requestTimeout: cfg.RequestTimeout}
	admin := &adminHandlers{ready: cfg.Ready, log: cfg.Logger, audit: cfg.Audit, holders: cfg.Holders}

	e := s.echo
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.errorHandler
	e.Use(s.middleware)

	e.GET("/healthz", admin.healthz)
	e.GET("/readyz", admin.readyz)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{})))

	v1 := e.Group("/v1")
	v1.GET("/metrics", catalog.listMetrics)
	v1.GET("/metrics/:metric", catalog.getMetric)
	v1.PUT("/metrics/:metric", catalog.putMetric)
	v1.DELETE("/metrics/:metric", catalog.deleteMetric)
	v1.GET("/metrics/:metric/usage", usage.metricUsage)

	v1.GET("/plans", catalog.listPlans)
	v1.GET("/plans/:plan", catalog.getPlan)
	v1.PUT("/plans/:plan", catalog.putPlan)
	v1.DELETE("/plans/:plan", catalog.deletePlan)
	v1.GET("/plans/:plan/versions", catalog.listPlanVersions)
	v1.GET("/plans/:plan/versions/:version", catalog.getPlanVersion)
	v1.POST("/plans/:plan/migrate", catalog.migratePlan)

	v1.GET("/customers", customers.listCustomers)
	v1.GET("/customers/:customer", customers.getCustomer)
	v1.PUT("/customers/:customer", customers.putCustomer)
	v1.DELETE("/customers/:customer", customers.deleteCustomer)
	v1.GET("/customers/:customer/limits", customers.getLimits)

	v1.GET("/customers/:customer/overrides", customers.listOverrides)
	v1.GET("/customers/:customer/overrides/:metric/:window", customers.getOverride)
	v1.PUT("/customers/:customer/overrides/:metric/:window", customers.putOverride)
	v1.DELETE("/customers/:customer/overrides/:metric/:window", customers.deleteOverride)

	v1.GET("/customers/:customer/usage", usage.usage)
	v1.GET("/customers/:customer/entitlements", usage.entitlements)
	v1.DELETE("/customers/:customer/usage/:metric", usage.resetUsage)
	v1.PUT("/customers/:customer/usage/:metric/total", usage.putTotal)
	v1.GET("/customers/:customer/usage/history", usage.history)
	v1.POST("/check", checks.check)
	v1.POST("/refund", checks.refund)
	v1.GET("/forward-auth", forward.forwardAuth)
	v1.Match(forwardAuthMethods, "/forward-auth/*", forward.forwardAuth)

	v1.GET("/audit", admin.listAudit)

	v1.GET("/customers/:customer/statement", billing.getStatement)
	v1.GET("/statements", billing.listStatements)

	v1.POST("/features/check", features.checkFeature)
	v1.GET("/customers/:customer/features", features.listFeatures)
	v1.PUT("/customers/:customer/features/:feature", features.putFeature)
	v1.DELETE("/customers/:customer/features/:feature", features.deleteFeature)

	v1.GET("/webhooks", hooks.listWebhooks)
	v1.GET("/webhooks/:webhook", hooks.getWebhook)
	v1.PUT("/webhooks/:webhook", hooks.putWebhook)
	v1.DELETE("/webhooks/:webhook", hooks.deleteWebhook)
	v1.GET("/webhooks/:webhook/deliveries", hooks.listDeliveries)

	v1.POST("/customers/:customer/keys", keys.createKey)
	v1.GET("/customers/:customer/keys", keys.listKeys)
	v1.GET("/keys/:key", keys.getKey)
	v1.DELETE("/keys/:key", keys.revokeKey)

	v1.POST("/customers/:customer/grants", grants.createGrant)
	v1.GET("/customers/:customer/grants", grants.listGrants)
	v1.DELETE("/grants/:grant", grants.voidGrant)

	v1.POST("/reservations", reservations.reserve)
	v1.GET("/reservations/:id", reservations.getReservation)
	v1.DELETE("/reservations/:id", reservations.releaseReservation)
	v1.POST("/reservations/:id/commit", reservations.commitReservation)

	v1.GET("/admin/holders", admin.listHolders)
	v1.POST("/admin/holders/:holder/release", admin.releaseHolder)
	v1.POST("/what-if", billing.whatIfReplay)

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
