package quota

import (
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// Bounds returns the window of kind w that contains now: its start and its
// end (exclusive). Calendar windows are in UTC: an hour from the full hour,
// a day from 00:00, a week from Monday 00:00, a month as the customer's
// anchor says. Short windows return the current bucket of the sliding
// window counter, aligned to multiples of the window since the Unix epoch.
// Total, which never ends, is TotalStart..TotalEnd whatever now is.
func Bounds(w tiers.Window, now time.Time, anchor tiers.Anchor) (start, end time.Time) {
	now = now.UTC()
	switch w {
	case tiers.Second, tiers.Minute:
		ms := now.UnixMilli()
		t := w.Length().Milliseconds()
		s := ms - mod(ms, t)
		return time.UnixMilli(s).UTC(), time.UnixMilli(s + t).UTC()
	case tiers.Hour:
		start = now.Truncate(time.Hour)
		return start, start.Add(time.Hour)
	case tiers.Day:
		y, m, d := now.Date()
		start = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 0, 1)
	case tiers.Week:
		y, m, d := now.Date()
		back := (int(now.Weekday()) + 6) % 7 // days since Monday
		start = time.Date(y, m, d-back, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 0, 7)
	case tiers.Month:
		return anchor.MonthPeriod(now)
	case tiers.Total:
		return TotalStart, TotalEnd
	}
	panic("quota: invalid window " + w.String())
}

// TotalStart and TotalEnd bound the window Total: its one counter starts
// at the Unix epoch, and its end is the latest instant an answer may name
// (see maxResetMs), which no clock reaches. Answers report no reset for it.
var (
	TotalStart = time.Unix(0, 0).UTC()
	TotalEnd   = time.UnixMilli(maxResetMs).UTC()
)

// mod is the non-negative remainder of a/b for b > 0.
func mod(a, b int64) int64 {
	r := a % b
	if r < 0 {
		r += b
	}
	return r
}
