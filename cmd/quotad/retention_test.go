package main

import (
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
)

// The --retain-* flags: defaults, days or Go durations, from the flag or
// its variable, 0 for forever.
func TestConfigRetention(t *testing.T) {
	t.Parallel()
	const day = 24 * time.Hour
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want quota.Retention
	}{
		{"defaults", nil, nil, quota.Retention{History: 400 * day, Audit: 400 * day, Reservations: 7 * day, Deliveries: 30 * day}},
		{"days from flags", []string{"--retain-history", "800d", "--retain-audit=90d", "--retain-reservations", "1d", "--retain-deliveries=3d"}, nil,
			quota.Retention{History: 800 * day, Audit: 90 * day, Reservations: day, Deliveries: 3 * day}},
		{"go durations from the environment", nil, map[string]string{"QUOTAD_RETAIN_RESERVATIONS": "36h", "QUOTAD_RETAIN_DELIVERIES": "90m"},
			quota.Retention{History: 400 * day, Audit: 400 * day, Reservations: 36 * time.Hour, Deliveries: 90 * time.Minute}},
		{"flag over environment", []string{"--retain-audit", "10d"}, map[string]string{"QUOTAD_RETAIN_AUDIT": "20d"},
			quota.Retention{History: 400 * day, Audit: 10 * day, Reservations: 7 * day, Deliveries: 30 * day}},
		{"0 keeps forever", []string{"-retain-history", "0", "--retain-audit=0d"}, nil,
			quota.Retention{Reservations: 7 * day, Deliveries: 30 * day}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParseConfig(t, tt.args, tt.env)
			if got := cfg.retention(); got != tt.want {
				t.Errorf("retention %+v, want %+v", got, tt.want)
			}
		})
	}
}

// A bad or negative --retain-* value is an error naming the flag, and the
// variable when it came from one.
func TestConfigRetentionRejectsBadValues(t *testing.T) {
	t.Parallel()
	mustRefuseEach(t, []configRefusal{
		{"negative flag", []string{"--retain-history=-1d"}, nil, []string{"--retain-history", "-1d", "0 (keep forever)"}},
		{"negative variable", nil, map[string]string{"QUOTAD_RETAIN_AUDIT": "-5h"}, []string{"--retain-audit", "$QUOTAD_RETAIN_AUDIT", "-5h"}},
		{"not a duration", []string{"--retain-reservations", "a week"}, nil, []string{"--retain-reservations", `"a week"`}},
		{"not a duration, variable", nil, map[string]string{"QUOTAD_RETAIN_DELIVERIES": "30days"}, []string{"--retain-deliveries", "$QUOTAD_RETAIN_DELIVERIES", `"30days"`}},
		{"fractional days", []string{"--retain-history=1.5d"}, nil, []string{"--retain-history", `"1.5d"`}},
	})
}

// --help shows the retention flags with their variables and defaults, in
// days.
func TestHelpShowsRetention(t *testing.T) {
	t.Parallel()
	out, err := runOut(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--retain-history=DURATION", "$QUOTAD_RETAIN_HISTORY", "default 400d",
		"--retain-reservations=DURATION", "default 7d", "--retain-deliveries=DURATION", "default 30d", "$QUOTAD_RETAIN_AUDIT"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}
