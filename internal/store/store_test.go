package store

import "testing"

func TestMaxConns(t *testing.T) {
	const url = "postgres://u@127.0.0.1:5432/db?sslmode=disable"
	tests := []struct {
		name     string
		url      string
		maxConns int
		want     int
	}{
		{"default", url, 0, DefaultMaxConns},
		{"negative is the default", url, -1, DefaultMaxConns},
		{"the URL's pool_max_conns", url + "&pool_max_conns=7", 0, 7},
		{"the flag over the URL", url + "&pool_max_conns=7", 3, 3},
		{"the flag", url, 40, 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MaxConns(tt.url, tt.maxConns)
			if err != nil {
				t.Fatalf("MaxConns: %v", err)
			}
			if got != tt.want {
				t.Errorf("MaxConns(%q, %d) = %d, want %d", tt.url, tt.maxConns, got, tt.want)
			}
		})
	}
	if _, err := MaxConns("postgres://u:secret@127.0.0.1:5432/db?pool_max_conns=many", 0); err == nil {
		t.Errorf("MaxConns accepted pool_max_conns=many")
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"postgres", "postgres://u:pw@h/db", "postgres://u:xxxxx@h/db"},
		{"postgresql", "cannot parse `postgresql://u:pw@h:1/db`: x", "cannot parse `postgresql://u:xxxxx@h:1/db`: x"},
		{"another scheme", "mysql://root:pw@127.0.0.1/x", "mysql://root:xxxxx@127.0.0.1/x"},
		{"no password", "postgres://u@h/db", "postgres://u@h/db"},
		{"key=value", "host=h password=pw user=u", "host=h password=xxxxx user=u"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RedactURL(tt.in); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
