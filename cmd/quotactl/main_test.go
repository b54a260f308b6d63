package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	quotad "github.com/quotad/quotad/client"
	"github.com/quotad/quotad/internal/quotadtest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestMain(m *testing.M) { os.Exit(quotadtest.Main(m)) }

// mustRun runs quotactl against srv and returns its exit status and output.
func mustRun(t *testing.T, srv *quotadtest.Server, args ...string) (int, string, string) {
	t.Helper()
	env := map[string]string{"QUOTAD_URL": srv.URL, "QUOTAD_TOKEN": srv.AdminToken}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"quotactl"}, args...), func(k string) string { return env[k] }, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// mustApply applies file and fails unless quotactl exits with want.
func mustApply(t *testing.T, srv *quotadtest.Server, want int, args ...string) string {
	t.Helper()
	code, out, errOut := mustRun(t, srv, append([]string{"catalog", "apply"}, args...)...)
	if code != want {
		t.Fatalf("apply %q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, want, out, errOut)
	}
	return out
}

// checkNoChanges applies args and fails the test, saying what printed
// what instead, unless apply finds nothing to change.
func checkNoChanges(t *testing.T, srv *quotadtest.Server, what string, args ...string) {
	t.Helper()
	if out := mustApply(t, srv, 0, args...); out != "No changes: the server matches the file.\n" {
		t.Errorf("%s printed\n%s", what, out)
	}
}

// mustExport runs catalog export with args and returns what it printed,
// failing the test unless it exits 0.
func mustExport(t *testing.T, srv *quotadtest.Server, args ...string) string {
	t.Helper()
	code, out, errOut := mustRun(t, srv, append([]string{"catalog", "export"}, args...)...)
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	return out
}

func mustWrite(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// admin is a client of srv with its admin token.
func admin(srv *quotadtest.Server) *quotad.Client {
	return quotad.New(srv.URL, quotad.WithToken(srv.AdminToken))
}

// put drops what a Put answers but its error.
func put[T any](_ T, _ bool, err error) error { return err }

// mustOK fails the test on an error of a call that sets it up or looks.
func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func auditCount(t *testing.T, srv *quotadtest.Server) int {
	t.Helper()
	n := 0
	for _, err := range admin(srv).Audit.List(context.Background(), quotad.AuditFilter{PageSize: 1000}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("got\n%s\nwant (%s)\n%s", got, path, want)
	}
}

const example = "../../examples/catalog.yaml"

// TestExampleCatalog applies the README's quickstart catalog to a real
// quotad, so that it cannot rot, and applies it again to see no change.
func TestExampleCatalog(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	checkGolden(t, "example-apply.golden", mustApply(t, srv, 0, "-f", example))

	limits, err := admin(srv).Customers.Limits(context.Background(), "acme")
	mustOK(t, err)
	got := make(map[string]string)
	for _, l := range limits.Limits {
		name := l.Metric + "/" + l.Window
		if l.Per != "" {
			name += "/" + l.Per
		}
		got[name] = l.Mode + " " + l.Source
	}
	want := map[string]string{"api_calls/second": "hard plan", "api_calls/day": "elastic override",
		"credits/month": "hard plan", "exports/day/subject": "hard plan"}
	if !maps.Equal(got, want) {
		t.Errorf("acme's limits: got %v, want %v", got, want)
	}

	events := auditCount(t, srv)
	checkNoChanges(t, srv, "second apply", "-f", example)
	if n := auditCount(t, srv); n != events {
		t.Errorf("second apply: audit log has %d events, want %d", n, events)
	}
}

// TestRoundTrip exports a catalog, applies the export (no change), then
// applies an edit of it: exactly that change is printed and made.
func TestRoundTrip(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	mustApply(t, srv, 0, "-f", example)
	// What the example leaves to defaults, and metadata, survive the trip.
	ctx, c := context.Background(), admin(srv)
	mustOK(t, put(c.Customers.Put(ctx, "beta", quotad.CustomerSpec{
		Plan: "pro", Metadata: quotad.Metadata{"region": "eu", "seats": 12, "ratio": 1.50, "tags": []any{"a", true, nil}},
	})))
	mustOK(t, put(c.Overrides.Put(ctx, "beta", "api_calls", "second", quotad.OverrideSpec{
		Limit: 20, Algorithm: quotad.TokenBucket, Burst: new(int64(40)),
	})))

	exported := filepath.Join(t.TempDir(), "export.yaml")
	mustExport(t, srv, "--customers", "-o", exported)
	checkNoChanges(t, srv, "apply of the export", "-f", exported, "--prune")

	data, err := os.ReadFile(exported)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), "limit: 50\n", "limit: 100\n", 1)
	if edited == string(data) {
		t.Fatalf("the export has no limit of 50:\n%s", data)
	}
	out := mustApply(t, srv, 0, "-f", mustWrite(t, edited))
	want := "~ plan pro\n" +
		"    limits[api_calls/second].limit: 50 → 100\n" +
		"\n0 to create, 1 to update, 0 to delete.\n" +
		"Applied 1 change.\n"
	if out != want {
		t.Errorf("apply of the edit printed\n%s\nwant\n%s", out, want)
	}
	plan, err := c.Plans.Get(ctx, "pro")
	mustOK(t, err)
	for _, l := range plan.Limits {
		if l.Window == "second" && l.Limit != 100 {
			t.Errorf("plan pro's second limit: got %d, want 100", l.Limit)
		}
	}
}

