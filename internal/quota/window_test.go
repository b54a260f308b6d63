package quota_test

import (
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

func TestBounds(t *testing.T) {
	t.Parallel()
	pinned := tiers.Anchor{Day: 10}.Change(tiers.Anchor{Day: 20}, parseTime(t, "2026-11-15T00:00:00Z"))
	tests := []boundsCase{
		{"second bucket", tiers.Second, "2026-11-22T10:00:01.999Z", tiers.Anchor{}, "2026-11-22T10:00:01Z", "2026-11-22T10:00:02Z"},
		{"minute bucket", tiers.Minute, "2026-11-22T10:07:59.999Z", tiers.Anchor{}, "2026-11-22T10:07:00Z", "2026-11-22T10:08:00Z"},
		{"hour", tiers.Hour, "2026-11-22T10:59:59Z", tiers.Anchor{}, "2026-11-22T10:00:00Z", "2026-11-22T11:00:00Z"},
		{"day", tiers.Day, "2026-12-31T23:59:59Z", tiers.Anchor{}, "2026-12-31T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"week on a Sunday", tiers.Week, "2026-11-29T23:59:59Z", tiers.Anchor{}, "2026-11-23T00:00:00Z", "2026-11-30T00:00:00Z"},
		{"week on a Monday", tiers.Week, "2026-11-30T00:00:00Z", tiers.Anchor{}, "2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z"},
		{"week across the year", tiers.Week, "2027-01-01T12:00:00Z", tiers.Anchor{}, "2026-12-28T00:00:00Z", "2027-01-04T00:00:00Z"},
		{"calendar month", tiers.Month, "2026-11-22T10:00:00Z", tiers.Anchor{}, "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"},
		{"leap February", tiers.Month, "2028-02-29T23:59:59Z", tiers.Anchor{}, "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z"},
		{"anchor 15 before the 15th", tiers.Month, "2026-11-14T23:59:59Z", tiers.Anchor{Day: 15}, "2026-10-15T00:00:00Z", "2026-11-15T00:00:00Z"},
		{"anchor 15 on the 15th", tiers.Month, "2026-11-15T00:00:00Z", tiers.Anchor{Day: 15}, "2026-11-15T00:00:00Z", "2026-12-15T00:00:00Z"},
		{"anchor 28 in March", tiers.Month, "2027-03-01T00:00:00Z", tiers.Anchor{Day: 28}, "2027-02-28T00:00:00Z", "2027-03-28T00:00:00Z"},
		{"anchor 28 across the year", tiers.Month, "2027-01-05T00:00:00Z", tiers.Anchor{Day: 28}, "2026-12-28T00:00:00Z", "2027-01-28T00:00:00Z"},
		{"changed anchor keeps the current period", tiers.Month, "2026-11-25T00:00:00Z", pinned, "2026-11-10T00:00:00Z", "2026-12-10T00:00:00Z"},
		{"changed anchor: a short first period", tiers.Month, "2026-12-12T00:00:00Z", pinned, "2026-12-10T00:00:00Z", "2026-12-20T00:00:00Z"},
		{"changed anchor: then whole periods", tiers.Month, "2026-12-25T00:00:00Z", pinned, "2026-12-20T00:00:00Z", "2027-01-20T00:00:00Z"},
		{"total: one window, whatever the time", tiers.Total, "2026-11-22T10:00:00Z", tiers.Anchor{}, "1970-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z"},
		{"total: the anchor changes nothing", tiers.Total, "2026-12-25T00:00:00Z", pinned, "1970-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z"},
		{"total: at the epoch", tiers.Total, "1970-01-01T00:00:00Z", tiers.Anchor{}, "1970-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkBounds(t, tt.window, tt.now, tt.anchor, tt.start, tt.end)
		})
	}
}

// A total never admits by waiting: its count falls only by a refund or an
// admin's set, which no wait foretells. A calendar window that denies
// admits when it ends.
func TestCalendarWait(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		window tiers.Window
		used   int64
		cost   int64
		want   int64
	}{
		{"a full day admits at midnight", tiers.Day, 10, 1, 14 * 3600 * 1000},
		{"a cost above a day's limit never", tiers.Day, 0, 11, -1},
		{"a full total never", tiers.Total, 10, 1, -1},
		{"a total with room but not for the cost never", tiers.Total, 5, 6, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start, end := quota.Bounds(tt.window, now, tiers.Anchor{})
			sp := quota.Span{Key: quota.CounterKey{Customer: "acme", Metric: "seats", Window: tt.window, Start: start}, End: end,
				Rule: quota.RuleFor(tiers.Limit{Metric: "seats", Window: tt.window, Limit: 10, Mode: tiers.Hard}, tiers.Metric{Key: "seats"})}
			if got := sp.CalendarWait(tt.used, tt.cost, now); got != tt.want {
				t.Errorf("CalendarWait(%d, %d) = %d, want %d", tt.used, tt.cost, got, tt.want)
			}
		})
	}
}

