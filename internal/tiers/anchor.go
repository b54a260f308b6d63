package tiers

import "time"

// Anchor is a customer's calendar: where its day, week and month windows
// (and so its billing periods) start. They start at local midnight in the
// customer's time zone (Loc; nil means UTC): a day from 00:00, a week from
// Monday 00:00, a month from 00:00 on the anchor day (Day; 0 means the
// 1st). A day across a change of daylight saving time lasts 23 or 25
// hours, and a date a zone skipped has no window. Hour and shorter windows
// are not the calendar's: they stay aligned to UTC.
//
// A changed anchor day or time zone applies from the next window: the
// windows in progress at the change are pinned with their exact bounds
// (the month for a new day; the day, week and month for a new zone), and
// the first window of the new calendar starts where the pinned one ends,
// so it may be shorter than a whole one.
type Anchor struct {
	Day int            // 1..28; 0 means calendar months
	Loc *time.Location // the time zone; nil means UTC
	// The windows in progress at the last change that moved them, if
	// any: PinnedMonth for a change of day or zone, PinnedDay and
	// PinnedWeek for a change of zone.
	PinnedDay, PinnedWeek, PinnedMonth Pin
}

// Pin is a window kept with its exact bounds, [Start, End); the zero Pin
// is none.
type Pin struct{ Start, End time.Time }

// Set reports whether p pins a window.
func (p Pin) Set() bool { return !p.End.IsZero() }

// holds reports whether p is set and now falls in it.
func (p Pin) holds(now time.Time) bool {
	return p.Set() && now.Before(p.End) && !now.Before(p.Start)
}

// Zone returns the anchor's time zone, UTC when it has none.
func (a Anchor) Zone() *time.Location {
	if a.Loc == nil {
		return time.UTC
	}
	return a.Loc
}

// ZoneName returns the IANA name of the anchor's time zone.
func (a Anchor) ZoneName() string { return zoneName(a.Loc) }

// Period returns the window of calendar kind w (Day, Week or Month) that
// contains now, in UTC. It panics on another kind.
func (a Anchor) Period(w Window, now time.Time) (start, end time.Time) {
	now = now.UTC()
	pin := a.pin(w)
	if pin.holds(now) {
		return pin.Start, pin.End
	}
	start, end = natural(w, now, a.Zone(), a.Day)
	if pin.Set() && !now.Before(pin.End) && start.Before(pin.End) {
		start = pin.End
	}
	return start, end
}

// MonthPeriod returns the month window containing now.
func (a Anchor) MonthPeriod(now time.Time) (start, end time.Time) { return a.Period(Month, now) }

func (a *Anchor) pinRef(w Window) *Pin {
	switch w {
	case Day:
		return &a.PinnedDay
	case Week:
		return &a.PinnedWeek
	case Month:
		return &a.PinnedMonth
	}
	panic("tiers: " + w.String() + " is not a calendar window")
}

func (a Anchor) pin(w Window) Pin { return *a.pinRef(w) }

// Change returns the anchor after moving it to next's day and time zone
// at now (next's pins are ignored). The windows in progress whose bounds
// the move changes keep them; the new calendar applies from their end. A
// window already pinned and still in progress stays pinned as it is.
func (a Anchor) Change(next Anchor, now time.Time) Anchor {
	now = now.UTC()
	out := a
	out.Day, out.Loc = next.Day, next.Loc
	zoneMoved := zoneName(a.Loc) != zoneName(next.Loc)
	dayMoved := normalDay(a.Day) != normalDay(next.Day)
	for _, w := range [...]Window{Day, Week, Month} {
		moved := zoneMoved || w == Month && dayMoved
		p := out.pinRef(w)
		if !moved || p.holds(now) {
			continue
		}
		start, end := a.Period(w, now)
		*p = Pin{Start: start, End: end}
	}
	return out
}

func normalDay(d int) int {
	if d < 1 {
		return 1
	}
	return d
}

// natural returns the window of kind w containing now in loc for anchor
// day day, pins aside.
func natural(w Window, now time.Time, loc *time.Location, day int) (start, end time.Time) {
	if loc == time.UTC {
		// The common case, without a zone's lookups.
		y, m, d := now.Date()
		switch w {
		case Day:
			start = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
			return start, start.AddDate(0, 0, 1)
		case Week:
			start = time.Date(y, m, d-daysSinceMonday(now.Weekday()), 0, 0, 0, 0, time.UTC)
			return start, start.AddDate(0, 0, 7)
		case Month:
			day = normalDay(day)
			if d < day {
				m--
			}
			start = time.Date(y, m, day, 0, 0, 0, 0, time.UTC)
			return start, start.AddDate(0, 1, 0)
		}
		panic("tiers: " + w.String() + " is not a calendar window")
	}
	y, m, d := now.In(loc).Date()
	switch w {
	case Day:
		return Midnight(y, m, d, loc), Midnight(y, m, d+1, loc)
	case Week:
		d -= daysSinceMonday(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Weekday())
		return Midnight(y, m, d, loc), Midnight(y, m, d+7, loc)
	case Month:
		day = normalDay(day)
		if d < day {
			m--
		}
		return Midnight(y, m, day, loc), Midnight(y, m+1, day, loc)
	}
	panic("tiers: " + w.String() + " is not a calendar window")
}

func daysSinceMonday(wd time.Weekday) int { return (int(wd) + 6) % 7 }

// Midnight returns, in UTC, when the civil date y-m-d (normalized as
// time.Date does) starts in loc: its first instant, 00:00 local. Where
// the clocks jumped over midnight that day, the day starts where the jump
// lands; where they went back over it, at the first of the two midnights;
// a date the zone skipped altogether starts where the next one does.
func Midnight(y int, m time.Month, d int, loc *time.Location) time.Time {
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	if loc == time.UTC {
		return t
	}
	zs, ze := t.ZoneBounds()
	if (zs.IsZero() || t.Sub(zs) > dayMargin) && (ze.IsZero() || ze.Sub(t) > dayMargin) {
		// No change of offset near: midnight exists once, and is t.
		return t.UTC()
	}
	date := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	if civil(t, loc).Before(date) {
		// time.Date resolved a midnight that does not exist to an instant
		// before the jump: the day starts where the jump lands.
		if !ze.IsZero() {
			t = ze
		}
	} else if !zs.IsZero() {
		// A midnight that exists twice: time.Date may name the second;
		// the first, if there is one, is one change of offset earlier.
		_, off := t.Zone()
		_, prev := zs.Add(-time.Nanosecond).Zone()
		if e := t.Add(time.Duration(off-prev) * time.Second); e.Before(zs) {
			if l := e.In(loc); l.Hour() == 0 && l.Minute() == 0 && l.Second() == 0 && civil(e, loc).Equal(date) {
				t = e
			}
		}
	}
	return t.UTC()
}

// dayMargin is more than the longest local day, and than a zone's
// largest change of offset.
const dayMargin = 48 * time.Hour

// civil returns the local date of t in loc, as 00:00 UTC of that date.
func civil(t time.Time, loc *time.Location) time.Time {
	y, m, d := t.In(loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// LocalDate returns the date of t in the anchor's time zone, as 00:00 UTC
// of that date: the day a customer's usage history counts t in.
func (a Anchor) LocalDate(t time.Time) time.Time {
	if a.Loc == nil || a.Loc == time.UTC {
		y, m, d := t.UTC().Date()
		return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	}
	return civil(t, a.Loc)
}
