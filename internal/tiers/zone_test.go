package tiers

import (
	"testing"
	"time"
)

// A zone is resolved once per process: the check path reads the cached
// location, and a customer's calendar windows cost no allocation.
func TestLoadZoneOnce(t *testing.T) {
	a, err := LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadZone("Europe/Berlin")
	if err != nil || a != b {
		t.Fatalf("LoadZone twice = %p, %p (%v), want the same location", a, b, err)
	}
	if loc, _ := LoadZone("UTC"); loc != time.UTC {
		t.Errorf("LoadZone(UTC) = %v, want time.UTC", loc)
	}
	if loc := ZoneOf("Nowhere/Else"); loc != time.UTC {
		t.Errorf("ZoneOf of an unknown name = %v, want UTC", loc)
	}
	anchor := Anchor{Day: 15, Loc: a}
	now := time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC)
	allocs := testing.AllocsPerRun(100, func() {
		for _, w := range []Window{Day, Week, Month} {
			anchor.Period(w, now)
		}
		anchor.LocalDate(now)
	})
	if allocs != 0 {
		t.Errorf("a zone's calendar windows cost %v allocations, want 0", allocs)
	}
}
