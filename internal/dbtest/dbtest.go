// Package dbtest gives tests a real, isolated PostgreSQL schema.
//
// The server comes from QUOTAD_TEST_DATABASE_URL when it is set (CI, and
// machines with a local PostgreSQL); otherwise one container is started with
// testcontainers-go for the whole test binary. Each call to New creates a
// fresh schema with every migration applied and drops it when the test ends,
// so tests and packages run in parallel without seeing each other. When no
// database can be had, tests fail: they are never skipped.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/testserver"
)

// EnvURL names the variable that points tests at a PostgreSQL server.
const EnvURL = "QUOTAD_TEST_DATABASE_URL"

// server is the test PostgreSQL server, looked up once per test binary.
var server = testserver.Source{
	EnvURL:  EnvURL,
	Server:  "PostgreSQL",
	Tests:   "database",
	Example: "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
	Start:   startContainer,
}

// ServerURL returns the URL of the test PostgreSQL server, starting a
// container if no URL is configured.
func ServerURL(t testing.TB) string {
	t.Helper()
	return server.URL(t)
}

// startContainer starts a PostgreSQL container and returns its URL.
func startContainer(ctx context.Context) (string, error) {
	c, err := postgres.Run(ctx, "postgres:15-alpine",
		postgres.WithDatabase("quotad"),
		postgres.WithUsername("postgres"),
		postgres.WithPassword("postgres"),
		testcontainers.WithWaitStrategy(
			wait.ForLog("database system is ready to accept connections").
				WithOccurrence(2).WithStartupTimeout(time.Minute)),
	)
	if err != nil {
		return "", err
	}
	return c.ConnectionString(ctx, "sslmode=disable")
}

// Schema is an isolated, migrated schema for one test.
type Schema struct {
	// URL connects to the server with search_path set to the schema.
	URL  string
	Name string
	Pool *pgxpool.Pool
}

// New creates a fresh schema with every migration applied and returns a pool
// whose connections work in it. Both are dropped when t ends.
func New(t testing.TB) *Schema {
	t.Helper()
	s := NewEmpty(t)
	db, err := store.New(context.Background(), s.Pool)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	if err := db.Migrations().Up(context.Background()); err != nil {
		t.Fatalf("migrate schema %s: %v", s.Name, err)
	}
	return s
}

// NewEmpty creates a fresh schema with no migration applied, for tests of
// the migrations, and returns a pool whose connections work in it. Both are
// dropped when t ends.
func NewEmpty(t testing.TB) *Schema {
	t.Helper()
	base := ServerURL(t)
	ctx := context.Background()
	name := createTemporary(t, base, "schema", `DROP SCHEMA %s CASCADE`)

	url := WithSearchPath(base, name)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return &Schema{URL: url, Name: name, Pool: pool}
}

// WithSearchPath returns the connection string url (URL or key=value form)
// with its search_path set to schema.
func WithSearchPath(url, schema string) string {
	if !strings.Contains(url, "://") {
		return url + " search_path=" + schema
	}
	if strings.Contains(url, "?") {
		return url + "&search_path=" + schema
	}
	return url + "?search_path=" + schema
}

// NewDatabase creates a fresh database with every migration applied, for
// tests that must cut it off (e.g. refuse its connections) without
// touching other tests. It is dropped when t ends. admin is a connection
// string to the same server for such interventions.
func NewDatabase(t testing.TB) (s *Schema, admin string) {
	t.Helper()
	base := ServerURL(t)
	ctx := context.Background()
	name := createTemporary(t, base, "database", `DROP DATABASE %s WITH (FORCE)`)
	url := replaceDatabase(base, name)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	db, err := store.New(ctx, pool)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	if err := db.Migrations().Up(ctx); err != nil {
		t.Fatalf("migrate database %s: %v", name, err)
	}
	return &Schema{URL: url, Name: name, Pool: pool}, base
}

// createTemporary creates, on the server at base, a schema or database
// (kind) of a fresh random name and returns the name; drop, given the name,
// drops it when t ends.
func createTemporary(t testing.TB, base, kind, drop string) string {
	t.Helper()
	ctx := context.Background()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := "test_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to test database: %v", store.RedactURL(err.Error()))
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE `+strings.ToUpper(kind)+` `+name); err != nil {
		t.Fatalf("create %s %s: %v", kind, name, err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), base)
		if err != nil {
			t.Errorf("drop %s %s: %v", kind, name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), fmt.Sprintf(drop, name)); err != nil {
			t.Errorf("drop %s %s: %v", kind, name, err)
		}
	})
	return name
}

// replaceDatabase returns the URL url with its database set to name.
func replaceDatabase(url, name string) string {
	if !strings.Contains(url, "://") {
		return url + " dbname=" + name
	}
	rest := url[strings.Index(url, "://")+3:]
	slash := strings.IndexByte(rest, '/')
	query := ""
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		query = rest[q:]
		if slash < 0 || slash > q {
			slash = q
		}
	}
	prefix := url[:strings.Index(url, "://")+3]
	if slash < 0 {
		return prefix + rest + "/" + name + query
	}
	return prefix + rest[:slash] + "/" + name + query
}