// TestConcurrentEdit changes a plan between quotactl's read and its write:
// the write gets 412, is reported, and the other edit stands.
func TestConcurrentEdit(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	mustApply(t, srv, 0, "-f", example)
	edited, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	file := mustWrite(t, strings.Replace(string(edited), "name: Pro\n", "name: Pro Plus\n", 1))

	testHookBeforeApply = func() {
		mustOK(t, put(admin(srv).Plans.Put(context.Background(), "pro", quotad.PlanSpec{Name: "Someone else's"})))
	}
	t.Cleanup(func() { testHookBeforeApply = nil })
	code, out, errOut := mustRun(t, srv, "catalog", "apply", "-f", file)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if want := "~ plan pro\n    name: \"Pro\" → \"Pro Plus\"\n"; !strings.HasPrefix(out, want) {
		t.Errorf("plan printed\n%s\nwant it to start with\n%s", out, want)
	}
	wantErr := "! plan pro: changed by someone else since it was read; re-run to see the new plan\nStopped after 0 of 1 change.\n"
	if errOut != wantErr {
		t.Errorf("stderr\n%s\nwant\n%s", errOut, wantErr)
	}
	plan, err := admin(srv).Plans.Get(context.Background(), "pro")
	mustOK(t, err)
	if plan.Name != "Someone else's" {
		t.Errorf("plan pro's name: got %q, want the other edit's", plan.Name)
	}
}

// TestPrune deletes exactly what the file does not name, in the sections
// it has.
func TestPrune(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	mustApply(t, srv, 0, "-f", example)
	ctx, c := context.Background(), admin(srv)
	mustOK(t, put(c.Metrics.Put(ctx, "reports", quotad.MetricSpec{})))
	mustOK(t, put(c.Plans.Put(ctx, "free", quotad.PlanSpec{})))
	mustOK(t, put(c.Customers.Put(ctx, "old", quotad.CustomerSpec{Plan: "pro"})))
	mustOK(t, put(c.Overrides.Put(ctx, "old", "api_calls", "hour", quotad.OverrideSpec{Limit: 5})))
	mustOK(t, put(c.Overrides.Put(ctx, "acme", "api_calls", "hour", quotad.OverrideSpec{Limit: 5})))

	data, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	noCustomers, _, _ := strings.Cut(string(data), "\ncustomers:")
	tests := []struct {
		name string
		file string
		want string
	}{
		{
			name: "without customers, customers are left alone",
			file: mustWrite(t, noCustomers),
			want: "- plan free\n- metric reports\n\n0 to create, 0 to update, 2 to delete.\nApplied 2 changes.\n",
		},
		{
			name: "with customers, a customer goes with its overrides",
			file: example,
			want: "- override acme api_calls/hour\n- customer old\n\n0 to create, 0 to update, 2 to delete.\nApplied 2 changes.\n",
		},
		{
			name: "then nothing is left to prune",
			file: example,
			want: "No changes: the server matches the file.\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if out := mustApply(t, srv, 0, "-f", tt.file, "--prune"); out != tt.want {
				t.Errorf("printed\n%s\nwant\n%s", out, tt.want)
			}
		})
	}
	gets := []struct {
		name string
		get  func() error
	}{
		{"metric reports", func() error { _, err := c.Metrics.Get(ctx, "reports"); return err }},
		{"plan free", func() error { _, err := c.Plans.Get(ctx, "free"); return err }},
		{"customer old", func() error { _, err := c.Customers.Get(ctx, "old"); return err }},
		{"override acme api_calls/hour", func() error { _, err := c.Overrides.Get(ctx, "acme", "api_calls", "hour"); return err }},
	}
	for _, g := range gets {
		if err := g.get(); !errors.Is(err, quotad.ErrNotFound) {
			t.Errorf("GET %s after prune: got %v, want 404", g.name, err)
		}
	}
}

// TestUnpruned: without --prune, what the server holds and the file does
// not name is said to be there, and left alone.
func TestUnpruned(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	mustApply(t, srv, 0, "-f", example)
	ctx, c := context.Background(), admin(srv)
	mustOK(t, put(c.Plans.Put(ctx, "free", quotad.PlanSpec{})))
	mustOK(t, put(c.Customers.Put(ctx, "old", quotad.CustomerSpec{Plan: "pro"})))
	mustOK(t, put(c.Overrides.Put(ctx, "acme", "api_calls", "hour", quotad.OverrideSpec{Limit: 5})))

	out := mustApply(t, srv, 0, "-f", example)
	want := "No changes: what the file names matches the server.\n" +
		"Not in the file, left as they are (--prune would delete them):\n" +
		"    plan free\n" +
		"    customer old\n" +
		"    override acme api_calls/hour\n"
	if out != want {
		t.Errorf("printed\n%s\nwant\n%s", out, want)
	}
	if _, err := c.Plans.Get(ctx, "free"); err != nil {
		t.Errorf("GET plan free after apply without --prune: %v", err)
	}
	if _, err := c.Overrides.Get(ctx, "acme", "api_calls", "hour"); err != nil {
		t.Errorf("GET override acme api_calls/hour after apply without --prune: %v", err)
	}
}

// TestDryRun prints the plan and writes nothing.
func TestDryRun(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	out := mustApply(t, srv, 0, "-f", example, "--dry-run")
	want := "+ metric api_calls\n+ metric exports\n+ metric llm_tokens\n+ metric credits\n+ plan pro\n+ customer acme\n" +
		"+ override acme api_calls/day\n\n7 to create, 0 to update, 0 to delete.\nDry run: nothing was written.\n"
	if out != want {
		t.Errorf("printed\n%s\nwant\n%s", out, want)
	}
	if n := auditCount(t, srv); n != 0 {
		t.Errorf("audit log has %d events after a dry run, want 0", n)
	}
}

// TestBadFile rejects a file before writing anything.
func TestBadFile(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	file := mustWrite(t, "metrics:\n  api_calls: {}\nplans:\n  pro:\n    limits:\n      - {metric: foo, window: day, limit: 5}\n    colour: blue\n")
	code, out, errOut := mustRun(t, srv, "catalog", "apply", "-f", file)
	if code != 1 || out != "" {
		t.Errorf("exit %d, stdout %q; want 1 and nothing", code, out)
	}
	// An unknown field and an undeclared metric are reported in one run.
	want := file + `:6: plans.pro.limits[0].metric: metric "foo" is not declared` + "\n" +
		file + ":7: plans.pro.colour: unknown field; known fields: name, description, public, price, limits, features\n" +
		file + ": 2 problems; nothing was written.\n"
	if errOut != want {
		t.Errorf("stderr\n%s\nwant\n%s", errOut, want)
	}
	if n := auditCount(t, srv); n != 0 {
		t.Errorf("audit log has %d events, want 0", n)
	}
}

