package catalogfile

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/quotad/quotad/internal/tiers"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// have is a server's catalog for the golden plan: the example, then
// edited by hand in every way a plan prints.
const have = `
metrics:
  api_calls: {description: Calls to the public API, capacity: {day: 10000000}}
  exports: {}
  old_metric: {}
  credits:
    credit_schema:
      - {metric: api_calls, credits: 3, per: 100}
      - {metric: exports, credits: 1}
  old_pool:
    credit_schema: [{metric: old_metric, credits: 1}]
plans:
  pro:
    name: Pro
    price: {amount_cents: 4900}
    limits:
      - {metric: api_calls, window: second, limit: 50, algorithm: sliding_window}
      - {metric: api_calls, window: hour, limit: 5000}
      - {metric: api_calls, window: day, limit: 100000, mode: soft, overage_percent: 20, overage_price_micros: 1000}
      - {metric: api_calls, window: day, per: subject, limit: 1000}
    features: {sso: true, max_projects: 10, support: priority, sandbox: "true"}
  legacy: {}
customers:
  acme:
    plan: pro
    name: Acme Inc.
    billing_anchor_day: 15
    time_zone: Europe/Berlin
    metadata: {region: eu}
    overrides:
      - {metric: api_calls, window: day, limit: 150000, expires_at: 2030-01-01T00:00:00Z, reason: launch week}
      - {metric: exports, window: day, limit: 7}
      - {metric: api_calls, window: day, per: subject, limit: 2000}
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
  credits:
    credit_schema:
      - {metric: new_metric, credits: 2}
      - {metric: api_calls, credits: 5, per: 100}
plans:
  pro:
    name: Pro
    price: {amount_cents: 5900, currency: USD, interval: month}
    features:
      sso: true
      max_projects: 20
      support: "priority"
      audit_log: false
    limits:
      - {metric: api_calls, window: day, limit: 200000, mode: soft, overage_percent: 20, overage_price_micros: 1000}
      - {metric: api_calls, window: second, limit: 50, algorithm: token_bucket, burst: 50}
      - {metric: api_calls, window: second, per: subject, limit: 5}
      - {metric: api_calls, window: day, per: subject, limit: 1500}
      - {metric: new_metric, window: month, limit: 10}
  team: {name: Team}
customers:
  acme:
    plan: team
    name: Acme Inc.
    billing_anchor_day: 15
    time_zone: America/New_York
    metadata: {region: us, tier: 2}
    overrides:
      - {metric: api_calls, window: day, limit: 200000, mode: elastic, ceiling: 400000, expires_at: 2030-01-01T00:00:00Z, reason: launch week}
      - {metric: api_calls, window: hour, per: subject, limit: 100}
  newco: {plan: team}
`

