package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/redisstore"
	"github.com/quotad/quotad/internal/rlheaders"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
	"github.com/quotad/quotad/migrations"
)

// parseConfig parses the flags of quotad serve as run does (args without
// the program's name or the command), with the environment read through
// getenv, and checks them.
func parseConfig(args []string, getenv func(string) string, stdout io.Writer) (*config, error) {
	cmd, c, err := parseArgs(append([]string{"serve"}, args...), getenv, stdout)
	if err != nil || cmd == "" {
		return nil, err
	}
	return &c.Config, c.Config.check()
}

// mustParseConfig is parseConfig over env, failing the test on an error.
func mustParseConfig(t testing.TB, args []string, env map[string]string) *config {
	t.Helper()
	cfg, err := parseConfig(args, fakeEnv(env), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// fakeEnv is a getenv over a map.
func fakeEnv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// Each setting comes from its flag, else its variable, else its default;
// the old single-dash spelling of flags still works.
func TestConfigSources(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		env  map[string]string
		got  func(*config) any
		want any
	}{
		{"default duration", nil, nil, func(c *config) any { return c.DBWait }, 30 * time.Second},
		{"duration from the environment", nil, map[string]string{"QUOTAD_DB_WAIT": "2s"}, func(c *config) any { return c.DBWait }, 2 * time.Second},
		{"flag over environment", []string{"--db-wait", "5s"}, map[string]string{"QUOTAD_DB_WAIT": "2s"}, func(c *config) any { return c.DBWait }, 5 * time.Second},
		{"flag with =", []string{"--db-wait=7s"}, nil, func(c *config) any { return c.DBWait }, 7 * time.Second},
		{"single-dash flag", []string{"-db-wait", "9s"}, nil, func(c *config) any { return c.DBWait }, 9 * time.Second},
		{"an empty variable is unset", nil, map[string]string{"QUOTAD_DB_WAIT": ""}, func(c *config) any { return c.DBWait }, 30 * time.Second},
		{"default int", nil, nil, func(c *config) any { return c.DBMaxConns }, 0},
		{"int from the environment", nil, map[string]string{"QUOTAD_DB_MAX_CONNS": "6"}, func(c *config) any { return c.DBMaxConns }, 6},
		{"default bool", nil, nil, func(c *config) any { return c.Migrate }, true},
		{"bool from the environment", nil, map[string]string{"QUOTAD_MIGRATE": "false"}, func(c *config) any { return c.Migrate }, false},
		{"bool from the environment, no", nil, map[string]string{"QUOTAD_LEASES": "no"}, func(c *config) any { return c.Leases }, false},
		{"--no-flag", []string{"--no-migrate"}, nil, func(c *config) any { return c.Migrate }, false},
		{"single-dash bool with a value", []string{"-migrate=false"}, nil, func(c *config) any { return c.Migrate }, false},
		{"bool flag over environment", []string{"--leases"}, map[string]string{"QUOTAD_LEASES": "false"}, func(c *config) any { return c.Leases }, true},
		{"default enum", nil, nil, func(c *config) any { return c.StoreFailure }, "open"},
		{"enum from the environment", nil, map[string]string{"QUOTAD_STORE_FAILURE": "closed"}, func(c *config) any { return c.StoreFailure }, "closed"},
		{"enum flag over environment", []string{"--store-failure", "open"}, map[string]string{"QUOTAD_STORE_FAILURE": "closed"}, func(c *config) any { return c.StoreFailure }, "open"},
		{"string default", nil, nil, func(c *config) any { return c.DatabaseURL }, defaultDatabaseURL},
		{"string from the environment", nil, map[string]string{"QUOTAD_REDIS_PREFIX": "q:"}, func(c *config) any { return c.RedisPrefix }, "q:"},
		{"a value that looks like a flag", []string{"-redis-prefix=-listen"}, nil, func(c *config) any { return c.RedisPrefix }, "-listen"},
		{"single-dash flags with values", []string{"-admin-tokens", adminToken, "-listen", "127.0.0.1:9"}, nil, func(c *config) any { return c.AdminTokens + " " + c.Listen }, adminToken + " 127.0.0.1:9"},
		{"flags after the command", []string{"--log-level", "warn"}, nil, func(c *config) any { return c.LogLevel }, "warn"},
		{"warm customers by default", nil, nil, func(c *config) any { return c.WarmCustomers }, 100000},
		{"no warming", nil, map[string]string{"QUOTAD_WARM_CUSTOMERS": "0"}, func(c *config) any { return c.WarmCustomers }, 0},
		{"warm timeout by default", nil, nil, func(c *config) any { return c.WarmTimeout }, 10 * time.Second},
		{"warm timeout flag", []string{"--warm-timeout", "30s"}, nil, func(c *config) any { return c.WarmTimeout }, 30 * time.Second},
		{"gc headroom by default", nil, nil, func(c *config) any { return c.gcHeadroom() }, uint64(128 << 20)},
		{"gc headroom from the environment", nil, map[string]string{"QUOTAD_GC_HEADROOM_MIB": "512"}, func(c *config) any { return c.gcHeadroom() }, uint64(512 << 20)},
		{"no gc headroom", []string{"--gc-headroom-mib", "0"}, nil, func(c *config) any { return c.gcHeadroom() }, uint64(0)},
		{"GOGC set: the operator paces the collector", nil, map[string]string{"GOGC": "200"}, func(c *config) any { return c.gcHeadroom() }, uint64(0)},
		{"caps by default", nil, nil, func(c *config) any { return c.caps() }, tiers.Caps{Customers: 1_000_000, KeysPerCustomer: 100, Webhooks: 100}},
		{"caps from the environment and flags", []string{"--max-webhooks", "0"},
			map[string]string{"QUOTAD_MAX_CUSTOMERS": "50", "QUOTAD_MAX_KEYS_PER_CUSTOMER": "2"},
			func(c *config) any { return c.caps() }, tiers.Caps{Customers: 50, KeysPerCustomer: 2}},
		{"rate limit headers by default", nil, nil, func(c *config) any { return c.rateLimitHeaders }, rlheaders.Draft10},
		{"rate limit headers from the environment", nil, map[string]string{"QUOTAD_RATELIMIT_HEADERS": "draft7, legacy,x"},
			func(c *config) any { return c.rateLimitHeaders }, rlheaders.Draft7 | rlheaders.Legacy | rlheaders.X},
		{"rate limit headers flag over environment", []string{"--ratelimit-headers", "x"}, map[string]string{"QUOTAD_RATELIMIT_HEADERS": "draft7"},
			func(c *config) any { return c.rateLimitHeaders }, rlheaders.X},
		{"tokens", nil, map[string]string{"QUOTAD_ADMIN_TOKENS": "ops:" + adminToken + ",second-admin-secret", "QUOTAD_CHECK_TOKENS": checkToken},
			func(c *config) any { return fmt.Sprintf("%d %s %s", len(c.tokens), c.tokens[0].Name, c.tokens[1].Name) }, "3 ops admin#2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParseConfig(t, tt.args, tt.env)
			if got := tt.got(cfg); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// A bad value is an error that names the flag, and the variable when it
// came from one.
func TestConfigRejectsBadValues(t *testing.T) {
	t.Parallel()
	mustRefuseEach(t, []configRefusal{
		{"int variable", nil, map[string]string{"QUOTAD_DB_MAX_CONNS": "x"}, []string{"--db-max-conns", "$QUOTAD_DB_MAX_CONNS", `"x"`}},
		{"int flag", []string{"--db-max-conns", "x"}, nil, []string{"--db-max-conns", `"x"`}},
		{"int out of range", []string{"-db-max-conns", "5000"}, nil, []string{"--db-max-conns", "5000"}},
		{"enum flag", []string{"-store-failure=maybe"}, nil, []string{"--store-failure", `"maybe"`}},
		{"enum variable", nil, map[string]string{"QUOTAD_STORE_FAILURE": "maybe"}, []string{"--store-failure", "$QUOTAD_STORE_FAILURE", `"maybe"`}},
		{"log level", []string{"--log-level", "loud"}, nil, []string{"--log-level", `"loud"`}},
		{"duration variable", nil, map[string]string{"QUOTAD_SHUTDOWN_TIMEOUT": "soon"}, []string{"--shutdown-timeout", "$QUOTAD_SHUTDOWN_TIMEOUT", `"soon"`}},
		{"negative duration", []string{"--db-wait=-1s"}, nil, []string{"--db-wait", "-1s"}},
		{"a value is not a flag", []string{"-db-wait", "-1s"}, nil, []string{"--db-wait", `"-1s"`}},
		{"zero redis timeout", nil, map[string]string{"QUOTAD_REDIS_TIMEOUT": "0s"}, []string{"--redis-timeout", "$QUOTAD_REDIS_TIMEOUT"}},
		{"negative drain timeout", nil, map[string]string{"QUOTAD_DRAIN_TIMEOUT": "-1s"}, []string{"--drain-timeout", "$QUOTAD_DRAIN_TIMEOUT", "-1s"}},
		{"negative warm customers", []string{"--warm-customers=-1"}, nil, []string{"--warm-customers", "-1"}},
		{"warm customers beyond the cache", nil, map[string]string{"QUOTAD_WARM_CUSTOMERS": "1000001"}, []string{"--warm-customers", "$QUOTAD_WARM_CUSTOMERS", "1000001"}},
		{"zero warm timeout", nil, map[string]string{"QUOTAD_WARM_TIMEOUT": "0s"}, []string{"--warm-timeout", "$QUOTAD_WARM_TIMEOUT"}},
		{"negative gc headroom", nil, map[string]string{"QUOTAD_GC_HEADROOM_MIB": "-1"}, []string{"--gc-headroom-mib", "$QUOTAD_GC_HEADROOM_MIB"}},
		{"bool variable", nil, map[string]string{"QUOTAD_MIGRATE": "maybe"}, []string{"--migrate", "$QUOTAD_MIGRATE", `"maybe"`}},
		{"token", nil, map[string]string{"QUOTAD_ADMIN_TOKENS": ":secret"}, []string{"--admin-tokens", "$QUOTAD_ADMIN_TOKENS"}},
		{"negative cap", nil, map[string]string{"QUOTAD_MAX_KEYS_PER_CUSTOMER": "-1"}, []string{"--max-keys-per-customer", "$QUOTAD_MAX_KEYS_PER_CUSTOMER", "-1"}},
		{"rate limit headers variable", nil, map[string]string{"QUOTAD_RATELIMIT_HEADERS": "draft8"},
			[]string{"--ratelimit-headers", "$QUOTAD_RATELIMIT_HEADERS", `"draft8"`, "draft10, draft7, legacy and x"}},
		{"rate limit headers flag", []string{"--ratelimit-headers", "draft10,draft7"}, nil,
			[]string{"--ratelimit-headers", "draft10 and draft7", "choose one"}},
		{"no rate limit headers", []string{"--ratelimit-headers="}, nil, []string{"--ratelimit-headers", `got ""`}},
		{"stripe meters without a key", nil, map[string]string{"QUOTAD_STRIPE_METERS": "api_calls=api_calls"},
			[]string{"--stripe-api-key", "--stripe-meters"}},
		{"stripe meter without event name", []string{"--stripe-meters", "api_calls=", "--stripe-api-key", "sk"}, nil,
			[]string{"--stripe-meters", `"api_calls="`}},
		{"stripe meter twice", nil, map[string]string{"QUOTAD_STRIPE_METERS": "a=x,a=y", "QUOTAD_STRIPE_API_KEY": "sk"},
			[]string{"--stripe-meters", "$QUOTAD_STRIPE_METERS", "twice"}},
		{"stripe api base", []string{"--stripe-api-base", "api.stripe.com"}, nil, []string{"--stripe-api-base", `"api.stripe.com"`}},
		{"unknown flag", []string{"-nope"}, nil, []string{"--nope"}},
		{"stray argument", []string{"extra"}, nil, []string{"extra"}},
	})
}

// configRefusal is a configuration quotad must refuse (args over env),
// with what its error must say.
type configRefusal struct {
	name string
	args []string
	env  map[string]string
	want []string
}

// mustRefuseEach checks, each in a subtest, that every one of tests is
// refused as it says.
func mustRefuseEach(t *testing.T, tests []configRefusal) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { mustRefuseConfig(t, tt.args, tt.env, tt.want, nil) })
	}
}

// mustRefuseConfig parses args over env and fails t unless the
// configuration is refused with an error that says every one of want and
// none of notWant.
func mustRefuseConfig(t *testing.T, args []string, env map[string]string, want, notWant []string) {
	t.Helper()
	_, err := parseConfig(args, fakeEnv(env), io.Discard)
	if err == nil {
		t.Fatalf("parsed, want an error")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %s", err, w)
		}
	}
	for _, w := range notWant {
		if strings.Contains(err.Error(), w) {
			t.Errorf("error %q says %s", err, w)
		}
	}
}