// squeezed is out with every run of spaces one space, so that a test
// names a table's row without its column widths.
func squeezed(out string) string {
	return regexp.MustCompile(` +`).ReplaceAllString(out, " ")
}

// checkRun is a run of quotactl and what it must exit with and print
// (wantOut each in its output, spaces squeezed), and what it must not.
type checkRun struct {
	name     string
	args     []string
	wantCode int
	wantOut  []string
	notOut   []string
}

func (tt checkRun) run(t *testing.T, srv *quotadtest.Server) {
	t.Helper()
	code, out, errOut := mustRun(t, srv, tt.args...)
	if code != tt.wantCode {
		t.Fatalf("exit %d, want %d\n%s%s", code, tt.wantCode, out, errOut)
	}
	for _, w := range tt.wantOut {
		if !strings.Contains(squeezed(out), w) {
			t.Errorf("output\n%s\nwant it to contain %q", out, w)
		}
	}
	for _, w := range tt.notOut {
		if strings.Contains(squeezed(out), w) {
			t.Errorf("output\n%s\nwant it without %q", out, w)
		}
	}
}

func TestCheckAndUsage(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	mustApply(t, srv, 0, "-f", example)
	// Beside the example's acme, whose plan limits exports per subject, a
	// customer whose plan limits nothing per subject.
	mustApply(t, srv, 0, "-f", mustWrite(t, `metrics:
  api_calls: {description: Calls to the public API, capacity: {day: 10000000}}
plans:
  basic:
    limits:
      - {metric: api_calls, window: second, limit: 10}
customers:
  globex:
    plan: basic
`))
	tests := []checkRun{
		{name: "allowed", args: []string{"check", "acme", "api_calls"}, wantOut: []string{
			"acme api_calls cost 1: allowed\n",
			"METRIC SUBJECT WINDOW MODE LIMIT USED REMAINING STATE RESET AT\n", "api_calls - second hard 50 1 49 ok "}},
		{name: "denied", args: []string{"check", "acme", "api_calls", "--cost", "51", "--dry-run"}, wantCode: 2, wantOut: []string{
			"denied: the check can never pass (dry run: nothing charged)\n", "exceeded"}},
		{name: "the cost after a colon", args: []string{"check", "acme", "api_calls:3"}, wantOut: []string{
			"acme api_calls cost 3: allowed\n", "api_calls - day elastic 200000 4 199996 ok "}},
		{name: "usage", args: []string{"usage", "acme"}, wantOut: []string{
			"acme on plan pro\n", "METRIC SUBJECT WINDOW LIMIT USED REMAINING OVERAGE RESET AT\n", "api_calls - day 200000 4 199996 0 "}},
		{name: "usage of a subject", args: []string{"usage", "acme", "--subject", "user-42"}, wantOut: []string{
			"acme on plan pro, subject user-42\n", "api_calls - day 200000 4 199996 0 ", "exports user-42 day 20 0 20 0 "},
			notOut: []string{"No limit of"}},
		{name: "usage of a subject, without limits per subject", args: []string{"usage", "globex", "--subject", "user-42"}, wantOut: []string{
			"globex on plan basic, subject user-42\n", "api_calls - second 10 0 10 0 ",
			"No limit of globex counts per subject: user-42's units count in the customer's windows only.\n"}},
		{name: "entitlements", args: []string{"entitlements", "acme", "--subject", "user-42"}, wantOut: []string{
			"acme on plan pro (active)\n", "FEATURE VALUE\n", "max_projects 10\n", "sso true\n", "support priority\n",
			"METRIC SUBJECT WINDOW MODE LIMIT USED REMAINING RESET AT\n",
			"api_calls - day elastic 200000 4 199996 ", "exports user-42 day hard 20 0 20 ", "No live grant.\n"}},
		{name: "unknown customer", args: []string{"usage", "nobody"}, wantCode: 1},
		{name: "entitlements of an unknown customer", args: []string{"entitlements", "nobody"}, wantCode: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, srv) })
	}
}

// Seats as code: a plan's limit of window total, set to the application's
// count, printed with no reset; a check it denies can never pass.
func TestSeats(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	mustApply(t, srv, 0, "-f", mustWrite(t, `metrics:
  seats: {description: Seats of a workspace}
plans:
  team:
    limits:
      - {metric: seats, window: total, limit: 10}
customers:
  acme:
    plan: team
`))
	for _, tt := range []checkRun{
		{name: "add a seat", args: []string{"check", "acme", "seats"}, wantOut: []string{
			"acme seats cost 1: allowed\n", "seats - total hard 10 1 9 ok never\n"}},
		{name: "set the count", args: []string{"set-total", "acme", "seats", "10"}, wantOut: []string{
			"acme seats total: 10 used of 10, 0 remaining\n"}},
		{name: "full", args: []string{"check", "acme", "seats"}, wantCode: 2, wantOut: []string{
			"denied: the check can never pass\n", "seats - total hard 10 10 0 exceeded never\n"}},
		{name: "usage", args: []string{"usage", "acme"}, wantOut: []string{"seats - total 10 10 0 0 never\n"}},
		{name: "a negative count", args: []string{"set-total", "acme", "seats", "--", "-1"}, wantCode: 1},
		{name: "the catalog exports the total", args: []string{"catalog", "export"}, wantOut: []string{"window: total"}},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, srv) })
	}
}