// zone returns the location of an IANA name, failing the test if it has
// none.
func zone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := tiers.LoadZone(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestBoundsZones: a customer's day, week and month windows start at local
// midnight in its time zone, a day across a change of daylight saving time
// lasts 23 or 25 hours, and bounds are reported in UTC; hours and shorter
// windows stay aligned to UTC.
func TestBoundsZones(t *testing.T) {
	t.Parallel()
	berlin := tiers.Anchor{Loc: zone(t, "Europe/Berlin")}
	newYork := tiers.Anchor{Loc: zone(t, "America/New_York")}
	kolkata := tiers.Anchor{Loc: zone(t, "Asia/Kolkata")}
	tests := []struct {
		name       string
		window     tiers.Window
		now        string
		anchor     tiers.Anchor
		start, end string
		hours      float64 // the window's length, 0: not checked
	}{
		{"Berlin, a winter day", tiers.Day, "2026-01-15T12:00:00Z", berlin, "2026-01-14T23:00:00Z", "2026-01-15T23:00:00Z", 24},
		{"Berlin, a summer day", tiers.Day, "2026-07-15T12:00:00Z", berlin, "2026-07-14T22:00:00Z", "2026-07-15T22:00:00Z", 24},
		{"Berlin, the spring day: 23 hours, first instant", tiers.Day, "2026-03-28T23:00:00Z", berlin, "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z", 23},
		{"Berlin, the spring day: across the jump", tiers.Day, "2026-03-29T01:00:00Z", berlin, "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z", 23},
		{"Berlin, the spring day: last instant", tiers.Day, "2026-03-29T21:59:59.999Z", berlin, "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z", 23},
		{"Berlin, the day before spring", tiers.Day, "2026-03-28T22:59:59.999Z", berlin, "2026-03-27T23:00:00Z", "2026-03-28T23:00:00Z", 24},
		{"Berlin, the day after spring", tiers.Day, "2026-03-29T22:00:00Z", berlin, "2026-03-29T22:00:00Z", "2026-03-30T22:00:00Z", 24},
		{"Berlin, the autumn day: 25 hours", tiers.Day, "2026-10-25T00:30:00Z", berlin, "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z", 25},
		{"Berlin, the autumn day: the repeated hour, twice", tiers.Day, "2026-10-25T01:30:00Z", berlin, "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z", 25},
		{"Berlin, the autumn day: last instant", tiers.Day, "2026-10-25T22:59:59.999Z", berlin, "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z", 25},
		{"New York, the spring day: 23 hours", tiers.Day, "2026-03-08T07:30:00Z", newYork, "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z", 23},
		{"New York, the autumn day: 25 hours", tiers.Day, "2026-11-01T06:30:00Z", newYork, "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z", 25},
		{"New York, late evening is still the local day", tiers.Day, "2026-11-22T03:00:00Z", newYork, "2026-11-21T05:00:00Z", "2026-11-22T05:00:00Z", 24},
		{"Kolkata, a half-hour offset", tiers.Day, "2026-11-22T20:00:00Z", kolkata, "2026-11-22T18:30:00Z", "2026-11-23T18:30:00Z", 24},
		{"Berlin, the week of the spring day: Monday to Monday", tiers.Week, "2026-03-29T12:00:00Z", berlin, "2026-03-22T23:00:00Z", "2026-03-29T22:00:00Z", 167},
		{"Berlin, a Monday starts at local midnight", tiers.Week, "2026-03-29T22:00:00Z", berlin, "2026-03-29T22:00:00Z", "2026-04-05T22:00:00Z", 168},
		{"New York, a Sunday evening is still the week", tiers.Week, "2026-11-30T03:00:00Z", newYork, "2026-11-23T05:00:00Z", "2026-11-30T05:00:00Z", 168},
		{"Berlin, March: one hour short", tiers.Month, "2026-03-15T12:00:00Z", berlin, "2026-02-28T23:00:00Z", "2026-03-31T22:00:00Z", 31*24 - 1},
		{"Berlin, the 1st just after local midnight", tiers.Month, "2026-10-31T23:30:00Z", berlin, "2026-10-31T23:00:00Z", "2026-11-30T23:00:00Z", 30 * 24},
		{"New York, anchor 15 across the autumn change", tiers.Month, "2026-11-10T12:00:00Z", tiers.Anchor{Day: 15, Loc: newYork.Loc},
			"2026-10-15T04:00:00Z", "2026-11-15T05:00:00Z", 31*24 + 1},
		{"an hour stays UTC in Kolkata", tiers.Hour, "2026-11-22T10:45:00Z", kolkata, "2026-11-22T10:00:00Z", "2026-11-22T11:00:00Z", 1},
		{"a minute stays UTC in Berlin", tiers.Minute, "2026-03-29T01:00:30Z", berlin, "2026-03-29T01:00:00Z", "2026-03-29T01:01:00Z", 0},
		{"a total has no zone", tiers.Total, "2026-03-29T01:00:30Z", berlin, "1970-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start, end := checkBounds(t, tt.window, tt.now, tt.anchor, tt.start, tt.end)
			if start.Location() != time.UTC || end.Location() != time.UTC {
				t.Errorf("Bounds = [%s, %s), not in UTC", start, end)
			}
			if got := end.Sub(start).Hours(); tt.hours != 0 && got != tt.hours {
				t.Errorf("the window lasts %v hours, want %v", got, tt.hours)
			}
		})
	}
}

