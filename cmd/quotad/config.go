package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	neturl "net/url"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/quotad/quotad/internal/api"
	"github.com/quotad/quotad/internal/cmdline"
	"github.com/quotad/quotad/internal/meters"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/redisstore"
	"github.com/quotad/quotad/internal/rlheaders"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
)

// defaultDatabaseURL points at a PostgreSQL on this machine, so that
// `make run` works wherever one runs with trust or peer auth.
const defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/quotad?sslmode=disable"

// config is quotad's configuration, shared by serve and migrate: each
// flag falls back to the QUOTAD_* environment variable its envvar tag
// names, then to its default. The variables are read only through run's
// getenv (see cmdline.EnvResolver), never from the process's environment behind
// its back, so that tests decide what quotad sees. A new setting is one
// field here (with its flag's help, envvar and default), plus a line in
// logValue and, if it needs more than its type checks, in check.
type config struct {
	Listen          string        `help:"Address to listen on; default 127.0.0.1:8080 without tokens, :8080 with." envvar:"QUOTAD_LISTEN" placeholder:"ADDR"`
	DatabaseURL     string        `help:"PostgreSQL URL." envvar:"QUOTAD_DATABASE_URL" default:"${database_url}" placeholder:"URL"`
	AdminTokens     string        `help:"Comma-separated admin tokens, each secret or name:secret." envvar:"QUOTAD_ADMIN_TOKENS" placeholder:"TOKENS"`
	CheckTokens     string        `help:"Comma-separated check tokens, each secret or name:secret." envvar:"QUOTAD_CHECK_TOKENS" placeholder:"TOKENS"`
	StoreFailure    string        `help:"What checks do when PostgreSQL is unreachable: open or closed." envvar:"QUOTAD_STORE_FAILURE" enum:"open,closed" default:"open" placeholder:"open|closed"`
	StoreTimeout    time.Duration `help:"How long PostgreSQL may stay silent (no byte back) before the checks waiting for it are answered as --store-failure says; a PostgreSQL that answers, however slowly, is waited for up to --request-timeout (Redis has --redis-timeout)." envvar:"QUOTAD_STORE_TIMEOUT" default:"${store_timeout}" placeholder:"DURATION"`
	RequestTimeout  time.Duration `help:"How long a check waits for a PostgreSQL that answers slowly, and any other request (admin reads and writes, refunds, usage) for PostgreSQL, before it is answered as --store-failure says (a check) or 503." envvar:"QUOTAD_REQUEST_TIMEOUT" default:"5s" placeholder:"DURATION"`
	LogLevel        string        `help:"Log level: debug, info, warn or error." envvar:"QUOTAD_LOG_LEVEL" enum:"debug,info,warn,error" default:"info" placeholder:"LEVEL"`
	DrainTimeout    time.Duration `help:"On SIGINT or SIGTERM, how long to go on serving, /readyz answering 503, while load balancers take the process out of rotation (keep-alive connections are closed after their next answer)." envvar:"QUOTAD_DRAIN_TIMEOUT" default:"5s" placeholder:"DURATION"`
	ShutdownTimeout time.Duration `help:"After the drain, how long to finish requests in flight, give back leased units and flush; the process exits then whatever PostgreSQL and Redis do, and logs what it could not give back." envvar:"QUOTAD_SHUTDOWN_TIMEOUT" default:"10s" placeholder:"DURATION"`
	DBWait          time.Duration `help:"How long to wait for PostgreSQL at start-up." envvar:"QUOTAD_DB_WAIT" default:"30s" placeholder:"DURATION"`
	DBMaxConns      int           `help:"PostgreSQL connections in the pool, 0 to 1000; 0 means the URL's pool_max_conns, else ${db_max_conns}." envvar:"QUOTAD_DB_MAX_CONNS" default:"0" placeholder:"N"`
	Migrate         bool          `help:"Apply schema migrations at start-up." envvar:"QUOTAD_MIGRATE" default:"true" negatable:""`
	Leases          bool          `help:"Serve long windows from leased blocks of units; false charges PostgreSQL on every check." envvar:"QUOTAD_LEASES" default:"true" negatable:""`
	ReclaimAfter    time.Duration `help:"How long a process must have been gone (its PostgreSQL session ended: at once when killed, within about 20 s when its machine is lost) before the others take back the units its leases held; a process cut off from PostgreSQL stops spending from its leases after half of it." envvar:"QUOTAD_RECLAIM_AFTER" default:"30s" placeholder:"DURATION"`
	RedisURL        string        `help:"Redis URL (redis://host:port/db or rediss://; a Redis Cluster: redis://host:port, more nodes with ?addr=host:port) to share short windows with every quotad process; empty: each process counts its own." envvar:"QUOTAD_REDIS_URL" placeholder:"URL"`
	RedisPrefix     string        `help:"Prefix of quotad's Redis keys." envvar:"QUOTAD_REDIS_PREFIX" default:"${redis_prefix}" placeholder:"PREFIX"`
	RedisTimeout    time.Duration `help:"When Redis is silent rather than slow: a connection with no answer for four times this (at least a second) is given up, and checks count their short windows in process, degraded; a Redis that answers is waited for up to --request-timeout." envvar:"QUOTAD_REDIS_TIMEOUT" default:"${redis_timeout}" placeholder:"DURATION"`
	DebugListen     string        `help:"Address to serve net/http/pprof on, without authentication: a loopback one unless --debug-allow-remote; empty: off." envvar:"QUOTAD_DEBUG_LISTEN" placeholder:"ADDR"`
	WarmCustomers   int           `help:"How many customers active today or yesterday (by usage history), the most recent first, to load into the cache at start-up before serving; 0: none." envvar:"QUOTAD_WARM_CUSTOMERS" default:"100000" placeholder:"N"`
	WarmTimeout     time.Duration `help:"How long start-up may spend loading them; then quotad serves anyway." envvar:"QUOTAD_WARM_TIMEOUT" default:"10s" placeholder:"DURATION"`
	GCHeadroom      int           `help:"MiB the heap may grow by above its live size before the garbage collector runs, while its live size is smaller (larger, the runtime's doubling applies); 0: the runtime's pace alone. Ignored when GOGC is set." envvar:"QUOTAD_GC_HEADROOM_MIB" name:"gc-headroom-mib" default:"128" placeholder:"MIB"`
	// DebugAllowRemote lets --debug-listen be beyond loopback (see debug.go).
	DebugAllowRemote bool `help:"Let --debug-listen be an address beyond loopback, where whoever reaches it reads quotad's memory profiles." envvar:"QUOTAD_DEBUG_ALLOW_REMOTE"`
	// ForwardAuthConfig names the YAML file of GET /v1/forward-auth's
	// rules; empty: the X-Quotad-* headers (see forwardauth.go).
	ForwardAuthConfig string `help:"YAML file of GET /v1/forward-auth's header names, API keys and routes; empty: X-Quotad-Customer, X-Quotad-Metric, X-Quotad-Cost." envvar:"QUOTAD_FORWARD_AUTH_CONFIG" placeholder:"FILE"`
	// GRPCListen serves Envoy's rate limit service (see grpc.go);
	// RLSConfig names its YAML rules.
	GRPCListen string `help:"Address to serve Envoy's rate limit service (envoy.service.ratelimit.v3) on, plaintext gRPC (h2c) unless --tls-cert, with gRPC health checking and reflection; empty: off." envvar:"QUOTAD_GRPC_LISTEN" placeholder:"ADDR"`
	RLSConfig  string `help:"YAML file of the rate limit service's descriptor entry keys and what unknown customers, keys and metrics get; empty: entries customer, api_key and metric, unknown denied." envvar:"QUOTAD_RLS_CONFIG" placeholder:"FILE"`
	// TLSCert and TLSKey serve the API and gRPC over TLS (see tls.go).
	TLSCert string `help:"PEM certificate (its chain after it) to serve HTTP and gRPC over TLS with, read again when the file changes; needs --tls-key; empty: plaintext." envvar:"QUOTAD_TLS_CERT" placeholder:"FILE"`
	TLSKey  string `help:"PEM private key of --tls-cert." envvar:"QUOTAD_TLS_KEY" placeholder:"FILE"`
	// Webhook deliveries (see internal/webhooks).
	WebhookAllowPrivate bool          `help:"Deliver webhooks to private, loopback and link-local addresses too." envvar:"QUOTAD_WEBHOOK_ALLOW_PRIVATE" default:"false" negatable:""`
	WebhookTimeout      time.Duration `help:"How long a webhook receiver has to answer a delivery." envvar:"QUOTAD_WEBHOOK_TIMEOUT" default:"10s" placeholder:"DURATION"`
	// WebhookRetryBase is for tests only: the first retry's delay ceiling
	// (5s in production), so that a test sees retries in milliseconds.
	WebhookRetryBase time.Duration `help:"Testing only: the first webhook retry's delay ceiling." envvar:"QUOTAD_WEBHOOK_RETRY_BASE" default:"5s" hidden:""`
	// Usage to Stripe Billing meters (see internal/meters): on when
	// StripeMeters names a metric; parsed by check into stripeMeters.
	StripeMeters  string `help:"Metrics whose usage goes to Stripe Billing meters, a comma list of metric=event_name (the meter's event name); needs --stripe-api-key; empty: off." envvar:"QUOTAD_STRIPE_METERS" placeholder:"LIST"`
	StripeAPIKey  string `help:"Stripe secret key the meter events are sent with." envvar:"QUOTAD_STRIPE_API_KEY" placeholder:"KEY"`
	StripeAPIBase string `help:"Stripe's API base URL (a test points it at stripe-mock)." envvar:"QUOTAD_STRIPE_API_BASE" default:"https://api.stripe.com" placeholder:"URL"`
	// RefundRequiresRequestID: see api.Config.RefundRequiresRequestID.
	RefundRequiresRequestID bool `help:"Refuse (403) POST /v1/refund without a request_id, the id of the check whose units it gives back, unless an admin token makes it without an API key: check tokens and API keys then give back only what a check charged." envvar:"QUOTAD_REFUND_REQUIRES_REQUEST_ID" default:"false" negatable:""`
	// RateLimitHeaders: the forms of the rate limit headers (see
	// rlheaders.ParseForms), parsed by check into rateLimitHeaders.
	RateLimitHeaders string `help:"Forms of the rate limit headers of check, forward-auth and gRPC answers, a comma list of: draft10 (RateLimit and RateLimit-Policy, the current draft), draft7 (draft 7's RateLimit: limit=, remaining=, reset= and RateLimit-Policy), legacy (RateLimit-Limit, -Remaining, -Reset in seconds) and x (X-RateLimit-Limit, -Remaining, -Reset as a Unix time); draft10 and draft7 exclude each other." envvar:"QUOTAD_RATELIMIT_HEADERS" name:"ratelimit-headers" default:"draft10" placeholder:"FORMS"`
	// Retention: how long PostgreSQL keeps what grows (see retention.go
	// and docs/operations.md, "Retention").
	RetainHistory      retainDuration `help:"How long to keep daily usage history (a deleted customer's too) after its day, and closed billing terms after they closed: what statements read; 0 keeps them forever. A duration such as 400d (days) or 72h." envvar:"QUOTAD_RETAIN_HISTORY" default:"400d" placeholder:"DURATION"`
	RetainAudit        retainDuration `help:"How long to keep audit events; 0 keeps them forever." envvar:"QUOTAD_RETAIN_AUDIT" default:"400d" placeholder:"DURATION"`
	RetainReservations retainDuration `help:"How long to keep committed, released and expired reservations after they settled (held ones stay); a purged one's request_id reserves anew. 0 keeps them forever." envvar:"QUOTAD_RETAIN_RESERVATIONS" default:"7d" placeholder:"DURATION"`
	RetainDeliveries   retainDuration `help:"How long to keep delivered and failed webhook deliveries after their last attempt (pending ones stay), and usage events after their window ended once no delivery of them is left; 0 keeps them forever." envvar:"QUOTAD_RETAIN_DELIVERIES" default:"30d" placeholder:"DURATION"`
	// Caps on what admin writes create (tiers.Caps; 0: no cap).
	MaxCustomers       int `help:"Most customers that may exist; creating one more is refused (409 cap_reached). 0: no cap." envvar:"QUOTAD_MAX_CUSTOMERS" default:"${max_customers}" placeholder:"N"`
	MaxKeysPerCustomer int `help:"Most live API keys (neither revoked nor expired) a customer may have; 0: no cap." envvar:"QUOTAD_MAX_KEYS_PER_CUSTOMER" default:"${max_keys_per_customer}" placeholder:"N"`
	MaxWebhooks        int `help:"Most webhooks that may exist; 0: no cap." envvar:"QUOTAD_MAX_WEBHOOKS" default:"${max_webhooks}" placeholder:"N"`

	tokens           []api.Token
	rateLimitHeaders rlheaders.Forms
	stripeMeters     map[string]string // metric → meter event name; empty: off
	gogc             string            // the environment's GOGC: when set, the operator paces the collector
	// origins names, by flag name, where each value given came from: the
	// flag (--listen) or its variable ($QUOTAD_LISTEN (--listen)); see from.
	origins map[string]string
	// warnings are what check found suspect but not wrong, logged once
	// the logger exists.
	warnings []configWarning
}