// TestCheckItemsAndSubjects checks with subjects and of several items, a
// metric drawing on a credit pool among them, and reads a subject's usage.
func TestCheckItemsAndSubjects(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	mustApply(t, srv, 0, "-f", mustWrite(t, `metrics:
  gpt4_tokens: {}
  images: {}
  credits:
    credit_schema:
      - {metric: gpt4_tokens, credits: 3, per: 100}
      - {metric: images, credits: 10}
plans:
  team:
    limits:
      - {metric: gpt4_tokens, window: day, limit: 1000000}
      - {metric: gpt4_tokens, window: day, per: subject, limit: 50000}
      - {metric: images, window: day, per: subject, limit: 5}
      - {metric: credits, window: day, limit: 100}
customers:
  acme:
    plan: team
`))
	tests := []checkRun{
		{
			name: "one metric for a subject, its pool charged too",
			args: []string{"check", "acme", "gpt4_tokens", "--cost", "900", "--subject", "user-42"},
			wantOut: []string{
				"acme gpt4_tokens cost 900 subject user-42: allowed\n",
				"gpt4_tokens - day hard 1000000 900 999100 ok ",
				"gpt4_tokens user-42 day hard 50000 900 49100 ok ",
				"credits - day hard 100 27 73 ok ",
			},
			notOut: []string{"ITEM"},
		},
		{
			name: "items: --subject for those without @SUBJECT",
			args: []string{"check", "acme", "gpt4_tokens:100@ops@example.com/ip:10.0.0.1", "images:2", "--subject", "bob"},
			wantOut: []string{
				"acme, 2 items: allowed\n",
				"ITEM METRIC SUBJECT COST ALLOWED REMAINING\n",
				"1 gpt4_tokens ops@example.com/ip:10.0.0.1 100 yes ",
				"2 images bob 2 yes 3\n",
				"METRIC SUBJECT WINDOW MODE LIMIT USED REMAINING STATE RESET AT\n",
				"gpt4_tokens ops@example.com/ip:10.0.0.1 day hard 50000 100 49900 ok ",
				"images bob day hard 5 2 3 ok ",
				"credits - day hard 100 50 50 ok ",
			},
		},
		{
			name:     "items denied: none charged, each answered",
			args:     []string{"check", "acme", "images:4@bob", "gpt4_tokens:100@user-42"},
			wantCode: 2,
			wantOut: []string{
				"acme, 2 items: denied: retry after ",
				"1 images bob 4 no ",
				"2 gpt4_tokens user-42 100 ",
				"images bob day hard 5 2 3 exceeded ",
			},
		},
		{
			name: "the subject's usage beside the customer's",
			args: []string{"usage", "acme", "--subject", "user-42"},
			wantOut: []string{
				"acme on plan team, subject user-42\n",
				"gpt4_tokens - day 1000000 1000 999000 0 ",
				"gpt4_tokens user-42 day 50000 900 49100 0 ",
				"images user-42 day 5 0 5 0 ",
				"credits - day 100 50 50 0 ",
			},
			notOut: []string{"No limit of"},
		},
		{
			name:    "the customer's usage alone",
			args:    []string{"usage", "acme"},
			wantOut: []string{"gpt4_tokens - day 1000000 1000 999000 0 "},
			notOut:  []string{"user-42"},
		},
		{name: "a metric with limits per subject needs one", args: []string{"check", "acme", "gpt4_tokens"}, wantCode: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, srv) })
	}

	// What quotactl refuses before asking quotad, each with its reason.
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "acme", "images:0"}, `"images:0": the cost after : must be a whole number of at least 1`},
		{[]string{"check", "acme", "images:x"}, `"images:x": the cost after : must be a whole number of at least 1`},
		{[]string{"check", "acme", "images@"}, `"images@": the subject after @ is empty`},
		{[]string{"check", "acme", ":2"}, `":2": want METRIC[:COST][@SUBJECT], with a metric`},
		{[]string{"check", "acme", "images", "gpt4_tokens", "--cost", "2"}, "--cost is the cost of a check of one metric: give each metric its own as METRIC:COST"},
		{[]string{"check", "acme", "images:2", "--cost", "3"}, `"images:2" has a cost already: give it once, with --cost or METRIC:COST`},
		{[]string{"check", "acme", "images", "--cost", "0"}, "--cost must be at least 1, got 0"},
	} {
		code, out, errOut := mustRun(t, srv, tt.args...)
		if code != 1 || out != "" || errOut != "quotactl: "+tt.want+"\n" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 1, nothing and %q", tt.args, code, out, errOut, tt.want)
		}
	}
	// A subject required is quotad's answer, naming the field.
	if _, _, errOut := mustRun(t, srv, "check", "acme", "gpt4_tokens"); !strings.Contains(errOut, "subject") {
		t.Errorf("a check without a subject of a metric with limits per subject: stderr %q, want it to name subject", errOut)
	}
	// None of them charged anything.
	checkRun{args: []string{"usage", "acme", "--subject", "bob"}, wantOut: []string{"images bob day 5 2 3 0 ", "credits - day 100 50 50 0 "}}.run(t, srv)
}