// TestBoundsZoneChange: a changed time zone takes effect for the next
// window. The windows in progress keep their bounds (and so their
// counters); the first window of the new zone starts where they end, and
// is shorter for that when the new zone's midnight came first.
func TestBoundsZoneChange(t *testing.T) {
	t.Parallel()
	berlin, newYork := zone(t, "Europe/Berlin"), zone(t, "America/New_York")
	// UTC to Berlin on Wednesday 2026-11-18 at 12:00 UTC.
	toBerlin := tiers.Anchor{}.Change(tiers.Anchor{Loc: berlin}, parseTime(t, "2026-11-18T12:00:00Z"))
	// Berlin to New York on the same instant: New York's midnight comes later.
	toNewYork := tiers.Anchor{Loc: berlin}.Change(tiers.Anchor{Loc: newYork}, parseTime(t, "2026-11-18T12:00:00Z"))
	// Berlin, then back to UTC within the same (pinned) day: the pin stays.
	back := toBerlin.Change(tiers.Anchor{}, parseTime(t, "2026-11-18T20:00:00Z"))
	tests := []boundsCase{
		{"the day in progress keeps its UTC bounds", tiers.Day, "2026-11-18T23:30:00Z", toBerlin, "2026-11-18T00:00:00Z", "2026-11-19T00:00:00Z"},
		{"the first Berlin day starts where it ended", tiers.Day, "2026-11-19T00:00:00Z", toBerlin, "2026-11-19T00:00:00Z", "2026-11-19T23:00:00Z"},
		{"then whole Berlin days", tiers.Day, "2026-11-19T23:00:00Z", toBerlin, "2026-11-19T23:00:00Z", "2026-11-20T23:00:00Z"},
		{"the week in progress keeps its UTC bounds", tiers.Week, "2026-11-22T23:30:00Z", toBerlin, "2026-11-16T00:00:00Z", "2026-11-23T00:00:00Z"},
		{"the first Berlin week starts where it ended", tiers.Week, "2026-11-23T00:00:00Z", toBerlin, "2026-11-23T00:00:00Z", "2026-11-29T23:00:00Z"},
		{"the month in progress keeps its UTC bounds", tiers.Month, "2026-11-30T23:30:00Z", toBerlin, "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"},
		{"the first Berlin month starts where it ended", tiers.Month, "2026-12-01T00:00:00Z", toBerlin, "2026-12-01T00:00:00Z", "2026-12-31T23:00:00Z"},
		{"an hour never moves", tiers.Hour, "2026-11-18T23:30:00Z", toBerlin, "2026-11-18T23:00:00Z", "2026-11-19T00:00:00Z"},
		{"the Berlin day in progress is kept", tiers.Day, "2026-11-18T22:59:59Z", toNewYork, "2026-11-17T23:00:00Z", "2026-11-18T23:00:00Z"},
		{"New York's day then runs to its own midnight", tiers.Day, "2026-11-18T23:00:00Z", toNewYork, "2026-11-18T23:00:00Z", "2026-11-19T05:00:00Z"},
		{"changing back within the pinned day keeps it", tiers.Day, "2026-11-18T23:30:00Z", back, "2026-11-18T00:00:00Z", "2026-11-19T00:00:00Z"},
		{"and UTC days follow", tiers.Day, "2026-11-19T12:00:00Z", back, "2026-11-19T00:00:00Z", "2026-11-20T00:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkBounds(t, tt.window, tt.now, tt.anchor, tt.start, tt.end)
		})
	}
}