// configWarning is one warning about the configuration: a message and
// its attributes, never a secret.
type configWarning struct {
	msg  string
	args []any
}

// cli is quotad's command line. The configuration's flags belong to
// every command, so that quotad --help shows them, and they may come
// before or after the command (serve and migrate use them).
type cli struct {
	Config  config           `embed:""`
	Version kong.VersionFlag `help:"Print quotad's version and exit."`

	Serve      struct{}   `cmd:"" default:"withargs" help:"Serve the API (the default command)."`
	Migrate    migrateCmd `cmd:"" help:"Manage the database schema, then print its version."`
	VersionCmd struct{}   `cmd:"" name:"version" help:"Print quotad's version."`

	// Simulate is what is left of quotad simulate, now the command
	// quotasim: it only says so (see run).
	Simulate movedCmd `cmd:"" hidden:"" passthrough:""`
}

type migrateCmd struct {
	Up      struct{} `cmd:"" help:"Apply every pending migration."`
	Down    struct{} `cmd:"" help:"Revert the newest applied migration."`
	Version struct{} `cmd:"" help:"Print the schema's version."`
	Force   struct {
		Version uint `arg:"" help:"The version the schema is at (0: none)."`
	} `cmd:"" help:"Record the schema as being at VERSION, not dirty, running no migration: after a migration failed halfway."`
}

