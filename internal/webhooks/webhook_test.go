package webhooks

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/quotad/quotad/internal/tiers"
)

func strp(s string) *string { return &s }

func TestSpecValidate(t *testing.T) {
	const url = "https://hooks.example.com/quotad"
	secret24 := "whsec_" + strings.Repeat("A", 32)             // 24 bytes
	secret64 := "whsec_" + strings.Repeat("AAAA", 21) + "AA==" // 64 bytes
	tests := []struct {
		name   string
		id     string
		spec   Spec
		fields []string // the fields refused; none: valid
		want   Webhook
	}{
		{name: "defaults", id: "billing", spec: Spec{URL: url},
			want: Webhook{ID: "billing", URL: url, Events: EventTypes, Thresholds: []int{80, 100}}},
		{name: "events in canonical order, thresholds sorted", id: "b", spec: Spec{URL: "http://h:8080/x?y=1",
			Events: []EventType{LimitReached, Threshold}, Thresholds: []int{100, 5, 1000}},
			want: Webhook{ID: "b", URL: "http://h:8080/x?y=1", Events: []EventType{Threshold, LimitReached}, Thresholds: []int{5, 100, 1000}}},
		{name: "secret of 24 bytes", id: "b", spec: Spec{URL: url, Secret: strp(secret24)},
			want: Webhook{ID: "b", URL: url, Events: EventTypes, Thresholds: []int{80, 100}, Secret: secret24}},
		{name: "secret of 64 bytes", id: "b", spec: Spec{URL: url, Secret: strp(secret64)},
			want: Webhook{ID: "b", URL: url, Events: EventTypes, Thresholds: []int{80, 100}, Secret: secret64}},
		{name: "bad id", id: "Billing", spec: Spec{URL: url}, fields: []string{"id"}},
		{name: "no url", id: "b", spec: Spec{}, fields: []string{"url"}},
		{name: "relative url", id: "b", spec: Spec{URL: "/hooks"}, fields: []string{"url"}},
		{name: "ftp url", id: "b", spec: Spec{URL: "ftp://h/x"}, fields: []string{"url"}},
		{name: "upper-case scheme", id: "b", spec: Spec{URL: "HTTPS://h/x"}, fields: []string{"url"}},
		{name: "no host", id: "b", spec: Spec{URL: "https:///x"}, fields: []string{"url"}},
		{name: "userinfo", id: "b", spec: Spec{URL: "https://u:p@h/x"}, fields: []string{"url"}},
		{name: "fragment", id: "b", spec: Spec{URL: "https://h/x#f"}, fields: []string{"url"}},
		{name: "space", id: "b", spec: Spec{URL: "https://h/a b"}, fields: []string{"url"}},
		{name: "url too long", id: "b", spec: Spec{URL: "https://h/" + strings.Repeat("a", 2039)}, fields: []string{"url"}},
		{name: "url of 2048", id: "b", spec: Spec{URL: "https://h/" + strings.Repeat("a", 2038)},
			want: Webhook{ID: "b", URL: "https://h/" + strings.Repeat("a", 2038), Events: EventTypes, Thresholds: []int{80, 100}}},
		{name: "empty events", id: "b", spec: Spec{URL: url, Events: []EventType{}}, fields: []string{"events"}},
		{name: "unknown event", id: "b", spec: Spec{URL: url, Events: []EventType{"usage.nope"}}, fields: []string{"events[0]"}},
		{name: "repeated event", id: "b", spec: Spec{URL: url, Events: []EventType{Threshold, Threshold}}, fields: []string{"events[1]"}},
		{name: "empty thresholds", id: "b", spec: Spec{URL: url, Thresholds: []int{}}, fields: []string{"thresholds"}},
		{name: "threshold 0", id: "b", spec: Spec{URL: url, Thresholds: []int{0}}, fields: []string{"thresholds[0]"}},
		{name: "threshold 1001", id: "b", spec: Spec{URL: url, Thresholds: []int{80, 1001}}, fields: []string{"thresholds[1]"}},
		{name: "repeated threshold", id: "b", spec: Spec{URL: url, Thresholds: []int{80, 80}}, fields: []string{"thresholds[1]"}},
		{name: "too many thresholds", id: "b", spec: Spec{URL: url, Thresholds: make([]int, 21)}, fields: []string{"thresholds"}},
		{name: "secret without prefix", id: "b", spec: Spec{URL: url, Secret: strp(strings.Repeat("A", 32))}, fields: []string{"secret"}},
		{name: "secret not base64", id: "b", spec: Spec{URL: url, Secret: strp("whsec_!!!!")}, fields: []string{"secret"}},
		{name: "secret too short", id: "b", spec: Spec{URL: url, Secret: strp("whsec_" + strings.Repeat("A", 28))}, fields: []string{"secret"}},
		{name: "secret too long", id: "b", spec: Spec{URL: url, Secret: strp("whsec_" + strings.Repeat("A", 88))}, fields: []string{"secret"}},
		{name: "empty secret", id: "b", spec: Spec{URL: url, Secret: strp("")}, fields: []string{"secret"}},
		{name: "every problem at once", id: "-", spec: Spec{URL: "x", Events: []EventType{}, Thresholds: []int{}},
			fields: []string{"id", "url", "events", "thresholds"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.spec.Validate(tt.id)
			if tt.fields != nil {
				var ve *tiers.ValidationError
				if !errors.As(err, &ve) {
					t.Fatalf("Validate = %v, want a validation error naming %v", err, tt.fields)
				}
				var names []string
				for _, f := range ve.Fields {
					names = append(names, f.Field)
				}
				if !slices.Equal(names, tt.fields) {
					t.Errorf("fields = %v, want %v (%v)", names, tt.fields, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if got.ID != tt.want.ID || got.URL != tt.want.URL || got.Secret != tt.want.Secret ||
				!slices.Equal(got.Events, tt.want.Events) || !slices.Equal(got.Thresholds, tt.want.Thresholds) {
				t.Errorf("Validate = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNewSecret(t *testing.T) {
	a, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSecret()
	if msg := CheckSecret(a); msg != "" || a == b || len(a) != len("whsec_")+44 {
		t.Errorf("NewSecret = %q, %q (%s)", a, b, msg)
	}
	if h := SecretHint(a); h != a[:10]+"…" {
		t.Errorf("SecretHint(%q) = %q", a, h)
	}
}

func TestMessageID(t *testing.T) {
	for _, n := range []int64{1, 42, 1 << 53} {
		if got, ok := ParseMessageID(MessageID(n)); !ok || got != n {
			t.Errorf("ParseMessageID(MessageID(%d)) = %d, %t", n, got, ok)
		}
	}
	for _, s := range []string{"", "msg_", "msg_0", "msg_-1", "msg_1a", "evt_1", "msg_1234567890123456789"} {
		if _, ok := ParseMessageID(s); ok {
			t.Errorf("ParseMessageID(%q) ok", s)
		}
	}
}
