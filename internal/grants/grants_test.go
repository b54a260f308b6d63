package grants

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

func TestSpecValidate(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Second), now.Add(time.Hour)
	ptr := func(n int) *int { return &n }
	tests := []struct {
		name   string
		spec   Spec
		fields []string // the fields in error; none: valid
	}{
		{name: "the least", spec: Spec{Metric: "api_calls", Amount: 1}},
		{name: "everything", spec: Spec{Metric: "api_calls", Amount: tiers.MaxLimit, ExpiresAt: &future, Priority: ptr(MaxPriority),
			Reason: "top-up", RequestID: "order-1"}},
		{name: "no metric", spec: Spec{Amount: 1}, fields: []string{"metric"}},
		{name: "bad metric", spec: Spec{Metric: "API", Amount: 1}, fields: []string{"metric"}},
		{name: "no amount", spec: Spec{Metric: "m"}, fields: []string{"amount"}},
		{name: "amount too large", spec: Spec{Metric: "m", Amount: tiers.MaxLimit + 1}, fields: []string{"amount"}},
		{name: "expired", spec: Spec{Metric: "m", Amount: 1, ExpiresAt: &past}, fields: []string{"expires_at"}},
		{name: "expires now", spec: Spec{Metric: "m", Amount: 1, ExpiresAt: &now}, fields: []string{"expires_at"}},
		{name: "negative priority", spec: Spec{Metric: "m", Amount: 1, Priority: ptr(-1)}, fields: []string{"priority"}},
		{name: "priority too high", spec: Spec{Metric: "m", Amount: 1, Priority: ptr(MaxPriority + 1)}, fields: []string{"priority"}},
		{name: "reason too long", spec: Spec{Metric: "m", Amount: 1, Reason: strings.Repeat("é", MaxReasonLen+1)}, fields: []string{"reason"}},
		{name: "control characters", spec: Spec{Metric: "m", Amount: 1, Reason: "a\nb", RequestID: "\x00"}, fields: []string{"reason", "request_id"}},
		{name: "every problem", spec: Spec{Amount: -1, Priority: ptr(-1)}, fields: []string{"metric", "amount", "priority"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.Validate(now)
			var got []string
			var ve *tiers.ValidationError
			if errors.As(err, &ve) {
				for _, f := range ve.Fields {
					got = append(got, f.Field)
				}
			} else if err != nil {
				t.Fatalf("Validate = %v; want a *tiers.ValidationError or nil", err)
			}
			if !slices.Equal(got, tt.fields) {
				t.Errorf("fields in error = %v; want %v", got, tt.fields)
			}
		})
	}
}

func TestIDs(t *testing.T) {
	id, err := NewID()
	if err != nil || !ValidID(id) || !strings.HasPrefix(id, IDPrefix) {
		t.Fatalf("NewID = %q, %v; want a valid grt_ id", id, err)
	}
	for _, bad := range []string{"", "grt_", "grt_short", "key_AAAAAAAAAAAAAAAA", "grt_AAAAAAAAAAAAAAA!", "grt_" + strings.Repeat("A", 65)} {
		if ValidID(bad) {
			t.Errorf("ValidID(%q) = true", bad)
		}
	}
}
