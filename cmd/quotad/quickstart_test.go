package main

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quotad/quotad/internal/dbtest"
)

// mustTool returns the path of a command the test needs, failing in CI
// and skipping elsewhere when it is missing.
func mustTool(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed; CI must run this test", name)
		}
		t.Skipf("%s is not installed: skipping", name)
	}
	return path
}

// repoRoot is the repository's top directory, where the Makefile is.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// make run serves against QUOTAD_DATABASE_URL when it is set, creating
// the database it names, and keeps today's default (database quotad on
// the local PostgreSQL) when it is not; QUOTAD_LISTEN reaches quotad
// untouched (quotad reads it, the Makefile sets no address of its own).
func TestMakeRunHonoursTheEnvironment(t *testing.T) {
	t.Parallel()
	mustTool(t, "make")
	const other = "postgres://ops@db.example:5433/billing?sslmode=require"
	tests := []struct {
		name string
		env  []string
		url  string
	}{
		{"defaults", nil, "postgres://postgres@127.0.0.1:5432/quotad?sslmode=disable"},
		{"QUOTAD_DATABASE_URL", []string{"QUOTAD_DATABASE_URL=" + other, "QUOTAD_LISTEN=127.0.0.1:9099"}, other},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("make", "-n", "run")
			cmd.Dir = repoRoot(t)
			for _, kv := range os.Environ() {
				k, _, _ := strings.Cut(kv, "=")
				if k != "QUOTAD_DATABASE_URL" && k != "QUOTAD_LISTEN" && k != "PGHOST" && k != "PGUSER" && k != "MAKEFLAGS" {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			cmd.Env = append(cmd.Env, tt.env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("make -n run: %v\n%s", err, out)
			}
			for _, want := range []string{
				"sh scripts/createdb.sh '" + tt.url + "'\n",
				"QUOTAD_DATABASE_URL='" + tt.url + "' ./bin/quotad\n",
			} {
				if !strings.Contains(string(out), want) {
					t.Errorf("make -n run prints\n%s\nwant a line %q", out, want)
				}
			}
			if strings.Contains(string(out), "QUOTAD_LISTEN=") || strings.Contains(string(out), "createdb -h") {
				t.Errorf("make -n run prints\n%s\nwant no address and no database of its own", out)
			}
		})
	}
}

// scripts/createdb.sh creates the database a URL (or a key=value
// connection string) names, once: run again, it leaves it be.
func TestCreateDBScript(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"sh", "psql", "createdb"} {
		mustTool(t, tool)
	}
	base, err := url.Parse(dbtest.ServerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	at := func(name string) string {
		u := *base
		u.Path = "/" + name
		return u.String()
	}
	dsn := func(name string) string {
		s := "host=" + base.Hostname() + " dbname=" + name + " sslmode=disable"
		if p := base.Port(); p != "" {
			s += " port=" + p
		}
		if u := base.User.Username(); u != "" {
			s += " user=" + u
		}
		return s
	}
	for _, form := range []struct {
		name string
		url  func(string) string
	}{{"url", at}, {"key=value", dsn}} {
		t.Run(form.name, func(t *testing.T) {
			var b [6]byte
			if _, err := rand.Read(b[:]); err != nil {
				t.Fatal(err)
			}
			name := "quickstart_" + hex.EncodeToString(b[:])
			t.Cleanup(func() {
				if out, err := exec.Command("psql", at("postgres"), "-X", "-c", "DROP DATABASE IF EXISTS "+name).CombinedOutput(); err != nil {
					t.Errorf("drop database %s: %v\n%s", name, err, out)
				}
			})
			for i, want := range []string{"created database " + name + "\n", ""} {
				out, err := exec.Command("sh", filepath.Join(repoRoot(t), "scripts", "createdb.sh"), form.url(name)).CombinedOutput()
				if err != nil || string(out) != want {
					t.Fatalf("run %d: %v, printed %q; want %q", i+1, err, out, want)
				}
			}
			out, err := exec.Command("psql", at(name), "-X", "-tAc", "SELECT current_database()").CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != name {
				t.Errorf("connect to the new database: %v\n%s", err, out)
			}
		})
	}
}
