package tiers

import (
	"fmt"
	"testing"
	"time"
)

// period is a month window, written [start, end).
type period struct{ start, end time.Time }

func (p period) String() string {
	return fmt.Sprintf("[%s, %s)", p.start.Format("2006-01-02T15:04Z"), p.end.Format("2006-01-02T15:04Z"))
}

func (p period) equal(q period) bool { return p.start.Equal(q.start) && p.end.Equal(q.end) }

func monthOf(a Anchor, now time.Time) period {
	s, e := a.MonthPeriod(now)
	return period{s, e}
}

func TestMonthPeriod(t *testing.T) {
	tests := []struct {
		name string
		day  int
		now  time.Time
		want period
	}{
		// Calendar months (no anchor day; day 1 is the same).
		{"calendar, mid-month", 0, time.Date(2026, 2, 14, 12, 0, 0, 0, time.UTC), period{date(2026, 2, 1), date(2026, 3, 1)}},
		{"calendar, first instant", 0, date(2026, 3, 1), period{date(2026, 3, 1), date(2026, 4, 1)}},
		{"calendar, last instant", 0, date(2026, 3, 1).Add(-time.Nanosecond), period{date(2026, 2, 1), date(2026, 3, 1)}},
		{"calendar, December into the next year", 0, date(2026, 12, 31), period{date(2026, 12, 1), date(2027, 1, 1)}},
		{"calendar, 31st of a long month", 0, date(2026, 1, 31), period{date(2026, 1, 1), date(2026, 2, 1)}},
		{"calendar, 30th of a short month", 0, date(2026, 4, 30), period{date(2026, 4, 1), date(2026, 5, 1)}},
		{"calendar, leap day", 0, date(2024, 2, 29), period{date(2024, 2, 1), date(2024, 3, 1)}},
		{"day 1 is the calendar month", 1, date(2024, 2, 29), period{date(2024, 2, 1), date(2024, 3, 1)}},
		{"negative day is the calendar month", -3, date(2026, 5, 9), period{date(2026, 5, 1), date(2026, 6, 1)}},
		{"calendar, time in another zone is taken as UTC", 0,
			time.Date(2026, 3, 1, 0, 30, 0, 0, time.FixedZone("UTC+1", 3600)), // 2026-02-28T23:30Z
			period{date(2026, 2, 1), date(2026, 3, 1)}},

		// Anchor day 15.
		{"day 15, before the anchor", 15, time.Date(2026, 3, 14, 23, 59, 59, 0, time.UTC), period{date(2026, 2, 15), date(2026, 3, 15)}},
		{"day 15, on the anchor", 15, date(2026, 3, 15), period{date(2026, 3, 15), date(2026, 4, 15)}},
		{"day 15, January reaches back into December", 15, date(2026, 1, 10), period{date(2025, 12, 15), date(2026, 1, 15)}},
		{"day 15, December reaches into January", 15, date(2026, 12, 20), period{date(2026, 12, 15), date(2027, 1, 15)}},

		// Anchor day 28, the largest: every month has it.
		{"day 28, on the 28th of February", 28, date(2026, 2, 28), period{date(2026, 2, 28), date(2026, 3, 28)}},
		{"day 28, the day before in February", 28, date(2026, 2, 27), period{date(2026, 1, 28), date(2026, 2, 28)}},
		{"day 28, on the 31st of January", 28, date(2026, 1, 31), period{date(2026, 1, 28), date(2026, 2, 28)}},
		{"day 28, on the 31st of March", 28, date(2026, 3, 31), period{date(2026, 3, 28), date(2026, 4, 28)}},
		{"day 28, on the 30th of April", 28, date(2026, 4, 30), period{date(2026, 4, 28), date(2026, 5, 28)}},
		{"day 28, on the 1st of March after a short February", 28, date(2026, 3, 1), period{date(2026, 2, 28), date(2026, 3, 28)}},
		{"day 28, leap day belongs to the period from the 28th", 28, date(2024, 2, 29), period{date(2024, 2, 28), date(2024, 3, 28)}},
		{"day 28, the day before a leap day", 28, date(2024, 2, 27), period{date(2024, 1, 28), date(2024, 2, 28)}},
		{"day 28, 31st of December", 28, date(2026, 12, 31), period{date(2026, 12, 28), date(2027, 1, 28)}},
		{"day 28, new year's day", 28, date(2027, 1, 1), period{date(2026, 12, 28), date(2027, 1, 28)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := monthOf(Anchor{Day: tc.day}, tc.now)
			if !got.equal(tc.want) {
				t.Errorf("MonthPeriod(%v) with day %d = %v, want %v", tc.now, tc.day, got, tc.want)
			}
			if got.start.Location() != time.UTC || got.end.Location() != time.UTC {
				t.Errorf("period %v is not in UTC", got)
			}
		})
	}
}

