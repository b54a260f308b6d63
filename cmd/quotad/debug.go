package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// startDebug serves net/http/pprof under /debug/pprof/ on addr, with its
// own http.Server, until stop is called; with addr empty it does nothing.
// The endpoints have no authentication: addr is a loopback one unless
// --debug-allow-remote (see config.check). /debug/pprof/cmdline is not
// served: it would show the command line, --database-url's password and
// tokens included (the configuration is in the start-up log, its secrets
// masked); the profiles need it not.
func startDebug(addr string, log *slog.Logger) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("debug listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // and the named profiles: heap, goroutine, ...
	mux.HandleFunc("/debug/pprof/cmdline", http.NotFound)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// No WriteTimeout: a CPU profile or trace answers after its duration.
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Warn("debug server stopped", "error", err)
		}
	}()
	bound := ln.Addr().String()
	if _, beyondLoopback := loopbackOnly(bound); beyondLoopback {
		log.Warn("debug endpoints have no authentication and listen beyond loopback", "addr", bound)
	}
	log.Info("debug listening", "addr", bound, "paths", "/debug/pprof/")
	return func() { srv.Close(); <-done }, nil
}
