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
				{Metric: "api_calls", Window: tiers.Second, Mode: tiers.Hard, Limit: 10, Used: 3, Remaining: 7, ResetAt: reset, State: StateOK, Length: time.Second},
				{Metric: "api_calls", Window: tiers.Day, Mode: tiers.Soft, Limit: 2, Used: 3, Remaining: 0, ResetAt: reset, State: StateOverage, Length: 24 * time.Hour},
			}}},
		{"denied, retry after", Decision{Customer: "acme", Metric: "api_calls", Cost: 1, RetryAfter: 42,
			Limits: []WindowResult{{Metric: "api_calls", Window: tiers.Hour, Mode: tiers.Elastic, Limit: 5, Used: 5, ResetAt: reset, State: StateExceeded, Length: time.Hour}}}},
		{"denied, never", Decision{Customer: "acme", Metric: "api_calls", Cost: 9, Never: true, Limits: []WindowResult{}}},
		{"degraded", Decision{Allowed: true, Customer: "acme", Metric: "api_calls", Cost: 1, Degraded: true, Limits: []WindowResult{}}},
	}
	pool := WindowResult{Metric: "credits", Window: tiers.Day, Mode: tiers.Hard, Limit: 100, Used: 100, ResetAt: reset,
		State: StateExceeded, Length: 24 * time.Hour}
	own := WindowResult{Metric: "gpt4", Subject: "u/1", Window: tiers.Minute, Mode: tiers.Hard, Limit: 10, Used: 2,
		Remaining: 8, ResetAt: reset, State: StateOK, Length: time.Minute}
	items := Decision{Customer: "acme", RetryAfter: 3600, Limits: []WindowResult{own, pool},
		Items: []ItemResult{
			{Customer: "acme", Metric: "gpt4", Subject: "u/1", Cost: 200, Allowed: false, RetryAfter: 3600,
				Limits: []WindowResult{own, pool}, Remaining: new(int64)},
			{Customer: "acme", Metric: "exports", Cost: 1, Allowed: true, Limits: []WindowResult{}},
		}}
	t.Run("items", func(t *testing.T) {
		b, err := encodeAnswer(items)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := decodeAnswer(b); err != nil || !reflect.DeepEqual(got, items) {
			t.Errorf("round trip:\n got %+v, %v\nwant %+v\nwire %s", got, err, items, b)
		}
	})
	t.Run("version 1", func(t *testing.T) {
		// Kept before windows named their metric: they are the answer's.
		v1 := `{"v":1,"allowed":true,"customer":"acme","metric":"api_calls","cost":1,"overage":false,"elastic":false,` +
			`"retry_after":0,"degraded":false,"limits":[{"window":"day","mode":"hard","limit":5,"used":1,"remaining":4,` +
			`"reset_at":"2026-11-23T00:00:00Z","state":"ok","length_ms":86400000}]}`
		got, err := decodeAnswer([]byte(v1))
		if err != nil || len(got.Limits) != 1 || got.Limits[0].Metric != "api_calls" || got.Limits[0].Used != 1 {
			t.Errorf("version 1: %+v, %v", got, err)
		}
	})
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