// movedCmd is a command that left quotad for a command of its own. It
// takes whatever follows it, so that what run says of the move is not
// lost to an error about a flag quotad does not know.
type movedCmd struct {
	Args []string `arg:"" optional:""`
}

// parseArgs parses quotad's command line (args without the program's
// name), with the environment read through getenv; help and the version
// go to stdout. It returns the command chosen and the parsed line. After
// --help or --version it returns the command "" and no error.
func parseArgs(args []string, getenv func(string) string, stdout io.Writer) (cmd string, c *cli, err error) {
	c = &cli{}
	parser, err := cmdline.New(c, getenv, stdout, stdout,
		kong.Name("quotad"),
		kong.Description("quotad serves quotas and billing tiers: an admin API for metrics, plans, customers and overrides, and POST /v1/check for backends. "+
			"Each flag falls back to the QUOTAD_* environment variable it names, then to its default; serve and migrate use them."),
		kong.Vars{
			"version":               strings.TrimSuffix(versionText(), "\n"),
			"database_url":          defaultDatabaseURL,
			"db_max_conns":          fmt.Sprint(store.DefaultMaxConns),
			"redis_prefix":          redisstore.DefaultPrefix,
			"redis_timeout":         redisstore.DefaultTimeout.String(),
			"max_customers":         fmt.Sprint(tiers.DefaultCaps.Customers),
			"max_keys_per_customer": fmt.Sprint(tiers.DefaultCaps.KeysPerCustomer),
			"max_webhooks":          fmt.Sprint(tiers.DefaultCaps.Webhooks),
			"store_timeout":         quota.DefaultStoreTimeout.String(),
		},
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
	)
	if err != nil {
		return "", nil, err
	}
	ctx, status, err := cmdline.Parse(parser, singleDashFlags(parser.Model, args))
	switch {
	case err != nil:
		return "", nil, err
	case ctx == nil && status != 0:
		return "", nil, fmt.Errorf("exit status %d", status)
	case ctx == nil:
		return "", nil, nil
	}
	c.Config.gogc = getenv("GOGC")
	c.Config.origins = origins(ctx)
	return ctx.Command(), c, nil
}

