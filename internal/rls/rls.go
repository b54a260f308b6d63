// Package rls serves Envoy's rate limit service protocol
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) over gRPC,
// so that Envoy, Istio, Envoy Gateway, Contour, Emissary and Gloo ask
// quotad as they ask Envoy's own ratelimit service. Each descriptor of a
// request is one item of a check (see Rules): its customer (or API key),
// its metric (or the request's domain), its subject, if any (by API key
// without one, the key's id), and its cost (hits_addend). All descriptors of one request are decided together, one
// check of items, all or nothing: when any is over its limit, none is
// counted. The answer carries, for
// each descriptor, its code, the most constraining window as Envoy's
// current_limit, the units left and the time until reset, and the
// RateLimit, RateLimit-Policy and Retry-After headers as the HTTP check
// writes them (internal/rlheaders). It knows nothing of HTTP servers or
// of PostgreSQL.
package rls

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/rlheaders"
	"github.com/quotad/quotad/internal/tiers"
)

// ServiceName is the full name of the rate limit service, as health
// checking names it.
const ServiceName = "envoy.service.ratelimit.v3.RateLimitService"

// Keys resolves API keys to the customers they belong to, and gives each
// key's id. An error wrapping tiers.ErrInvalidAPIKey means the key is
// unknown, revoked or expired; any other error is the store's.
// Implementations are safe for concurrent use.
type Keys interface {
	Customer(ctx context.Context, key string) (customer, id string, err error)
}

// Checker decides checks, all of a check's items or none. *quota.Engine
// implements it; its errors are *quota.ItemError (an unknown customer or
// metric, a subject required), *tiers.ValidationError and
// tiers.ErrUnavailable.
type Checker interface {
	Check(ctx context.Context, r quota.Request) (quota.Decision, error)
}

var _ Checker = (*quota.Engine)(nil)

// Options configure a Service.
type Options struct {
	Checker Checker
	// Keys resolves api_key entries; nil: every API key is unknown.
	Keys Keys
	// Rules say how descriptors become checks; nil: DefaultRules.
	Rules *Rules
	// Tokens are the bearer tokens a call may carry (check and admin
	// tokens); none: calls need none.
	Tokens []string
	// Now is the clock of durations until reset; nil: time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// Registerer, if set, gets the service's metric,
	// quotad_rls_requests_total by answer.
	Registerer prometheus.Registerer
	// RateLimitHeaders are the forms of the rate limit headers an answer
	// asks Envoy to add to the response; 0 means rlheaders.Default.
	RateLimitHeaders rlheaders.Forms
	// CountCheck, if set, hears each authenticated request as one check,
	// by the decision quotad_checks_total counts HTTP checks by (see
	// checkDecision).
	CountCheck func(decision string)
}

// Service implements RateLimitService. It is safe for concurrent use.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer
	checker Checker
	keys    Keys
	rules   *Rules
	tokens  [][sha256.Size]byte
	now     func() time.Time
	log     *slog.Logger
	forms   rlheaders.Forms
	// answers counts requests by answer: ok, over_limit, or the gRPC
	// error code in snake case (nil without a Registerer); ok and
	// overLimit are its two most frequent counters, looked up once.
	answers       *prometheus.CounterVec
	ok, overLimit prometheus.Counter
	countCheck    func(decision string)
}

// New returns a Service.
func New(o Options) *Service {
	s := &Service{checker: o.Checker, keys: o.Keys, rules: o.Rules, now: o.Now, log: o.Logger, forms: o.RateLimitHeaders,
		countCheck: o.CountCheck}
	if s.forms == 0 {
		s.forms = rlheaders.Default
	}
	if s.rules == nil {
		s.rules = DefaultRules()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	for _, t := range o.Tokens {
		s.tokens = append(s.tokens, sha256.Sum256([]byte(t)))
	}
	if o.Registerer != nil {
		s.answers = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quotad_rls_requests_total",
			Help: "Requests to Envoy's rate limit service (gRPC) by answer: ok, over_limit, or the gRPC error (invalid_argument, unauthenticated, unavailable, internal).",
		}, []string{"answer"})
		o.Registerer.MustRegister(s.answers)
		s.ok, s.overLimit = s.answers.WithLabelValues("ok"), s.answers.WithLabelValues("over_limit")
	}
	return s
}