// Only run's getenv counts: a QUOTAD_* variable of the test process
// itself does not reach the configuration. (Not parallel: t.Setenv.)
func TestConfigIgnoresProcessEnvironment(t *testing.T) {
	t.Setenv("QUOTAD_LOG_LEVEL", "loud")
	t.Setenv("QUOTAD_DB_WAIT", "soon")
	t.Setenv("QUOTAD_STORE_FAILURE", "closed")
	t.Setenv("QUOTAD_LISTEN", "127.0.0.1:1")
	cfg, err := parseConfig(nil, fakeEnv(nil), io.Discard)
	if err != nil {
		t.Fatalf("the process's environment leaked into the configuration: %v", err)
	}
	if cfg.LogLevel != "info" || cfg.DBWait != 30*time.Second || cfg.StoreFailure != "open" || cfg.Listen != "127.0.0.1:8080" {
		t.Errorf("config %+v, want the defaults", cfg)
	}
}

// runOut runs quotad with args and no environment, and returns what it
// printed.
func runOut(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), append([]string{"quotad"}, args...), fakeEnv(nil), &out)
	return out.String(), err
}

// --help lists the commands and the flags with their types, variables
// and defaults, and serves nothing.
func TestHelp(t *testing.T) {
	t.Parallel()
	commands := []string{"serve", "migrate up", "migrate down", "migrate version", "migrate force", "version"}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"-help"}, {"serve", "--help"}} {
		out, err := runOut(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if args[0] == "serve" {
			commands = nil // serve's help is about serve
		}
		for _, want := range append(commands,
			"--listen=ADDR", "--db-wait=DURATION", "--db-max-conns=N", "--store-failure=open|closed",
			"--[no-]migrate", "--[no-]leases", "--log-level=LEVEL",
			"$QUOTAD_DB_WAIT", "default 30s", "$QUOTAD_DATABASE_URL", "--version",
		) {
			if !strings.Contains(out, want) {
				t.Errorf("%v: help lacks %q:\n%s", args, want, out)
			}
		}
		if strings.Contains(out, " string") {
			t.Errorf("%v: help shows an untyped flag:\n%s", args, out)
		}
	}
}

