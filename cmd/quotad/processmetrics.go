package main

import (
	"runtime"
	"runtime/debug"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// registerProcessMetrics registers what an operator reads of any
// process: the Go runtime's and the process's own series, the build
// quotad runs, and PostgreSQL's connection pool.
func registerProcessMetrics(reg *prometheus.Registry, pool *pgxpool.Pool) {
	b := currentBuild()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "quotad_build_info",
			Help:        "Always 1: the version, the source revision and the Go release quotad was built from, as labels.",
			ConstLabels: prometheus.Labels{"version": b.version, "revision": b.revision, "go": b.goVersion},
		}, func() float64 { return 1 }),
	)
	stat := func(v func(*pgxpool.Stat) float64) func() float64 {
		return func() float64 { return v(pool.Stat()) }
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "quotad_db_pool_conns", Help: "Connections of the PostgreSQL pool, idle, in use or being made."},
			stat(func(s *pgxpool.Stat) float64 { return float64(s.TotalConns()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "quotad_db_pool_acquired_conns", Help: "Connections of the PostgreSQL pool in use."},
			stat(func(s *pgxpool.Stat) float64 { return float64(s.AcquiredConns()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "quotad_db_pool_idle_conns", Help: "Connections of the PostgreSQL pool idle."},
			stat(func(s *pgxpool.Stat) float64 { return float64(s.IdleConns()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "quotad_db_pool_max_conns", Help: "The most connections the PostgreSQL pool makes (--db-max-conns)."},
			stat(func(s *pgxpool.Stat) float64 { return float64(s.MaxConns()) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "quotad_db_pool_acquires_total", Help: "Connections taken from the PostgreSQL pool."},
			stat(func(s *pgxpool.Stat) float64 { return float64(s.AcquireCount()) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "quotad_db_pool_empty_acquires_total", Help: "Connections taken from the PostgreSQL pool that had to wait: none was idle."},
			stat(func(s *pgxpool.Stat) float64 { return float64(s.EmptyAcquireCount()) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "quotad_db_pool_acquire_wait_seconds_total", Help: "Time spent waiting for a connection of the PostgreSQL pool."},
			stat(func(s *pgxpool.Stat) float64 { return s.AcquireDuration().Seconds() })),
	)
}

// buildInfo is what quotad was built from, as quotad_build_info and
// quotad version say it.
type buildInfo struct {
	version   string // set at build time (main.version)
	revision  string // the source revision, see revision
	goVersion string // the Go release
}

func currentBuild() buildInfo {
	return buildInfo{version: version, revision: revision(), goVersion: runtime.Version()}
}

// revision returns the source revision the binary was built from, as Go
// records it ("unknown" outside a version-controlled checkout).
func revision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "unknown", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && rev != "unknown" {
		rev += "-dirty"
	}
	return rev
}
