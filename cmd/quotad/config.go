package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	neturl "net/url"
	"strconv"
	"strings"
	"time"

	"github.com/quotad/quotad/internal/api"
	"github.com/quotad/quotad/internal/redisstore"
	"github.com/quotad/quotad/internal/store"
)

// defaultDatabaseURL points at a PostgreSQL on this machine, so that
// `make run` works wherever one runs with trust or peer auth.
const defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/quotad?sslmode=disable"

// config is quotad's configuration: flags, each falling back to a QUOTAD_*
// environment variable, then to a default.
type config struct {
	Listen          string
	DatabaseURL     string
	AdminTokens     string
	CheckTokens     string
	StoreFailure    string
	LogLevel        string
	ShutdownTimeout time.Duration
	DBWait          time.Duration
	DBMaxConns      int
	Migrate         bool
	Leases          bool
	DebugListen     string
	RedisURL        string
	RedisPrefix     string
	RedisTimeout    time.Duration

	tokens []api.Token
}

// parseConfig reads flags from args and the environment through getenv.
func parseConfig(name string, args []string, getenv func(string) string, stderr io.Writer) (*config, error) {
	var cfg config
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	fs.StringVar(&cfg.Listen, "listen", env("QUOTAD_LISTEN", ""),
		"address to listen on (QUOTAD_LISTEN; default 127.0.0.1:8080 without tokens, :8080 with)")
	fs.StringVar(&cfg.DatabaseURL, "database-url", env("QUOTAD_DATABASE_URL", defaultDatabaseURL),
		"PostgreSQL URL (QUOTAD_DATABASE_URL)")
	fs.StringVar(&cfg.AdminTokens, "admin-tokens", env("QUOTAD_ADMIN_TOKENS", ""),
		"comma-separated admin tokens, each secret or name:secret (QUOTAD_ADMIN_TOKENS)")
	fs.StringVar(&cfg.CheckTokens, "check-tokens", env("QUOTAD_CHECK_TOKENS", ""),
		"comma-separated check tokens, each secret or name:secret (QUOTAD_CHECK_TOKENS)")
	fs.StringVar(&cfg.StoreFailure, "store-failure", env("QUOTAD_STORE_FAILURE", "open"),
		"what checks do when PostgreSQL is unreachable: open or closed (QUOTAD_STORE_FAILURE)")
	fs.StringVar(&cfg.LogLevel, "log-level", env("QUOTAD_LOG_LEVEL", "info"),
		"debug, info, warn or error (QUOTAD_LOG_LEVEL)")
	shutdown := fs.String("shutdown-timeout", env("QUOTAD_SHUTDOWN_TIMEOUT", "10s"),
		"how long to drain requests on SIGINT/SIGTERM (QUOTAD_SHUTDOWN_TIMEOUT)")
	dbWait := fs.String("db-wait", env("QUOTAD_DB_WAIT", "30s"),
		"how long to wait for PostgreSQL at start-up (QUOTAD_DB_WAIT)")
	maxConns := fs.String("db-max-conns", env("QUOTAD_DB_MAX_CONNS", "0"),
		"PostgreSQL connections in the pool; 0 means the URL's pool_max_conns or 24 (QUOTAD_DB_MAX_CONNS)")
	migrate := fs.String("migrate", env("QUOTAD_MIGRATE", "true"),
		"apply schema migrations at start-up (QUOTAD_MIGRATE)")
	leases := fs.String("leases", env("QUOTAD_LEASES", "true"),
		"serve long windows from leased blocks of units; false charges PostgreSQL on every check (QUOTAD_LEASES)")
	fs.StringVar(&cfg.RedisURL, "redis-url", env("QUOTAD_REDIS_URL", ""),
		"Redis URL (redis://host:port/db or rediss://) to share short windows with every quotad process; empty: each process counts its own (QUOTAD_REDIS_URL)")
	fs.StringVar(&cfg.RedisPrefix, "redis-prefix", env("QUOTAD_REDIS_PREFIX", redisstore.DefaultPrefix),
		"prefix of quotad's Redis keys (QUOTAD_REDIS_PREFIX)")
	redisTimeout := fs.String("redis-timeout", env("QUOTAD_REDIS_TIMEOUT", redisstore.DefaultTimeout.String()),
		"how long a check waits for Redis before counting its short windows in process, degraded (QUOTAD_REDIS_TIMEOUT)")
	fs.StringVar(&cfg.DebugListen, "debug-listen", env("QUOTAD_DEBUG_LISTEN", ""),
		"address to serve net/http/pprof on, without authentication; empty: off (QUOTAD_DEBUG_LISTEN)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}

	var err error
	if cfg.ShutdownTimeout, err = time.ParseDuration(*shutdown); err != nil || cfg.ShutdownTimeout < 0 {
		return nil, fmt.Errorf("shutdown-timeout: want a duration such as 10s, got %q", *shutdown)
	}
	if cfg.DBWait, err = time.ParseDuration(*dbWait); err != nil || cfg.DBWait < 0 {
		return nil, fmt.Errorf("db-wait: want a duration such as 30s, got %q", *dbWait)
	}
	if cfg.RedisTimeout, err = time.ParseDuration(*redisTimeout); err != nil || cfg.RedisTimeout <= 0 {
		return nil, fmt.Errorf("redis-timeout: want a positive duration such as 250ms, got %q", *redisTimeout)
	}
	if cfg.RedisURL != "" {
		if _, err := redisstore.New(cfg.RedisURL, redisstore.Options{}); err != nil {
			return nil, fmt.Errorf("redis-url: %v", redactRedis(err.Error(), cfg.RedisURL))
		}
	}
	if cfg.DBMaxConns, err = strconv.Atoi(*maxConns); err != nil || cfg.DBMaxConns < 0 || cfg.DBMaxConns > 1000 {
		return nil, fmt.Errorf("db-max-conns: want an integer from 0 to 1000, got %q", *maxConns)
	}
	if cfg.Migrate, err = parseBool("migrate", *migrate); err != nil {
		return nil, err
	}
	if cfg.Leases, err = parseBool("leases", *leases); err != nil {
		return nil, err
	}
	if cfg.StoreFailure != "open" && cfg.StoreFailure != "closed" {
		return nil, fmt.Errorf("store-failure: want open or closed, got %q", cfg.StoreFailure)
	}
	if _, err := parseLevel(cfg.LogLevel); err != nil {
		return nil, err
	}
	admin, err := api.ParseTokens(cfg.AdminTokens, api.RoleAdmin)
	if err != nil {
		return nil, err
	}
	check, err := api.ParseTokens(cfg.CheckTokens, api.RoleCheck)
	if err != nil {
		return nil, err
	}
	cfg.tokens = append(admin, check...)
	if cfg.Listen == "" {
		cfg.Listen = ":8080"
		if len(cfg.tokens) == 0 {
			cfg.Listen = "127.0.0.1:8080"
		}
	}
	return &cfg, nil
}

func parseBool(name, s string) (bool, error) {
	switch strings.ToLower(s) {
	case "true", "1", "yes":
		return true, nil
	case "false", "0", "no":
		return false, nil
	}
	return false, fmt.Errorf("%s: want true or false, got %q", name, s)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("log-level: want debug, info, warn or error, got %q", s)
	}
	return l, nil
}