// fuzzZones are the time zones FuzzBounds tries: the common ones and those
// whose clocks did odd things (a jump or a repeat across midnight, half an
// hour of daylight saving time, a skipped date, a 45-minute offset).
var fuzzZones = []string{"UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe",
	"America/Havana", "America/Santiago", "America/Sao_Paulo", "Asia/Amman", "Pacific/Apia", "Pacific/Kiritimati",
	"Pacific/Chatham", "Asia/Kathmandu", "Africa/Casablanca", "America/St_Johns", "Antarctica/Troll"}

// FuzzBounds checks the calendar windows against their definition in any
// zone and at any instant of 1970..2100: the window holds now, and starts
// (ends) at the first instant whose local date is its first date (the one
// after its last), worked out from the local dates alone; for a day its
// own date, for a week the Monday on or before it, for a month the anchor
// day on or before it. Windows of an hour or less ignore the zone.
func FuzzBounds(f *testing.F) {
	f.Add(int64(1774746000), "Europe/Berlin", uint8(tiers.Day), uint8(0))       // 2026-03-29T01:00Z, the jump
	f.Add(int64(1792890000), "Europe/Berlin", uint8(tiers.Day), uint8(0))       // 2026-10-25T01:00Z, the repeat
	f.Add(int64(1772953200), "America/New_York", uint8(tiers.Week), uint8(0))   // 2026-03-08T07:00Z
	f.Add(int64(1793512800), "America/New_York", uint8(tiers.Month), uint8(15)) // 2026-11-01T06:00Z
	f.Fuzz(func(t *testing.T, sec int64, name string, window, day uint8) {
		const from, to = 0, 4102444800 // 1970..2100
		now := time.Unix(from+((sec%(to-from))+(to-from))%(to-from), 0).UTC()
		loc, err := tiers.LoadZone(name)
		if err != nil {
			loc = zone(t, fuzzZones[len(name)%len(fuzzZones)])
		}
		w := tiers.Window(window)
		if !w.Valid() {
			w = tiers.Windows[int(window)%len(tiers.Windows)]
		}
		a := tiers.Anchor{Day: int(day) % 29, Loc: loc}
		start, end := quota.Bounds(w, now, a)
		if now.Before(start) || !now.Before(end) {
			t.Fatalf("%s %s at %s: [%s, %s) does not hold now", loc, w, now, start, end)
		}
		if !w.Resets() || w == tiers.Hour || w.Short() {
			if s, e := quota.Bounds(w, now, tiers.Anchor{}); !s.Equal(start) || !e.Equal(end) {
				t.Fatalf("%s %s at %s: [%s, %s), want UTC's [%s, %s)", loc, w, now, start, end, s, e)
			}
			return
		}
		date := func(t time.Time) time.Time {
			y, m, d := t.In(loc).Date()
			return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		}
		today := date(now)
		var first, next time.Time // the window's first date and the one after its last
		switch w {
		case tiers.Day:
			first, next = today, today.AddDate(0, 0, 1)
		case tiers.Week:
			first = today.AddDate(0, 0, -((int(today.Weekday()) + 6) % 7))
			next = first.AddDate(0, 0, 7)
		case tiers.Month:
			d := max(1, a.Day)
			first = time.Date(today.Year(), today.Month(), d, 0, 0, 0, 0, time.UTC)
			if today.Day() < d {
				first = first.AddDate(0, -1, 0)
			}
			next = first.AddDate(0, 1, 0)
		}
		startsAt := func(x, d time.Time) bool { // x is the first instant on or after date d
			return !date(x).Before(d) && date(x.Add(-time.Nanosecond)).Before(d)
		}
		if !startsAt(start, first) || !startsAt(end, next) {
			t.Fatalf("%s %s at %s (local %s): [%s, %s) (local [%s, %s)), want from local %s to local %s",
				loc, w, now, now.In(loc), start, end, start.In(loc), end.In(loc), first.Format(time.DateOnly), next.Format(time.DateOnly))
		}
		if start.Location() != time.UTC || end.Location() != time.UTC {
			t.Fatalf("[%s, %s) is not in UTC", start, end)
		}
	})
}