// NewServer returns a gRPC server (plaintext; h2c) serving svc, standard
// health checking (the returned health server: set its statuses, see
// KeepHealth) and reflection, so that grpcurl and Kubernetes probes work.
// Health and reflection need no token. opts come after ServerOptions, so
// they may override them.
func NewServer(svc *Service, opts ...grpc.ServerOption) (*grpc.Server, *health.Server) {
	g := grpc.NewServer(append(ServerOptions(), opts...)...)
	rlsv3.RegisterRateLimitServiceServer(g, svc)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	hs.SetServingStatus(ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(g, hs)
	reflection.Register(g)
	return g, hs
}

// Flow control windows of the server's connections and streams: fixed, as
// Envoy's own ratelimit service has them. A check is a message of a few
// hundred bytes each way, so a window of 64 KiB per stream (HTTP/2's
// default) and 1 MiB per connection (a few thousand checks in flight on
// one connection, as Envoy multiplexes them) never hold a call back.
const (
	streamWindow = 64 << 10
	connWindow   = 1 << 20
)

// ServerOptions are the options NewServer gives the gRPC server, for the
// cost of a check over gRPC to be that of one over HTTP/1.1:
//
//   - Fixed flow control windows. With windows sized by gRPC's bandwidth
//     estimate (its default), the server answers a ping of its own to the
//     data of almost every call on a connection that carries one call at a
//     time: another frame each way, and often another write and read.
//   - Stream workers, a few per core: a call runs on a goroutine that
//     already has the stack a check needs, not on a new one whose stack
//     grows (is copied) two or three times per call. When every worker is
//     busy, a call gets a goroutine of its own as without workers.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.StaticStreamWindowSize(streamWindow),
		grpc.StaticConnWindowSize(connWindow),
		grpc.NumStreamWorkers(uint32(4 * runtime.GOMAXPROCS(0))),
	}
}

// KeepHealth sets hs's statuses (the server's and ServiceName's) from
// ready — SERVING while it returns nil — now and every interval until ctx
// ends; then NOT_SERVING.
func KeepHealth(ctx context.Context, hs *health.Server, ready func(context.Context) error, every time.Duration) {
	set := func(st healthpb.HealthCheckResponse_ServingStatus) {
		hs.SetServingStatus("", st)
		hs.SetServingStatus(ServiceName, st)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		st := healthpb.HealthCheckResponse_SERVING
		if err := ready(ctx); err != nil {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		if ctx.Err() != nil {
			set(healthpb.HealthCheckResponse_NOT_SERVING)
			return
		}
		set(st)
		select {
		case <-ctx.Done():
			set(healthpb.HealthCheckResponse_NOT_SERVING)
			return
		case <-tick.C:
		}
	}
}

// authenticate checks the call's authorization metadata in constant time:
// every token is compared, over fixed-length digests.
func (s *Service) authenticate(ctx context.Context) error {
	if len(s.tokens) == 0 {
		return nil
	}
	vals := metadata.ValueFromIncomingContext(ctx, "authorization")
	if len(vals) != 1 {
		return status.Error(codes.Unauthenticated, "want authorization metadata: Bearer <check token>")
	}
	scheme, secret, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return status.Error(codes.Unauthenticated, "want authorization metadata: Bearer <check token>")
	}
	d := sha256.Sum256([]byte(secret))
	match := 0
	for i := range s.tokens {
		match |= subtle.ConstantTimeCompare(d[:], s.tokens[i][:])
	}
	if match != 1 {
		return status.Error(codes.Unauthenticated, "the token is not a check or admin token")
	}
	return nil
}

// descriptor is one descriptor read: the item of a check it stands for,
// unless it names an unknown customer, API key or metric. A look (a
// hits_addend of 0) asks whether the descriptor is over its limit without
// counting (quota.Request.Look): over only when nothing is left, its
// windows as they stand.
type descriptor struct {
	item    quota.Item
	look    bool
	unknown bool
	// suspended: the descriptor's customer is suspended (see
	// tiers.SuspendedError): OVER_LIMIT, whatever the config says of
	// unknown ones.
	suspended *tiers.SuspendedError
}