// origins names, by flag name, where the value of each flag set came
// from: the command line (--flag) or, through the environment resolver,
// the flag's variable ($VARIABLE (--flag)).
func origins(ctx *kong.Context) map[string]string {
	out := map[string]string{}
	for _, p := range ctx.Path {
		if p.Flag == nil {
			continue
		}
		name := "--" + p.Flag.Name
		if env := p.Flag.Tag.Get("envvar"); p.Resolved && env != "" {
			name = "$" + env + " (" + name + ")"
		}
		out[p.Flag.Name] = name
	}
	return out
}

// from names where the value of the flag name came from, for an error
// or a warning about it: the flag when it was given on the command line,
// its variable when it came from there, else its default.
func (c *config) from(name string) string {
	if o, ok := c.origins[name]; ok {
		return o
	}
	return "--" + name + " (its default)"
}

// singleDashFlags rewrites the single-dash spelling of long flags
// (-listen, -migrate=false, -help), which quotad took before its flags
// were GNU-style, to --listen, --migrate=false, --help. quotad has no
// short flag but -h, so no cluster of short flags is lost. A flag's value
// and what follows "--" are left as they are.
func singleDashFlags(model *kong.Application, args []string) []string {
	long := map[string]*kong.Flag{}
	for _, f := range model.Flags {
		long[f.Name] = f
		if f.Tag.Negatable != "" {
			long["no-"+f.Name] = f
		}
	}
	out := make([]string, 0, len(args))
	takesValue := false // the previous argument is a flag whose value is next
	for i, a := range args {
		switch {
		case takesValue:
			takesValue = false
		case a == "--":
			return append(out, args[i:]...)
		case strings.HasPrefix(a, "-") && len(a) > 2 && a[1] != '-':
			a = "-" + a
			fallthrough
		case strings.HasPrefix(a, "--"):
			name, _, hasValue := strings.Cut(a[2:], "=")
			if f, ok := long[name]; ok {
				takesValue = !hasValue && !f.IsBool() && !f.IsCounter()
			}
		}
		out = append(out, a)
	}
	return out
}