// TestPrintedPlan compares the printed plan of every kind of change with
// testdata/plan.golden (-update rewrites it).
func TestPrintedPlan(t *testing.T) {
	h := mustCatalog(t, have, &Catalog{})
	w := mustCatalog(t, want, &Catalog{})
	etags := map[Ref]string{
		MetricRef("api_calls"): `"3"`, PlanRef("pro"): `"7"`, CustomerRef("acme"): `"2"`,
		OverrideRef("acme", tiers.LimitKey{Metric: "exports", Window: tiers.Day}): `"1"`, CustomerRef("gone"): `"4"`,
		MetricRef("credits"): `"2"`, MetricRef("old_pool"): `"1"`,
		OverrideRef("acme", tiers.LimitKey{Metric: "api_calls", Window: tiers.Day, Per: tiers.PerSubject}): `"5"`,
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
// zero percent, a credit rate per 1) counts as the file that leaves them
// out, or names the default (per customer); a credit schema's order says
// nothing.
func TestServerDefaults(t *testing.T) {
	server := `
metrics:
  api_calls: {description: "", capacity: {}, credit_schema: []}
  images: {}
  credits: {credit_schema: [{metric: images, credits: 10, per: 1}, {metric: api_calls, credits: 3, per: 100}]}
plans:
  pro:
    name: pro
    description: ""
    price: {amount_cents: 0, currency: USD, interval: month}
    limits:
      - {metric: api_calls, window: second, limit: 50, mode: hard, overage_percent: 0, algorithm: sliding_window, ceiling: null}
      - {metric: api_calls, window: minute, limit: 60, mode: hard, algorithm: token_bucket, burst: 60}
      - {metric: api_calls, window: minute, per: subject, limit: 6, mode: hard, algorithm: sliding_window}
customers:
  acme:
    plan: pro
    name: ""
    metadata: {}
    billing_anchor_day: null
    time_zone: UTC
    overrides: [{metric: api_calls, window: day, per: subject, limit: 5, mode: hard}]
`
	file := `
metrics:
  api_calls: {}
  images: {}
  credits: {credit_schema: [{metric: api_calls, credits: 3, per: 100}, {metric: images, credits: 10}]}
plans:
  pro:
    limits:
      - {metric: api_calls, window: minute, per: subject, limit: 6}
      - {metric: api_calls, window: minute, limit: 60, algorithm: token_bucket, per: customer}
      - {metric: api_calls, window: second, limit: 50}
customers:
  acme:
    plan: pro
    overrides: [{metric: api_calls, window: day, per: subject, limit: 5}]
`
	h := mustNormalize(t, server)
	if changes := Diff(mustCatalog(t, file, h), h, nil, true); len(changes) != 0 {
		var b bytes.Buffer
		Print(&b, changes, nil)
		t.Errorf("changes:\n%s", b.String())
	}
}

// mustNormalize parses server, a catalog as a server holds it, and
// normalizes it as of now.
func mustNormalize(t *testing.T, server string) *Catalog {
	t.Helper()
	doc, err := Parse("server", []byte(server))
	if err != nil {
		t.Fatal(err)
	}
	h, err := Normalize(doc.File, now)
	if err != nil {
		t.Fatal(err)
	}
	return h
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
	h := mustNormalize(t, server)
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

// TestReadmeCatalog keeps the catalogs the README and docs/api.md show
// the same as the files under examples/, which tests of quotactl apply to
// quotad.
func TestReadmeCatalog(t *testing.T) {
	for _, tc := range []struct{ doc, section, file string }{
		{"README.md", "Quickstart", "catalog.yaml"},
		{"docs/api.md", "Features, seats and top-ups", "pricing.yaml"},
	} {
		doc, err := os.ReadFile("../../" + tc.doc)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile("(?s)\n## " + regexp.QuoteMeta(tc.section) + "\n.*?```yaml\n(.*?)```").FindSubmatch(doc)
		if m == nil {
			t.Errorf("%s has no yaml block under %s", tc.doc, tc.section)
			continue
		}
		data, err := os.ReadFile("../../examples/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		shown, example := mustCatalog(t, string(m[1]), &Catalog{}), mustCatalog(t, string(data), &Catalog{})
		if changes := Diff(shown, example, nil, true); len(changes) != 0 {
			var b bytes.Buffer
			Print(&b, changes, nil)
			t.Errorf("%s's catalog under %s differs from examples/%s:\n%s", tc.doc, tc.section, tc.file, b.String())
		}
	}
}

// TestMetricOrder: metrics are written in an order the server takes one
// at a time: a pool after the metrics it names, a pool that lets a metric
// go before the one that takes it, a pool deleted before its metrics.
func TestMetricOrder(t *testing.T) {
	tests := []struct {
		name       string
		have, want string
		prune      bool
		order      []string
	}{
		{
			name:  "a new pool after the new metrics it names",
			have:  `metrics: {}`,
			want:  `metrics: {credits: {credit_schema: [{metric: images, credits: 1}, {metric: gpt4, credits: 3}]}, gpt4: {}, images: {}}`,
			order: []string{"+ metric gpt4", "+ metric images", "+ metric credits"},
		},
		{
			name:  "a metric moves to a pool of a lower key",
			have:  `metrics: {audio: {}, b_pool: {credit_schema: [{metric: audio, credits: 1}]}}`,
			want:  `metrics: {audio: {}, a_pool: {credit_schema: [{metric: audio, credits: 1}]}, b_pool: {credit_schema: [{metric: zzz, credits: 1}]}, zzz: {}}`,
			order: []string{"+ metric zzz", "~ metric b_pool", "+ metric a_pool"},
		},
		{
			name:  "a pool that stops being one, first",
			have:  `metrics: {audio: {}, z_pool: {credit_schema: [{metric: audio, credits: 1}]}}`,
			want:  `metrics: {audio: {}, a_pool: {credit_schema: [{metric: audio, credits: 1}]}, z_pool: {}}`,
			order: []string{"~ metric z_pool", "+ metric a_pool"},
		},
		{
			name:  "a metric becomes a pool once its pool lets it go",
			have:  `metrics: {a_talk: {}, audio: {}, minutes: {credit_schema: [{metric: a_talk, credits: 1}, {metric: audio, credits: 1}]}}`,
			want:  `metrics: {a_talk: {credit_schema: [{metric: audio, credits: 2}]}, audio: {}, minutes: {credit_schema: [{metric: images, credits: 1}]}, images: {}}`,
			order: []string{"+ metric images", "~ metric minutes", "~ metric a_talk"},
		},
		{
			name:  "pools that swap their metrics stay in key order (the server refuses the first)",
			have:  `metrics: {x: {}, y: {}, p: {credit_schema: [{metric: x, credits: 1}]}, q: {credit_schema: [{metric: y, credits: 1}]}}`,
			want:  `metrics: {x: {}, y: {}, p: {credit_schema: [{metric: y, credits: 1}]}, q: {credit_schema: [{metric: x, credits: 1}]}}`,
			order: []string{"~ metric p", "~ metric q"},
		},
		{
			name:  "a pool deleted before the metrics it names",
			have:  `metrics: {a_metric: {}, keep: {}, z_pool: {credit_schema: [{metric: a_metric, credits: 1}]}}`,
			want:  `metrics: {keep: {}}`,
			prune: true,
			order: []string{"- metric z_pool", "- metric a_metric"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, w := mustCatalog(t, tc.have, &Catalog{}), mustCatalog(t, tc.want, &Catalog{})
			var got []string
			for _, c := range Diff(w, h, nil, tc.prune) {
				got = append(got, c.Op.sign()+" "+c.Ref.String())
			}
			if strings.Join(got, "\n") != strings.Join(tc.order, "\n") {
				t.Errorf("changes\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.order, "\n  "))
			}
		})
	}
}

// A limit's rollover is part of plans as code: read, sent, exported and
// compared like any field.
func TestRolloverAsCode(t *testing.T) {
	const text = `
metrics:
  api_calls: {}
plans:
  pro:
    name: Pro
    limits:
      - {metric: api_calls, window: month, limit: 100000, rollover: {max: 50000}}
customers:
  acme:
    plan: pro
    overrides:
      - {metric: api_calls, window: day, limit: 5000, rollover: {max: 1000}}
`
	c := mustCatalog(t, text, &Catalog{})
	if r := c.Plans["pro"].Limits[0].Rollover; r == nil || r.Max != 50000 {
		t.Errorf("the plan's limit has rollover %+v; want max 50000", r)
	}
	key := tiers.LimitKey{Metric: "api_calls", Window: tiers.Day}
	if r := c.Customers["acme"].Overrides[key].Rollover; r == nil || r.Max != 1000 {
		t.Errorf("the override has rollover %+v; want max 1000", r)
	}
	out, err := Encode(Export(c, true))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "max: 50000") || !strings.Contains(string(out), "max: 1000") {
		t.Errorf("export lacks the rollovers:\n%s", out)
	}
	changed := mustCatalog(t, strings.Replace(text, "max: 50000", "max: 40000", 1), &Catalog{})
	changes := Diff(changed, c, nil, false)
	if len(changes) != 1 {
		t.Fatalf("a rollover changed: %+v; want one change", changes)
	}
}

// TestPublicAsCode: a plan's public reads, exports and diffs; false, the
// default, is the same as absent.
func TestPublicAsCode(t *testing.T) {
	catalog := func(public string) string {
		return "metrics:\n  api_calls: {}\nplans:\n  pro: {name: Pro" + public + "}\n"
	}
	for _, tc := range []struct {
		name, server, file string
		changes            int
	}{
		{"both public", ", public: true", ", public: true", 0},
		{"false is absent", ", public: false", "", 0},
		{"absent is false", "", ", public: false", 0},
		{"made public", "", ", public: true", 1},
		{"made non-public", ", public: true", ", public: false", 1},
		{"public left out", ", public: true", "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := mustCatalog(t, catalog(tc.server), &Catalog{})
			file := mustCatalog(t, catalog(tc.file), server)
			if changes := Diff(file, server, nil, false); len(changes) != tc.changes {
				t.Errorf("changes %+v; want %d", changes, tc.changes)
			}
			out, err := Encode(Export(server, true))
			if err != nil {
				t.Fatal(err)
			}
			public := server.Plans["pro"].Public
			if strings.Contains(string(out), "public: true") != public {
				t.Errorf("export of a plan with public %v:\n%s", public, out)
			}
			if back := mustCatalog(t, string(out), &Catalog{}); back.Plans["pro"].Public != public {
				t.Errorf("export read back with public %v, want %v:\n%s", back.Plans["pro"].Public, public, out)
			}
		})
	}
}
