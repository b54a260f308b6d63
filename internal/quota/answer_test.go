package quota

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

func TestAnswerWireForm(t *testing.T) {
	t.Parallel()
	reset := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		d    Decision
	}{
		{"allowed", Decision{Allowed: true, Customer: "acme", Metric: "api_calls", Cost: 3, Overage: true,
			Limits: []WindowResult{
				{Window: tiers.Second, Mode: tiers.Hard, Limit: 10, Used: 3, Remaining: 7, ResetAt: reset, State: StateOK, Length: time.Second},
				{Window: tiers.Day, Mode: tiers.Soft, Limit: 2, Used: 3, Remaining: 0, ResetAt: reset, State: StateOverage, Length: 24 * time.Hour},
			}}},
		{"denied, retry after", Decision{Customer: "acme", Metric: "api_calls", Cost: 1, RetryAfter: 42,
			Limits: []WindowResult{{Window: tiers.Hour, Mode: tiers.Elastic, Limit: 5, Used: 5, ResetAt: reset, State: StateExceeded, Length: time.Hour}}}},
		{"denied, never", Decision{Customer: "acme", Metric: "api_calls", Cost: 9, Never: true, Limits: []WindowResult{}}},
		{"degraded", Decision{Allowed: true, Customer: "acme", Metric: "api_calls", Cost: 1, Degraded: true, Limits: []WindowResult{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := encodeAnswer(tt.d)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil || m["v"] != float64(answerVersion) {
				t.Fatalf("wire form %s lacks its version (%v)", b, err)
			}
			got, err := decodeAnswer(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.d) {
				t.Errorf("round trip:\n got %+v\nwant %+v\nwire %s", got, tt.d, b)
			}
			// Answers kept before the wire form: a Decision marshalled as it was.
			legacy, err := json.Marshal(tt.d)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := decodeAnswer(legacy); err != nil || !reflect.DeepEqual(got, tt.d) {
				t.Errorf("untagged form: got %+v, %v; want %+v", got, err, tt.d)
			}
		})
	}
	if _, err := decodeAnswer([]byte(`{"v": 99}`)); err == nil {
		t.Error("an unknown version decoded")
	}
}
