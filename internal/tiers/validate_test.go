package tiers

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestValidKey(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"api_calls", true},
		{"a", true},
		{"0", true},
		{"llm.tokens-v2_x", true},
		{strings.Repeat("a", 63), true},
		{"", false},
		{strings.Repeat("a", 64), false},
		{"API", false},
		{"apiCalls", false},
		{"_api", false},
		{".api", false},
		{"-api", false},
		{"api calls", false},
		{"api/calls", false},
		{"api:calls", false},
		{"api@calls", false},
		{"énergie", false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%q", tc.key), func(t *testing.T) {
			if got := ValidKey(tc.key); got != tc.want {
				t.Errorf("ValidKey(%q) = %v, want %v", tc.key, got, tc.want)
			}
		})
	}
}

func TestValidCustomerID(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{"acme", true},
		{"A", true},
		{"9", true},
		{"Acme-Corp_1.eu:prod@x", true},
		{strings.Repeat("A", 128), true},
		{"", false},
		{strings.Repeat("A", 129), false},
		{"-acme", false},
		{"_acme", false},
		{".acme", false},
		{":acme", false},
		{"@acme", false},
		{"acme corp", false},
		{"acme/1", false},
		{"acme#1", false},
		{"ácme", false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%q", tc.id), func(t *testing.T) {
			if got := ValidCustomerID(tc.id); got != tc.want {
				t.Errorf("ValidCustomerID(%q) = %v, want %v", tc.id, got, tc.want)
			}
		})
	}
}

func TestCheckKeyAndCustomerID(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		wantField string // "" means no error
	}{
		{"valid key", CheckKey("plan", "pro"), ""},
		{"invalid key names its field", CheckKey("plan", "Pro"), "plan"},
		{"invalid metric key", CheckKey("metric", ""), "metric"},
		{"valid customer id", CheckCustomerID("customer", "Acme"), ""},
		{"invalid customer id names its field", CheckCustomerID("customer", "a b"), "customer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.wantField == "" {
				checkFields(t, tc.err)
			} else {
				checkFields(t, tc.err, tc.wantField)
			}
		})
	}
}

func TestMetricSpecValidate(t *testing.T) {
	tests := []struct {
		name       string
		key        string
		spec       MetricSpec
		wantFields []string
	}{
		{name: "empty spec", key: "api_calls"},
		{name: "description and capacity", key: "api_calls", spec: MetricSpec{
			Description: ptr("API calls"),
			Capacity:    map[string]*int64{"second": ptr[int64](5000), "day": ptr[int64](10_000_000)},
		}},
		{name: "capacity bounds inclusive", key: "m", spec: MetricSpec{
			Capacity: map[string]*int64{"minute": ptr[int64](0), "month": ptr(MaxLimit)},
		}},
		{name: "description at max length", key: "m", spec: MetricSpec{Description: ptr(strings.Repeat("é", maxDescriptionLen))}},

		{name: "upper-case key", key: "API", wantFields: []string{"metric"}},
		{name: "empty key", key: "", wantFields: []string{"metric"}},
		{name: "key too long", key: strings.Repeat("a", 64), wantFields: []string{"metric"}},
		{name: "key starting with underscore", key: "_m", wantFields: []string{"metric"}},
		{name: "capacity for unknown window", key: "m", spec: MetricSpec{
			Capacity: map[string]*int64{"year": ptr[int64](1)},
		}, wantFields: []string{"capacity.year"}},
		{name: "no capacity for a total, which is hard only", key: "m", spec: MetricSpec{
			Capacity: map[string]*int64{"total": ptr[int64](1)},
		}, wantFields: []string{"capacity.total"}},
		{name: "capacity window in wrong case", key: "m", spec: MetricSpec{
			Capacity: map[string]*int64{"Day": ptr[int64](1)},
		}, wantFields: []string{"capacity.Day"}},
		{name: "null capacity", key: "m", spec: MetricSpec{
			Capacity: map[string]*int64{"day": nil},
		}, wantFields: []string{"capacity.day"}},
		{name: "negative capacity", key: "m", spec: MetricSpec{
			Capacity: map[string]*int64{"second": ptr[int64](-1)},
		}, wantFields: []string{"capacity.second"}},
		{name: "capacity above 2^53-1", key: "m", spec: MetricSpec{
			Capacity: map[string]*int64{"hour": ptr(MaxLimit + 1)},
		}, wantFields: []string{"capacity.hour"}},
		{name: "description too long", key: "m", spec: MetricSpec{Description: ptr(strings.Repeat("x", maxDescriptionLen+1))},
			wantFields: []string{"description"}},
		{name: "description with NUL", key: "m", spec: MetricSpec{Description: ptr("a\x00b")},
			wantFields: []string{"description"}},
		{name: "description not UTF-8", key: "m", spec: MetricSpec{Description: ptr("a\xffb")},
			wantFields: []string{"description"}},
		{name: "every field wrong", key: "M", spec: MetricSpec{
			Description: ptr("\x00"),
			Capacity:    map[string]*int64{"week": ptr[int64](-5), "fortnight": ptr[int64](1)},
		}, wantFields: []string{"capacity.fortnight", "capacity.week", "description", "metric"}},

		// Credit schemas: the rules a schema keeps on its own.
		{name: "credit schema", key: "credits", spec: MetricSpec{CreditSchema: []CreditRateSpec{
			{Metric: "gpt4_tokens", Credits: ptr[int64](3), Per: ptr[int64](100)},
			{Metric: "images", Credits: ptr[int64](10)},
		}}},
		{name: "empty credit schema", key: "credits", spec: MetricSpec{CreditSchema: []CreditRateSpec{}}},
		{name: "credit rate bounds inclusive", key: "credits", spec: MetricSpec{CreditSchema: []CreditRateSpec{
			{Metric: "a", Credits: ptr[int64](1), Per: ptr(MaxLimit)},
			{Metric: "b", Credits: ptr(MaxLimit), Per: ptr[int64](1)},
		}}},
		{name: "credit schema of 500 entries", key: "credits", spec: MetricSpec{CreditSchema: rates(maxCreditRates)}},
		{name: "credit schema of 501 entries", key: "credits", spec: MetricSpec{CreditSchema: rates(maxCreditRates + 1)},
			wantFields: []string{"credit_schema"}},
		{name: "credit rate without metric", key: "credits", spec: MetricSpec{CreditSchema: []CreditRateSpec{{Credits: ptr[int64](1)}}},
			wantFields: []string{"credit_schema[0].metric"}},
		{name: "credit rate on a bad key", key: "credits", spec: MetricSpec{CreditSchema: []CreditRateSpec{{Metric: "GPT4", Credits: ptr[int64](1)}}},
			wantFields: []string{"credit_schema[0].metric"}},
		{name: "pool naming itself", key: "credits", spec: MetricSpec{CreditSchema: []CreditRateSpec{
			{Metric: "images", Credits: ptr[int64](1)}, {Metric: "credits", Credits: ptr[int64](1)},
		}}, wantFields: []string{"credit_schema[1].metric"}},
		{name: "metric twice in a schema", key: "credits", spec: MetricSpec{CreditSchema: []CreditRateSpec{
			{Metric: "images", Credits: ptr[int64](1)}, {Metric: "gpt4_tokens", Credits: ptr[int64](1)},
			{Metric: "images", Credits: ptr[int64](2), Per: ptr[int64](5)},
		}}, wantFields: []string{"credit_schema[2].metric"}},
		{name: "credit rate without credits", key: "credits", spec: MetricSpec{CreditSchema: []CreditRateSpec{{Metric: "images"}}},
			wantFields: []string{"credit_schema[0].credits"}},
		{name: "credits 0", key: "credits", spec: MetricSpec{CreditSchema: []CreditRateSpec{{Metric: "images", Credits: ptr[int64](0)}}},
			wantFields: []string{"credit_schema[0].credits"}},
		{name: "credits negative", key: "credits", spec: MetricSpec{CreditSchema: []CreditRateSpec{{Metric: "images", Credits: ptr[int64](-3)}}},
			wantFields: []string{"credit_schema[0].credits"}},
		{name: "credits above 2^53-1", key: "credits", spec: MetricSpec{CreditSchema: []CreditRateSpec{{Metric: "images", Credits: ptr(MaxLimit + 1)}}},
			wantFields: []string{"credit_schema[0].credits"}},
		{name: "per 0", key: "credits", spec: MetricSpec{CreditSchema: []CreditRateSpec{{Metric: "images", Credits: ptr[int64](1), Per: ptr[int64](0)}}},
			wantFields: []string{"credit_schema[0].per"}},
		{name: "per above 2^53-1", key: "credits", spec: MetricSpec{CreditSchema: []CreditRateSpec{{Metric: "images", Credits: ptr[int64](1), Per: ptr(MaxLimit + 1)}}},
			wantFields: []string{"credit_schema[0].per"}},
		{name: "every rate field wrong", key: "credits", spec: MetricSpec{CreditSchema: []CreditRateSpec{
			{Metric: "credits", Credits: ptr[int64](0), Per: ptr[int64](-1)},
		}}, wantFields: []string{"credit_schema[0].credits", "credit_schema[0].metric", "credit_schema[0].per"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.spec.Validate(tc.key)
			checkFields(t, err, tc.wantFields...)
		})
	}
}

