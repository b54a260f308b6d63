package tiers

import (
	"reflect"
	"testing"
)

func TestMigrationSpecValidate(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	yes := true
	tests := []struct {
		name   string
		key    string
		spec   MigrationSpec
		fields []string
	}{
		{"defaults", "pro", MigrationSpec{DryRun: &yes}, nil},
		{"from and to", "pro", MigrationSpec{FromVersion: n(1), ToVersion: n(3), DryRun: &yes}, nil},
		{"dry_run missing", "pro", MigrationSpec{}, []string{"dry_run"}},
		{"to older than from", "pro", MigrationSpec{FromVersion: n(3), ToVersion: n(2), DryRun: &yes}, []string{"to_version"}},
		{"to equal to from", "pro", MigrationSpec{FromVersion: n(2), ToVersion: n(2), DryRun: &yes}, []string{"to_version"}},
		{"versions below 1", "pro", MigrationSpec{FromVersion: n(0), ToVersion: n(-1), DryRun: &yes}, []string{"from_version", "to_version"}},
		{"bad key", "Pro", MigrationSpec{DryRun: &yes}, []string{"plan"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			if err := tc.spec.Validate(tc.key); err != nil {
				for _, f := range err.(*ValidationError).Fields {
					got = append(got, f.Field)
				}
			}
			if !reflect.DeepEqual(got, tc.fields) {
				t.Errorf("fields = %v, want %v", got, tc.fields)
			}
		})
	}
}

func TestOverLimits(t *testing.T) {
	limit := func(metric string, w Window, n int64, per Per) EffectiveLimit {
		return EffectiveLimit{Limit: Limit{Metric: metric, Window: w, Limit: n, Mode: Hard, Per: per}}
	}
	limits := []EffectiveLimit{limit("api_calls", Day, 7, PerCustomer), limit("api_calls", Day, 1, PerSubject),
		limit("exports", Month, 3, PerCustomer)}
	tests := []struct {
		name  string
		usage []WindowUsage
		want  []OverLimit
	}{
		{"none", nil, []OverLimit{}},
		{"at the limit is not beyond", []WindowUsage{{"api_calls", Day, 7}}, []OverLimit{}},
		{"beyond, the subject's limit aside", []WindowUsage{{"api_calls", Day, 8}, {"exports", Month, 3}},
			[]OverLimit{{Metric: "api_calls", Window: Day, Used: 8, Limit: 7}}},
		{"a window the new limits lack", []WindowUsage{{"api_calls", Hour, 100}, {"exports", Month, 4}},
			[]OverLimit{{Metric: "exports", Window: Month, Used: 4, Limit: 3}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := OverLimits(tc.usage, limits); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("OverLimits = %+v, want %+v", got, tc.want)
			}
		})
	}
}
