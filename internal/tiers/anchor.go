package tiers

import "time"

// Anchor decides where a customer's month windows start. A customer without
// an anchor day counts calendar months (day 1).
//
// A changed anchor day applies from the next period: the period in progress
// when the day changes is pinned with its exact bounds, and the first period
// on the new day starts where the pinned one ends (so it may be shorter than a
// month).
type Anchor struct {
	Day         int       // 1..28; 0 means calendar months
	PinnedStart time.Time // the period in progress at the last change, if any
	PinnedEnd   time.Time
}

// MonthPeriod returns the month window containing now.
func (a Anchor) MonthPeriod(now time.Time) (start, end time.Time) {
	now = now.UTC()
	if !a.PinnedEnd.IsZero() && now.Before(a.PinnedEnd) && !now.Before(a.PinnedStart) {
		return a.PinnedStart, a.PinnedEnd
	}
	start, end = monthPeriod(now, a.Day)
	if !a.PinnedEnd.IsZero() && !now.Before(a.PinnedEnd) && start.Before(a.PinnedEnd) {
		start = a.PinnedEnd
	}
	return start, end
}

// Change returns the anchor after moving it to day (0: calendar months) at
// now. The period in progress keeps its bounds; day applies from its end.
func (a Anchor) Change(day int, now time.Time) Anchor {
	now = now.UTC()
	if !a.PinnedEnd.IsZero() && now.Before(a.PinnedEnd) && !now.Before(a.PinnedStart) {
		// Still inside a pinned period: only the day that follows it changes.
		a.Day = day
		return a
	}
	if normalDay(day) == normalDay(a.Day) {
		a.Day = day
		return a
	}
	start, end := a.MonthPeriod(now)
	return Anchor{Day: day, PinnedStart: start, PinnedEnd: end}
}

func normalDay(d int) int {
	if d < 1 {
		return 1
	}
	return d
}

// monthPeriod returns the month window containing now for anchor day day.
// Days are at most 28, so every month has that day.
func monthPeriod(now time.Time, day int) (start, end time.Time) {
	day = normalDay(day)
	y, m, d := now.Date()
	if d < day {
		m--
	}
	start = time.Date(y, m, day, 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 1, 0)
}