// rates returns a credit schema of n valid entries.
func rates(n int) []CreditRateSpec {
	out := make([]CreditRateSpec, n)
	for i := range out {
		out[i] = CreditRateSpec{Metric: fmt.Sprintf("m%d", i), Credits: ptr[int64](1)}
	}
	return out
}

func TestMetricSpecValidateResult(t *testing.T) {
	m, err := MetricSpec{
		Description: ptr("tokens"),
		Capacity:    map[string]*int64{"second": ptr[int64](5000), "day": ptr[int64](10_000_000)},
	}.Validate("llm_tokens")
	if err != nil {
		t.Fatalf("Validate: %v", err)
	}
	want := Metric{Key: "llm_tokens", Description: "tokens", Capacity: map[Window]int64{Second: 5000, Day: 10_000_000},
		CreditSchema: []CreditRate{}}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("Validate = %+v, want %+v", m, want)
	}

	m, err = MetricSpec{CreditSchema: []CreditRateSpec{
		{Metric: "gpt4_tokens", Credits: ptr[int64](3), Per: ptr[int64](100)},
		{Metric: "images", Credits: ptr[int64](10)},
	}}.Validate("credits")
	if err != nil {
		t.Fatalf("Validate(credits): %v", err)
	}
	wantRates := []CreditRate{{Metric: "gpt4_tokens", Credits: 3, Per: 100}, {Metric: "images", Credits: 10, Per: 1}}
	if !reflect.DeepEqual(m.CreditSchema, wantRates) {
		t.Errorf("Validate(credits).CreditSchema = %+v, want %+v (per 1 when left out, in the order written)", m.CreditSchema, wantRates)
	}
	if m.Draws != nil {
		t.Errorf("Validate(credits).Draws = %+v, want nil: it is the store's to fill", m.Draws)
	}

	m, err = MetricSpec{}.Validate("m")
	if err != nil {
		t.Fatalf("Validate(empty): %v", err)
	}
	if m.Capacity == nil || len(m.Capacity) != 0 || m.Description != "" || m.CreditSchema == nil || len(m.CreditSchema) != 0 {
		t.Errorf("Validate(empty) = %+v, want empty non-nil capacity and credit schema, and no description", m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"capacity":{},"credit_schema":[]`; !bytes.Contains(b, []byte(want)) {
		t.Errorf("Validate(empty) shows %s, want %s in it: an empty schema is shown as capacity is", b, want)
	}
}

func TestMetricSpecValidateSortsFields(t *testing.T) {
	schema := rates(11)
	schema[2].Credits, schema[10].Per = ptr[int64](0), ptr[int64](0)
	_, err := MetricSpec{
		Description:  ptr("\x00"),
		Capacity:     map[string]*int64{"zz": ptr[int64](1), "aa": ptr[int64](1), "day": ptr[int64](-1)},
		CreditSchema: schema,
	}.Validate("Bad")
	ve, ok := err.(*ValidationError)
	if !ok {
		t.Fatalf("error %v is a %T, want *ValidationError", err, err)
	}
	var got []string
	for _, f := range ve.Fields {
		got = append(got, f.Field)
	}
	want := []string{"capacity.aa", "capacity.day", "capacity.zz", "credit_schema[2].credits", "credit_schema[10].per",
		"description", "metric"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fields in order %q, want %q (map order must not leak into the answer; a list's entries keep theirs)", got, want)
	}
}

// limitSpec returns a valid hard limit spec on metric m for window w.
func limitSpec(m, w string, limit int64) LimitSpec {
	return LimitSpec{Metric: m, Window: w, Limit: ptr(limit)}
}

func TestPlanSpecValidateFields(t *testing.T) {
	tests := []struct {
		name       string
		key        string
		spec       PlanSpec
		wantFields []string
	}{
		{name: "empty spec", key: "free"},
		{name: "spec example", key: "pro", spec: PlanSpec{
			Name:        ptr("Pro"),
			Description: ptr("for teams"),
			Price:       &PriceSpec{AmountCents: ptr[int64](4900), Currency: ptr("USD"), Interval: ptr("month")},
			Limits: []LimitSpec{
				limitSpec("api_calls", "second", 50),
				{Metric: "api_calls", Window: "day", Limit: ptr[int64](100000), Mode: "soft",
					OveragePercent: ptr[int64](20), OveragePriceMicros: ptr[int64](1000)},
			},
		}},
		{name: "name at max length", key: "p", spec: PlanSpec{Name: ptr(strings.Repeat("ü", maxNameLen))}},
		{name: "every interval", key: "p", spec: PlanSpec{Price: &PriceSpec{Interval: ptr("day")}}},
		{name: "interval week", key: "p", spec: PlanSpec{Price: &PriceSpec{Interval: ptr("week")}}},
		{name: "interval year", key: "p", spec: PlanSpec{Price: &PriceSpec{Interval: ptr("year")}}},
		{name: "free price", key: "p", spec: PlanSpec{Price: &PriceSpec{AmountCents: ptr[int64](0)}}},
		{name: "max price", key: "p", spec: PlanSpec{Price: &PriceSpec{AmountCents: ptr(MaxLimit)}}},
		{name: "same metric, different windows", key: "p", spec: PlanSpec{Limits: []LimitSpec{
			limitSpec("m", "second", 1), limitSpec("m", "minute", 1), limitSpec("m", "hour", 1),
			limitSpec("m", "day", 1), limitSpec("m", "week", 1), limitSpec("m", "month", 1),
		}}},
		{name: "same window, different metrics", key: "p", spec: PlanSpec{Limits: []LimitSpec{
			limitSpec("a", "day", 1), limitSpec("b", "day", 1),
		}}},
		{name: "as many limits as allowed", key: "p", spec: PlanSpec{Limits: manyLimits(maxLimitsPerPlan)}},
		{name: "a customer-wide and a per-subject limit on one metric+window", key: "p", spec: PlanSpec{Limits: []LimitSpec{
			limitSpec("m", "day", 1000), perSubject(limitSpec("m", "day", 10)),
		}}},
		{name: "per customer named, beside one per subject", key: "p", spec: PlanSpec{Limits: []LimitSpec{
			perSubject(limitSpec("m", "minute", 10)), withPer(limitSpec("m", "minute", 100), "customer"),
		}}},
		{name: "limits per subject on every window", key: "p", spec: PlanSpec{Limits: []LimitSpec{
			perSubject(limitSpec("m", "second", 1)), perSubject(limitSpec("m", "minute", 1)), perSubject(limitSpec("m", "hour", 1)),
			perSubject(limitSpec("m", "day", 1)), perSubject(limitSpec("m", "week", 1)), perSubject(limitSpec("m", "month", 1)),
		}}},

		{name: "bad key", key: "Pro", wantFields: []string{"plan"}},
		{name: "empty key", key: "", wantFields: []string{"plan"}},
		{name: "empty name", key: "p", spec: PlanSpec{Name: ptr("")}, wantFields: []string{"name"}},
		{name: "blank name", key: "p", spec: PlanSpec{Name: ptr(" \t ")}, wantFields: []string{"name"}},
		{name: "name too long", key: "p", spec: PlanSpec{Name: ptr(strings.Repeat("x", maxNameLen+1))}, wantFields: []string{"name"}},
		{name: "name with NUL", key: "p", spec: PlanSpec{Name: ptr("Pro\x00")}, wantFields: []string{"name"}},
		{name: "description too long", key: "p", spec: PlanSpec{Description: ptr(strings.Repeat("x", maxDescriptionLen+1))},
			wantFields: []string{"description"}},
		{name: "negative price", key: "p", spec: PlanSpec{Price: &PriceSpec{AmountCents: ptr[int64](-1)}},
			wantFields: []string{"price.amount_cents"}},
		{name: "price above 2^53-1", key: "p", spec: PlanSpec{Price: &PriceSpec{AmountCents: ptr(MaxLimit + 1)}},
			wantFields: []string{"price.amount_cents"}},
		{name: "lower-case currency", key: "p", spec: PlanSpec{Price: &PriceSpec{Currency: ptr("usd")}},
			wantFields: []string{"price.currency"}},
		{name: "two-letter currency", key: "p", spec: PlanSpec{Price: &PriceSpec{Currency: ptr("US")}},
			wantFields: []string{"price.currency"}},
		{name: "four-letter currency", key: "p", spec: PlanSpec{Price: &PriceSpec{Currency: ptr("USDT")}},
			wantFields: []string{"price.currency"}},
		{name: "currency with digit", key: "p", spec: PlanSpec{Price: &PriceSpec{Currency: ptr("U5D")}},
			wantFields: []string{"price.currency"}},
		{name: "empty currency", key: "p", spec: PlanSpec{Price: &PriceSpec{Currency: ptr("")}},
			wantFields: []string{"price.currency"}},
		{name: "unknown interval", key: "p", spec: PlanSpec{Price: &PriceSpec{Interval: ptr("quarter")}},
			wantFields: []string{"price.interval"}},
		{name: "empty interval", key: "p", spec: PlanSpec{Price: &PriceSpec{Interval: ptr("")}},
			wantFields: []string{"price.interval"}},
		{name: "too many limits", key: "p", spec: PlanSpec{Limits: manyLimits(maxLimitsPerPlan + 1)},
			wantFields: []string{"limits"}},
		{name: "duplicate metric+window", key: "p", spec: PlanSpec{Limits: []LimitSpec{
			limitSpec("m", "day", 1), limitSpec("m", "day", 2),
		}}, wantFields: []string{"limits[1]"}},
		{name: "duplicate with another mode is still a duplicate", key: "p", spec: PlanSpec{Limits: []LimitSpec{
			limitSpec("m", "hour", 1), limitSpec("x", "hour", 1),
			{Metric: "m", Window: "hour", Limit: ptr[int64](5), Mode: "soft", OveragePercent: ptr[int64](10)},
		}}, wantFields: []string{"limits[2]"}},
		{name: "two per-subject limits on one metric+window", key: "p", spec: PlanSpec{Limits: []LimitSpec{
			perSubject(limitSpec("m", "day", 1)), limitSpec("m", "day", 1), perSubject(limitSpec("m", "day", 2)),
		}}, wantFields: []string{"limits[2]"}},
		{name: "per customer named and left out are the same per", key: "p", spec: PlanSpec{Limits: []LimitSpec{
			limitSpec("m", "day", 1), withPer(limitSpec("m", "day", 2), "customer"),
		}}, wantFields: []string{"limits[1]"}},
		{name: "every copy after the first is reported", key: "p", spec: PlanSpec{Limits: []LimitSpec{
			limitSpec("m", "day", 1), limitSpec("m", "day", 2), limitSpec("m", "day", 3),
		}}, wantFields: []string{"limits[1]", "limits[2]"}},
		{name: "error path carries the limit's index", key: "p", spec: PlanSpec{Limits: []LimitSpec{
			limitSpec("a", "day", 1), limitSpec("b", "day", 1), limitSpec("c", "fortnight", 1),
		}}, wantFields: []string{"limits[2].window"}},
		{name: "several problems at once", key: "P", spec: PlanSpec{
			Name:  ptr(""),
			Price: &PriceSpec{AmountCents: ptr[int64](-5), Currency: ptr("eur"), Interval: ptr("hour")},
			Limits: []LimitSpec{
				{Metric: "", Window: ""},
			},
		}, wantFields: []string{
			"limits[0].limit", "limits[0].metric", "limits[0].window", "name", "plan",
			"price.amount_cents", "price.currency", "price.interval",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.spec.Validate(tc.key)
			checkFields(t, err, tc.wantFields...)
		})
	}
}

// withPer returns l with per set to per.
func withPer(l LimitSpec, per string) LimitSpec {
	l.Per = &per
	return l
}

// perSubject returns l per subject.
func perSubject(l LimitSpec) LimitSpec { return withPer(l, "subject") }

// manyLimits returns n valid limits on distinct metrics.
func manyLimits(n int) []LimitSpec {
	out := make([]LimitSpec, n)
	for i := range out {
		out[i] = limitSpec(fmt.Sprintf("m%d", i), "day", 1)
	}
	return out
}

// TestLimitSpecFields covers each field of one plan limit. The limit is the
// plan's only one, so its fields are named limits[0].<field>.
func TestLimitSpecFields(t *testing.T) {
	tests := []struct {
		name      string
		limit     LimitSpec
		wantField string // "" for a valid limit
	}{
		{"hard with defaults", limitSpec("m", "day", 10), ""},
		{"explicit hard", LimitSpec{Metric: "m", Window: "second", Limit: ptr[int64](1), Mode: "hard"}, ""},
		{"zero limit", limitSpec("m", "day", 0), ""},
		{"limit 2^53-1", limitSpec("m", "day", MaxLimit), ""},
		{"hard with zero overage percent", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](1), OveragePercent: ptr[int64](0)}, ""},
		{"soft without overage", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](1), Mode: "soft"}, ""},
		{"soft with 0 percent", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](1), Mode: "soft", OveragePercent: ptr[int64](0)}, ""},
		{"soft with 1000 percent", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](1), Mode: "soft", OveragePercent: ptr[int64](1000)}, ""},
		{"soft with overage price 0", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](1), Mode: "soft", OveragePriceMicros: ptr[int64](0)}, ""},
		{"soft with overage price 2^53-1", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](1), Mode: "soft", OveragePriceMicros: ptr(MaxLimit)}, ""},
		{"elastic without ceiling", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](10), Mode: "elastic"}, ""},
		{"elastic with ceiling equal to limit", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](10), Mode: "elastic", Ceiling: ptr[int64](10)}, ""},
		{"elastic with ceiling above limit", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](10), Mode: "elastic", Ceiling: ptr(MaxLimit)}, ""},

		{"missing metric", LimitSpec{Window: "day", Limit: ptr[int64](1)}, "metric"},
		{"bad metric key", LimitSpec{Metric: "Api", Window: "day", Limit: ptr[int64](1)}, "metric"},
		{"missing window", LimitSpec{Metric: "m", Limit: ptr[int64](1)}, "window"},
		{"unknown window", LimitSpec{Metric: "m", Window: "year", Limit: ptr[int64](1)}, "window"},
		{"window in wrong case", LimitSpec{Metric: "m", Window: "Day", Limit: ptr[int64](1)}, "window"},
		{"missing limit", LimitSpec{Metric: "m", Window: "day"}, "limit"},
		{"negative limit", limitSpec("m", "day", -1), "limit"},
		{"limit above 2^53-1", limitSpec("m", "day", MaxLimit+1), "limit"},
		{"unknown mode", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](1), Mode: "burst"}, "mode"},
		{"mode in wrong case", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](1), Mode: "Soft"}, "mode"},
		{"overage percent on default hard", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](1), OveragePercent: ptr[int64](10)}, "overage_percent"},
		{"overage percent on elastic", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](1), Mode: "elastic", OveragePercent: ptr[int64](10)}, "overage_percent"},
		{"negative overage percent", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](1), Mode: "soft", OveragePercent: ptr[int64](-1)}, "overage_percent"},
		{"overage percent above 1000", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](1), Mode: "soft", OveragePercent: ptr[int64](1001)}, "overage_percent"},
		{"overage price on hard", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](1), Mode: "hard", OveragePriceMicros: ptr[int64](10)}, "overage_price_micros"},
		{"overage price on elastic", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](1), Mode: "elastic", OveragePriceMicros: ptr[int64](0)}, "overage_price_micros"},
		{"negative overage price", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](1), Mode: "soft", OveragePriceMicros: ptr[int64](-1)}, "overage_price_micros"},
		{"overage price above 2^53-1", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](1), Mode: "soft", OveragePriceMicros: ptr(MaxLimit + 1)}, "overage_price_micros"},
		{"ceiling on hard", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](1), Ceiling: ptr[int64](5)}, "ceiling"},
		{"ceiling on soft", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](1), Mode: "soft", Ceiling: ptr[int64](5)}, "ceiling"},
		{"ceiling below limit", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](10), Mode: "elastic", Ceiling: ptr[int64](9)}, "ceiling"},
		{"negative ceiling", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](0), Mode: "elastic", Ceiling: ptr[int64](-1)}, "ceiling"},
		{"ceiling above 2^53-1", LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](1), Mode: "elastic", Ceiling: ptr(MaxLimit + 1)}, "ceiling"},
		{"per subject", perSubject(limitSpec("m", "day", 10)), ""},
		{"per customer", withPer(limitSpec("m", "day", 10), "customer"), ""},
		{"per subject, token bucket", perSubject(LimitSpec{Metric: "m", Window: "second", Limit: ptr[int64](10),
			Algorithm: ptr("token_bucket"), Burst: ptr[int64](20)}), ""},
		{"unknown per", withPer(limitSpec("m", "day", 10), "user"), "per"},
		{"empty per", withPer(limitSpec("m", "day", 10), ""), "per"},
		{"per in wrong case", withPer(limitSpec("m", "day", 10), "Subject"), "per"},
	}
	tests = append(tests, algorithmCases()...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := PlanSpec{Limits: []LimitSpec{tc.limit}}.Validate("p")
			if tc.wantField == "" {
				checkFields(t, err)
				if len(p.Limits) != 1 {
					t.Errorf("valid limit: plan has %d limits, want 1", len(p.Limits))
				}
				return
			}
			checkFields(t, err, "limits[0]."+tc.wantField)
		})
	}
}

// algorithmCases are the algorithm and burst rows of TestLimitSpecFields;
// TestOverrideSpecAlgorithms runs them as overrides too.
func algorithmCases() []struct {
	name      string
	limit     LimitSpec
	wantField string
} {
	l := func(window string, limit int64, algorithm *string, burst *int64) LimitSpec {
		return LimitSpec{Metric: "m", Window: window, Limit: ptr(limit), Algorithm: algorithm, Burst: burst}
	}
	return []struct {
		name      string
		limit     LimitSpec
		wantField string
	}{
		{"sliding_window named on second", l("second", 10, ptr("sliding_window"), nil), ""},
		{"fixed_window on minute", l("minute", 10, ptr("fixed_window"), nil), ""},
		{"sliding_log on second", l("second", 10, ptr("sliding_log"), nil), ""},
		{"sliding_log at its largest limit", l("minute", MaxLogLimit, ptr("sliding_log"), nil), ""},
		{"sliding_log with limit 0", l("second", 0, ptr("sliding_log"), nil), ""},
		{"token_bucket without burst", l("second", 10, ptr("token_bucket"), nil), ""},
		{"token_bucket with burst 1", l("minute", 10, ptr("token_bucket"), ptr[int64](1)), ""},
		{"token_bucket with burst 2^53-1", l("second", 10, ptr("token_bucket"), ptr(MaxLimit)), ""},
		{"token_bucket with burst below limit", l("second", 100, ptr("token_bucket"), ptr[int64](5)), ""},
		{"token_bucket with limit above 10000", l("second", MaxLimit, ptr("token_bucket"), nil), ""},
		{"token_bucket, soft", LimitSpec{Metric: "m", Window: "second", Limit: ptr[int64](10), Mode: "soft", OveragePercent: ptr[int64](50),
			Algorithm: ptr("token_bucket"), Burst: ptr[int64](20)}, ""},
		{"fixed_window, elastic", LimitSpec{Metric: "m", Window: "minute", Limit: ptr[int64](10), Mode: "elastic", Ceiling: ptr[int64](20),
			Algorithm: ptr("fixed_window")}, ""},
		{"null algorithm and burst on a long window", l("day", 10, nil, nil), ""},
		{"token_bucket, elastic, ceiling at the burst", LimitSpec{Metric: "m", Window: "second", Limit: ptr[int64](10), Mode: "elastic",
			Ceiling: ptr[int64](100), Algorithm: ptr("token_bucket"), Burst: ptr[int64](100)}, ""},
		{"token_bucket, elastic, ceiling below the burst", LimitSpec{Metric: "m", Window: "second", Limit: ptr[int64](10), Mode: "elastic",
			Ceiling: ptr[int64](20), Algorithm: ptr("token_bucket"), Burst: ptr[int64](100)}, "ceiling"},

		{"unknown algorithm", l("second", 10, ptr("leaky_bucket"), nil), "algorithm"},
		{"empty algorithm", l("second", 10, ptr(""), nil), "algorithm"},
		{"algorithm in wrong case", l("minute", 10, ptr("Token_Bucket"), nil), "algorithm"},
		{"algorithm on hour", l("hour", 10, ptr("fixed_window"), nil), "algorithm"},
		{"default algorithm named on day", l("day", 10, ptr("sliding_window"), nil), "algorithm"},
		{"token_bucket on week", l("week", 10, ptr("token_bucket"), nil), "algorithm"},
		{"sliding_log on month", l("month", 10, ptr("sliding_log"), nil), "algorithm"},
		{"token_bucket with burst on month names the algorithm only", l("month", 10, ptr("token_bucket"), ptr[int64](5)), "algorithm"},
		{"burst without algorithm", l("second", 10, nil, ptr[int64](5)), "burst"},
		{"burst with sliding_window", l("second", 10, ptr("sliding_window"), ptr[int64](5)), "burst"},
		{"burst with fixed_window", l("minute", 10, ptr("fixed_window"), ptr[int64](5)), "burst"},
		{"burst with sliding_log", l("second", 10, ptr("sliding_log"), ptr[int64](5)), "burst"},
		{"burst on a long window", l("day", 10, nil, ptr[int64](5)), "burst"},
		{"burst 0", l("second", 10, ptr("token_bucket"), ptr[int64](0)), "burst"},
		{"negative burst", l("second", 10, ptr("token_bucket"), ptr[int64](-1)), "burst"},
		{"burst above 2^53-1", l("second", 10, ptr("token_bucket"), ptr(MaxLimit+1)), "burst"},
		{"sliding_log above its largest limit", l("second", MaxLogLimit+1, ptr("sliding_log"), nil), "limit"},
		{"sliding_log with limit 2^53-1", l("minute", MaxLimit, ptr("sliding_log"), nil), "limit"},
	}
}

// An override is one limit: the same rules name the same fields, without
// the limits[0]. prefix.
func TestOverrideSpecAlgorithms(t *testing.T) {
	for _, tc := range algorithmCases() {
		t.Run(tc.name, func(t *testing.T) {
			spec := OverrideSpec{Limit: tc.limit.Limit, Mode: tc.limit.Mode, OveragePercent: tc.limit.OveragePercent,
				Ceiling: tc.limit.Ceiling, Algorithm: tc.limit.Algorithm, Burst: tc.limit.Burst}
			_, err := spec.Validate("acme", "api_calls", tc.limit.Window, "", t0)
			if tc.wantField == "" {
				checkFields(t, err)
			} else {
				checkFields(t, err, tc.wantField)
			}
		})
	}
}

// Each rule's message, as the API returns it.
func TestAlgorithmMessages(t *testing.T) {
	tests := []struct {
		spec LimitSpec
		want FieldError
	}{
		{LimitSpec{Metric: "m", Window: "second", Limit: ptr[int64](1), Algorithm: ptr("leaky_bucket")},
			FieldError{"limits[0].algorithm", "must be one of sliding_window, fixed_window, sliding_log, token_bucket"}},
		{LimitSpec{Metric: "m", Window: "day", Limit: ptr[int64](1), Algorithm: ptr("sliding_window")},
			FieldError{"limits[0].algorithm", "applies only to short windows: second, minute"}},
		{LimitSpec{Metric: "m", Window: "second", Limit: ptr[int64](1), Burst: ptr[int64](2)},
			FieldError{"limits[0].burst", "applies only to algorithm token_bucket"}},
		{LimitSpec{Metric: "m", Window: "second", Limit: ptr[int64](1), Algorithm: ptr("token_bucket"), Burst: ptr[int64](0)},
			FieldError{"limits[0].burst", "must be an integer between 1 and 9007199254740991"}},
		{LimitSpec{Metric: "m", Window: "second", Limit: ptr[int64](10001), Algorithm: ptr("sliding_log")},
			FieldError{"limits[0].limit", "must be at most 10000 with algorithm sliding_log"}},
		{LimitSpec{Metric: "seats", Window: "total", Limit: ptr[int64](10), Mode: "soft"},
			FieldError{"limits[0].mode", "must be hard on window total"}},
		{LimitSpec{Metric: "seats", Window: "total", Limit: ptr[int64](10), Mode: "elastic"},
			FieldError{"limits[0].mode", "must be hard on window total"}},
		{LimitSpec{Metric: "seats", Window: "total", Limit: ptr[int64](10), Algorithm: ptr("fixed_window")},
			FieldError{"limits[0].algorithm", "applies only to short windows: second, minute"}},
	}
	for _, tc := range tests {
		_, err := PlanSpec{Limits: []LimitSpec{tc.spec}}.Validate("p")
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0] != tc.want {
			t.Errorf("Validate(%+v) = %v, want %+v", tc.spec, err, tc.want)
		}
	}
}

func TestPlanSpecValidateResult(t *testing.T) {
	tests := []struct {
		name string
		key  string
		spec PlanSpec
		want Plan
	}{
		{
			name: "defaults: name is the key, price 0 USD per month, no limits",
			key:  "free",
			want: Plan{Features: map[string]FeatureValue{}, Key: "free", Name: "free", Price: Price{Currency: "USD", Interval: "month"}, Limits: []Limit{}},
		},
		{
			name: "partial price keeps the other defaults",
			key:  "eu",
			spec: PlanSpec{Price: &PriceSpec{Currency: ptr("EUR")}},
			want: Plan{Features: map[string]FeatureValue{}, Key: "eu", Name: "eu", Price: Price{Currency: "EUR", Interval: "month"}, Limits: []Limit{}},
		},
		{
			name: "every mode converted",
			key:  "pro",
			spec: PlanSpec{
				Name:        ptr("Pro"),
				Description: ptr("for teams"),
				Price:       &PriceSpec{AmountCents: ptr[int64](4900), Currency: ptr("USD"), Interval: ptr("year")},
				Limits: []LimitSpec{
					limitSpec("api_calls", "second", 50),
					{Metric: "api_calls", Window: "day", Limit: ptr[int64](100000), Mode: "soft",
						OveragePercent: ptr[int64](20), OveragePriceMicros: ptr[int64](1000)},
					{Metric: "exports", Window: "month", Limit: ptr[int64](10), Mode: "elastic", Ceiling: ptr[int64](15)},
					{Metric: "exports", Window: "minute", Limit: ptr[int64](3), Mode: "hard", OveragePercent: ptr[int64](0)},
				},
			},
			want: Plan{Features: map[string]FeatureValue{},
				Key: "pro", Name: "Pro", Description: "for teams",
				Price: Price{AmountCents: 4900, Currency: "USD", Interval: "year"},
				Limits: []Limit{
					{Metric: "api_calls", Window: Second, Limit: 50, Mode: Hard},
					{Metric: "api_calls", Window: Day, Limit: 100000, Mode: Soft, OveragePercent: 20, OveragePriceMicros: ptr[int64](1000)},
					{Metric: "exports", Window: Month, Limit: 10, Mode: Elastic, Ceiling: ptr[int64](15)},
					{Metric: "exports", Window: Minute, Limit: 3, Mode: Hard},
				},
			},
		},
		{
			name: "every algorithm converted, null as not set",
			key:  "rates",
			spec: PlanSpec{Limits: []LimitSpec{
				{Metric: "a", Window: "second", Limit: ptr[int64](5), Algorithm: ptr("sliding_window")},
				{Metric: "a", Window: "minute", Limit: ptr[int64](50), Algorithm: ptr("fixed_window")},
				{Metric: "b", Window: "second", Limit: ptr[int64](MaxLogLimit), Algorithm: ptr("sliding_log")},
				{Metric: "b", Window: "minute", Limit: ptr[int64](60), Algorithm: ptr("token_bucket"), Burst: ptr[int64](10)},
				{Metric: "c", Window: "second", Limit: ptr[int64](7), Mode: "soft", Algorithm: ptr("token_bucket")},
				{Metric: "c", Window: "day", Limit: ptr[int64](700), Algorithm: nil, Burst: nil},
			}},
			want: Plan{Features: map[string]FeatureValue{},
				Key: "rates", Name: "rates", Price: Price{Currency: "USD", Interval: "month"},
				Limits: []Limit{
					{Metric: "a", Window: Second, Limit: 5, Mode: Hard, Algorithm: SlidingWindow},
					{Metric: "a", Window: Minute, Limit: 50, Mode: Hard, Algorithm: FixedWindow},
					{Metric: "b", Window: Second, Limit: MaxLogLimit, Mode: Hard, Algorithm: SlidingLog},
					{Metric: "b", Window: Minute, Limit: 60, Mode: Hard, Algorithm: TokenBucket, Burst: ptr[int64](10)},
					{Metric: "c", Window: Second, Limit: 7, Mode: Soft, Algorithm: TokenBucket},
					{Metric: "c", Window: Day, Limit: 700, Mode: Hard},
				},
			},
		},
		{
			name: "per converted, customer when left out or null",
			key:  "per",
			spec: PlanSpec{Limits: []LimitSpec{
				limitSpec("a", "day", 1000),
				perSubject(limitSpec("a", "day", 10)),
				withPer(limitSpec("a", "minute", 100), "customer"),
				perSubject(LimitSpec{Metric: "a", Window: "minute", Limit: ptr[int64](5), Algorithm: ptr("token_bucket")}),
			}},
			want: Plan{Features: map[string]FeatureValue{},
				Key: "per", Name: "per", Price: Price{Currency: "USD", Interval: "month"},
				Limits: []Limit{
					{Metric: "a", Window: Day, Limit: 1000, Mode: Hard},
					{Metric: "a", Window: Day, Limit: 10, Mode: Hard, Per: PerSubject},
					{Metric: "a", Window: Minute, Limit: 100, Mode: Hard, Per: PerCustomer},
					{Metric: "a", Window: Minute, Limit: 5, Mode: Hard, Algorithm: TokenBucket, Per: PerSubject},
				},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.spec.Validate(tc.key)
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Validate =\n  %+v\nwant\n  %+v", got, tc.want)
			}
		})
	}
}

// TestPlanSpecMoneyIsInteger checks that the money fields only decode from
// JSON integers, so a price can never be a fraction of a cent.
func TestPlanSpecMoneyIsInteger(t *testing.T) {
	const ok = `{"price": {"amount_cents": 4900, "currency": "EUR", "interval": "year"},
		"limits": [{"metric": "m", "window": "day", "limit": 5, "mode": "soft", "overage_price_micros": 1500}]}`
	var s PlanSpec
	if err := json.Unmarshal([]byte(ok), &s); err != nil {
		t.Fatalf("decode integer money: %v", err)
	}
	p, err := s.Validate("pro")
	if err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if want := (Price{AmountCents: 4900, Currency: "EUR", Interval: "year"}); p.Price != want {
		t.Errorf("price = %+v, want %+v", p.Price, want)
	}
	if got := p.Limits[0].OveragePriceMicros; got == nil || *got != 1500 {
		t.Errorf("overage_price_micros = %v, want 1500", got)
	}

	bad := map[string]string{
		"fractional cents":        `{"price": {"amount_cents": 49.5}}`,
		"cents as string":         `{"price": {"amount_cents": "4900"}}`,
		"exponent cents":          `{"price": {"amount_cents": 4.9e3}}`,
		"fractional micros":       `{"limits": [{"metric": "m", "window": "day", "limit": 1, "mode": "soft", "overage_price_micros": 0.5}]}`,
		"fractional limit":        `{"limits": [{"metric": "m", "window": "day", "limit": 1.5}]}`,
		"fractional overage rate": `{"limits": [{"metric": "m", "window": "day", "limit": 1, "mode": "soft", "overage_percent": 12.5}]}`,
	}
	for name, body := range bad {
		t.Run(name, func(t *testing.T) {
			var s PlanSpec
			if err := json.Unmarshal([]byte(body), &s); err == nil {
				t.Errorf("decoding %s succeeded (%+v), want an error", body, s)
			}
		})
	}
}

// specNow is the time customer specs are validated at.
var specNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func TestCustomerSpecValidateFields(t *testing.T) {
	tests := []struct {
		name       string
		id         string
		spec       CustomerSpec
		wantFields []string
	}{
		{name: "plan only", id: "acme", spec: CustomerSpec{Plan: ptr("pro")}},
		{name: "all fields", id: "Acme-1:eu@prod", spec: CustomerSpec{
			Plan: ptr("pro"), Name: ptr("Acme"), BillingAnchorDay: ptr[int64](15),
			Metadata: json.RawMessage(`{"tier": "gold", "seats": 12, "tags": ["a", "b"], "nested": {"x": null}}`),
		}},
		{name: "anchor day 1", id: "a", spec: CustomerSpec{Plan: ptr("p"), BillingAnchorDay: ptr[int64](1)}},
		{name: "anchor day 28", id: "a", spec: CustomerSpec{Plan: ptr("p"), BillingAnchorDay: ptr[int64](28)}},
		{name: "name at max length", id: "a", spec: CustomerSpec{Plan: ptr("p"), Name: ptr(strings.Repeat("ß", maxNameLen))}},
		{name: "empty name is allowed", id: "a", spec: CustomerSpec{Plan: ptr("p"), Name: ptr("")}},
		{name: "id of 128 characters", id: strings.Repeat("x", 128), spec: CustomerSpec{Plan: ptr("p")}},

		{name: "empty id", id: "", spec: CustomerSpec{Plan: ptr("p")}, wantFields: []string{"customer"}},
		{name: "id too long", id: strings.Repeat("x", 129), spec: CustomerSpec{Plan: ptr("p")}, wantFields: []string{"customer"}},
		{name: "id with space", id: "acme corp", spec: CustomerSpec{Plan: ptr("p")}, wantFields: []string{"customer"}},
		{name: "id starting with dash", id: "-acme", spec: CustomerSpec{Plan: ptr("p")}, wantFields: []string{"customer"}},
		{name: "missing plan", id: "a", wantFields: []string{"plan"}},
		{name: "empty plan", id: "a", spec: CustomerSpec{Plan: ptr("")}, wantFields: []string{"plan"}},
		{name: "bad plan key", id: "a", spec: CustomerSpec{Plan: ptr("Pro")}, wantFields: []string{"plan"}},
		{name: "name too long", id: "a", spec: CustomerSpec{Plan: ptr("p"), Name: ptr(strings.Repeat("x", maxNameLen+1))},
			wantFields: []string{"name"}},
		{name: "name with NUL", id: "a", spec: CustomerSpec{Plan: ptr("p"), Name: ptr("\x00")}, wantFields: []string{"name"}},
		{name: "anchor day 0", id: "a", spec: CustomerSpec{Plan: ptr("p"), BillingAnchorDay: ptr[int64](0)},
			wantFields: []string{"billing_anchor_day"}},
		{name: "negative anchor day", id: "a", spec: CustomerSpec{Plan: ptr("p"), BillingAnchorDay: ptr[int64](-1)},
			wantFields: []string{"billing_anchor_day"}},
		{name: "anchor day 29", id: "a", spec: CustomerSpec{Plan: ptr("p"), BillingAnchorDay: ptr[int64](29)},
			wantFields: []string{"billing_anchor_day"}},
		{name: "anchor day 30", id: "a", spec: CustomerSpec{Plan: ptr("p"), BillingAnchorDay: ptr[int64](30)},
			wantFields: []string{"billing_anchor_day"}},
		{name: "anchor day 31", id: "a", spec: CustomerSpec{Plan: ptr("p"), BillingAnchorDay: ptr[int64](31)},
			wantFields: []string{"billing_anchor_day"}},
		{name: "anchor day that would overflow int32", id: "a", spec: CustomerSpec{Plan: ptr("p"), BillingAnchorDay: ptr[int64](1 << 32)},
			wantFields: []string{"billing_anchor_day"}},
		{name: "bad metadata", id: "a", spec: CustomerSpec{Plan: ptr("p"), Metadata: json.RawMessage(`[1]`)},
			wantFields: []string{"metadata"}},
		{name: "unknown time zone", id: "a", spec: CustomerSpec{Plan: ptr("p"), TimeZone: ptr("Mars/Olympus_Mons")},
			wantFields: []string{"time_zone"}},
		{name: "empty time zone", id: "a", spec: CustomerSpec{Plan: ptr("p"), TimeZone: ptr("")}, wantFields: []string{"time_zone"}},
		{name: "the host's zone is no IANA name", id: "a", spec: CustomerSpec{Plan: ptr("p"), TimeZone: ptr("Local")},
			wantFields: []string{"time_zone"}},
		{name: "an offset is no IANA name", id: "a", spec: CustomerSpec{Plan: ptr("p"), TimeZone: ptr("+01:00")},
			wantFields: []string{"time_zone"}},
		{name: "a path out of the database", id: "a", spec: CustomerSpec{Plan: ptr("p"), TimeZone: ptr("../../etc/passwd")},
			wantFields: []string{"time_zone"}},
		{name: "an absolute path", id: "a", spec: CustomerSpec{Plan: ptr("p"), TimeZone: ptr("/usr/share/zoneinfo/UTC")},
			wantFields: []string{"time_zone"}},
		{name: "an empty segment", id: "a", spec: CustomerSpec{Plan: ptr("p"), TimeZone: ptr("Europe//Berlin")},
			wantFields: []string{"time_zone"}},
		{name: "a time zone too long", id: "a", spec: CustomerSpec{Plan: ptr("p"), TimeZone: ptr("Europe/" + strings.Repeat("x", 80))},
			wantFields: []string{"time_zone"}},
		{name: "everything wrong", id: "", spec: CustomerSpec{
			Name: ptr("\xff"), BillingAnchorDay: ptr[int64](99), Metadata: json.RawMessage(`"x"`), TimeZone: ptr("Nowhere"),
		}, wantFields: []string{"billing_anchor_day", "customer", "metadata", "name", "plan", "time_zone"}},
		{name: "suspended with a reason", id: "a", spec: CustomerSpec{Plan: ptr("p"), Status: ptr("suspended"), StatusReason: ptr("card declined")}},
		{name: "active", id: "a", spec: CustomerSpec{Plan: ptr("p"), Status: ptr("active")}},
		{name: "unknown status", id: "a", spec: CustomerSpec{Plan: ptr("p"), Status: ptr("frozen")},
			wantFields: []string{"status"}},
		{name: "reason too long", id: "a", spec: CustomerSpec{Plan: ptr("p"), Status: ptr("suspended"), StatusReason: ptr(strings.Repeat("x", 501))},
			wantFields: []string{"status_reason"}},
		{name: "reason of an active customer", id: "a", spec: CustomerSpec{Plan: ptr("p"), StatusReason: ptr("why")},
			wantFields: []string{"status_reason"}},
		{name: "trial", id: "a", spec: CustomerSpec{Plan: ptr("free"), Trial: &TrialSpec{Plan: ptr("pro"), EndsAt: ptr(specNow.Add(time.Hour))}}},
		{name: "trial of no plan", id: "a", spec: CustomerSpec{Plan: ptr("free"), Trial: &TrialSpec{EndsAt: ptr(specNow.Add(time.Hour))}},
			wantFields: []string{"trial.plan"}},
		{name: "trial of its own plan", id: "a", spec: CustomerSpec{Plan: ptr("free"), Trial: &TrialSpec{Plan: ptr("free"), EndsAt: ptr(specNow.Add(time.Hour))}},
			wantFields: []string{"trial.plan"}},
		{name: "trial without an end", id: "a", spec: CustomerSpec{Plan: ptr("free"), Trial: &TrialSpec{Plan: ptr("pro")}},
			wantFields: []string{"trial.ends_at"}},
		{name: "trial ended", id: "a", spec: CustomerSpec{Plan: ptr("free"), Trial: &TrialSpec{Plan: ptr("pro"), EndsAt: ptr(specNow)}},
			wantFields: []string{"trial.ends_at"}},
		{name: "trial ending within a second", id: "a", spec: CustomerSpec{Plan: ptr("free"), Trial: &TrialSpec{Plan: ptr("pro"), EndsAt: ptr(specNow.Add(1500 * time.Millisecond))}},
			wantFields: []string{"trial.ends_at"}},
		{name: "scheduled change", id: "a", spec: CustomerSpec{Plan: ptr("free"), ScheduledChange: &ScheduledChangeSpec{Plan: ptr("pro"), At: ptr("2026-12-01T00:00:00Z")}}},
		{name: "scheduled change at period end", id: "a", spec: CustomerSpec{Plan: ptr("free"), ScheduledChange: &ScheduledChangeSpec{Plan: ptr("pro"), At: ptr("period_end")}}},
		{name: "scheduled change in the past", id: "a", spec: CustomerSpec{Plan: ptr("free"), ScheduledChange: &ScheduledChangeSpec{Plan: ptr("pro"), At: ptr("2026-11-01T00:00:00Z")}},
			wantFields: []string{"scheduled_change.at"}},
		{name: "scheduled change at no time", id: "a", spec: CustomerSpec{Plan: ptr("free"), ScheduledChange: &ScheduledChangeSpec{Plan: ptr("pro"), At: ptr("tomorrow")}},
			wantFields: []string{"scheduled_change.at"}},
		{name: "scheduled change without at", id: "a", spec: CustomerSpec{Plan: ptr("free"), ScheduledChange: &ScheduledChangeSpec{Plan: ptr("pro")}},
			wantFields: []string{"scheduled_change.at"}},
		{name: "scheduled change to a bad key", id: "a", spec: CustomerSpec{Plan: ptr("free"), ScheduledChange: &ScheduledChangeSpec{Plan: ptr("Pro"), At: ptr("period_end")}},
			wantFields: []string{"scheduled_change.plan"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.spec.Validate(tc.id, specNow)
			checkFields(t, err, tc.wantFields...)
		})
	}
}

func TestCustomerSpecValidateResult(t *testing.T) {
	tests := []struct {
		name         string
		spec         CustomerSpec
		wantName     string
		wantDay      int // 0: no billing anchor day
		wantMetadata string
		wantZone     string // "": UTC
	}{
		{name: "no time zone is UTC", spec: CustomerSpec{Plan: ptr("pro")}, wantMetadata: `{}`},
		{name: "an IANA time zone", spec: CustomerSpec{Plan: ptr("pro"), TimeZone: ptr("Europe/Berlin")}, wantMetadata: `{}`,
			wantZone: "Europe/Berlin"},
		{name: "UTC by its name", spec: CustomerSpec{Plan: ptr("pro"), TimeZone: ptr("UTC")}, wantMetadata: `{}`},
		{name: "a zone with a plus", spec: CustomerSpec{Plan: ptr("pro"), TimeZone: ptr("Etc/GMT+5")}, wantMetadata: `{}`,
			wantZone: "Etc/GMT+5"},
		{name: "no metadata is an empty object", spec: CustomerSpec{Plan: ptr("pro")}, wantMetadata: `{}`},
		{name: "null metadata is an empty object", spec: CustomerSpec{Plan: ptr("pro"), Metadata: json.RawMessage(`null`)},
			wantMetadata: `{}`},
		{name: "null metadata with spaces", spec: CustomerSpec{Plan: ptr("pro"), Metadata: json.RawMessage(" \n null \t")},
			wantMetadata: `{}`},
		{name: "metadata is re-encoded compactly with sorted keys",
			spec:         CustomerSpec{Plan: ptr("pro"), Metadata: json.RawMessage(`{ "b": 1.50, "a": [true, null, "x"] }`)},
			wantMetadata: `{"a":[true,null,"x"],"b":1.50}`},
		{name: "large numbers keep their digits",
			spec:         CustomerSpec{Plan: ptr("pro"), Metadata: json.RawMessage(`{"n": 123456789012345678901234567890, "e": 1e300}`)},
			wantMetadata: `{"e":1e300,"n":123456789012345678901234567890}`},
		{name: "name and anchor day",
			spec:     CustomerSpec{Plan: ptr("pro"), Name: ptr("Acme"), BillingAnchorDay: ptr[int64](28)},
			wantName: "Acme", wantDay: 28, wantMetadata: `{}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.spec.Validate("acme", specNow)
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if c.ID != "acme" || c.Plan != "pro" || c.Name != tc.wantName {
				t.Errorf("id, plan, name = %q, %q, %q, want %q, %q, %q", c.ID, c.Plan, c.Name, "acme", "pro", tc.wantName)
			}
			if string(c.Metadata) != tc.wantMetadata {
				t.Errorf("metadata = %s, want %s", c.Metadata, tc.wantMetadata)
			}
			if c.Anchor.Day != tc.wantDay {
				t.Errorf("Anchor.Day = %d, want %d", c.Anchor.Day, tc.wantDay)
			}
			wantZone := cmp.Or(tc.wantZone, "UTC")
			if c.TimeZone != wantZone || c.Anchor.ZoneName() != wantZone {
				t.Errorf("TimeZone, Anchor's zone = %q, %q, want %q", c.TimeZone, c.Anchor.ZoneName(), wantZone)
			}
			if c.Anchor.PinnedDay.Set() || c.Anchor.PinnedWeek.Set() || c.Anchor.PinnedMonth.Set() {
				t.Errorf("a new customer's anchor is pinned: %+v", c.Anchor)
			}
			switch {
			case tc.wantDay == 0 && c.BillingAnchorDay != nil:
				t.Errorf("BillingAnchorDay = %d, want nil", *c.BillingAnchorDay)
			case tc.wantDay != 0 && (c.BillingAnchorDay == nil || *c.BillingAnchorDay != tc.wantDay):
				t.Errorf("BillingAnchorDay = %v, want %d", c.BillingAnchorDay, tc.wantDay)
			}
		})
	}
}

