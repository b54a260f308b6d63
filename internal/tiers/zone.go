package tiers

import (
	"fmt"
	"sync"
	"time"

	// The IANA time zone database, embedded: a customer's time zone
	// resolves the same on every host, whether or not it has
	// /usr/share/zoneinfo (a distroless or scratch image, a bare CI
	// machine). Go reads the host's database first when there is one.
	_ "time/tzdata"
)

// DefaultTimeZone is the time zone of a customer that names none.
const DefaultTimeZone = "UTC"

// maxTimeZoneLen bounds a time zone name; the longest IANA name,
// America/Argentina/ComodRivadavia, has 32 characters.
const maxTimeZoneLen = 64

// zones caches the locations LoadZone resolved, by name: resolving reads
// and parses the zone's file, which a customer's load should not repeat.
var zones sync.Map // string → *time.Location

// timeZoneRule says what a time zone must be.
const timeZoneRule = `must be an IANA time zone name, e.g. "Europe/Berlin" or "UTC"`

// LoadZone returns the location of the IANA time zone name, resolved
// once per process. "Local" and "" are not time zone names (they would
// mean the host's zone and UTC): both are errors, as is a name the time
// zone database does not hold. Its error is a *ValidationError about
// time_zone.
func LoadZone(name string) (*time.Location, error) {
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	if !validZoneName(name) {
		return nil, Invalid("time_zone", timeZoneRule)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, Invalid("time_zone", fmt.Sprintf("%s: %q is not in the time zone database", timeZoneRule, name))
	}
	actual, _ := zones.LoadOrStore(name, loc)
	return actual.(*time.Location), nil
}

// ZoneOf returns the location of name, a time zone a store kept after
// LoadZone accepted it; UTC for "" and for a name this process's time
// zone database does not hold (which only a database older than the one
// that accepted it would lack).
func ZoneOf(name string) *time.Location {
	loc, err := LoadZone(name)
	if err != nil {
		return time.UTC
	}
	return loc
}

// validZoneName reports whether name has the shape of an IANA name:
// letters, digits and "/_+-", no empty or dot segment (so no path
// outside the database), and not "Local".
func validZoneName(name string) bool {
	if name == "" || len(name) > maxTimeZoneLen || name == "Local" || name[0] == '/' || name[len(name)-1] == '/' {
		return false
	}
	prev := byte('/')
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '+', c == '-':
		case c == '/' && prev != '/':
		default:
			return false
		}
		prev = c
	}
	return true
}

// zoneName is the name of loc, nil meaning UTC.
func zoneName(loc *time.Location) string {
	if loc == nil {
		return DefaultTimeZone
	}
	return loc.String()
}