// quotad version and quotad --version print the version set at build
// time, the revision and Go release quotad_build_info names, the newest
// migration the binary carries and its Redis keys' version.
func TestVersion(t *testing.T) {
	t.Parallel()
	newest := 0
	entries, err := fs.ReadDir(migrations.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		var n int
		if _, err := fmt.Sscanf(e.Name(), "%06d_", &n); err == nil && n > newest {
			newest = n
		}
	}
	if newest < 14 {
		t.Fatalf("newest migration file %d: want 14 or more", newest)
	}
	want := fmt.Sprintf("quotad %s\nrevision: %s\ngo: %s\nschema: %d\nredis keys: %d\n",
		version, revision(), runtime.Version(), newest, redisstore.KeyVersion)
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		out, err := runOut(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if out != want {
			t.Errorf("%v printed %q, want %q", args, out, want)
		}
	}
}

// quotad simulate, which became the command quotasim, says so in one line
// whatever follows it, and help no longer lists it.
func TestSimulateMoved(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"simulate"},
		{"simulate", "-h"},
		{"simulate", "-workload", "onoff", "-limit", "20"},
		{"--log-level", "warn", "simulate", "--chart", "c.svg"},
	} {
		out, err := runOut(t, args...)
		if err == nil || !strings.Contains(err.Error(), "quotasim") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line naming quotasim", args, err)
		}
		if out != "" {
			t.Errorf("%v printed %q, want nothing", args, out)
		}
	}
	out, err := runOut(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "simulate") {
		t.Errorf("help lists simulate:\n%s", out)
	}
}

