package tiers

import (
	"slices"
	"testing"
)

func TestCheckCreditPools(t *testing.T) {
	rate := func(metric string, credits int64) CreditRate {
		return CreditRate{Metric: metric, Credits: credits, Per: 1}
	}
	pool := func(key string, rates ...CreditRate) Metric { return Metric{Key: key, CreditSchema: rates} }
	plain := func(key string) Metric { return Metric{Key: key} }
	// declared: the catalog the checks run against, before the write.
	declared := func(list ...Metric) map[string]Metric {
		out := make(map[string]Metric, len(list))
		for _, m := range list {
			out[m.Key] = m
		}
		return out
	}
	base := declared(plain("gpt4_tokens"), plain("images"), plain("audio"),
		pool("credits", rate("gpt4_tokens", 3)), pool("minutes", rate("audio", 1)))

	tests := []struct {
		name       string
		m          Metric
		metrics    map[string]Metric
		wantFields []string
	}{
		{name: "a metric without schema", m: plain("images"), metrics: base},
		{name: "a metric that draws on a pool may lose its schema", m: plain("gpt4_tokens"), metrics: base},
		{name: "a new pool of free metrics", m: pool("bonus", rate("images", 10)), metrics: base},
		{name: "a pool replaced, keeping its metrics", m: pool("credits", rate("gpt4_tokens", 5), rate("images", 10)), metrics: base},
		{name: "a pool names a metric another pool gave up in the same write",
			m:       pool("minutes", rate("gpt4_tokens", 1)),
			metrics: declared(plain("gpt4_tokens"), pool("minutes", rate("audio", 1)))},
		{name: "a pool emptied", m: pool("credits"), metrics: base},
		{name: "a pool not declared yet", m: pool("new_pool", rate("images", 1)), metrics: base},

		{name: "an undeclared metric", m: pool("bonus", rate("images", 1), rate("video", 2)), metrics: base,
			wantFields: []string{"credit_schema[1].metric"}},
		{name: "a metric that draws on another pool", m: pool("bonus", rate("gpt4_tokens", 1)), metrics: base,
			wantFields: []string{"credit_schema[0].metric"}},
		{name: "a pool named by a pool", m: pool("bonus", rate("credits", 1)), metrics: base,
			wantFields: []string{"credit_schema[0].metric"}},
		{name: "a metric that draws on a pool made a pool", m: pool("gpt4_tokens", rate("images", 1)), metrics: base,
			wantFields: []string{"credit_schema"}},
		{name: "every rule at once", m: pool("audio", rate("video", 1), rate("gpt4_tokens", 1), rate("credits", 1), rate("images", 1)),
			metrics:    base,
			wantFields: []string{"credit_schema", "credit_schema[0].metric", "credit_schema[1].metric", "credit_schema[2].metric"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkFields(t, CheckCreditPools(tc.m, tc.metrics), tc.wantFields...)
		})
	}
}

// Each rule's message, as the API returns it.
func TestCheckCreditPoolsMessages(t *testing.T) {
	metrics := map[string]Metric{
		"gpt4_tokens": {Key: "gpt4_tokens"},
		"credits":     {Key: "credits", CreditSchema: []CreditRate{{Metric: "gpt4_tokens", Credits: 3, Per: 100}}},
	}
	tests := []struct {
		m    Metric
		want FieldError
	}{
		{Metric{Key: "bonus", CreditSchema: []CreditRate{{Metric: "video", Credits: 1, Per: 1}}},
			FieldError{"credit_schema[0].metric", `metric "video" is not declared`}},
		{Metric{Key: "bonus", CreditSchema: []CreditRate{{Metric: "gpt4_tokens", Credits: 1, Per: 1}}},
			FieldError{"credit_schema[0].metric", `metric "gpt4_tokens" draws on pool "credits" already, and a metric draws on at most one`}},
		{Metric{Key: "bonus", CreditSchema: []CreditRate{{Metric: "credits", Credits: 1, Per: 1}}},
			FieldError{"credit_schema[0].metric", `metric "credits" is a credit pool, and a pool draws on none`}},
		{Metric{Key: "gpt4_tokens", CreditSchema: []CreditRate{{Metric: "credits", Credits: 1, Per: 1}}},
			FieldError{"credit_schema", `must be empty: the metric draws on pool "credits", and a pool draws on none`}},
	}
	for _, tc := range tests {
		err := CheckCreditPools(tc.m, metrics)
		ve, ok := err.(*ValidationError)
		if !ok {
			t.Errorf("CheckCreditPools(%s) = %v, want a *ValidationError", tc.m.Key, err)
			continue
		}
		if !slices.Contains(ve.Fields, tc.want) {
			t.Errorf("CheckCreditPools(%s) = %+v, want %+v among them", tc.m.Key, ve.Fields, tc.want)
		}
	}
}
