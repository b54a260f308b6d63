package quota

import (
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// Bounds returns the window of kind w that contains now: its start and its
// end (exclusive), in UTC. Day, week and month windows are the customer's
// calendar's (see tiers.Anchor): from local midnight in its time zone, a
// week from Monday, a month from its anchor day, pinned across a change of
// either. An hour is from the full hour in UTC, whatever the zone. Short
// windows return the current bucket of the sliding window counter,
// aligned to multiples of the window since the Unix epoch. Total, which
// never ends, is TotalStart..TotalEnd whatever now is.
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
	case tiers.Day, tiers.Week, tiers.Month:
		return anchor.Period(w, now)
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