// ShouldRateLimit decides every descriptor of r together, all or nothing.
// Errors: codes.Unauthenticated (tokens configured, none or a wrong one
// presented), codes.InvalidArgument (a malformed request),
// codes.Unavailable (the store cannot be reached and checks fail closed,
// or API keys cannot be read).
func (s *Service) ShouldRateLimit(ctx context.Context, r *rlsv3.RateLimitRequest) (res *rlsv3.RateLimitResponse, err error) {
	res, degraded, err := s.shouldRateLimit(ctx, r)
	if s.answers != nil {
		s.count(res, err)
	}
	if s.countCheck != nil {
		if d := checkDecision(res, degraded, err); d != "" {
			s.countCheck(d)
		}
	}
	return res, err
}

// checkDecision names a request's answer as quotad_checks_total counts an
// HTTP check's: allowed (OK), degraded (OK, a descriptor decided without
// its store), denied (OVER_LIMIT), rejected (InvalidArgument: refused
// input) or error (Unavailable, Internal: not decided); "" for an
// unauthenticated call, not counted, as on HTTP.
func checkDecision(res *rlsv3.RateLimitResponse, degraded bool, err error) string {
	switch status.Code(err) {
	case codes.OK:
	case codes.Unauthenticated:
		return ""
	case codes.InvalidArgument:
		return "rejected"
	default:
		return "error"
	}
	switch {
	case res.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT:
		return "denied"
	case degraded:
		return "degraded"
	}
	return "allowed"
}

// count counts an answer in quotad_rls_requests_total.
func (s *Service) count(res *rlsv3.RateLimitResponse, err error) {
	switch {
	case err != nil:
		s.answers.WithLabelValues(answerOf(res, err)).Inc()
	case res.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT:
		s.overLimit.Inc()
	default:
		s.ok.Inc()
	}
}

// answerOf names an answer for quotad_rls_requests_total.
func answerOf(res *rlsv3.RateLimitResponse, err error) string {
	switch c := status.Code(err); {
	case err != nil:
		return toSnake(c.String())
	case res.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT:
		return "over_limit"
	}
	return "ok"
}