// The start-up log shows the pool size in use, not the flag's 0.
func TestLoggedPoolSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want int64
	}{
		{"default", nil, store.DefaultMaxConns},
		{"the URL's pool_max_conns", map[string]string{"QUOTAD_DATABASE_URL": "postgres://u@h/db?pool_max_conns=9"}, 9},
		{"QUOTAD_DB_MAX_CONNS", map[string]string{"QUOTAD_DB_MAX_CONNS": "5"}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParseConfig(t, nil, tt.env)
			var got int64 = -1
			for _, a := range cfg.logValue().Group() {
				if a.Key == "db_max_conns" {
					got = a.Value.Int64()
				}
			}
			if got != tt.want {
				t.Errorf("db_max_conns = %d, want %d", got, tt.want)
			}
		})
	}
}

// An error about a value names where it came from: the flag when the
// command line gave it (and not the variable, whatever the environment
// says), the variable when the environment did. Addresses and URLs are
// checked by their syntax too.
func TestConfigBlamesWhereTheValueCameFrom(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    []string
		notWant []string
	}{
		{"duration from the flag", []string{"--db-wait=-1s"}, map[string]string{"QUOTAD_DB_WAIT": "2s"},
			[]string{"--db-wait", "-1s"}, []string{"$QUOTAD_DB_WAIT"}},
		{"duration from the variable", nil, map[string]string{"QUOTAD_DB_WAIT": "-1s"},
			[]string{"$QUOTAD_DB_WAIT", "--db-wait", "-1s"}, nil},
		{"positive duration from the flag", []string{"--request-timeout", "0s"}, nil,
			[]string{"--request-timeout"}, []string{"$QUOTAD_REQUEST_TIMEOUT"}},
		{"int from the flag", []string{"--db-max-conns", "5000"}, nil,
			[]string{"--db-max-conns", "5000"}, []string{"$QUOTAD_DB_MAX_CONNS"}},
		{"int from the variable", nil, map[string]string{"QUOTAD_WARM_CUSTOMERS": "-1"},
			[]string{"$QUOTAD_WARM_CUSTOMERS"}, nil},
		{"tokens from the flag", []string{"--admin-tokens", ":s3cret"}, nil,
			[]string{"--admin-tokens"}, []string{"$QUOTAD_ADMIN_TOKENS", "s3cret"}},
		{"tokens from the variable", nil, map[string]string{"QUOTAD_CHECK_TOKENS": "name:"},
			[]string{"$QUOTAD_CHECK_TOKENS"}, nil},
		{"listen without a port, from the flag", []string{"--listen", "127.0.0.1"}, map[string]string{"QUOTAD_LISTEN": ":8080"},
			[]string{"--listen", `"127.0.0.1"`}, []string{"$QUOTAD_LISTEN"}},
		{"listen without a port, from the variable", nil, map[string]string{"QUOTAD_LISTEN": "8080"},
			[]string{"$QUOTAD_LISTEN", "--listen", `"8080"`}, nil},
		{"listen port out of range", []string{"--listen", ":65536"}, nil,
			[]string{"--listen", "65536"}, nil},
		{"listen host with a path", []string{"--listen", "http://host:80"}, nil,
			[]string{"--listen"}, nil},
		{"gRPC listen", []string{"--grpc-listen", "127.0.0.1:x"}, nil,
			[]string{"--grpc-listen", `"x"`}, []string{"$QUOTAD_GRPC_LISTEN"}},
		{"debug listen from the variable", nil, map[string]string{"QUOTAD_DEBUG_LISTEN": "localhost"},
			[]string{"$QUOTAD_DEBUG_LISTEN", "--debug-listen"}, nil},
		{"database URL from the flag", []string{"--database-url", "mysql://root:s3cret@db/x"}, nil,
			[]string{"--database-url", "postgres://"}, []string{"$QUOTAD_DATABASE_URL", "s3cret"}},
		{"database URL from the variable", nil, map[string]string{"QUOTAD_DATABASE_URL": "postgres://root:s3cret@db:port/x"},
			[]string{"$QUOTAD_DATABASE_URL", "--database-url"}, []string{"s3cret"}},
		{"Redis URL from the flag", []string{"--redis-url", "http://:s3cret@cache:6379"}, nil,
			[]string{"--redis-url"}, []string{"$QUOTAD_REDIS_URL", "s3cret"}},
		{"Redis URL from the variable", nil, map[string]string{"QUOTAD_REDIS_URL": "redis://:s3cret@cache:port"},
			[]string{"$QUOTAD_REDIS_URL", "--redis-url"}, []string{"s3cret"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { mustRefuseConfig(t, tt.args, tt.env, tt.want, tt.notWant) })
	}
}