// check validates what the flags' types do not, every value before
// quotad connects to anything (addresses and URLs by their syntax), and
// derives the tokens and the listen address. An error names where the
// value came from (see from); what is suspect but not wrong becomes
// c.warnings.
func (c *config) check() error {
	bad := func(name, format string, args ...any) error {
		return fmt.Errorf("%s: "+format, append([]any{c.from(name)}, args...)...)
	}
	switch {
	case c.ShutdownTimeout < 0:
		return bad("shutdown-timeout", "want a duration of 0 or more, got %s", c.ShutdownTimeout)
	case c.DrainTimeout < 0:
		return bad("drain-timeout", "want a duration of 0 or more, got %s", c.DrainTimeout)
	case c.ReclaimAfter < 100*time.Millisecond:
		return bad("reclaim-after", "want a duration of 100ms or more, got %s", c.ReclaimAfter)
	case c.DBWait < 0:
		return bad("db-wait", "want a duration of 0 or more, got %s", c.DBWait)
	case c.StoreTimeout <= 0:
		return bad("store-timeout", "want a positive duration such as 250ms, got %s", c.StoreTimeout)
	case c.RequestTimeout <= 0:
		return bad("request-timeout", "want a positive duration such as 5s, got %s", c.RequestTimeout)
	case c.RedisTimeout <= 0:
		return bad("redis-timeout", "want a positive duration such as 250ms, got %s", c.RedisTimeout)
	case c.WebhookTimeout <= 0:
		return bad("webhook-timeout", "want a positive duration such as 10s, got %s", c.WebhookTimeout)
	case c.WebhookRetryBase <= 0:
		return bad("webhook-retry-base", "want a positive duration, got %s", c.WebhookRetryBase)
	case c.DBMaxConns < 0 || c.DBMaxConns > 1000:
		return bad("db-max-conns", "want an integer from 0 to 1000, got %d", c.DBMaxConns)
	case c.WarmCustomers < 0 || c.WarmCustomers > tiers.DefaultCacheCustomers:
		return bad("warm-customers", "want an integer from 0 to %d (the cache's bound), got %d", tiers.DefaultCacheCustomers, c.WarmCustomers)
	case c.WarmTimeout <= 0:
		return bad("warm-timeout", "want a positive duration such as 10s, got %s", c.WarmTimeout)
	case c.GCHeadroom < 0 || c.GCHeadroom > 1<<20:
		return bad("gc-headroom-mib", "want an integer from 0 to %d, got %d", 1<<20, c.GCHeadroom)
	}
	for _, m := range []struct {
		name string
		n    int
	}{{"max-customers", c.MaxCustomers}, {"max-keys-per-customer", c.MaxKeysPerCustomer}, {"max-webhooks", c.MaxWebhooks}} {
		if m.n < 0 {
			return bad(m.name, "want an integer of 0 (no cap) or more, got %d", m.n)
		}
	}
	for _, a := range []struct{ name, addr string }{
		{"listen", c.Listen}, {"grpc-listen", c.GRPCListen}, {"debug-listen", c.DebugListen},
	} {
		if a.addr == "" {
			continue
		}
		if err := checkAddr(a.addr); err != nil {
			return bad(a.name, "%v", err)
		}
	}
	if _, beyond := loopbackOnly(c.DebugListen); c.DebugListen != "" && beyond && !c.DebugAllowRemote {
		return bad("debug-listen", "%q is not a loopback address, and pprof has no authentication: listen on one, such as 127.0.0.1:6060, or set --debug-allow-remote", c.DebugListen)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("%s and %s: give both or neither", c.from("tls-cert"), c.from("tls-key"))
	}
	if _, err := store.MaxConns(c.DatabaseURL, c.DBMaxConns); err != nil {
		return bad("database-url", "%v", err) // says why without the password
	}
	if err := c.checkRetention(); err != nil {
		return err
	}
	forms, err := rlheaders.ParseForms(c.RateLimitHeaders)
	if err != nil {
		return bad("ratelimit-headers", "%v", err)
	}
	c.rateLimitHeaders = forms
	if err := c.checkStripe(); err != nil {
		return err
	}
	if c.RedisURL != "" {
		if _, err := redisstore.New(c.RedisURL, redisstore.Options{}); err != nil {
			return bad("redis-url", "%v", redactRedis(err.Error(), c.RedisURL))
		}
	}
	admin, err := api.ParseTokens(c.AdminTokens, api.RoleAdmin)
	if err != nil {
		return bad("admin-tokens", "%w", err)
	}
	check, err := api.ParseTokens(c.CheckTokens, api.RoleCheck)
	if err != nil {
		return bad("check-tokens", "%w", err)
	}
	c.tokens = append(admin, check...)
	c.warnings = append(c.warnings, c.tokenWarnings()...)
	if c.Listen == "" {
		c.Listen = ":8080"
		if len(c.tokens) == 0 {
			c.Listen = "127.0.0.1:8080"
		}
	}
	return nil
}

