package catalogfile

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func mustExample(t *testing.T) (string, *Catalog) {
	t.Helper()
	data, err := os.ReadFile("../../examples/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(data), mustCatalog(t, string(data), &Catalog{})
}

// have is a server's catalog for the golden plan: the example, then
// edited by hand in every way a plan prints.
const have = `
metrics:
  api_calls: {description: Calls to the public API, capacity: {day: 10000000}}
  exports: {}
  old_metric: {}
plans:
  pro:
    name: Pro
    price: {amount_cents: 4900}
    limits:
      - {metric: api_calls, window: second, limit: 50, algorithm: sliding_window}
      - {metric: api_calls, window: hour, limit: 5000}
      - {metric: api_calls, window: day, limit: 100000, mode: soft, overage_percent: 20, overage_price_micros: 1000}
  legacy: {}
customers:
  acme:
    plan: pro
    name: Acme Inc.
    billing_anchor_day: 15
    metadata: {region: eu}
    overrides:
      - {metric: api_calls, window: day, limit: 150000, expires_at: 2030-01-01T00:00:00Z, reason: launch week}
      - {metric: exports, window: day, limit: 7}
  gone: {plan: legacy}
`

// want is the file applied to it.
const want = `
metrics:
  api_calls:
    description: Calls to the public API
    capacity: {day: 20000000, second: 5000}
  exports: {description: Data exports}
  new_metric: {}
plans:
  pro:
    name: Pro
    price: {amount_cents: 5900, currency: USD, interval: month}
    limits:
      - {metric: api_calls, window: day, limit: 200000, mode: soft, overage_percent: 20, overage_price_micros: 1000}
      - {metric: api_calls, window: second, limit: 50, algorithm: token_bucket, burst: 50}
      - {metric: new_metric, window: month, limit: 10}
  team: {name: Team}
customers:
  acme:
    plan: team
    name: Acme Inc.
    billing_anchor_day: 15
    metadata: {region: us, tier: 2}
    overrides:
      - {metric: api_calls, window: day, limit: 200000, mode: elastic, ceiling: 400000, expires_at: 2030-01-01T00:00:00Z, reason: launch week}
  newco: {plan: team}
`

// TestPrintedPlan compares the printed plan of every kind of change with
// testdata/plan.golden (-update rewrites it).
func TestPrintedPlan(t *testing.T) {
	h := mustCatalog(t, have, &Catalog{})
	w := mustCatalog(t, want, &Catalog{})
	etags := map[Ref]string{
		MetricRef("api_calls"): `"3"`, PlanRef("pro"): `"7"`, CustomerRef("acme"): `"2"`,
		OverrideRef("acme", "exports", "day"): `"1"`, CustomerRef("gone"): `"4"`,
	}
	for _, prune := range []bool{false, true} {
		name := "plan.golden"
		if prune {
			name = "plan-prune.golden"
		}
		t.Run(name, func(t *testing.T) {
			changes := Diff(w, h, etags, prune)
			var kept []Ref
			if !prune {
				kept = Unpruned(w, h)
			}
			var b bytes.Buffer
			if err := Print(&b, changes, kept); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, name, b.String())
			for _, c := range changes {
				if got, want := c.IfMatch != "", c.Op != Create && etags[c.Ref] != ""; got != want {
					t.Errorf("%s %s: If-Match %q, want one: %v", c.Op.sign(), c.Ref, c.IfMatch, want)
				}
			}
		})
	}
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

// TestExportRoundTrip exports a catalog, reads the export back and finds
// nothing to change, with or without prune; a second export is the same
// text.
func TestExportRoundTrip(t *testing.T) {
	for _, text := range []string{have, want} {
		c := mustCatalog(t, text, &Catalog{})
		out, err := Encode(Export(c, true))
		if err != nil {
			t.Fatal(err)
		}
		back := mustCatalog(t, string(out), &Catalog{})
		if changes := Diff(back, c, nil, true); len(changes) != 0 {
			t.Errorf("export of\n%s\nread back as\n%s\nchanges %+v", text, out, changes)
		}
		again, err := Encode(Export(back, true))
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(out) {
			t.Errorf("second export differs:\n%s\nfirst:\n%s", again, out)
		}
	}
}

// TestServerDefaults: what a server shows for fields left to their
// defaults (mode hard, the default algorithm named, a bucket's burst, a
// zero percent) counts as the file that leaves them out.
func TestServerDefaults(t *testing.T) {
	server := `
metrics: {api_calls: {description: "", capacity: {}}}
plans:
  pro:
    name: pro
    description: ""
    price: {amount_cents: 0, currency: USD, interval: month}
    limits:
      - {metric: api_calls, window: second, limit: 50, mode: hard, overage_percent: 0, algorithm: sliding_window, ceiling: null}
      - {metric: api_calls, window: minute, limit: 60, mode: hard, algorithm: token_bucket, burst: 60}
customers:
  acme: {plan: pro, name: "", metadata: {}, billing_anchor_day: null}
`
	file := `
metrics: {api_calls: {}}
plans:
  pro:
    limits:
      - {metric: api_calls, window: minute, limit: 60, algorithm: token_bucket}
      - {metric: api_calls, window: second, limit: 50}
customers:
  acme: {plan: pro}
`
	doc, err := Parse("server", []byte(server))
	if err != nil {
		t.Fatal(err)
	}
	h, err := Normalize(doc.File, now)
	if err != nil {
		t.Fatal(err)
	}
	if changes := Diff(mustCatalog(t, file, h), h, nil, true); len(changes) != 0 {
		var b bytes.Buffer
		Print(&b, changes, nil)
		t.Errorf("changes:\n%s", b.String())
	}
}

// TestExpiredOverrides: a server's expired override is kept by Normalize,
// left out by export and never pruned.
func TestExpiredOverrides(t *testing.T) {
	server := `
metrics: {api_calls: {}}
plans: {pro: {}}
customers:
  acme:
    plan: pro
    overrides: [{metric: api_calls, window: day, limit: 5, expires_at: 2026-01-01T00:00:00Z}]
`
	doc, err := Parse("server", []byte(server))
	if err != nil {
		t.Fatal(err)
	}
	h, err := Normalize(doc.File, now)
	if err != nil {
		t.Fatal(err)
	}
	for key, o := range h.Customers["acme"].Overrides {
		if !o.Expired {
			t.Errorf("override %v: not marked expired", key)
		}
	}
	out, err := Encode(Export(h, true))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "overrides") {
		t.Errorf("export has the expired override:\n%s", out)
	}
	if changes := Diff(mustCatalog(t, string(out), h), h, nil, true); len(changes) != 0 {
		t.Errorf("applying the export with prune: %+v, want no change", changes)
	}
}

// TestReadmeCatalog keeps the catalog the README shows the same as
// examples/catalog.yaml, which a test of quotactl applies to quotad.
func TestReadmeCatalog(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Set up a catalog\n.*?```yaml\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README has no yaml block under Set up a catalog")
	}
	_, example := mustExample(t)
	shown := mustCatalog(t, string(m[1]), &Catalog{})
	if changes := Diff(shown, example, nil, true); len(changes) != 0 {
		var b bytes.Buffer
		Print(&b, changes, nil)
		t.Errorf("README's catalog differs from examples/catalog.yaml:\n%s", b.String())
	}
}
