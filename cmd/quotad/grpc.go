package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/quotad/quotad/internal/rls"
)

// healthEvery is how often the gRPC health status follows /readyz.
const healthEvery = time.Second

// loadRLS reads the rate limit service's rules from the file cfg names, or
// returns the defaults; a bad file stops quotad at start-up.
func loadRLS(cfg *config) (*rls.Rules, error) {
	if cfg.RLSConfig == "" {
		return rls.DefaultRules(), nil
	}
	return rls.LoadRules(cfg.RLSConfig)
}

// grpcServer is Envoy's rate limit service, serving beside the HTTP API.
type grpcServer struct {
	log        *slog.Logger
	srv        *grpc.Server
	errs       chan error
	stopHealth context.CancelFunc
	healthDone chan struct{}
}

// startGRPC serves the rate limit service on --grpc-listen, if set (nil
// otherwise), its health following the HTTP readiness, its requests
// counted as checks by countCheck.
func (p *instance) startGRPC(rules *rls.Rules, countCheck func(decision string)) (*grpcServer, error) {
	if p.cfg.GRPCListen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", p.cfg.GRPCListen)
	if err != nil {
		return nil, fmt.Errorf("grpc listen: %w", err)
	}
	var secrets []string
	for _, t := range p.cfg.tokens {
		secrets = append(secrets, t.Secret) // check and admin tokens, as on HTTP
	}
	svc := rls.New(rls.Options{Checker: p.engine, Keys: p.verifier, Rules: rules, Tokens: secrets, Logger: p.log, Registerer: p.registry,
		RateLimitHeaders: p.cfg.rateLimitHeaders, CountCheck: countCheck})
	// With --tls-cert, gRPC is served over TLS; else it is h2c. gRPC needs
	// no Host (:authority) check without tokens, as HTTP has: a browser's
	// page cannot speak gRPC (it cannot send HTTP/2 frames in clear, nor
	// the trailers gRPC needs), so DNS rebinding cannot reach it.
	var opts []grpc.ServerOption
	if p.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(p.tls)))
	}
	srv, hs := rls.NewServer(svc, opts...)
	g := &grpcServer{log: p.log, srv: srv, errs: make(chan error, 1), healthDone: make(chan struct{})}
	var ctx context.Context
	ctx, g.stopHealth = context.WithCancel(p.bg)
	go func() {
		defer close(g.healthDone)
		rls.KeepHealth(ctx, hs, func(ctx context.Context) error { return ready(ctx, p.cfg, p.db, p.engine) }, healthEvery)
	}()
	go func() { g.errs <- srv.Serve(ln) }()
	p.log.Info("grpc listening", "addr", ln.Addr().String(), "tls", p.tls != nil)
	return g, nil
}

// Err reports the server's failure; nil-safe (a nil server never fails).
func (g *grpcServer) Err() <-chan error {
	if g == nil {
		return nil
	}
	return g.errs
}

// shutdown says NOT_SERVING, then lets calls in flight finish until ctx
// ends, when the rest are cut off: those are streams that do not end by
// themselves, such as health watches (a check waits for the stores no
// longer than the store timeout), so cutting them is no failure.
func (g *grpcServer) shutdown(ctx context.Context) {
	if g == nil {
		return
	}
	g.stopHealth()
	<-g.healthDone
	done := make(chan struct{})
	go func() { g.srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		g.srv.Stop()
		<-done
		g.log.Warn("grpc: calls still open at the shutdown timeout were cut off (health watches, most likely)")
	}
}