// nested returns a JSON object nested depth levels deep around leaf.
func nested(depth int, leaf string) string {
	return strings.Repeat(`{"a":`, depth) + leaf + strings.Repeat(`}`, depth)
}

func TestCustomerMetadata(t *testing.T) {
	tests := []struct {
		name     string
		metadata string
		valid    bool
	}{
		{"empty object", `{}`, true},
		{"strings, numbers, bools, arrays", `{"s": "x", "n": -1.5e-3, "b": false, "a": [1, [2, {"c": 3}]]}`, true},
		{"escaped unicode", `{"s": "caf\u00e9 \ud83d\ude00"}`, true},
		{"moderate nesting", nested(maxMetadataDepth, `1`), true},
		{"exponent at the bound", `{"n": 1e1000}`, true},
		{"negative exponent at the bound", `{"n": 1E-1000}`, true},
		{"explicit plus exponent", `{"n": 2.5e+1000}`, true},
		{"1000 decimals", `{"n": 0.` + strings.Repeat("1", maxNumberScale) + `}`, true},
		{"number in array at the bound", `{"a": [1e-1000]}`, true},

		{"array", `[]`, false},
		{"string", `"acme"`, false},
		{"number", `42`, false},
		{"boolean", `true`, false},
		{"not JSON", `{tier: gold}`, false},
		{"truncated", `{"a": 1`, false},
		{"empty input after spaces", `   `, false},
		{"NUL in a string", `{"s": "a\u0000b"}`, false},
		{"NUL in a key", `{"a\u0000": 1}`, false},
		{"NUL in a nested array", `{"a": [["\u0000"]]}`, false},
		{"nesting too deep", nested(maxMetadataDepth+8, `1`), false},
		{"arrays nested too deep", `{"a":` + strings.Repeat(`[`, maxMetadataDepth+8) + strings.Repeat(`]`, maxMetadataDepth+8) + `}`, false},
		{"exponent above the bound", `{"n": 1e1001}`, false},
		{"exponent below the bound", `{"n": 1e-1001}`, false},
		{"exponent overflowing int", `{"n": 1e99999999999999999999}`, false},
		{"too many decimals", `{"n": 0.` + strings.Repeat("1", maxNumberScale+1) + `}`, false},
		{"bad number deep inside", `{"a": {"b": [1, 2, 3e5000]}}`, false},
		{"two objects", `{} {}`, false},
		{"object then garbage", `{"a": 1} x`, false},
		{"object then a NUL the decoder would skip", `{"a": 1} {"b": "\u0000"}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := CustomerSpec{Plan: ptr("p"), Metadata: json.RawMessage(tc.metadata)}.Validate("acme", specNow)
			if !tc.valid {
				checkFields(t, err, "metadata")
				return
			}
			checkFields(t, err)
			if !json.Valid(c.Metadata) {
				t.Errorf("normalized metadata %s is not valid JSON", c.Metadata)
			}
			a, b := decodeExact(t, []byte(tc.metadata)), decodeExact(t, c.Metadata)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("normalized metadata %s does not mean the same as %s", c.Metadata, tc.metadata)
			}
		})
	}
}

// decodeExact decodes JSON keeping numbers as written.
func decodeExact(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func TestStorableNumber(t *testing.T) {
	tests := []struct {
		n    string
		want bool
	}{
		{"0", true},
		{"-12", true},
		{"3.14", true},
		{"1e1000", true},
		{"1E1000", true},
		{"1e+1000", true},
		{"1e-1000", true},
		{"-0." + strings.Repeat("9", maxNumberScale) + "e-1000", true},
		{"1" + strings.Repeat("0", 5000), true}, // many integer digits: no scale
		{"1e1001", false},
		{"1E-1001", false},
		{"1e+1001", false},
		{"1e9223372036854775808", false},
		{"0." + strings.Repeat("0", maxNumberScale) + "1", false},
	}
	for _, tc := range tests {
		name := tc.n
		if len(name) > 24 {
			name = name[:24] + fmt.Sprintf("...(%d chars)", len(tc.n))
		}
		t.Run(name, func(t *testing.T) {
			if got := storableNumber(tc.n); got != tc.want {
				t.Errorf("storableNumber(%s) = %v, want %v", name, got, tc.want)
			}
		})
	}
}

func TestOverrideSpecValidateFields(t *testing.T) {
	hour := t0.Add(time.Hour)
	tests := []struct {
		name       string
		args       string // customer/metric/window[/per]; "" means acme/api_calls/day
		spec       OverrideSpec
		wantFields []string
	}{
		{name: "limit only", spec: OverrideSpec{Limit: ptr[int64](5000)}},
		{name: "spec example", spec: OverrideSpec{Limit: ptr[int64](5000), Mode: "soft", OveragePercent: ptr[int64](10),
			ExpiresAt: &hour, Reason: ptr("launch week")}},
		{name: "elastic with ceiling", spec: OverrideSpec{Limit: ptr[int64](10), Mode: "elastic", Ceiling: ptr[int64](20)}},
		{name: "zero limit", spec: OverrideSpec{Limit: ptr[int64](0)}},
		{name: "expires one nanosecond from now", spec: OverrideSpec{Limit: ptr[int64](1), ExpiresAt: ptr(t0.Add(time.Nanosecond))}},
		{name: "reason at max length", spec: OverrideSpec{Limit: ptr[int64](1), Reason: ptr(strings.Repeat("ä", maxReasonLen))}},
		{name: "week window", args: "acme/api_calls/week", spec: OverrideSpec{Limit: ptr[int64](1)}},
		{name: "addressed per subject", args: "acme/api_calls/day/subject", spec: OverrideSpec{Limit: ptr[int64](1)}},
		{name: "addressed per customer", args: "acme/api_calls/day/customer", spec: OverrideSpec{Limit: ptr[int64](1)}},
		{name: "body repeats per subject", args: "acme/api_calls/day/subject", spec: OverrideSpec{Limit: ptr[int64](1), Per: ptr("subject")}},
		{name: "body repeats the default per", spec: OverrideSpec{Limit: ptr[int64](1), Per: ptr("customer")}},
		{name: "body repeats per customer", args: "acme/api_calls/day/customer", spec: OverrideSpec{Limit: ptr[int64](1), Per: ptr("customer")}},

		{name: "unknown per in the address", args: "acme/api_calls/day/user", spec: OverrideSpec{Limit: ptr[int64](1)}, wantFields: []string{"per"}},
		{name: "per in the address in upper case", args: "acme/api_calls/day/Subject", spec: OverrideSpec{Limit: ptr[int64](1)}, wantFields: []string{"per"}},
		{name: "body per subject, addressed per customer", spec: OverrideSpec{Limit: ptr[int64](1), Per: ptr("subject")}, wantFields: []string{"per"}},
		{name: "body per customer, addressed per subject", args: "acme/api_calls/day/subject", spec: OverrideSpec{Limit: ptr[int64](1), Per: ptr("customer")},
			wantFields: []string{"per"}},
		{name: "unknown per in the body", spec: OverrideSpec{Limit: ptr[int64](1), Per: ptr("")}, wantFields: []string{"per"}},
		{name: "unknown per in both, reported once", args: "acme/api_calls/day/user", spec: OverrideSpec{Limit: ptr[int64](1), Per: ptr("subject")},
			wantFields: []string{"per"}},

		{name: "bad customer", args: "a b/api_calls/day", spec: OverrideSpec{Limit: ptr[int64](1)}, wantFields: []string{"customer"}},
		{name: "bad metric", args: "acme/API/day", spec: OverrideSpec{Limit: ptr[int64](1)}, wantFields: []string{"metric"}},
		{name: "unknown window", args: "acme/api_calls/year", spec: OverrideSpec{Limit: ptr[int64](1)}, wantFields: []string{"window"}},
		{name: "missing limit", wantFields: []string{"limit"}},
		{name: "negative limit", spec: OverrideSpec{Limit: ptr[int64](-1)}, wantFields: []string{"limit"}},
		{name: "limit above 2^53-1", spec: OverrideSpec{Limit: ptr(MaxLimit + 1)}, wantFields: []string{"limit"}},
		{name: "unknown mode", spec: OverrideSpec{Limit: ptr[int64](1), Mode: "HARD"}, wantFields: []string{"mode"}},
		{name: "overage percent on hard", spec: OverrideSpec{Limit: ptr[int64](1), OveragePercent: ptr[int64](10)},
			wantFields: []string{"overage_percent"}},
		{name: "overage percent above 1000", spec: OverrideSpec{Limit: ptr[int64](1), Mode: "soft", OveragePercent: ptr[int64](1001)},
			wantFields: []string{"overage_percent"}},
		{name: "overage price on elastic", spec: OverrideSpec{Limit: ptr[int64](1), Mode: "elastic", OveragePriceMicros: ptr[int64](5)},
			wantFields: []string{"overage_price_micros"}},
		{name: "ceiling on soft", spec: OverrideSpec{Limit: ptr[int64](1), Mode: "soft", Ceiling: ptr[int64](5)},
			wantFields: []string{"ceiling"}},
		{name: "ceiling below limit", spec: OverrideSpec{Limit: ptr[int64](10), Mode: "elastic", Ceiling: ptr[int64](5)},
			wantFields: []string{"ceiling"}},
		{name: "expires now", spec: OverrideSpec{Limit: ptr[int64](1), ExpiresAt: ptr(t0)}, wantFields: []string{"expires_at"}},
		{name: "expired", spec: OverrideSpec{Limit: ptr[int64](1), ExpiresAt: ptr(t0.Add(-time.Second))}, wantFields: []string{"expires_at"}},
		{name: "expires now, written in another zone", spec: OverrideSpec{Limit: ptr[int64](1),
			ExpiresAt: ptr(t0.In(time.FixedZone("UTC+5", 5*3600)))}, wantFields: []string{"expires_at"}},
		{name: "expires in the last year RFC 3339 can write", spec: OverrideSpec{Limit: ptr[int64](1),
			ExpiresAt: ptr(time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC))}},
		{name: "expires in year 10000", spec: OverrideSpec{Limit: ptr[int64](1),
			ExpiresAt: ptr(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))}, wantFields: []string{"expires_at"}},
		{name: "expires in year 10000 once read as UTC", spec: OverrideSpec{Limit: ptr[int64](1),
			ExpiresAt: ptr(time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("UTC-2", -2*3600)))}, wantFields: []string{"expires_at"}},
		{name: "reason too long", spec: OverrideSpec{Limit: ptr[int64](1), Reason: ptr(strings.Repeat("x", maxReasonLen+1))},
			wantFields: []string{"reason"}},
		{name: "reason with NUL", spec: OverrideSpec{Limit: ptr[int64](1), Reason: ptr("\x00")}, wantFields: []string{"reason"}},
		{name: "everything wrong", args: "//", spec: OverrideSpec{
			Mode: "soft", OveragePercent: ptr[int64](-3), ExpiresAt: ptr(t0.Add(-time.Hour)), Reason: ptr("\xff"),
		}, wantFields: []string{"customer", "expires_at", "limit", "metric", "overage_percent", "reason", "window"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if args == "" {
				args = "acme/api_calls/day"
			}
			parts := append(strings.Split(args, "/"), "")
			_, err := tc.spec.Validate(parts[0], parts[1], parts[2], parts[3], t0)
			checkFields(t, err, tc.wantFields...)
		})
	}
}

func TestOverrideSpecValidateResult(t *testing.T) {
	zone := time.FixedZone("UTC-3", -3*3600)
	expires := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		window string // "" means day
		per    string // as addressed; "" is the customer
		spec   OverrideSpec
		want   Override
	}{
		{
			name: "missing mode means hard, whatever the plan said",
			spec: OverrideSpec{Limit: ptr[int64](5000)},
			want: Override{Customer: "acme", Limit: Limit{Metric: "api_calls", Window: Day, Limit: 5000, Mode: Hard}},
		},
		{
			name: "soft with expiry and reason",
			spec: OverrideSpec{Limit: ptr[int64](5000), Mode: "soft", OveragePercent: ptr[int64](10), OveragePriceMicros: ptr[int64](250),
				ExpiresAt: ptr(expires.In(zone)), Reason: ptr("launch week")},
			want: Override{Customer: "acme",
				Limit: Limit{Metric: "api_calls", Window: Day, Limit: 5000, Mode: Soft, OveragePercent: 10,
					OveragePriceMicros: ptr[int64](250)},
				ExpiresAt: &expires, Reason: "launch week"},
		},
		{
			name: "elastic with ceiling",
			spec: OverrideSpec{Limit: ptr[int64](100), Mode: "elastic", Ceiling: ptr[int64](150)},
			want: Override{Customer: "acme", Limit: Limit{Metric: "api_calls", Window: Day, Limit: 100, Mode: Elastic,
				Ceiling: ptr[int64](150)}},
		},
		{
			name:   "token bucket with burst",
			window: "second",
			spec:   OverrideSpec{Limit: ptr[int64](10), Algorithm: ptr("token_bucket"), Burst: ptr[int64](40)},
			want: Override{Customer: "acme", Limit: Limit{Metric: "api_calls", Window: Second, Limit: 10, Mode: Hard,
				Algorithm: TokenBucket, Burst: ptr[int64](40)}},
		},
		{
			name: "addressed per subject",
			per:  "subject",
			spec: OverrideSpec{Limit: ptr[int64](10)},
			want: Override{Customer: "acme", Limit: Limit{Metric: "api_calls", Window: Day, Limit: 10, Mode: Hard, Per: PerSubject}},
		},
		{
			name: "addressed per subject, the body agreeing",
			per:  "subject",
			spec: OverrideSpec{Limit: ptr[int64](10), Per: ptr("subject")},
			want: Override{Customer: "acme", Limit: Limit{Metric: "api_calls", Window: Day, Limit: 10, Mode: Hard, Per: PerSubject}},
		},
		{
			name: "addressed per customer by name",
			per:  "customer",
			spec: OverrideSpec{Limit: ptr[int64](10)},
			want: Override{Customer: "acme", Limit: Limit{Metric: "api_calls", Window: Day, Limit: 10, Mode: Hard}},
		},
		{
			name:   "sliding log",
			window: "minute",
			spec:   OverrideSpec{Limit: ptr[int64](10), Algorithm: ptr("sliding_log")},
			want: Override{Customer: "acme", Limit: Limit{Metric: "api_calls", Window: Minute, Limit: 10, Mode: Hard,
				Algorithm: SlidingLog}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			window := tc.window
			if window == "" {
				window = "day"
			}
			got, err := tc.spec.Validate("acme", "api_calls", window, tc.per, t0)
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if got.ExpiresAt != nil && got.ExpiresAt.Location() != time.UTC {
				t.Errorf("expires_at is in %v, want UTC", got.ExpiresAt.Location())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Validate =\n  %+v\nwant\n  %+v", got, tc.want)
			}
		})
	}
}

// TestSpecValidateDoesNotAlias checks that validated values do not share
// pointers with the spec they came from: a caller reusing its spec must not
// change a limit already handed to the store or a cache.
func TestSpecValidateDoesNotAlias(t *testing.T) {
	price, ceiling, burst := ptr[int64](100), ptr[int64](50), ptr[int64](20)
	spec := PlanSpec{Limits: []LimitSpec{
		{Metric: "a", Window: "day", Limit: ptr[int64](1), Mode: "soft", OveragePriceMicros: price},
		{Metric: "b", Window: "day", Limit: ptr[int64](1), Mode: "elastic", Ceiling: ceiling},
		{Metric: "c", Window: "second", Limit: ptr[int64](1), Algorithm: ptr("token_bucket"), Burst: burst},
	}}
	p, err := spec.Validate("p")
	if err != nil {
		t.Fatalf("Validate: %v", err)
	}
	*price, *ceiling, *burst = 999, 999, 999
	if got := *p.Limits[0].OveragePriceMicros; got != 100 {
		t.Errorf("overage_price_micros follows the spec after validation: %d, want 100", got)
	}
	if got := *p.Limits[1].Ceiling; got != 50 {
		t.Errorf("ceiling follows the spec after validation: %d, want 50", got)
	}
	if got := *p.Limits[2].Burst; got != 20 {
		t.Errorf("burst follows the spec after validation: %d, want 20", got)
	}
}