// toSnake turns a gRPC code's name (InvalidArgument) into snake case
// (invalid_argument).
func toSnake(name string) string {
	var b strings.Builder
	for i, r := range name {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// shouldRateLimit answers r, and says whether a descriptor was decided
// degraded (its store out of reach).
func (s *Service) shouldRateLimit(ctx context.Context, r *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, bool, error) {
	if err := s.authenticate(ctx); err != nil {
		return nil, false, err
	}
	c := calls.Get().(*call)
	defer c.free()
	ds, err := s.read(ctx, r, c)
	if err != nil {
		return nil, false, err
	}
	overLimit := s.rules.countsOverLimit(r.GetDomain())
	decisions, err := s.decide(ctx, ds, c, overLimit)
	if s.log.Enabled(ctx, slog.LevelDebug) {
		s.logCall(ctx, r.GetDomain(), ds, decisions, overLimit, err)
	}
	if err != nil {
		return nil, false, err
	}
	degraded := false
	for i := range ds {
		degraded = degraded || !ds[i].unknown && decisions[i].Degraded
	}
	return s.answer(ds, decisions), degraded, nil
}

// descriptorLog is one descriptor's part of a request's debug log line.
type descriptorLog struct {
	Customer string `json:"customer,omitempty"`
	Metric   string `json:"metric,omitempty"`
	Subject  string `json:"subject,omitempty"`
	Cost     int64  `json:"cost"`
	// Decision is allowed, denied or degraded; suspended for a suspended
	// customer; unknown for a customer,
	// key or metric quotad does not know; looked for a descriptor that
	// only looks (counts nothing); counted_over_limit for one denied in a
	// domain that counts over the limit (counted all the same).
	Decision string     `json:"decision,omitempty"`
	DeniedBy *windowLog `json:"denied_by,omitempty"`
	Retry    int64      `json:"retry_after,omitempty"`
}

// windowLog is the window that denied a descriptor.
type windowLog struct {
	Metric  string `json:"metric"`
	Subject string `json:"subject,omitempty"`
	Window  string `json:"window"`
	Limit   int64  `json:"limit"`
	Used    int64  `json:"used"`
}

// logCall logs a request's descriptors at debug level: whose checks, of
// which metrics, and what was decided (err, when nothing was); overLimit:
// the domain counts over the limit.
func (s *Service) logCall(ctx context.Context, domain string, ds []descriptor, decisions []quota.Decision, overLimit bool, err error) {
	entries := make([]descriptorLog, len(ds))
	for i := range ds {
		d := &ds[i]
		e := &entries[i]
		e.Customer, e.Metric, e.Subject, e.Cost = d.item.Customer, d.item.Metric, d.item.Subject, d.item.Cost
		switch {
		case d.unknown:
			e.Decision = "unknown"
		case d.suspended != nil:
			e.Decision = "suspended"
		case err != nil || i >= len(decisions):
		default:
			dec := &decisions[i]
			e.Decision = "allowed"
			switch {
			case !dec.Allowed:
				e.Decision = "denied"
			case dec.Degraded:
				e.Decision = "degraded"
			}
			switch {
			case d.look && dec.Allowed:
				e.Decision = "looked"
			case !d.look && !dec.Allowed && overLimit:
				e.Decision = "counted_over_limit"
			}
			e.Retry = dec.RetryAfter
			for _, w := range dec.Limits {
				if w.State == quota.StateExceeded {
					e.DeniedBy = &windowLog{Metric: w.Metric, Subject: w.Subject, Window: w.Window.String(), Limit: w.Limit, Used: w.Used}
					break
				}
			}
		}
	}
	attrs := []slog.Attr{slog.String("domain", domain), slog.Any("descriptors", entries)}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	s.log.LogAttrs(ctx, slog.LevelDebug, "rls: request", attrs...)
}

// call is the working memory of one request: its descriptors, their
// decisions, and the items of its two checks (looks and takes) with, per
// descriptor, the index of its item in each. Calls come from a pool, as a
// request is decided many thousand times a second; the answer holds
// nothing of its call.
type call struct {
	ds             []descriptor
	decisions      []quota.Decision
	looks, takes   []quota.Item
	lookOf, takeOf []int
}

var calls = sync.Pool{New: func() any { return new(call) }}

// free empties c, so that the pool keeps no customer's strings or
// windows alive, and gives it back.
func (c *call) free() {
	clear(c.ds)
	clear(c.decisions)
	clear(c.looks)
	clear(c.takes)
	c.ds, c.decisions, c.looks, c.takes = c.ds[:0], c.decisions[:0], c.looks[:0], c.takes[:0]
	c.lookOf, c.takeOf = c.lookOf[:0], c.takeOf[:0]
	calls.Put(c)
}

// resize returns b with length n, its memory reused when it has room.
func resize[T any](b []T, n int) []T {
	return slices.Grow(b[:0], n)[:n]
}

// read turns r's descriptors into checks, into c's memory.
func (s *Service) read(ctx context.Context, r *rlsv3.RateLimitRequest, c *call) ([]descriptor, error) {
	invalid := func(format string, args ...any) error {
		return status.Errorf(codes.InvalidArgument, format, args...)
	}
	if len(r.GetDescriptors()) == 0 {
		return nil, invalid("want at least one descriptor")
	}
	if len(r.GetDescriptors()) > quota.MaxItems {
		return nil, invalid("want at most %d descriptors, got %d", quota.MaxItems, len(r.GetDescriptors()))
	}
	if r.GetHitsAddend() > quota.MaxCost {
		return nil, invalid("hits_addend %d: want at most %d", r.GetHitsAddend(), quota.MaxCost)
	}
	c.ds = resize(c.ds, len(r.GetDescriptors()))
	ds := c.ds
	for i, d := range r.GetDescriptors() {
		if len(d.GetEntries()) == 0 {
			return nil, invalid("descriptors[%d]: no entries", i)
		}
		if d.GetIsNegativeHits() {
			return nil, invalid("descriptors[%d]: is_negative_hits: quotad does not take units back through this service (POST /v1/refund does)", i)
		}
		var customer, key, metric, subject string
		var hasCustomer, hasKey, hasMetric, hasSubject bool
		for j, e := range d.GetEntries() {
			if e.GetKey() == "" || e.GetValue() == "" {
				return nil, invalid("descriptors[%d].entries[%d]: want a key and a value", i, j)
			}
			var v *string
			var has *bool
			switch e.GetKey() {
			case s.rules.customerKey:
				v, has = &customer, &hasCustomer
			case s.rules.apiKeyKey:
				v, has = &key, &hasKey
			case s.rules.metricKey:
				v, has = &metric, &hasMetric
			case s.rules.subjectKey:
				v, has = &subject, &hasSubject
			default:
				continue // entries quotad does not read (remote_address, path...)
			}
			if *has {
				return nil, invalid("descriptors[%d]: entry %q given twice", i, e.GetKey())
			}
			*v, *has = e.GetValue(), true
		}
		switch {
		case hasCustomer && hasKey:
			return nil, invalid("descriptors[%d]: entries %q and %q: want one of them", i, s.rules.customerKey, s.rules.apiKeyKey)
		case !hasCustomer && !hasKey:
			return nil, invalid("descriptors[%d]: no %q or %q entry", i, s.rules.customerKey, s.rules.apiKeyKey)
		}
		if !hasMetric {
			if r.GetDomain() == "" {
				return nil, invalid("descriptors[%d]: no %q entry and no domain", i, s.rules.metricKey)
			}
			metric = r.GetDomain()
		}
		q := quota.Request{Customer: customer, Metric: metric, Cost: 1, Subject: subject}
		switch {
		case d.GetHitsAddend() != nil:
			n := d.GetHitsAddend().GetValue()
			if n > quota.MaxCost {
				return nil, invalid("descriptors[%d]: hits_addend %d: want at most %d", i, n, quota.MaxCost)
			}
			// 0 asks whether the descriptor is over its limit without
			// counting: a look, which has room for one unit or not.
			q.Cost, ds[i].look = max(int64(n), 1), n == 0
		case r.GetHitsAddend() > 0:
			q.Cost = int64(r.GetHitsAddend())
		}
		if hasKey {
			c, id, err := s.customerOf(ctx, key)
			switch {
			case errors.Is(err, tiers.ErrInvalidAPIKey):
				ds[i].unknown = true
			case err != nil:
				s.log.Warn("rls: API keys cannot be read", "error", err)
				return nil, status.Error(codes.Unavailable, "API keys cannot be read now")
			}
			q.Customer = c
			if !hasSubject {
				// By key, the key is the subject, as for POST /v1/check.
				q.Subject = id
			}
		}
		v := q
		if ds[i].unknown {
			v.Customer = "unknown" // the key named no customer: the rest must still be well formed
		}
		if err := v.Validate(); err != nil {
			return nil, invalid("descriptors[%d]: %v", i, fieldErrors(err))
		}
		ds[i].item = quota.Item{Customer: q.Customer, Metric: q.Metric, Cost: q.Cost, Subject: q.Subject}
	}
	return ds, nil
}

// customerOf resolves an API key to its customer and the key's id;
// without Keys, every key is unknown.
func (s *Service) customerOf(ctx context.Context, key string) (customer, id string, err error) {
	if s.keys == nil {
		return "", "", fmt.Errorf("%w: API keys are not served by this quotad", tiers.ErrInvalidAPIKey)
	}
	return s.keys.Customer(ctx, key)
}

// fieldErrors words a validation error with the descriptor's words:
// customer, metric, cost.
func fieldErrors(err error) string {
	var ve *tiers.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var parts []string
	for _, f := range ve.Fields {
		name := f.Field
		if name == "cost" {
			name = "hits_addend"
		}
		parts = append(parts, name+" "+f.Message)
	}
	return strings.Join(parts, "; ")
}

// decide checks the known descriptors all or nothing, as one check of
// items; a descriptor that names an unknown customer or metric is found
// unknown here. Looks (hits_addend 0) are looked at first (quota's Look):
// a look over its limit denies the request, and the other descriptors are
// then only looked at too (a dry run), as they are when a descriptor is
// unknown and unknown ones deny. In a domain that counts over the limit,
// the others are counted all the same, each over its limit denied but
// counted (quota's Force). Descriptors of one customer's metric and
// subject count as one item of their costs together. It returns a
// decision per descriptor (zero for the unknown ones).
func (s *Service) decide(ctx context.Context, ds []descriptor, c *call, overLimit bool) ([]quota.Decision, error) {
	c.decisions = resize(c.decisions, len(ds))
	out := c.decisions
	for attempt := 0; attempt <= len(ds); attempt++ {
		denyAll := false
		for i := range ds {
			denyAll = denyAll || ds[i].unknown && !s.rules.allowUnknown || ds[i].suspended != nil
		}
		c.looks, c.lookOf = s.items(ds, true, c.looks, c.lookOf)
		c.takes, c.takeOf = s.items(ds, false, c.takes, c.takeOf)
		looks, lookOf, takes, takeOf := c.looks, c.lookOf, c.takes, c.takeOf
		var err error
		var of []int // the descriptors' items of the check that failed
		lookedOver := false
		if len(looks) > 0 {
			d, e := s.check(ctx, looks, quota.Request{Look: true})
			if e != nil {
				err, of = e, lookOf
			} else {
				lookedOver = !d.Allowed
				fill(out, lookOf, &d)
			}
		}
		if err == nil && len(takes) > 0 {
			how := quota.Request{DryRun: denyAll || lookedOver}
			if overLimit {
				how = quota.Request{Force: true}
			}
			d, e := s.check(ctx, takes, how)
			if e != nil {
				err, of = e, takeOf
			} else {
				fill(out, takeOf, &d)
			}
		}
		var ie *quota.ItemError
		switch {
		case err == nil:
			return out, nil
		case errors.As(err, &ie) && (errors.Is(err, tiers.ErrCustomerNotFound) || errors.Is(err, tiers.ErrMetricNotFound)):
			// Once more, without the descriptors of the unknown item.
			for i, j := range of {
				if j == ie.Index {
					ds[i].unknown = true
				}
			}
			continue
		case errors.As(err, &ie) && errors.As(err, new(*tiers.SuspendedError)):
			// Once more, without the descriptors of the suspended
			// customer: they deny, the others count nothing.
			var se *tiers.SuspendedError
			errors.As(err, &se)
			for i, j := range of {
				if j == ie.Index {
					ds[i].suspended = se
				}
			}
			continue
		case errors.Is(err, tiers.ErrUnavailable):
			return nil, status.Error(codes.Unavailable, "the store cannot be reached and checks fail closed")
		case errors.As(err, &ie) && errors.Is(err, tiers.ErrSubjectRequired):
			i := slices.Index(of, ie.Index)
			return nil, status.Errorf(codes.InvalidArgument, "descriptors[%d]: metric %q has limits per subject: want a %q entry (or an %q entry, whose key is the subject)",
				i, ds[i].item.Metric, s.rules.subjectKey, s.rules.apiKeyKey)
		case errors.As(err, &ie):
			return nil, status.Errorf(codes.InvalidArgument, "descriptors: %s", fieldErrors(ie.Err))
		case errors.As(err, new(*tiers.ValidationError)):
			return nil, status.Errorf(codes.InvalidArgument, "descriptors: %s", fieldErrors(err))
		}
		s.log.Error("rls: check failed", "error", err)
		return nil, status.Error(codes.Internal, "internal error")
	}
	return out, nil
}

// check decides items all or nothing, as how says (DryRun, Look or
// Force; nothing else of it is read). A single item is checked as a check
// of one metric (the HTTP check's form, whose decision carries no items):
// its decision, errors included, is the one a check of that one item
// would give, at less cost.
func (s *Service) check(ctx context.Context, items []quota.Item, how quota.Request) (quota.Decision, error) {
	r := quota.Request{DryRun: how.DryRun, Look: how.Look, Force: how.Force}
	if len(items) == 1 {
		it := &items[0]
		r.Customer, r.Metric, r.Cost, r.Subject = it.Customer, it.Metric, it.Cost, it.Subject
	} else {
		r.Items = items
	}
	return s.checker.Check(ctx, r)
}

// items returns the items of the known descriptors of ds that look (or,
// look false, that count), descriptors of one customer's metric and
// subject as one item of their costs together, and, per descriptor, the
// index of its item (-1: none); in the memory of items and of.
func (s *Service) items(ds []descriptor, look bool, items []quota.Item, of []int) ([]quota.Item, []int) {
	items = items[:0]
	of = resize(of, len(ds))
	for i := range ds {
		of[i] = -1
		d := &ds[i]
		if d.unknown || d.suspended != nil || d.look != look {
			continue
		}
		for j := range items {
			if it := &items[j]; it.Customer == d.item.Customer && it.Metric == d.item.Metric && it.Subject == d.item.Subject {
				it.Cost = min(it.Cost+d.item.Cost, quota.MaxCost)
				of[i] = j
				break
			}
		}
		if of[i] < 0 {
			of[i] = len(items)
			items = append(items, d.item)
		}
	}
	return items, of
}

// fill sets the decision of every descriptor whose item (per of) d
// decided: d itself when it decided one item in the form of a check of
// one metric (see check).
func fill(out []quota.Decision, of []int, d *quota.Decision) {
	for i, j := range of {
		switch {
		case j < 0:
		case d.Items == nil:
			out[i] = *d
		default:
			out[i] = d.Item(j)
		}
	}
}

// answer builds the response: a status per descriptor, the overall code,
// and the headers of the descriptor that decides the answer (see
// headline).
func (s *Service) answer(ds []descriptor, decisions []quota.Decision) *rlsv3.RateLimitResponse {
	now := s.now()
	var suspended *tiers.SuspendedError
	m := new(answerMemory)
	res := &m.res
	res.OverallCode = rlsv3.RateLimitResponse_OK
	res.Statuses, m.statuses = m.one[:], m.oneStatus[:]
	if len(ds) > 1 {
		res.Statuses, m.statuses = make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(ds)), make([]statusMemory, len(ds))
	}
	for i := range ds {
		sm := &m.statuses[i]
		st := &sm.status
		st.Code = rlsv3.RateLimitResponse_OK
		res.Statuses[i] = st
		if se := ds[i].suspended; se != nil {
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
			res.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
			suspended = se
			continue
		}
		if ds[i].unknown {
			if !s.rules.allowUnknown {
				st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
				res.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
			}
			continue
		}
		d := &decisions[i]
		if !d.Allowed {
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
			res.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if w, ok := rlheaders.MostConstraining(d.Limits); ok {
			st.CurrentLimit = &sm.limit
			st.CurrentLimit.Name = rlheaders.Name(d, &w)
			st.CurrentLimit.RequestsPerUnit = clamp32(w.Limit)
			st.CurrentLimit.Unit = Unit(w.Window)
			st.LimitRemaining = clamp32(w.Remaining)
			st.DurationUntilReset = nil // a total never resets
			if w.Window.Resets() {
				st.DurationUntilReset = &sm.reset
				setDuration(st.DurationUntilReset, max(0, w.ResetAt.Sub(now)))
			}
		}
	}
	if i := headline(ds, decisions); i >= 0 {
		v := s.forms.For(&decisions[i], now)
		list := v.Headers()
		values := m.header[:]
		res.ResponseHeadersToAdd = m.headers[:0]
		if len(list) > len(values) { // forms beside draft10's
			res.ResponseHeadersToAdd, values = make([]*corev3.HeaderValue, 0, len(list)), make([]corev3.HeaderValue, len(list))
		}
		for j, h := range list {
			values[j].Key, values[j].Value = h.Name, h.Value
			res.ResponseHeadersToAdd = append(res.ResponseHeadersToAdd, &values[j])
		}
		if len(res.ResponseHeadersToAdd) == 0 {
			res.ResponseHeadersToAdd = nil
		}
	}
	if suspended != nil {
		suspendedAnswer(res, suspended)
	}
	return res
}

// suspendedProblem is the body Envoy sends back for a suspended
// customer's request: the problem document POST /v1/check answers (a wire
// form).
type suspendedProblem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
}

// suspendedAnswer makes res, OVER_LIMIT, say that the customer is
// suspended: a problem document of code customer_suspended as the body
// (raw_body), and no rate-limit headers, which would send the client to
// retry.
func suspendedAnswer(res *rlsv3.RateLimitResponse, se *tiers.SuspendedError) {
	body, _ := json.Marshal(suspendedProblem{Type: "urn:quotad:problem:customer_suspended",
		Title: "Forbidden", Status: 403, Detail: se.Error(), Code: "customer_suspended"})
	res.RawBody = body
	res.ResponseHeadersToAdd = []*corev3.HeaderValue{{Key: "Content-Type", Value: "application/problem+json"}}
}

// answerMemory holds an answer's messages, allocated together: the
// response, its headers in the default forms (RateLimit-Policy, RateLimit
// and Retry-After) and, for a request of one descriptor (most of them),
// its status; the statuses of more descriptors come in one more
// allocation, as do the headers of more forms, in two.
type answerMemory struct {
	res       rlsv3.RateLimitResponse
	headers   [3]*corev3.HeaderValue
	header    [3]corev3.HeaderValue
	one       [1]*rlsv3.RateLimitResponse_DescriptorStatus
	oneStatus [1]statusMemory
	statuses  []statusMemory
}

// statusMemory is a descriptor's status with its current limit and its
// time until reset.
type statusMemory struct {
	status rlsv3.RateLimitResponse_DescriptorStatus
	limit  rlsv3.RateLimitResponse_RateLimit
	reset  durationpb.Duration
}

// setDuration sets dst to d, as durationpb.New(d) would make it.
func setDuration(dst *durationpb.Duration, d time.Duration) {
	nanos := d.Nanoseconds()
	secs := nanos / 1e9
	dst.Seconds, dst.Nanos = secs, int32(nanos-secs*1e9)
}

// headline picks the descriptor whose headers the answer carries: the
// first one over its limit, else the one whose most constraining window
// has the fewest units left (the first on a tie); -1 when no known
// descriptor has a limit.
func headline(ds []descriptor, decisions []quota.Decision) int {
	best, bestLeft := -1, int64(math.MaxInt64)
	for i := range ds {
		if ds[i].unknown {
			continue
		}
		d := &decisions[i]
		if !d.Allowed {
			return i
		}
		if w, ok := rlheaders.MostConstraining(d.Limits); ok && w.Remaining < bestLeft {
			best, bestLeft = i, w.Remaining
		}
	}
	return best
}

// Unit names window w as Envoy does. Every quotad window but total has its
// unit (a month anchored on a billing day is still a month); a total,
// which Envoy has no unit for, is UNKNOWN.
func Unit(w tiers.Window) rlsv3.RateLimitResponse_RateLimit_Unit {
	switch w {
	case tiers.Second:
		return rlsv3.RateLimitResponse_RateLimit_SECOND
	case tiers.Minute:
		return rlsv3.RateLimitResponse_RateLimit_MINUTE
	case tiers.Hour:
		return rlsv3.RateLimitResponse_RateLimit_HOUR
	case tiers.Day:
		return rlsv3.RateLimitResponse_RateLimit_DAY
	case tiers.Week:
		return rlsv3.RateLimitResponse_RateLimit_WEEK
	case tiers.Month:
		return rlsv3.RateLimitResponse_RateLimit_MONTH
	}
	return rlsv3.RateLimitResponse_RateLimit_UNKNOWN
}

// clamp32 fits a count into Envoy's uint32 fields: limits and remainders
// above 4294967295 are reported as that.
func clamp32(n int64) uint32 {
	return uint32(min(max(n, 0), math.MaxUint32))
}