// Addresses that cannot be listened on are refused before quotad connects
// to anything: with a database URL that nothing answers and an hour to
// wait for it, the error is still, at once, the address's, naming where it
// came from.
func TestListenAddressRefusedBeforeConnecting(t *testing.T) {
	t.Parallel()
	inUse, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inUse.Close() }) // after the parallel subtests
	// Port 1 of loopback: nothing listens there, connections are refused
	// and retried for --db-wait.
	const unreachable = "postgres://postgres@127.0.0.1:1/quotad?sslmode=disable"
	tests := []configRefusal{
		{"syntax, from the flag", []string{"--listen", "nowhere"}, nil, []string{"--listen", `"nowhere"`}},
		{"in use, from the flag", []string{"--listen", inUse.Addr().String()}, nil, []string{"--listen", "address already in use"}},
		{"in use, from the variable", nil, map[string]string{"QUOTAD_LISTEN": inUse.Addr().String()},
			[]string{"$QUOTAD_LISTEN", "address already in use"}},
		{"gRPC in use", []string{"--grpc-listen", inUse.Addr().String()}, nil, []string{"--grpc-listen", "address already in use"}},
		{"debug in use", nil, map[string]string{"QUOTAD_DEBUG_LISTEN": inUse.Addr().String()},
			[]string{"$QUOTAD_DEBUG_LISTEN", "address already in use"}},
		// With a token: without, quotad would listen on loopback only.
		{"not this host's", []string{"--listen", "192.0.2.1:8080"}, map[string]string{"QUOTAD_ADMIN_TOKENS": "ops:" + adminToken},
			[]string{"--listen", "192.0.2.1:8080"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"QUOTAD_DATABASE_URL": unreachable, "QUOTAD_DB_WAIT": "1h", "QUOTAD_LISTEN": "127.0.0.1:0"}
			for k, v := range tt.env {
				env[k] = v
			}
			// Only a safety net: the address is refused long before.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var out bytes.Buffer
			err := run(ctx, append([]string{"quotad"}, tt.args...), fakeEnv(env), &out)
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("run returned %v, want the address refused", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %s", err, w)
				}
			}
			if strings.Contains(err.Error(), "database") || strings.Contains(out.String(), "database") {
				t.Errorf("quotad tried the database before refusing the address: error %q, log %s", err, out.String())
			}
		})
	}
}