// loopbackOnly rewrites addr to listen on loopback only, keeping its port.
func loopbackOnly(addr string) (string, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, false
	}
	if host == "localhost" {
		return addr, false
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return addr, false
	}
	return net.JoinHostPort("127.0.0.1", port), true
}

// logValue lists the effective configuration with every secret masked.
func (c *config) logValue() slog.Value {
	var names []string
	for _, t := range c.tokens {
		names = append(names, t.Name)
	}
	return slog.GroupValue(
		slog.String("listen", c.Listen),
		slog.String("database_url", store.RedactURL(c.DatabaseURL)),
		slog.Any("tokens", names),
		slog.String("store_failure", c.StoreFailure),
		slog.String("log_level", c.LogLevel),
		slog.String("shutdown_timeout", c.ShutdownTimeout.String()),
		slog.Int("db_max_conns", c.poolSize()),
		slog.Bool("migrate", c.Migrate),
		slog.Bool("leases", c.Leases),
		slog.String("debug_listen", c.DebugListen),
		slog.String("redis_url", redactRedis(c.RedisURL, c.RedisURL)),
		slog.String("redis_prefix", c.RedisPrefix),
		slog.String("redis_timeout", c.RedisTimeout.String()),
	)
}

// poolSize is the size of quotad's PostgreSQL pool: -db-max-conns, else
// the URL's pool_max_conns, else store.DefaultMaxConns.
func (c *config) poolSize() int {
	n, err := store.MaxConns(c.DatabaseURL, c.DBMaxConns)
	if err != nil {
		return c.DBMaxConns // the URL is refused when quotad connects
	}
	return n
}

// redactRedis returns s with the password of Redis URL url masked.
func redactRedis(s, url string) string {
	u, err := neturl.Parse(url)
	if err != nil || u.User == nil {
		return s
	}
	if p, ok := u.User.Password(); ok && p != "" {
		s = strings.ReplaceAll(s, p, "xxxxx")
	}
	return s
}