func TestKeys(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	mustApply(t, srv, 0, "-f", example)

	code, out, errOut := mustRun(t, srv, "keys", "list", "acme")
	if code != 0 || out != "acme has no API keys.\n" {
		t.Fatalf("list before: exit %d\n%s%s", code, out, errOut)
	}
	code, key, errOut := mustRun(t, srv, "keys", "create", "acme", "--name", "ci", "--expires-at", "2999-01-01T00:00:00Z")
	key = strings.TrimSpace(key)
	if code != 0 || !strings.HasPrefix(key, "qk_") || !strings.Contains(errOut, "Issued key_") || !strings.Contains(errOut, "expires 2999-01-01T00:00:00Z") {
		t.Fatalf("create: exit %d\nstdout %q\nstderr %s", code, key, errOut)
	}
	// The key works, for acme.
	res, err := quotad.New(srv.URL, quotad.WithToken(srv.CheckToken)).Check(context.Background(),
		quotad.CheckRequest{APIKey: key, Metric: "api_calls", DryRun: true})
	if err != nil || res.Customer != "acme" {
		t.Fatalf("check by the new key: %+v, %v", res, err)
	}

	code, out, errOut = mustRun(t, srv, "keys", "list", "acme")
	if code != 0 || !strings.Contains(out, key[:8]) || !strings.Contains(out, "ci") || strings.Contains(out, key) {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	id := strings.Fields(strings.Split(out, "\n")[1])[0]

	// check --api-key: the key stands for the customer, every argument
	// is a metric.
	for _, tt := range []struct {
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{[]string{"check", "--api-key", key, "api_calls", "--dry-run"}, 0, "acme api_calls cost 1: allowed (dry run: nothing charged)\n", ""},
		{[]string{"check", "api_calls:2", "--api-key", key, "--dry-run"}, 0, "acme api_calls cost 2: allowed (dry run: nothing charged)\n", ""},
		{[]string{"check", "--api-key", key, "acme", "api_calls", "--dry-run"}, 1, "", "with --api-key, every argument is a metric"},
		{[]string{"check", "--api-key", "qk_" + strings.Repeat("0", 32), "api_calls", "--dry-run"}, 1, "", "invalid_api_key"},
		{[]string{"check", "acme"}, 1, "", "name at least one metric"},
	} {
		code, out, errOut := mustRun(t, srv, tt.args...)
		if code != tt.wantCode || !strings.HasPrefix(out, tt.wantOut) || !strings.Contains(errOut, tt.wantErr) {
			t.Errorf("%q: exit %d\nstdout %q\nstderr %q\nwant exit %d, stdout from %q, stderr with %q",
				tt.args, code, out, errOut, tt.wantCode, tt.wantOut, tt.wantErr)
		}
	}

	code, out, errOut = mustRun(t, srv, "keys", "revoke", id)
	if code != 0 || out != "Revoked "+id+".\n" {
		t.Fatalf("revoke: exit %d\n%s%s", code, out, errOut)
	}
	// Revoked, the key is listed only when asked for, with when.
	if code, out, errOut := mustRun(t, srv, "keys", "list", "acme"); code != 0 || out != "acme has no API keys.\n" {
		t.Errorf("list after revoke: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = mustRun(t, srv, "keys", "list", "acme", "--include-revoked")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 || !strings.HasSuffix(lines[0], "REVOKED") ||
		!strings.HasPrefix(lines[1], id) || !strings.HasSuffix(lines[1], "Z") {
		t.Errorf("list --include-revoked: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := quotad.New(srv.URL, quotad.WithToken(srv.CheckToken)).Check(context.Background(),
		quotad.CheckRequest{APIKey: key, Metric: "api_calls", DryRun: true}); !errors.Is(err, quotad.ErrInvalidAPIKey) {
		t.Errorf("check by the revoked key: %v, want ErrInvalidAPIKey", err)
	}

	for _, args := range [][]string{
		{"keys", "revoke", id},
		{"keys", "create", "nobody"},
		{"keys", "create", "acme", "--expires-at", "tomorrow"},
		{"keys", "list", "nobody"},
	} {
		if code, out, errOut := mustRun(t, srv, args...); code != 1 || errOut == "" {
			t.Errorf("%q: exit %d, want 1 with a message\n%s%s", args, code, out, errOut)
		}
	}
}

func TestFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"quotactl", "--version"}, func(string) string { return "" }, &stdout, &stderr)
	if code != 0 || stdout.String() != "quotactl dev\n" {
		t.Errorf("--version: exit %d, %q", code, stdout.String())
	}
	stdout.Reset()
	// --url wins over QUOTAD_URL; nothing listens on port 1.
	getenv := func(k string) string { return map[string]string{"QUOTAD_URL": "http://127.0.0.1:2"}[k] }
	code = run(context.Background(), []string{"quotactl", "--url", "http://127.0.0.1:1", "usage", "acme"}, getenv, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "127.0.0.1:1") {
		t.Errorf("--url: exit %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	code = run(context.Background(), []string{"quotactl", "usage", "acme"}, getenv, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "127.0.0.1:2") {
		t.Errorf("QUOTAD_URL: exit %d, stderr %q", code, stderr.String())
	}
}

// TestMetadataDigits applies metadata whose numbers float64 would change:
// they reach quotad, come back and are exported with their digits, so a
// second apply finds nothing to do.
func TestMetadataDigits(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	file := mustWrite(t, "metrics:\n  api_calls: {}\nplans:\n  pro: {}\ncustomers:\n  acme:\n    plan: pro\n"+
		"    metadata: {ratio: 1.50, big: 12345678901234567890, tiny: 1e-7, nested: {seats: [10, 2.50]}}\n")
	mustApply(t, srv, 0, "-f", file)
	checkNoChanges(t, srv, "second apply", "-f", file)
	out := mustExport(t, srv, "--customers")
	for _, want := range []string{"big: 12345678901234567890\n", "ratio: 1.50\n", "- 2.50\n", "tiny: 0.0000001\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("export\n%s\nwant it to contain %q", out, want)
		}
	}
}

// TestLimitsPerSubjectAndCreditPools applies a file with limits and
// overrides per subject and credit pools to quotad: they arrive as
// written, apply again changes nothing, export gives them back, and an
// edit that moves a metric from one pool to another (named before it) and
// prunes an override per subject is made in an order quotad takes.
func TestLimitsPerSubjectAndCreditPools(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	ctx, c := context.Background(), admin(srv)
	const file = `metrics:
  gpt4_tokens: {}
  images: {}
  z_credits:
    credit_schema:
      - {metric: gpt4_tokens, credits: 3, per: 100}
      - {metric: images, credits: 10}
plans:
  team:
    limits:
      - {metric: gpt4_tokens, window: day, limit: 1000000}
      - {metric: gpt4_tokens, window: day, per: subject, limit: 50000}
      - {metric: images, window: minute, per: subject, limit: 5}
customers:
  acme:
    plan: team
    overrides:
      - {metric: gpt4_tokens, window: day, per: subject, limit: 80000, reason: power users}
      - {metric: gpt4_tokens, window: day, limit: 2000000}
`
	out := mustApply(t, srv, 0, "-f", mustWrite(t, file))
	want := "+ metric gpt4_tokens\n+ metric images\n+ metric z_credits\n+ plan team\n+ customer acme\n" +
		"+ override acme gpt4_tokens/day\n+ override acme gpt4_tokens/day/subject\n" +
		"\n7 to create, 0 to update, 0 to delete.\nApplied 7 changes.\n"
	if out != want {
		t.Errorf("apply printed\n%s\nwant\n%s", out, want)
	}
	pool, err := c.Metrics.Get(ctx, "z_credits")
	mustOK(t, err)
	if len(pool.CreditSchema) != 2 || pool.CreditSchema[1] != (quotad.CreditRate{Metric: "images", Credits: 10, Per: 1}) {
		t.Errorf("pool = %+v", pool.CreditSchema)
	}
	o, err := c.Overrides.GetPer(ctx, "acme", "gpt4_tokens", "day", quotad.PerSubject)
	mustOK(t, err)
	if o.Limit != 80000 || o.Reason != "power users" {
		t.Errorf("override per subject = %+v", o)
	}
	checkNoChanges(t, srv, "second apply", "-f", mustWrite(t, file), "--prune")
	exported := mustExport(t, srv, "--customers")
	for _, w := range []string{"        per: subject\n        limit: 50000\n", "    credit_schema:\n      - metric: gpt4_tokens\n        credits: 3\n        per: 100\n"} {
		if !strings.Contains(exported, w) {
			t.Errorf("export\n%s\nwant it to contain\n%s", exported, w)
		}
	}
	checkNoChanges(t, srv, "apply of the export", "-f", mustWrite(t, exported), "--prune")

	// images moves to a pool whose key sorts before z_credits: z_credits
	// lets it go first. The override per subject goes, the other stays.
	edited := strings.Replace(file, "      - {metric: images, credits: 10}\n", "", 1)
	edited = strings.Replace(edited, "  images: {}\n", "  images: {}\n  a_bonus:\n    credit_schema: [{metric: images, credits: 1}]\n", 1)
	edited = strings.Replace(edited, "      - {metric: gpt4_tokens, window: day, per: subject, limit: 80000, reason: power users}\n", "", 1)
	out = mustApply(t, srv, 0, "-f", mustWrite(t, edited), "--prune")
	want = "~ metric z_credits\n    credit_schema[images].credits: 10 → (none)\n+ metric a_bonus\n" +
		"- override acme gpt4_tokens/day/subject\n" +
		"\n1 to create, 1 to update, 1 to delete.\nApplied 3 changes.\n"
	if out != want {
		t.Errorf("apply of the edit printed\n%s\nwant\n%s", out, want)
	}
	images, err := c.Metrics.Get(ctx, "a_bonus")
	mustOK(t, err)
	if len(images.CreditSchema) != 1 || images.CreditSchema[0].Metric != "images" {
		t.Errorf("a_bonus = %+v", images)
	}
	if _, err := c.Overrides.GetPer(ctx, "acme", "gpt4_tokens", "day", quotad.PerSubject); !errors.Is(err, quotad.ErrOverrideNotFound) {
		t.Errorf("the pruned override per subject: %v, want ErrOverrideNotFound", err)
	}
	if _, err := c.Overrides.Get(ctx, "acme", "gpt4_tokens", "day"); err != nil {
		t.Errorf("the customer-wide override went too: %v", err)
	}
}

// TestBadPoolsAndPers: the file's credit pools and pers are checked before
// anything is written, each problem with its line.
func TestBadPoolsAndPers(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	file := mustWrite(t, "metrics:\n  a: {}\n  credits:\n    credit_schema: [{metric: a, credits: 1}, {metric: b, credits: 1}]\n"+
		"  bonus:\n    credit_schema: [{metric: a, credits: 2}]\n"+
		"plans:\n  pro:\n    limits:\n      - {metric: a, window: day, per: users, limit: 5}\n")
	code, out, errOut := mustRun(t, srv, "catalog", "apply", "-f", file)
	if code != 1 || out != "" {
		t.Errorf("exit %d, stdout %q; want 1 and nothing", code, out)
	}
	want := file + `:4: metrics.credits.credit_schema[0].metric: metric "a" draws on pool "bonus" already, and a metric draws on at most one` + "\n" +
		file + `:4: metrics.credits.credit_schema[1].metric: metric "b" is not declared` + "\n" +
		file + `:6: metrics.bonus.credit_schema[0].metric: metric "a" draws on pool "credits" already, and a metric draws on at most one` + "\n" +
		file + ":10: plans.pro.limits[0].per: must be one of customer, subject\n" +
		file + ": 4 problems; nothing was written.\n"
	if errOut != want {
		t.Errorf("stderr\n%s\nwant\n%s", errOut, want)
	}
	if n := auditCount(t, srv); n != 0 {
		t.Errorf("audit log has %d events, want 0", n)
	}
}

// TestPlanFeatures applies a file whose plans grant features to quotad:
// they arrive as written, in their types (a string that reads as a
// boolean stays a string), apply again changes nothing, export gives them
// back, and an edit is printed field by field and made.
func TestPlanFeatures(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	ctx, c := context.Background(), admin(srv)
	const file = `metrics: {}
plans:
  business:
    name: Business
    features:
      sso: true
      max_projects: 10
      support: priority
      sandbox: "true"
  free:
    features: {sso: false}
`
	out := mustApply(t, srv, 0, "-f", mustWrite(t, file))
	if want := "+ plan business\n+ plan free\n\n2 to create, 0 to update, 0 to delete.\nApplied 2 changes.\n"; out != want {
		t.Errorf("apply printed\n%s\nwant\n%s", out, want)
	}
	p, err := c.Plans.Get(ctx, "business")
	mustOK(t, err)
	if want := (quotad.Features{"sso": true, "max_projects": int64(10), "support": "priority", "sandbox": "true"}); !reflect.DeepEqual(p.Features, want) {
		t.Errorf("business features = %#v, want %#v", p.Features, want)
	}
	checkNoChanges(t, srv, "second apply", "-f", mustWrite(t, file), "--prune")
	exported := mustExport(t, srv)
	if w := "    features:\n      max_projects: 10\n      sandbox: \"true\"\n      sso: true\n      support: priority\n"; !strings.Contains(exported, w) {
		t.Errorf("export\n%s\nwant it to contain\n%s", exported, w)
	}
	checkNoChanges(t, srv, "apply of the export", "-f", mustWrite(t, exported), "--prune")

	edited := strings.Replace(file, "      max_projects: 10\n", "      max_projects: 50\n", 1)
	edited = strings.Replace(edited, "      sandbox: \"true\"\n", "", 1)
	out = mustApply(t, srv, 0, "-f", mustWrite(t, edited))
	want := "~ plan business\n    features.max_projects: 10 → 50\n    features.sandbox: \"true\" → (none)\n" +
		"\n0 to create, 1 to update, 0 to delete.\nApplied 1 change.\n"
	if out != want {
		t.Errorf("apply of the edit printed\n%s\nwant\n%s", out, want)
	}
	p, err = c.Plans.Get(ctx, "business")
	mustOK(t, err)
	if want := (quotad.Features{"sso": true, "max_projects": int64(50), "support": "priority"}); !reflect.DeepEqual(p.Features, want) {
		t.Errorf("business features after the edit = %#v, want %#v", p.Features, want)
	}
}

func TestGrants(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	mustApply(t, srv, 0, "-f", example)

	code, out, errOut := mustRun(t, srv, "grants", "list", "acme")
	if code != 0 || out != "acme has no grants.\n" {
		t.Fatalf("list before: exit %d\n%s%s", code, out, errOut)
	}
	code, id, errOut := mustRun(t, srv, "grants", "create", "acme", "api_calls", "500", "--priority", "2",
		"--expires-at", "2999-01-01T00:00:00Z", "--reason", "top-up pack", "--request-id", "order-1")
	id = strings.TrimSpace(id)
	if code != 0 || !strings.HasPrefix(id, "grt_") || !strings.Contains(errOut, "Granted 500 api_calls to acme (priority 2), expires 2999-01-01T00:00:00Z") {
		t.Fatalf("create: exit %d\nstdout %q\nstderr %s", code, id, errOut)
	}
	// The same request id: the same grant.
	if code, again, errOut := mustRun(t, srv, "grants", "create", "acme", "api_calls", "500", "--priority", "2",
		"--expires-at", "2999-01-01T00:00:00Z", "--reason", "top-up pack", "--request-id", "order-1"); code != 0 || strings.TrimSpace(again) != id {
		t.Fatalf("repeat: exit %d\nstdout %q, want %s\nstderr %s", code, again, id, errOut)
	}
	code, out, errOut = mustRun(t, srv, "grants", "list", "acme")
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "top-up pack") || strings.Count(out, "grt_") != 1 {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut = mustRun(t, srv, "grants", "void", id); code != 0 || out != "Voided "+id+".\n" {
		t.Fatalf("void: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut = mustRun(t, srv, "grants", "list", "acme"); code != 0 || out != "acme has no grants.\n" {
		t.Fatalf("list after the void: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut = mustRun(t, srv, "grants", "list", "acme", "--all"); code != 0 || !strings.Contains(out, id) {
		t.Fatalf("list --all after the void: exit %d\n%s%s", code, out, errOut)
	}
	for _, args := range [][]string{
		{"grants", "void", id},
		{"grants", "create", "nobody", "api_calls", "5"},
		{"grants", "create", "acme", "nothing", "5"},
		{"grants", "create", "acme", "api_calls", "0"},
		{"grants", "create", "acme", "api_calls", "5", "--expires-at", "tomorrow"},
		{"grants", "list", "nobody"},
	} {
		if code, out, errOut := mustRun(t, srv, args...); code != 1 || errOut == "" {
			t.Errorf("%q: exit %d, want 1 with a message\n%s%s", args, code, out, errOut)
		}
	}
}

// TestPricingWalkthrough follows docs/api.md's "Features, seats and
// top-ups" on a real quotad: the pricing page's catalog applied, then what
// the application does — seats added and given back, a feature asked, a
// month's allowance used up, a top-up bought and drawn — and the
// entitlements that show it.
func TestPricingWalkthrough(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	mustApply(t, srv, 0, "-f", "../../examples/pricing.yaml")
	ctx := context.Background()
	c := quotad.New(srv.URL, quotad.WithToken(srv.CheckToken))

	// Inviting a member takes a seat; Pro has 5.
	for i := range 6 {
		res, err := c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "seats", RequestID: fmt.Sprintf("invite-%d", i)})
		mustOK(t, err)
		if res.Allowed != (i < 5) {
			t.Fatalf("invite %d: allowed %t", i, res.Allowed)
		}
	}
	// A member leaves: the seat goes back.
	_, err := c.Refund(ctx, quotad.RefundRequest{Customer: "acme", Metric: "seats", Cost: 1, RequestID: "invite-4"})
	mustOK(t, err)
	// Features: Pro has 10 projects and no SSO.
	f, err := c.CheckFeature(ctx, quotad.FeatureCheckRequest{Customer: "acme", Feature: "max_projects"})
	mustOK(t, err)
	sso, err := c.CheckFeature(ctx, quotad.FeatureCheckRequest{Customer: "acme", Feature: "sso"})
	mustOK(t, err)
	if !f.Allowed || f.Value != int64(10) || sso.Allowed {
		t.Errorf("max_projects %+v, sso %+v; want 10 and not granted", f, sso)
	}
	// The month's allowance used up, the next call is denied until a
	// top-up is bought; then it draws on it.
	res, err := c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "api_calls", Cost: 100000})
	mustOK(t, err)
	if !res.Allowed {
		t.Fatalf("the month's 100000: %+v", res)
	}
	if res, err = c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "api_calls"}); err != nil || res.Allowed {
		t.Fatalf("a call beyond the month: %+v, %v; want denied", res, err)
	}
	if _, err := admin(srv).Grants.Create(ctx, "acme", quotad.GrantSpec{Metric: "api_calls", Amount: 10000,
		Reason: "top-up pack", RequestID: "order-1234"}); err != nil {
		t.Fatal(err)
	}
	if res, err = c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "api_calls"}); err != nil || !res.Allowed || res.Granted != 1 {
		t.Fatalf("a call on the top-up: %+v, %v; want allowed, 1 granted", res, err)
	}
	e, err := c.Entitlements(ctx, "acme", "")
	mustOK(t, err)
	var got []string
	for _, l := range e.Limits {
		got = append(got, fmt.Sprintf("%s/%s %d/%d", l.Metric, l.Window, l.Used, l.Limit))
	}
	if want := "[api_calls/month 100000/100000 seats/total 4/5]"; fmt.Sprint(got) != want {
		t.Errorf("limits %v, want %s", got, want)
	}
	if len(e.Grants) != 1 || e.Grants[0].Remaining != 9999 || e.Features["support"] != "standard" {
		t.Errorf("entitlements %+v", e)
	}
}

