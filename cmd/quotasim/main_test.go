package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runArgs runs quotasim with args and returns what it printed.
func runArgs(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), append([]string{"quotasim"}, args...), &out)
	return out.String(), err
}

// tableRow returns the table's line for algorithm alg.
func tableRow(t *testing.T, table, alg string) string {
	t.Helper()
	for _, l := range strings.Split(table, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == alg {
			return l
		}
	}
	t.Fatalf("no row for %s in\n%s", alg, table)
	return ""
}

func TestHelp(t *testing.T) {
	t.Parallel()
	out, err := runArgs(t, "-h")
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("quotasim -h: %v", err)
	}
	for _, s := range []string{"Usage: quotasim [flags]", "-workload", "-trace", "-detail", "-chart", "heavy"} {
		if !strings.Contains(out, s) {
			t.Errorf("usage lacks %q:\n%s", s, out)
		}
	}
}

// TestEndToEnd generates a workload, writes the table, the detail, the
// chart and the trace, then replays the trace written and finds the same
// decisions. It does not run in parallel: the table's
// bytes per key are the growth of the whole process's live heap, which
// parallel tests, freeing memory meanwhile, can make negative.
func TestEndToEnd(t *testing.T) {
	dir := t.TempDir()
	detail, chart, trace := filepath.Join(dir, "detail.csv"), filepath.Join(dir, "chart.svg"), filepath.Join(dir, "trace.csv")
	table, err := runArgs(t, "-workload", "onoff", "-limit", "20", "-duration", "20s", "-seed", "3",
		"-customers", "3", "-memory-keys", "2000", "-detail", detail, "-chart", chart, "-write-trace", trace)
	if err != nil {
		t.Fatalf("quotasim: %v\n%s", err, table)
	}
	t.Logf("\n%s", table)
	algs := []string{"exact", "sliding_window", "fixed_window", "sliding_log", "token_bucket"}
	for _, alg := range algs {
		row := strings.Fields(tableRow(t, table, alg))
		if alg != "exact" && row[len(row)-1] == "-" {
			t.Errorf("%s: no bytes per key", alg)
		}
	}
	if !strings.Contains(table, "workload onoff, seed 3: 3 customers") || !strings.Contains(table, "limit 20 per second") {
		t.Errorf("the table does not say what it replayed:\n%s", table)
	}

	f, err := os.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	traceLines, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil || len(traceLines) < 100 || strings.Join(traceLines[0], ",") != "unix_ms,customer,cost" {
		t.Fatalf("trace: %d lines, %v", len(traceLines), err)
	}
	f, err = os.Open(detail)
	if err != nil {
		t.Fatal(err)
	}
	detailLines, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(detailLines)-1, (len(traceLines)-1)*len(algs); got != want {
		t.Errorf("detail: %d lines, want %d", got, want)
	}
	if h := strings.Join(detailLines[0], ","); !strings.HasPrefix(h, "unix_ms,customer,cost,algorithm,admitted,exact_admit") {
		t.Errorf("detail header %q", h)
	}

	svg, err := os.ReadFile(chart)
	if err != nil {
		t.Fatal(err)
	}
	// The chart's well-formedness is internal/simulate's to test; here, that
	// the command wrote the chart of this replay.
	if !bytes.Contains(svg, []byte("<svg")) {
		t.Errorf("the chart is no SVG:\n%.200s", svg)
	}
	for _, s := range append(algs, "limit (20)") {
		if !bytes.Contains(svg, []byte(s)) {
			t.Errorf("the chart names no %q", s)
		}
	}

	// The trace written, replayed, is decided the same way.
	again, err := runArgs(t, "-trace", trace, "-limit", "20", "-algorithms", "sliding_window", "-memory-keys", "0")
	if err != nil {
		t.Fatalf("quotasim -trace: %v\n%s", err, again)
	}
	strip := func(row string) string { return strings.Join(strings.Fields(row)[:14], " ") } // all but bytes/key
	for _, alg := range []string{"exact", "sliding_window"} {
		if a, b := strip(tableRow(t, table, alg)), strip(tableRow(t, again, alg)); a != b {
			t.Errorf("%s replayed from the trace:\n%s\nwant\n%s", alg, b, a)
		}
	}
	if strings.Contains(again, "fixed_window") {
		t.Errorf("-algorithms sliding_window replayed others:\n%s", again)
	}
}

func TestRejects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("unix_ms,customer,cost\n1,a,1\n2,a,x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.csv")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-trace", bad}, "line 3: cost"},
		{[]string{"-trace", empty, "-seed", "2", "-load", "3"}, "-load, -seed shape a generated workload"},
		{[]string{"-trace", empty, "-chart", filepath.Join(dir, "c.svg"), "-memory-keys", "0"}, "no checks to chart"},
		{[]string{"-trace", filepath.Join(dir, "missing.csv")}, "missing.csv"},
		{[]string{"-window", "hour"}, "want second or minute"},
		{[]string{"-algorithms", "sliding_window,leaky"}, `unknown algorithm "leaky"`},
		{[]string{"-workload", "square"}, `unknown workload "square"`},
		{[]string{"-limit", "0"}, "limit"},
		{[]string{"-limit", "20000"}, "a sliding log takes limits up to 10000"},
		{[]string{"-duration", "0s"}, "duration"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		out, err := runArgs(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("quotasim %v: %v, want an error with %q\n%s", tc.args, err, tc.want, out)
		}
	}
}