// TestMonthPeriodEveryDay checks, for every anchor day the API accepts and
// every day of a leap year and a common year, that the month window holds
// now, starts at 00:00 UTC on the anchor day, lasts one calendar month, and
// that consecutive windows meet without a gap or an overlap.
func TestMonthPeriodEveryDay(t *testing.T) {
	for day := 0; day <= 28; day++ {
		t.Run(fmt.Sprintf("day %d", day), func(t *testing.T) {
			a := Anchor{Day: day}
			wantDay := max(day, 1)
			for now := date(2024, 1, 1); now.Before(date(2026, 1, 1)); now = now.Add(12 * time.Hour) {
				p := monthOf(a, now)
				if now.Before(p.start) || !now.Before(p.end) {
					t.Fatalf("at %v: period %v does not hold now", now, p)
				}
				if p.start.Day() != wantDay || p.start.Hour() != 0 || p.start.Minute() != 0 || p.start.Nanosecond() != 0 {
					t.Fatalf("at %v: period %v does not start at 00:00 on day %d", now, p, wantDay)
				}
				if want := p.start.AddDate(0, 1, 0); !p.end.Equal(want) || p.end.Day() != wantDay {
					t.Fatalf("at %v: period %v does not last one month (end should be %v)", now, p, want)
				}
				if next := monthOf(a, p.end); !next.start.Equal(p.end) {
					t.Fatalf("at %v: period %v is followed by %v", now, p, next)
				}
				if prev := monthOf(a, p.start.Add(-time.Nanosecond)); !prev.end.Equal(p.start) {
					t.Fatalf("at %v: period %v is preceded by %v", now, p, prev)
				}
			}
		})
	}
}

