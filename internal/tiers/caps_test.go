package tiers

import (
	"errors"
	"testing"
)

func TestCapsCheck(t *testing.T) {
	caps := Caps{Customers: 3, KeysPerCustomer: 1}
	tests := []struct {
		name string
		kind CapKind
		n    int64 // objects with the new one
		want bool  // refused
	}{
		{"below", CapCustomers, 2, false},
		{"at the cap", CapCustomers, 3, false},
		{"beyond", CapCustomers, 4, true},
		{"one key", CapKeysPerCustomer, 1, false},
		{"a second key", CapKeysPerCustomer, 2, true},
		{"no cap", CapWebhooks, 1 << 40, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := caps.Check(tt.kind, tt.n)
			var ce *CapError
			if got := errors.Is(err, ErrCapReached) && errors.As(err, &ce) && ce.Kind == tt.kind; got != tt.want || (err != nil) != tt.want {
				t.Errorf("Check(%d, %d) = %v, want refused: %t", tt.kind, tt.n, err, tt.want)
			}
		})
	}
}