// Tokens that share a name, or a secret, start with a warning each, which
// names the tokens and where they came from, never a secret.
func TestConfigWarnsOfTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		wants []string // the warnings' messages, in order, by a word of each
	}{
		{"distinct", nil, map[string]string{"QUOTAD_ADMIN_TOKENS": "ops:s3cret-a-0123456789", "QUOTAD_CHECK_TOKENS": "backend:s3cret-b-0123456789"}, nil},
		{"one name twice", nil, map[string]string{"QUOTAD_ADMIN_TOKENS": "ops:s3cret-a-0123456789,ops:s3cret-b-0123456789"}, []string{"one name"}},
		{"one name in both lists", []string{"--check-tokens", "ops:s3cret-b-0123456789"}, map[string]string{"QUOTAD_ADMIN_TOKENS": "ops:s3cret-a-0123456789"},
			[]string{"one name"}},
		{"one secret in both lists", nil, map[string]string{"QUOTAD_ADMIN_TOKENS": "ops:s3cret-a-0123456789", "QUOTAD_CHECK_TOKENS": "backend:s3cret-a-0123456789"},
			[]string{"both an admin and a check token"}},
		{"unnamed, one secret twice", []string{"--check-tokens", "s3cret-a-0123456789,s3cret-a-0123456789"}, nil, []string{"one secret"}},
		{"both at once", nil, map[string]string{"QUOTAD_ADMIN_TOKENS": "ops:s3cret-a-0123456789", "QUOTAD_CHECK_TOKENS": "ops:s3cret-a-0123456789"},
			[]string{"one name", "both an admin and a check token"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"QUOTAD_DATABASE_URL": "postgres://postgres@127.0.0.1:1/quotad?sslmode=disable",
				"QUOTAD_DB_WAIT": "0s", "QUOTAD_LISTEN": "127.0.0.1:0"}
			for k, v := range tt.env {
				env[k] = v
			}
			var out bytes.Buffer
			// Nothing answers at the database's address: quotad logs its
			// warnings, then gives up.
			if err := run(context.Background(), append([]string{"quotad"}, tt.args...), fakeEnv(env), &out); err == nil {
				t.Fatal("run succeeded without a database")
			}
			var got []map[string]any
			for line := range strings.Lines(out.String()) {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				if rec["level"] == "WARN" && strings.Contains(rec["msg"].(string), "token") {
					got = append(got, rec)
				}
			}
			if len(got) != len(tt.wants) {
				t.Fatalf("%d warnings of tokens, want %d:\n%s", len(got), len(tt.wants), out.String())
			}
			for i, w := range tt.wants {
				if !strings.Contains(got[i]["msg"].(string), w) {
					t.Errorf("warning %d: %v, want one of %q", i, got[i], w)
				}
			}
			if strings.Contains(out.String(), "s3cret") {
				t.Errorf("a secret is logged:\n%s", out.String())
			}
		})
	}
}