// BenchmarkBounds measures a calendar window's bounds in UTC and in a
// zone: what a check pays per long window for its customer's calendar.
func BenchmarkBounds(b *testing.B) {
	for _, at := range []struct{ name, zone, now string }{
		{"UTC", "UTC", "2026-11-22T10:00:00Z"},
		{"Berlin", "Europe/Berlin", "2026-11-22T10:00:00Z"},
		{"Berlin_autumn_day", "Europe/Berlin", "2026-10-25T01:30:00Z"},
	} {
		anchor := tiers.Anchor{Day: 15, Loc: zone(b, at.zone)}
		now, err := time.Parse(time.RFC3339, at.now)
		if err != nil {
			b.Fatal(err)
		}
		for _, w := range []tiers.Window{tiers.Hour, tiers.Day, tiers.Week, tiers.Month} {
			b.Run(at.name+"/"+w.String(), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					quota.Bounds(w, now, anchor)
				}
			})
		}
	}
}

// boundsCase is a row of the Bounds tables: the window of now under anchor
// is [start, end), all times in RFC 3339.
type boundsCase struct {
	name       string
	window     tiers.Window
	now        string
	anchor     tiers.Anchor
	start, end string
}

// parseTime parses an RFC 3339 time, failing the test if it is not one.
func parseTime(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// checkBounds fails t unless Bounds(w, now, anchor) is [start, end), all
// RFC 3339 times, and returns the bounds it got.
func checkBounds(t *testing.T, w tiers.Window, now string, anchor tiers.Anchor, start, end string) (time.Time, time.Time) {
	t.Helper()
	gotStart, gotEnd := quota.Bounds(w, parseTime(t, now), anchor)
	if !gotStart.Equal(parseTime(t, start)) || !gotEnd.Equal(parseTime(t, end)) {
		t.Errorf("Bounds = [%s, %s), want [%s, %s)", gotStart, gotEnd, start, end)
	}
	return gotStart, gotEnd
}
