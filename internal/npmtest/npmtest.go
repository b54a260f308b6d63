// Package npmtest runs, for tests, the Node.js tools of testdata/npm: the
// packages its package.json pins and package-lock.json locks (clients'
// parsers of the rate limit headers, Spectral), installed there with
// `npm ci` (.ci/run does), and the scripts beside them.
//
// When node or the packages are missing, a test fails in CI (the variable
// CI set), where they must be installed, and is skipped elsewhere.
package npmtest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Timeout bounds one run of a tool: Spectral over openapi.yaml takes a
// few seconds on an idle machine.
const Timeout = 5 * time.Minute

// Dir returns testdata/npm, the directory of the tools, with the packages
// installed.
func Dir(t testing.TB) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "testdata", "npm")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err != nil {
		missing(t, "the packages of testdata/npm are not installed (cd testdata/npm && npm ci)")
	}
	return dir
}

// Run runs node with script (a file of Dir) and args, in Dir, stdin
// given, and returns what it printed; a failure fails t, with its
// stderr.
func Run(t testing.TB, stdin []byte, script string, args ...string) []byte {
	t.Helper()
	dir := Dir(t)
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node is not installed (apt-get install nodejs npm)")
	}
	return run(t, dir, stdin, node, append([]string{filepath.Join(dir, script)}, args...)...)
}

// RunBin runs the command name of the packages (node_modules/.bin) with
// args, in dir, and returns what it printed and its error (an
// *exec.ExitError when it ran and failed), for the caller to judge.
func RunBin(t testing.TB, dir, name string, args ...string) ([]byte, error) {
	t.Helper()
	bin := filepath.Join(Dir(t), "node_modules", ".bin", name)
	if _, err := exec.LookPath("node"); err != nil {
		missing(t, "node is not installed (apt-get install nodejs npm)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

func run(t testing.TB, dir string, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, stderr.Bytes())
	}
	return stdout.Bytes()
}

// missing fails t in CI, where the tools must be installed, and skips it
// elsewhere.
func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s; CI must run this test", why)
	}
	t.Skipf("%s: skipping", why)
}

// moduleRoot returns the directory of the main module's go.mod, above the
// test's working directory (its package's directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("npmtest: no go.mod above the working directory")
		}
		dir = parent
	}
}
