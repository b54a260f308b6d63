package tiers

import (
	"errors"
	"slices"
	"testing"
)

// A rollover is valid on customer-wide hard limits of a day, week or
// month only, with a max of at least 1.
func TestRolloverValidation(t *testing.T) {
	limit := int64(100)
	subject := "subject"
	tests := []struct {
		name   string
		spec   LimitSpec
		fields []string
	}{
		{name: "month", spec: LimitSpec{Window: "month", Rollover: &Rollover{Max: 50}}},
		{name: "day", spec: LimitSpec{Window: "day", Rollover: &Rollover{Max: MaxLimit}}},
		{name: "hour", spec: LimitSpec{Window: "hour", Rollover: &Rollover{Max: 50}}, fields: []string{"limits[0].rollover"}},
		{name: "minute", spec: LimitSpec{Window: "minute", Rollover: &Rollover{Max: 50}}, fields: []string{"limits[0].rollover"}},
		{name: "soft", spec: LimitSpec{Window: "day", Mode: "soft", Rollover: &Rollover{Max: 50}}, fields: []string{"limits[0].rollover"}},
		{name: "per subject", spec: LimitSpec{Window: "day", Per: &subject, Rollover: &Rollover{Max: 50}}, fields: []string{"limits[0].rollover"}},
		{name: "max 0", spec: LimitSpec{Window: "day", Rollover: &Rollover{}}, fields: []string{"limits[0].rollover.max"}},
		{name: "max too large", spec: LimitSpec{Window: "day", Rollover: &Rollover{Max: MaxLimit + 1}}, fields: []string{"limits[0].rollover.max"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.spec.Metric, tt.spec.Limit = "api_calls", &limit
			name := "P"
			p, err := PlanSpec{Name: &name, Limits: []LimitSpec{tt.spec}}.Validate("p")
			var got []string
			var ve *ValidationError
			if errors.As(err, &ve) {
				for _, f := range ve.Fields {
					got = append(got, f.Field)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.fields) {
				t.Fatalf("fields in error = %v; want %v", got, tt.fields)
			}
			if err == nil && (p.Limits[0].Rollover == nil || p.Limits[0].Rollover.Max != tt.spec.Rollover.Max) {
				t.Errorf("rollover = %+v; want %+v", p.Limits[0].Rollover, tt.spec.Rollover)
			}
		})
	}
}
