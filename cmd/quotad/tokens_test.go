package main

import (
	"io"
	"testing"
)

// A token shorter than 16 characters, or a sample value the documentation
// printed, stops start-up with an error that names where it came from and
// the token, never its secret.
func TestConfigRefusesWeakTokens(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		args   []string
		env    map[string]string
		secret string // must not be in the error
		want   []string
	}{
		{"short admin token", nil, map[string]string{"QUOTAD_ADMIN_TOKENS": "ops:hunter2-pass"},
			"hunter2-pass", []string{"$QUOTAD_ADMIN_TOKENS", "--admin-tokens", "ops", "at least 16 characters", "got 12"}},
		{"short check token, from the flag", []string{"--check-tokens", "backend:" + checkToken + ",hunter2"}, nil,
			"hunter2", []string{"--check-tokens", "check token 2", "check#2", "at least 16"}},
		{"short among long ones", nil, map[string]string{"QUOTAD_ADMIN_TOKENS": adminToken + ", abc"},
			"abc", []string{"$QUOTAD_ADMIN_TOKENS", "admin token 2"}},
		{"compose's sample admin token", nil, map[string]string{"QUOTAD_ADMIN_TOKENS": "ops:change-me-admin"},
			"change-me-admin", []string{"$QUOTAD_ADMIN_TOKENS", "ops", "sample value"}},
		{"compose's sample check token, unnamed", []string{"--check-tokens", "change-me-check"}, nil,
			"change-me-check", []string{"--check-tokens", "check#1", "sample value"}},
	} {
		t.Run(tc.name, func(t *testing.T) { mustRefuseConfig(t, tc.args, tc.env, tc.want, []string{tc.secret}) })
	}
	// Sixteen characters are enough.
	cfg, err := parseConfig(nil, fakeEnv(map[string]string{"QUOTAD_ADMIN_TOKENS": "ops:0123456789abcdef"}), io.Discard)
	if err != nil || len(cfg.tokens) != 1 {
		t.Errorf("a token of 16 characters: %v, want it accepted", err)
	}
}
