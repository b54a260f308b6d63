package quota_test

import (
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

func TestBounds(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	pinned := tiers.Anchor{Day: 10}.Change(20, at("2026-11-15T00:00:00Z"))
	tests := []struct {
		name       string
		window     tiers.Window
		now        string
		anchor     tiers.Anchor
		start, end string
	}{
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
			start, end := quota.Bounds(tt.window, at(tt.now), tt.anchor)
			if !start.Equal(at(tt.start)) || !end.Equal(at(tt.end)) {
				t.Errorf("Bounds = [%s, %s), want [%s, %s)", start, end, tt.start, tt.end)
			}
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