// TestApplyGrandfather: a changed plan gets a new version either way; with
// --grandfather its customers stay on theirs, without it they follow.
func TestApplyGrandfather(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	mustApply(t, srv, 0, "-f", example)
	ctx := context.Background()
	mustOK(t, put(admin(srv).Customers.Put(ctx, "acme", quotad.CustomerSpec{Plan: "pro"})))
	text, err := os.ReadFile(example)
	mustOK(t, err)
	steps := []struct {
		args           []string
		amount         string
		latest, onAcme int64
	}{
		{[]string{"--grandfather"}, "amount_cents: 5900", 2, 1},
		{nil, "amount_cents: 6900", 3, 1},
	}
	for _, st := range steps {
		file := mustWrite(t, strings.Replace(string(text), "amount_cents: 4900", st.amount, 1))
		mustApply(t, srv, 0, append([]string{"-f", file}, st.args...)...)
		p, err := admin(srv).Plans.Get(ctx, "pro")
		mustOK(t, err)
		cu, err := admin(srv).Customers.Get(ctx, "acme")
		mustOK(t, err)
		if p.LatestVersion != st.latest || cu.PlanVersion != st.onAcme {
			t.Errorf("apply %v %s: latest version %d, acme on %d; want %d, %d", st.args, st.amount,
				p.LatestVersion, cu.PlanVersion, st.latest, st.onAcme)
		}
	}
}