// roleName names a token's role in a warning.
func roleName(r api.Role) string {
	if r == api.RoleAdmin {
		return "admin"
	}
	return "check"
}

// noMigrate says what turned start-up migrations off, for the refusal of
// an older schema: "--no-migrate is set" or "$QUOTAD_MIGRATE (--migrate) is
// false"; "" when they are on.
func (c *config) noMigrate() string {
	switch {
	case c.Migrate:
		return ""
	case strings.HasPrefix(c.from("migrate"), "$"):
		return c.from("migrate") + " is false"
	}
	return "--no-migrate is set"
}

// checkAddr checks the syntax of a listen address: host:port, the host
// empty (every interface), a name or an IP address, the port a number
// from 0 (any free port) to 65535 or a service's name.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port, such as 127.0.0.1:8080 or :8080, got %q", addr)
	}
	if strings.ContainsAny(host, " /?#@") {
		return fmt.Errorf("%q: want a host name or an IP address before the port", addr)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("%q: want a port from 0 to 65535, got %q", addr, port)
	}
	return nil
}

// tokenWarnings warns of tokens that share a name (the logs and the audit
// trail cannot tell them apart) or a secret (who presents it is taken for
// the last of them, whatever the other's role). They name tokens, never
// secrets.
func (c *config) tokenWarnings() []configWarning {
	var out []configWarning
	names := map[string]api.Token{}
	secrets := map[string]api.Token{}
	from := func(t api.Token) string {
		if t.Role == api.RoleAdmin {
			return c.from("admin-tokens")
		}
		return c.from("check-tokens")
	}
	for _, t := range c.tokens {
		if prev, ok := names[t.Name]; ok {
			out = append(out, configWarning{"two tokens have one name: the logs and the audit trail cannot tell them apart; give each a name of its own",
				[]any{"name", t.Name, "first", from(prev), "second", from(t)}})
		}
		names[t.Name] = t
		if prev, ok := secrets[t.Secret]; ok {
			msg := "two tokens have one secret: who presents it is taken for the second"
			if prev.Role != t.Role {
				msg = "one secret is both an admin and a check token: who presents it is taken for the second, with its role only"
			}
			out = append(out, configWarning{msg,
				[]any{"first", prev.Name, "first_role", roleName(prev.Role), "first_from", from(prev),
					"second", t.Name, "second_role", roleName(t.Role), "second_from", from(t)}})
		}
		secrets[t.Secret] = t
	}
	return out
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level: want debug, info, warn or error, got %q", s)
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
		slog.String("store_timeout", c.StoreTimeout.String()),
		slog.String("request_timeout", c.RequestTimeout.String()),
		slog.String("log_level", c.LogLevel),
		slog.String("drain_timeout", c.DrainTimeout.String()),
		slog.String("shutdown_timeout", c.ShutdownTimeout.String()),
		slog.Int("db_max_conns", c.poolSize()),
		slog.Bool("migrate", c.Migrate),
		slog.Bool("leases", c.Leases),
		slog.String("reclaim_after", c.ReclaimAfter.String()),
		slog.String("debug_listen", c.DebugListen),
		slog.Bool("debug_allow_remote", c.DebugAllowRemote),
		slog.String("tls_cert", c.TLSCert),
		slog.Int("warm_customers", c.WarmCustomers),
		slog.String("warm_timeout", c.WarmTimeout.String()),
		slog.Uint64("gc_headroom_mib", c.gcHeadroom()>>20),
		slog.String("redis_url", redactRedis(c.RedisURL, c.RedisURL)),
		slog.String("redis_prefix", c.RedisPrefix),
		slog.String("redis_timeout", c.RedisTimeout.String()),
		slog.String("forward_auth_config", c.ForwardAuthConfig),
		slog.String("grpc_listen", c.GRPCListen),
		slog.String("rls_config", c.RLSConfig),
		slog.Bool("webhook_allow_private", c.WebhookAllowPrivate),
		slog.String("webhook_timeout", c.WebhookTimeout.String()),
		slog.String("stripe_meters", c.StripeMeters),
		slog.String("stripe_api_base", c.StripeAPIBase),
		slog.Bool("refund_requires_request_id", c.RefundRequiresRequestID),
		slog.String("ratelimit_headers", c.rateLimitHeaders.String()),
		slog.Any("retain", c.retentionLogValue()),
		slog.Any("caps", c.caps()),
	)
}

