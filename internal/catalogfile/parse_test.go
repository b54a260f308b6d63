package catalogfile

import (
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// now is the clock of these tests: overrides must expire after it.
var now = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// serverCatalog is what a server holds in the cases that read it.
var serverCatalog = &Catalog{
	Metrics:   map[string]tiers.Metric{"exports": {Key: "exports"}},
	Plans:     map[string]tiers.Plan{"free": {Key: "free"}},
	Customers: map[string]Account{},
}

// lines joins YAML lines, so that a case shows each line's number plainly.
func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

// proLimits is a file that declares the metric api_calls and the plan pro
// with limits: the lines given, from line 5 on.
func proLimits(limits ...string) string {
	return lines(append([]string{"metrics: {api_calls: {}}", "plans:", "  pro:", "    limits:"}, limits...)...)
}

// featureRule is what a feature's value must be, as quotad says it.
const featureRule = "must be true, false, an integer between -9007199254740991 and 9007199254740991, or a string of 1 to 256 characters"

func TestBadFiles(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string
	}{
		{
			name: "empty",
			file: "",
			want: []string{"catalog.yaml: the file is empty"},
		},
		{
			name: "not yaml",
			file: lines("metrics:", "\tapi_calls: {}"),
			want: []string{"catalog.yaml:2: found character that cannot start any token"},
		},
		{
			name: "indentation",
			file: lines("plans:", "  pro:", "    name: Pro", "   description: Our plan"),
			want: []string{"catalog.yaml:4: did not find expected key"},
		},
		{
			name: "indentation in a mapping further down",
			file: lines("metrics:", "  api_calls: {}", "plans:", "   pro: {}", "  team: {}"),
			want: []string{"catalog.yaml:5: did not find expected key"},
		},
		{
			name: "two documents",
			file: lines("metrics: {}", "---", "plans: {}"),
			want: []string{"catalog.yaml:2: a catalog file holds one YAML document"},
		},
		{
			name: "not a mapping",
			file: lines("- metrics"),
			want: []string{"catalog.yaml:1: must be a mapping, got a list"},
		},
		{
			name: "unknown section",
			file: lines("metrics: {}", "plan: {}"),
			want: []string{`catalog.yaml:2: plan: unknown field; known fields: metrics, plans, customers`},
		},
		{
			name: "section left empty",
			file: lines("metrics: {}", "customers:", "#  acme: {plan: pro}"),
			want: []string{"catalog.yaml:2: customers: must be a mapping; write {} for none"},
		},
		{
			name: "bad features",
			file: lines(
				"plans:",
				"  pro:",
				"    features:",
				"      sso: yes",
				"      seats: 1.5",
				"      Support: priority",
				"      empty:",
				"      list: [1]",
				"      long: "+strings.Repeat("x", 257),
				"      fine: 9007199254740991",
			),
			want: []string{
				"catalog.yaml:5: plans.pro.features.seats: " + featureRule,
				"catalog.yaml:6: plans.pro.features.Support: the feature's key must match ^[a-z0-9][a-z0-9_.-]{0,62}$",
				"catalog.yaml:7: plans.pro.features.empty: " + featureRule,
				"catalog.yaml:8: plans.pro.features.list: " + featureRule,
				"catalog.yaml:9: plans.pro.features.long: " + featureRule,
			},
		},
		{
			name: "unknown field in a limit",
			file: proLimits(
				"      - metric: api_calls",
				"        window: day",
				"        limit: 5",
				"        mdoe: soft",
			),
			want: []string{"catalog.yaml:8: plans.pro.limits[0].mdoe: unknown field; known fields: metric, window, per, limit, mode, overage_percent, overage_price_micros, ceiling, algorithm, burst, rollover"},
		},
		{
			name: "string for an integer",
			file: lines("metrics:", "  api_calls:", "    capacity:", `      day: "100"`),
			want: []string{`catalog.yaml:4: metrics.api_calls.capacity.day: must be an integer, got "100"`},
		},
		{
			name: "string for a boolean",
			file: lines("plans:", "  pro:", `    public: "yes"`),
			want: []string{`catalog.yaml:3: plans.pro.public: must be true or false, got "yes"`},
		},
		{
			name: "integer for a boolean",
			file: lines("plans:", "  pro:", `    public: 1`),
			want: []string{`catalog.yaml:3: plans.pro.public: must be true or false, got "1"`},
		},
		{
			name: "fraction for an integer",
			file: lines("metrics: {api_calls: {}}", "plans:", "  pro:", "    limits: [{metric: api_calls, window: day, limit: 1.5}]"),
			want: []string{`catalog.yaml:4: plans.pro.limits[0].limit: must be an integer, got "1.5"`},
		},
		{
			name: "mapping for a list",
			file: lines("plans:", "  pro:", "    limits: {metric: api_calls}"),
			want: []string{"catalog.yaml:3: plans.pro.limits: must be a list, got a mapping"},
		},
		{
			name: "list for a string",
			file: lines("plans:", "  pro:", "    name: [Pro]"),
			want: []string{"catalog.yaml:3: plans.pro.name: must be a string, got a list"},
		},
		{
			name: "duplicate key",
			file: lines("metrics:", "  api_calls: {}", "  exports: {}", "  api_calls: {description: again}"),
			want: []string{"catalog.yaml:4: metrics.api_calls: duplicate key (first at line 2)"},
		},
		{
			name: "limit on an undeclared metric",
			file: lines(
				"metrics:",
				"  api_calls: {}",
				"plans:",
				"  pro:",
				"    limits:",
				"      - {metric: api_calls, window: day, limit: 5}",
				"      - {metric: foo, window: day, limit: 5}",
			),
			want: []string{`catalog.yaml:7: plans.pro.limits[1].metric: metric "foo" is not declared`},
		},
		{
			name: "without metrics, the server's are declared",
			file: lines(
				"plans:",
				"  pro:",
				"    limits:",
				"      - {metric: exports, window: day, limit: 5}",
				"      - {metric: api_calls, window: day, limit: 5}",
			),
			want: []string{`catalog.yaml:5: plans.pro.limits[1].metric: metric "api_calls" is not declared`},
		},
		{
			name: "with metrics, only the file's are declared",
			file: lines(
				"metrics: {api_calls: {}}",
				"plans:",
				"  pro:",
				"    limits: [{metric: exports, window: day, limit: 5}]",
			),
			want: []string{`catalog.yaml:4: plans.pro.limits[0].metric: metric "exports" is not declared`},
		},
		{
			name: "customer on an undeclared plan",
			file: lines("plans: {pro: {}}", "customers:", "  acme:", "    plan: free"),
			want: []string{`catalog.yaml:4: customers.acme.plan: plan "free" is not declared`},
		},
		{
			name: "customer without a plan",
			file: lines("customers:", "  acme:", "    name: Acme"),
			want: []string{`catalog.yaml:2: customers.acme.plan: is required`},
		},
		{
			name: "override on an undeclared metric",
			file: lines("customers:", "  acme:", "    plan: free", "    overrides:", "      - {metric: api_calls, window: day, limit: 5}"),
			want: []string{`catalog.yaml:5: customers.acme.overrides[0].metric: metric "api_calls" is not declared`},
		},
		{
			name: "bad window and mode",
			file: proLimits(
				"      - metric: api_calls",
				"        window: days",
				"        limit: 5",
				"        mode: strict",
			),
			want: []string{
				"catalog.yaml:6: plans.pro.limits[0].window: must be one of second, minute, hour, day, week, month, total",
				"catalog.yaml:8: plans.pro.limits[0].mode: must be one of hard, soft, elastic",
			},
		},
		{
			name: "field of another mode",
			file: proLimits(
				"      - metric: api_calls",
				"        window: day",
				"        limit: 5",
				"        ceiling: 10",
			),
			want: []string{"catalog.yaml:8: plans.pro.limits[0].ceiling: applies only to mode elastic"},
		},
		{
			name: "algorithm on a long window",
			file: proLimits("      - {metric: api_calls, window: day, limit: 5, algorithm: token_bucket}"),
			want: []string{"catalog.yaml:5: plans.pro.limits[0].algorithm: applies only to short windows: second, minute"},
		},
		{
			name: "limit left out",
			file: proLimits("      - metric: api_calls", "        window: day"),
			want: []string{"catalog.yaml:5: plans.pro.limits[0].limit: is required"},
		},
		{
			name: "duplicate limit",
			file: proLimits(
				"      - {metric: api_calls, window: day, limit: 5}",
				"      - {metric: api_calls, window: day, limit: 6}",
			),
			want: []string{"catalog.yaml:6: plans.pro.limits[1]: duplicates limits[0]: a metric+window+per appears at most once"},
		},
		{
			name: "a customer-wide limit and one per subject on one metric+window",
			file: proLimits(
				"      - {metric: api_calls, window: day, limit: 5}",
				"      - {metric: api_calls, window: day, per: subject, limit: 1}",
				"      - {metric: api_calls, window: day, per: subject, limit: 2}",
				"      - {metric: api_calls, window: day, per: customer, limit: 6}",
			),
			want: []string{
				"catalog.yaml:7: plans.pro.limits[2]: duplicates limits[1]: a metric+window+per appears at most once",
				"catalog.yaml:8: plans.pro.limits[3]: duplicates limits[0]: a metric+window+per appears at most once",
			},
		},
		{
			name: "per that is none",
			file: proLimits(
				"      - metric: api_calls",
				"        window: day",
				"        per: user",
				"        limit: 5",
				"      - {metric: api_calls, window: hour, per: [subject], limit: 5}",
				"customers:",
				"  acme:",
				"    plan: pro",
				"    overrides:",
				"      - {metric: api_calls, window: day, per: Subject, limit: 5}",
			),
			want: []string{
				"catalog.yaml:7: plans.pro.limits[0].per: must be one of customer, subject",
				"catalog.yaml:9: plans.pro.limits[1].per: must be a string, got a list",
				"catalog.yaml:14: customers.acme.overrides[0].per: must be one of customer, subject",
			},
		},
		{
			name: "overrides per subject",
			file: lines(
				"customers:",
				"  acme:",
				"    plan: free",
				"    overrides:",
				"      - {metric: exports, window: day, limit: 5}",
				"      - {metric: exports, window: day, per: subject, limit: 1}",
				"      - {metric: exports, window: day, per: customer, limit: 6}",
				"      - {metric: exports, window: day, per: subject, limit: 2}",
			),
			want: []string{
				"catalog.yaml:7: customers.acme.overrides[2]: duplicates overrides[0]: a metric+window+per appears at most once",
				"catalog.yaml:8: customers.acme.overrides[3]: duplicates overrides[1]: a metric+window+per appears at most once",
			},
		},
		{
			// The rules among metrics wait for a schema's own to hold
			// (bonus names a pool, reported once its entries are right).
			name: "credit schemas",
			file: lines(
				"metrics:",
				"  gpt4_tokens: {}",
				"  images: {}",
				"  credits:",
				"    credit_schema:",
				"      - {metric: gpt4_tokens, credits: 3, per: 100}",
				"      - {metric: video, credits: 1}",
				"      - {metric: credits, credits: 1}",
				"      - {metric: gpt4_tokens, credits: 0, per: many}",
				"  bonus:",
				"    credit_schema:",
				"      - {metric: credits, credits: 1}",
				"      - metric: images",
				"  minutes:",
				"    credit_schema: [{metric: gpt4_tokens, credits: 2}]",
			),
			want: []string{
				"catalog.yaml:8: metrics.credits.credit_schema[2].metric: must name another metric: a pool cannot draw on itself",
				"catalog.yaml:9: metrics.credits.credit_schema[3].credits: must be an integer between 1 and 9007199254740991",
				`catalog.yaml:9: metrics.credits.credit_schema[3].per: must be an integer, got "many"`,
				"catalog.yaml:13: metrics.bonus.credit_schema[1].credits: is required",
				`catalog.yaml:15: metrics.minutes.credit_schema[0].metric: metric "gpt4_tokens" draws on pool "credits" already, and a metric draws on at most one`,
			},
		},
		{
			name: "credit pools among the file's metrics",
			file: lines(
				"metrics:",
				"  gpt4_tokens: {}",
				"  credits:",
				"    credit_schema:",
				"      - {metric: gpt4_tokens, credits: 3, per: 100}",
				"      - {metric: exports, credits: 1}",
				"  images:",
				"    credit_schema: [{metric: gpt4_tokens, credits: 2}]",
			),
			want: []string{
				`catalog.yaml:5: metrics.credits.credit_schema[0].metric: metric "gpt4_tokens" draws on pool "images" already, and a metric draws on at most one`,
				`catalog.yaml:6: metrics.credits.credit_schema[1].metric: metric "exports" is not declared`,
				`catalog.yaml:8: metrics.images.credit_schema[0].metric: metric "gpt4_tokens" draws on pool "credits" already, and a metric draws on at most one`,
			},
		},
		{
			name: "a metric that draws on a pool made a pool",
			file: lines(
				"metrics:",
				"  audio: {}",
				"  minutes:",
				"    credit_schema: [{metric: talk, credits: 1}]",
				"  talk:",
				"    credit_schema: [{metric: audio, credits: 1}]",
			),
			want: []string{
				`catalog.yaml:4: metrics.minutes.credit_schema[0].metric: metric "talk" is a credit pool, and a pool draws on none`,
				`catalog.yaml:6: metrics.talk.credit_schema: must be empty: the metric draws on pool "minutes", and a pool draws on none`,
			},
		},
		{
			name: "bad keys",
			file: lines("metrics:", "  API_calls: {}", "plans:", "  Pro: {}", "customers:", "  ac me: {plan: free}"),
			want: []string{
				"catalog.yaml:2: metrics.API_calls: must match ^[a-z0-9][a-z0-9_.-]{0,62}$",
				"catalog.yaml:4: plans.Pro: must match ^[a-z0-9][a-z0-9_.-]{0,62}$",
				"catalog.yaml:6: customers.ac me: must match ^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$",
				`catalog.yaml:6: customers.ac me.plan: plan "free" is not declared`,
			},
		},
		{
			name: "price",
			file: lines("plans:", "  pro:", "    price:", "      currency: usd", "      interval: fortnight"),
			want: []string{
				"catalog.yaml:4: plans.pro.price.currency: must be a three-letter ISO 4217 code in upper case, e.g. USD",
				"catalog.yaml:5: plans.pro.price.interval: must be one of day, week, month, year",
			},
		},
		{
			name: "billing anchor day",
			file: lines("customers:", "  acme:", "    plan: free", "    billing_anchor_day: 31"),
			want: []string{"catalog.yaml:4: customers.acme.billing_anchor_day: must be an integer between 1 and 28"},
		},
		{
			name: "time zone",
			file: lines("customers:", "  acme:", "    plan: free", "    time_zone: Europe/Atlantis"),
			want: []string{`catalog.yaml:4: customers.acme.time_zone: must be an IANA time zone name, e.g. "Europe/Berlin" or "UTC": "Europe/Atlantis" is not in the time zone database`},
		},
		{
			name: "metadata not a mapping",
			file: lines("customers:", "  acme:", "    plan: free", "    metadata: [a, b]"),
			want: []string{"catalog.yaml:4: customers.acme.metadata: must be a mapping, got a list"},
		},
		{
			name: "metadata with an infinite number",
			file: lines("customers:", "  acme:", "    plan: free", "    metadata:", "      weight: .inf"),
			want: []string{`catalog.yaml:5: customers.acme.metadata.weight: must be a finite number, got ".inf"`},
		},
		{
			name: "override expired",
			file: lines(
				"customers:",
				"  acme:",
				"    plan: free",
				"    overrides:",
				"      - metric: exports",
				"        window: day",
				"        limit: 5",
				"        expires_at: 2026-01-01T00:00:00Z",
			),
			want: []string{"catalog.yaml:8: customers.acme.overrides[0].expires_at: must lie in the future"},
		},
		{
			name: "override expiry not a time",
			file: lines("customers:", "  acme:", "    plan: free", "    overrides:", "      - {metric: exports, window: day, limit: 5, expires_at: tomorrow}"),
			want: []string{`catalog.yaml:5: customers.acme.overrides[0].expires_at: must be an RFC 3339 time, e.g. 2027-01-01T00:00:00Z, got "tomorrow"`},
		},
		{
			name: "duplicate override",
			file: lines(
				"customers:",
				"  acme:",
				"    plan: free",
				"    overrides:",
				"      - {metric: exports, window: day, limit: 5}",
				"      - {metric: exports, window: day, limit: 6}",
			),
			want: []string{"catalog.yaml:6: customers.acme.overrides[1]: duplicates overrides[0]: a metric+window+per appears at most once"},
		},
		{
			name: "every problem, in line order",
			file: lines(
				"metrics:",
				"  api_calls:",
				"    capacity: {fortnight: 5}",
				"plans:",
				"  pro:",
				"    limits:",
				"      - {metric: foo, window: day, limit: -1}",
				"customers:",
				"  acme: {plan: gold}",
			),
			want: []string{
				"catalog.yaml:3: metrics.api_calls.capacity.fortnight: must be a window: second, minute, hour, day, week or month",
				"catalog.yaml:7: plans.pro.limits[0].limit: must be an integer between 0 and 9007199254740991",
				`catalog.yaml:7: plans.pro.limits[0].metric: metric "foo" is not declared`,
				`catalog.yaml:9: customers.acme.plan: plan "gold" is not declared`,
			},
		},
		{
			name: "problems of reading and of meaning, at once",
			file: lines(
				"metrics:",
				"  api_calls:",
				`    capacity: {day: "many"}`,
				"plans:",
				"  pro:",
				"    colour: blue",
				"    limits:",
				"      - {metric: foo, window: day, limit: 5}",
				"      - {metric: api_calls, window: day, limit: 100, mode: elastic, ceiling: 50}",
				"      - {metric: api_calls, window: hour, limit: 1.5}",
				"customers:",
				"  acme:",
				"    plan: enterprise",
				"    name: [Acme]",
			),
			want: []string{
				`catalog.yaml:3: metrics.api_calls.capacity.day: must be an integer, got "many"`,
				"catalog.yaml:6: plans.pro.colour: unknown field; known fields: name, description, public, price, limits, features",
				`catalog.yaml:8: plans.pro.limits[0].metric: metric "foo" is not declared`,
				"catalog.yaml:9: plans.pro.limits[1].ceiling: must be at least limit",
				`catalog.yaml:10: plans.pro.limits[2].limit: must be an integer, got "1.5"`,
				`catalog.yaml:13: customers.acme.plan: plan "enterprise" is not declared`,
				"catalog.yaml:14: customers.acme.name: must be a string, got a list",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseAndValidate("catalog.yaml", tt.file, serverCatalog)
			if err == nil {
				t.Fatalf("got no error, want %q", tt.want)
			}
			errs, ok := err.(Errors)
			if !ok {
				t.Fatalf("got %T %v, want Errors", err, err)
			}
			got := strings.Split(errs.Error(), "\n")
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got errors\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func parseAndValidate(name, text string, server *Catalog) (*Catalog, error) {
	doc, err := Parse(name, []byte(text))
	if err != nil {
		return nil, err
	}
	return Validate(doc, server, now)
}

func mustCatalog(t *testing.T, text string, server *Catalog) *Catalog {
	t.Helper()
	c, err := parseAndValidate("catalog.yaml", text, server)
	if err != nil {
		t.Fatalf("catalog:\n%s\n%v", text, err)
	}
	return c
}
