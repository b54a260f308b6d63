package main

import (
	"io"
	"testing"

	"github.com/quotad/quotad/internal/store"
)

// The start-up log shows the pool size in use, not the flag's 0.
func TestLoggedPoolSize(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want int64
	}{
		{"default", nil, store.DefaultMaxConns},
		{"the URL's pool_max_conns", map[string]string{"QUOTAD_DATABASE_URL": "postgres://u@h/db?pool_max_conns=9"}, 9},
		{"QUOTAD_DB_MAX_CONNS", map[string]string{"QUOTAD_DB_MAX_CONNS": "5"}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseConfig("quotad", nil, func(k string) string { return tt.env[k] }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			var got int64 = -1
			for _, a := range cfg.logValue().Group() {
				if a.Key == "db_max_conns" {
					got = a.Value.Int64()
				}
			}
			if got != tt.want {
				t.Errorf("db_max_conns = %d, want %d", got, tt.want)
			}
		})
	}
}
