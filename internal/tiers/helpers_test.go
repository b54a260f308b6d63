package tiers

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }

// t0 is the fixed "now" the tests use unless a case needs another.
var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// fieldsOf returns the sorted field names of a *ValidationError, or nil for a
// nil error. Any other error type fails the test.
func fieldsOf(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %q is a %T, want *ValidationError", err, err)
	}
	if len(ve.Fields) == 0 {
		t.Errorf("ValidationError %q names no field", err)
	}
	names := make([]string, 0, len(ve.Fields))
	for _, f := range ve.Fields {
		if f.Message == "" {
			t.Errorf("field %q has an empty message", f.Field)
		}
		names = append(names, f.Field)
	}
	slices.Sort(names)
	return names
}

// checkFields asserts that err names exactly the fields want (in any order);
// no fields means err must be nil.
func checkFields(t *testing.T, err error, want ...string) {
	t.Helper()
	got := fieldsOf(t, err)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		if len(want) == 0 {
			t.Errorf("unexpected error: %v", err)
			return
		}
		t.Errorf("error fields = %q, want %q (error: %v)", got, want, err)
	}
}

// date returns midnight UTC of the given day.
func date(y int, m time.Month, d int) time.Time {
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