// TestSuspendResume suspends a customer of the example catalog and
// resumes it: its checks are refused in between, the rest of the
// customer is kept, and applying the catalog again does not resume it.
func TestSuspendResume(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	mustApply(t, srv, 0, "-f", example)
	c := admin(srv)
	ctx := context.Background()
	before, err := c.Customers.Get(ctx, "acme")
	mustOK(t, err)

	code, out, errOut := mustRun(t, srv, "customers", "suspend", "acme", "--reason", "card declined")
	if code != 0 || out != "acme suspended: card declined\n" {
		t.Fatalf("suspend: exit %d\n%s%s", code, out, errOut)
	}
	_, err = c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "api_calls", Cost: 1})
	if !errors.Is(err, quotad.ErrCustomerSuspended) || !strings.Contains(err.Error(), "card declined") {
		t.Fatalf("check while suspended: %v, want ErrCustomerSuspended with the reason", err)
	}
	after, err := c.Customers.Get(ctx, "acme")
	mustOK(t, err)
	if after.Plan != before.Plan || after.Name != before.Name || after.Status != quotad.StatusSuspended {
		t.Errorf("suspended customer = %+v, was %+v", after.CustomerSpec, before.CustomerSpec)
	}
	// A file that renames acme: the replace keeps it suspended.
	text, err := os.ReadFile(example)
	mustOK(t, err)
	renamed := strings.Replace(string(text), "name: Acme Inc.", "name: Acme Corp.", 1)
	if out := mustApply(t, srv, 0, "-f", mustWrite(t, renamed)); !strings.Contains(out, "Acme Corp.") {
		t.Fatalf("apply of the renamed customer:\n%s", out)
	}
	if _, err = c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "api_calls", Cost: 1, DryRun: true}); !errors.Is(err, quotad.ErrCustomerSuspended) {
		t.Errorf("check after applying a catalog that renames acme: %v, want still suspended", err)
	}

	if code, out, errOut = mustRun(t, srv, "customers", "resume", "acme"); code != 0 || out != "acme active\n" {
		t.Fatalf("resume: exit %d\n%s%s", code, out, errOut)
	}
	if _, err = c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "api_calls", Cost: 1, DryRun: true}); err != nil {
		t.Errorf("check after resuming: %v", err)
	}
	for _, args := range [][]string{
		{"customers", "suspend", "acme"},
		{"customers", "suspend", "nobody", "--reason", "x"},
		{"customers", "resume", "nobody"},
	} {
		if code, out, errOut := mustRun(t, srv, args...); code == 0 || errOut == "" {
			t.Errorf("%q: exit %d, want an error with a message\n%s%s", args, code, out, errOut)
		}
	}
}

