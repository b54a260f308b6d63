package api

import (
	"net/http"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/rlheaders"
	"github.com/quotad/quotad/internal/tiers"
)

// sfItem is one member of a RateLimit or RateLimit-Policy list as an RFC
// 9651 parser reads it: the policy name and its integer parameters.
type sfItem struct {
	name   string
	params map[string]int64
}

// mustParseList parses a header as an RFC 9651 List of Items whose values
// are Strings and whose parameters are Integers, as the ratelimit-headers
// draft defines RateLimit and RateLimit-Policy, with a parser quotad did
// not write.
func mustParseList(t testing.TB, name string, values []string) []sfItem {
	t.Helper()
	list, err := httpsfv.UnmarshalList(values)
	if err != nil {
		t.Fatalf("%s %q is not a Structured Field List: %v", name, values, err)
	}
	var out []sfItem
	for _, m := range list {
		item, ok := m.(httpsfv.Item)
		if !ok {
			t.Fatalf("%s %q: member %#v is not an Item", name, values, m)
		}
		s, ok := item.Value.(string)
		if !ok {
			t.Fatalf("%s %q: item value %#v is not a String", name, values, item.Value)
		}
		it := sfItem{name: s, params: map[string]int64{}}
		for _, k := range item.Params.Names() {
			v, _ := item.Params.Get(k)
			n, ok := v.(int64)
			if !ok {
				t.Fatalf("%s %q: parameter %s=%#v is not an Integer", name, values, k, v)
			}
			it.params[k] = n
		}
		out = append(out, it)
	}
	return out
}

// The RateLimit headers parse as the draft's Structured Fields: every
// window in RateLimit-Policy with q and w, one in RateLimit with r and t,
// r the body's remaining on a 429 too.
func TestRateLimitHeadersAreStructuredFields(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	sec := quota.WindowResult{Window: tiers.Second, Mode: tiers.Hard, Limit: 10, Used: 9, Remaining: 1,
		ResetAt: now.Add(time.Second), State: quota.StateExceeded, Length: time.Second}
	day := quota.WindowResult{Window: tiers.Day, Mode: tiers.Soft, Limit: 1000, Used: 10, Remaining: 990,
		ResetAt: now.Add(14 * time.Hour), State: quota.StateOK, Length: 24 * time.Hour}
	tests := []struct {
		name      string
		d         quota.Decision
		rateLimit []sfItem // nil: no RateLimit header
	}{
		{"denied, 1 left for a cost of 5",
			quota.Decision{Metric: "api_calls", Cost: 5, RetryAfter: 1, Limits: []quota.WindowResult{sec, day}},
			[]sfItem{{"api_calls/second", map[string]int64{"r": 1, "t": 1}}}},
		{"allowed",
			quota.Decision{Allowed: true, Metric: "api_calls", Cost: 1, Limits: []quota.WindowResult{day}},
			[]sfItem{{"api_calls/day", map[string]int64{"r": 990, "t": 50400}}}},
		{"never passes",
			quota.Decision{Metric: `we"ird\metric`, Cost: 61, Never: true, Limits: []quota.WindowResult{sec, day}},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			setCheckHeaders(h, rlheaders.Draft10, &tt.d, now)
			policy := mustParseList(t, "RateLimit-Policy", h.Values("RateLimit-Policy"))
			if len(policy) != len(tt.d.Limits) {
				t.Fatalf("RateLimit-Policy has %d items, want one per window (%d): %q", len(policy), len(tt.d.Limits), h.Values("RateLimit-Policy"))
			}
			for i, w := range tt.d.Limits {
				want := sfItem{tt.d.Metric + "/" + w.Window.String(), map[string]int64{"q": w.Limit, "w": int64(w.Length / time.Second)}}
				if got := policy[i]; got.name != want.name || len(got.params) != 2 || got.params["q"] != want.params["q"] || got.params["w"] != want.params["w"] {
					t.Errorf("RateLimit-Policy item %d = %+v, want %+v", i, got, want)
				}
			}
			if tt.rateLimit == nil {
				if v := h.Values("RateLimit"); v != nil {
					t.Errorf("RateLimit = %q, want none", v)
				}
				return
			}
			got := mustParseList(t, "RateLimit", h.Values("RateLimit"))
			if len(got) != 1 || got[0].name != tt.rateLimit[0].name || len(got[0].params) != 2 ||
				got[0].params["r"] != tt.rateLimit[0].params["r"] || got[0].params["t"] != tt.rateLimit[0].params["t"] {
				t.Errorf("RateLimit = %+v, want %+v", got, tt.rateLimit)
			}
		})
	}
}