// TestAnchorChange follows a customer through a change of billing anchor
// day: the period in progress keeps its bounds, the first period on the new
// day starts where it ends, and later periods follow the new day.
func TestAnchorChange(t *testing.T) {
	type probe struct {
		at   time.Time
		want period
	}
	tests := []struct {
		name     string
		from     Anchor
		changes  []change // applied in order
		probes   []probe
		wantPins bool
	}{
		{
			name:     "calendar to day 15: a short first period",
			from:     Anchor{},
			changes:  []change{{15, date(2026, 3, 10)}},
			wantPins: true,
			probes: []probe{
				{date(2026, 3, 10), period{date(2026, 3, 1), date(2026, 4, 1)}},
				{date(2026, 3, 20), period{date(2026, 3, 1), date(2026, 4, 1)}}, // would be [Mar 15, Apr 15) unpinned
				{date(2026, 4, 1).Add(-time.Nanosecond), period{date(2026, 3, 1), date(2026, 4, 1)}},
				{date(2026, 4, 1), period{date(2026, 4, 1), date(2026, 4, 15)}},
				{date(2026, 4, 14), period{date(2026, 4, 1), date(2026, 4, 15)}},
				{date(2026, 4, 15), period{date(2026, 4, 15), date(2026, 5, 15)}},
				{date(2026, 6, 1), period{date(2026, 5, 15), date(2026, 6, 15)}},
			},
		},
		{
			name:     "day 15 to calendar",
			from:     Anchor{Day: 15},
			changes:  []change{{0, date(2026, 3, 10)}},
			wantPins: true,
			probes: []probe{
				{date(2026, 3, 10), period{date(2026, 2, 15), date(2026, 3, 15)}},
				{date(2026, 3, 14), period{date(2026, 2, 15), date(2026, 3, 15)}},
				{date(2026, 3, 15), period{date(2026, 3, 15), date(2026, 4, 1)}},
				{date(2026, 4, 1), period{date(2026, 4, 1), date(2026, 5, 1)}},
			},
		},
		{
			name:     "later day: day 10 to day 20",
			from:     Anchor{Day: 10},
			changes:  []change{{20, date(2026, 3, 15)}},
			wantPins: true,
			probes: []probe{
				{date(2026, 3, 25), period{date(2026, 3, 10), date(2026, 4, 10)}},
				{date(2026, 4, 10), period{date(2026, 4, 10), date(2026, 4, 20)}},
				{date(2026, 4, 20), period{date(2026, 4, 20), date(2026, 5, 20)}},
			},
		},
		{
			name:     "earlier day: day 20 to day 10",
			from:     Anchor{Day: 20},
			changes:  []change{{10, date(2026, 3, 25)}},
			wantPins: true,
			probes: []probe{
				{date(2026, 4, 10), period{date(2026, 3, 20), date(2026, 4, 20)}},
				{date(2026, 4, 20), period{date(2026, 4, 20), date(2026, 5, 10)}},
				{date(2026, 5, 10), period{date(2026, 5, 10), date(2026, 6, 10)}},
			},
		},
		{
			name:     "day 28 to day 1 across a short February",
			from:     Anchor{Day: 28},
			changes:  []change{{1, date(2026, 2, 28)}},
			wantPins: true,
			probes: []probe{
				{date(2026, 3, 27), period{date(2026, 2, 28), date(2026, 3, 28)}},
				{date(2026, 3, 28), period{date(2026, 3, 28), date(2026, 4, 1)}},
				{date(2026, 4, 1), period{date(2026, 4, 1), date(2026, 5, 1)}},
			},
		},
		{
			name:     "calendar to day 28 on a leap day",
			from:     Anchor{},
			changes:  []change{{28, date(2024, 2, 29)}},
			wantPins: true,
			probes: []probe{
				{date(2024, 2, 29), period{date(2024, 2, 1), date(2024, 3, 1)}},
				{date(2024, 3, 1), period{date(2024, 3, 1), date(2024, 3, 28)}},
				{date(2024, 3, 28), period{date(2024, 3, 28), date(2024, 4, 28)}},
			},
		},
		{
			name:     "changing on the first instant of a period pins that whole period",
			from:     Anchor{Day: 5},
			changes:  []change{{25, date(2026, 7, 5)}},
			wantPins: true,
			probes: []probe{
				{date(2026, 7, 5), period{date(2026, 7, 5), date(2026, 8, 5)}},
				{date(2026, 7, 30), period{date(2026, 7, 5), date(2026, 8, 5)}},
				{date(2026, 8, 5), period{date(2026, 8, 5), date(2026, 8, 25)}},
			},
		},
		{
			name:    "same day: nothing pinned",
			from:    Anchor{Day: 15},
			changes: []change{{15, date(2026, 3, 10)}},
			probes: []probe{
				{date(2026, 3, 20), period{date(2026, 3, 15), date(2026, 4, 15)}},
			},
		},
		{
			name:    "no day to day 1: both are calendar months",
			from:    Anchor{},
			changes: []change{{1, date(2026, 3, 10)}},
			probes: []probe{
				{date(2026, 3, 20), period{date(2026, 3, 1), date(2026, 4, 1)}},
			},
		},
		{
			name:    "day 1 to no day: both are calendar months",
			from:    Anchor{Day: 1},
			changes: []change{{0, date(2026, 3, 10)}},
			probes: []probe{
				{date(2026, 3, 20), period{date(2026, 3, 1), date(2026, 4, 1)}},
			},
		},
		{
			name:     "second change inside the pinned period only moves the next day",
			from:     Anchor{},
			changes:  []change{{15, date(2026, 3, 10)}, {20, date(2026, 3, 20)}},
			wantPins: true,
			probes: []probe{
				{date(2026, 3, 25), period{date(2026, 3, 1), date(2026, 4, 1)}},
				{date(2026, 4, 1), period{date(2026, 4, 1), date(2026, 4, 20)}},
				{date(2026, 4, 20), period{date(2026, 4, 20), date(2026, 5, 20)}},
			},
		},
		{
			name:     "changing back inside the pinned period restores plain periods",
			from:     Anchor{},
			changes:  []change{{15, date(2026, 3, 10)}, {0, date(2026, 3, 20)}},
			wantPins: true,
			probes: []probe{
				{date(2026, 3, 25), period{date(2026, 3, 1), date(2026, 4, 1)}},
				{date(2026, 4, 5), period{date(2026, 4, 1), date(2026, 5, 1)}},
			},
		},
		{
			name:     "change during the short first period pins it",
			from:     Anchor{},
			changes:  []change{{15, date(2026, 3, 10)}, {25, date(2026, 4, 5)}},
			wantPins: true,
			probes: []probe{
				{date(2026, 4, 5), period{date(2026, 4, 1), date(2026, 4, 15)}},
				{date(2026, 4, 15), period{date(2026, 4, 15), date(2026, 4, 25)}},
				{date(2026, 4, 25), period{date(2026, 4, 25), date(2026, 5, 25)}},
			},
		},
		{
			name:     "change a long time after an earlier one",
			from:     Anchor{},
			changes:  []change{{15, date(2026, 3, 10)}, {5, date(2026, 9, 20)}},
			wantPins: true,
			probes: []probe{
				{date(2026, 9, 20), period{date(2026, 9, 15), date(2026, 10, 15)}},
				{date(2026, 10, 15), period{date(2026, 10, 15), date(2026, 11, 5)}},
				{date(2026, 11, 5), period{date(2026, 11, 5), date(2026, 12, 5)}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.from
			for _, c := range tc.changes {
				before := monthOf(a, c.at)
				a = a.Change(Anchor{Day: c.day}, c.at)
				if a.Day != c.day {
					t.Errorf("after Change(%d, %v): Day = %d", c.day, c.at, a.Day)
				}
				if after := monthOf(a, c.at); !after.equal(before) {
					t.Errorf("Change(%d, %v) moved the period in progress from %v to %v", c.day, c.at, before, after)
				}
			}
			if pinned := a.PinnedMonth.Set(); pinned != tc.wantPins {
				t.Errorf("pinned = %v (%v), want %v", pinned, a.PinnedMonth, tc.wantPins)
			}
			for _, p := range tc.probes {
				if got := monthOf(a, p.at); !got.equal(p.want) {
					t.Errorf("at %s: period %v, want %v", p.at.Format(time.RFC3339Nano), got, p.want)
				}
			}
		})
	}
}

// change is one Change call: move to day at at.
type change struct {
	day int
	at  time.Time
}

// TestAnchorChangeEveryPair changes between every pair of anchor days the
// API accepts, at several moments of the year, and walks the following
// months: the period in progress never moves, periods tile time without a
// gap or an overlap, none is longer than a month, and from the second month
// on they are the plain periods of the new day.
func TestAnchorChangeEveryPair(t *testing.T) {
	moments := []time.Time{
		date(2026, 1, 31).Add(13 * time.Hour),
		date(2026, 2, 28),
		date(2024, 2, 29).Add(23 * time.Hour),
		date(2026, 6, 14).Add(6 * time.Hour),
		date(2026, 12, 31).Add(23*time.Hour + 59*time.Minute),
	}
	for from := 0; from <= 28; from++ {
		for to := 0; to <= 28; to++ {
			for _, at := range moments {
				old := Anchor{Day: from}
				a := old.Change(Anchor{Day: to}, at)
				cur := monthOf(a, at)
				if want := monthOf(old, at); !cur.equal(want) {
					t.Fatalf("day %d -> %d at %v: period in progress %v, want %v", from, to, at, cur, want)
				}
				for step := 0; step < 5; step++ {
					next := monthOf(a, cur.end)
					if !next.start.Equal(cur.end) {
						t.Fatalf("day %d -> %d at %v: %v is followed by %v", from, to, at, cur, next)
					}
					if !next.start.Before(next.end) || next.end.After(next.start.AddDate(0, 1, 0)) {
						t.Fatalf("day %d -> %d at %v: period %v is empty or longer than a month", from, to, at, next)
					}
					if mid := next.start.Add(next.end.Sub(next.start) / 2); !monthOf(a, mid).equal(next) {
						t.Fatalf("day %d -> %d at %v: mid-period %v gives %v, want %v", from, to, at, mid, monthOf(a, mid), next)
					}
					if step >= 1 {
						if plain := monthOf(Anchor{Day: to}, next.start); !plain.equal(next) {
							t.Fatalf("day %d -> %d at %v: period %v, want the plain period %v", from, to, at, next, plain)
						}
					}
					cur = next
				}
			}
		}
	}
}