// A fatal error, whatever its line breaks, is one JSON log line at ERROR,
// and the exit status is not 0.
func TestFatalErrorIsOneJSONLine(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if status := exitStatus(nil, &out); status != 0 || out.Len() != 0 {
		t.Errorf("no error: status %d, printed %q; want 0 and nothing", status, out.String())
	}
	if status := exitStatus(fmt.Errorf("wrapped: %w", flag.ErrHelp), &out); status != 0 || out.Len() != 0 {
		t.Errorf("help: status %d, printed %q; want 0 and nothing", status, out.String())
	}
	status := exitStatus(errors.New("migrate up: line one\nline two"), &out)
	if status == 0 {
		t.Error("exit status 0 for an error")
	}
	assertOneErrorLine(t, out.String(), "line one\nline two")
}

// assertOneErrorLine checks that out is one JSON log line at ERROR whose
// error says want.
func assertOneErrorLine(t *testing.T, out, want string) {
	t.Helper()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("printed %q, want one line", out)
	}
	var rec struct{ Time, Level, Msg, Error string }
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatalf("printed %q: %v", out, err)
	}
	if rec.Time == "" || rec.Level != "ERROR" || rec.Msg == "" || !strings.Contains(rec.Error, want) {
		t.Errorf("logged %+v, want an ERROR line whose error says %q", rec, want)
	}
}

// quotad as a process: a bad configuration is one JSON line on its
// standard output, where its logs go, nothing on its standard error, and
// exit status 1.
func TestBinaryFatalErrorIsOneJSONLine(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"bad flag value", []string{"--listen", "nowhere"}, nil, "--listen"},
		{"bad variable", nil, []string{"QUOTAD_STORE_FAILURE=maybe"}, "$QUOTAD_STORE_FAILURE"},
		{"unknown flag", []string{"--nope"}, nil, "--nope"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(MustBuildBinary(t), tt.args...)
			cmd.Env = append(os.Environ(), "QUOTAD_DATABASE_URL=postgres://postgres@127.0.0.1:1/quotad", "QUOTAD_DB_WAIT=1h")
			cmd.Env = append(cmd.Env, tt.env...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Errorf("quotad ended with %v, want exit status 1", err)
			}
			if stderr.Len() != 0 {
				t.Errorf("printed on standard error: %q", stderr.String())
			}
			assertOneErrorLine(t, stdout.String(), tt.want)
		})
	}
}

// The refusal of an older schema without migrations names what turned
// them off: the flag or the variable.
func TestNoMigrateNamesItsSource(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"on", nil, nil, ""},
		{"flag", []string{"--no-migrate"}, map[string]string{"QUOTAD_MIGRATE": "true"}, "--no-migrate is set"},
		{"flag with a value", []string{"--migrate=false"}, nil, "--no-migrate is set"},
		{"variable", nil, map[string]string{"QUOTAD_MIGRATE": "false"}, "$QUOTAD_MIGRATE (--migrate) is false"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParseConfig(t, tt.args, tt.env)
			if got := cfg.noMigrate(); got != tt.want {
				t.Errorf("noMigrate() = %q, want %q", got, tt.want)
			}
		})
	}
}