// caps are the caps the store holds creations to.
func (c *config) caps() tiers.Caps {
	return tiers.Caps{Customers: c.MaxCustomers, KeysPerCustomer: c.MaxKeysPerCustomer, Webhooks: c.MaxWebhooks}
}

// gcHeadroom is the garbage collector's headroom in bytes (see gctune):
// none when the environment sets GOGC.
func (c *config) gcHeadroom() uint64 {
	if c.gogc != "" {
		return 0
	}
	return uint64(c.GCHeadroom) << 20
}

// poolSize is the size of quotad's PostgreSQL pool: --db-max-conns, else
// the URL's pool_max_conns, else store.DefaultMaxConns.
func (c *config) poolSize() int {
	n, err := store.MaxConns(c.DatabaseURL, c.DBMaxConns)
	if err != nil {
		return c.DBMaxConns // the URL is refused when quotad connects
	}
	return n
}

// redactRedis returns s with the password of Redis URL url masked; of
// a URL that cannot be parsed, every URL's in s.
func redactRedis(s, url string) string {
	u, err := neturl.Parse(url)
	if err != nil {
		return store.RedactURL(s)
	}
	if u.User == nil {
		return s
	}
	if p, ok := u.User.Password(); ok && p != "" {
		s = strings.ReplaceAll(s, p, "xxxxx")
	}
	return s
}

// checkStripe parses --stripe-meters and checks the flags it needs.
func (c *config) checkStripe() error {
	bad := func(name, format string, args ...any) error {
		return fmt.Errorf("%s: "+format, append([]any{c.from(name)}, args...)...)
	}
	m, err := meters.ParseMeters(c.StripeMeters)
	if err != nil {
		return bad("stripe-meters", "%v", err)
	}
	if u, err := neturl.Parse(c.StripeAPIBase); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return bad("stripe-api-base", "want an http(s) URL such as https://api.stripe.com, got %q", c.StripeAPIBase)
	}
	if len(m) > 0 && c.StripeAPIKey == "" {
		return bad("stripe-api-key", "--stripe-meters sends usage to Stripe: set the secret key to send it with")
	}
	c.stripeMeters = m
	return nil
}