// A plan's public applies, exports and diffs; taking it out of the file
// makes the plan non-public.
func TestPlanPublic(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	ctx, c := context.Background(), admin(srv)
	const file = "metrics: {}\nplans:\n  pro: {name: Pro, public: true}\n  free: {name: Free}\n"
	mustApply(t, srv, 0, "-f", mustWrite(t, file))
	for key, want := range map[string]bool{"pro": true, "free": false} {
		p, err := c.Plans.Get(ctx, key)
		mustOK(t, err)
		if p.Public != want {
			t.Errorf("%s: public %v, want %v", key, p.Public, want)
		}
	}
	exported := mustExport(t, srv)
	checkNoChanges(t, srv, "apply of the export\n"+exported+"\n", "-f", mustWrite(t, exported), "--prune")
	out := mustApply(t, srv, 0, "-f", mustWrite(t, strings.Replace(file, ", public: true", "", 1)))
	if want := "~ plan pro\n    public: true → (none)\n\n0 to create, 1 to update, 0 to delete.\nApplied 1 change.\n"; out != want {
		t.Errorf("apply without public printed\n%s\nwant\n%s", out, want)
	}
	p, err := c.Plans.Get(ctx, "pro")
	mustOK(t, err)
	if p.Public || p.LatestVersion != 1 {
		t.Errorf("pro: public %v, latest version %d; want false, 1", p.Public, p.LatestVersion)
	}
}
