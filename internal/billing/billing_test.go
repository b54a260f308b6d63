package billing

import (
	"errors"
	"math/big"
	"reflect"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

func day(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }

func pro(from, to time.Time) Terms {
	return Terms{Customer: "acme", From: from, To: to, Plan: "pro", PlanName: "Pro", PriceCents: 4900,
		Currency: "USD", Interval: "month", OveragePrices: map[string]int64{"api_calls": 1000}}
}

func with(t Terms, f func(*Terms)) Terms { f(&t); return t }

func metric(s string) *string { return &s }

func TestRoundHalfUp(t *testing.T) {
	tests := []struct {
		num, den, want int64
	}{
		{0, 7, 0},
		{5, 10, 1},  // .5 exactly goes up
		{15, 10, 2}, // 1.5 too
		{25, 10, 3}, // 2.5 too: half up, not half even
		{4999, 10000, 0},
		{5000, 10000, 1},
		{14999, 10000, 1},
		{2450, 100, 25}, // 24.5
		{2449, 100, 24},
	}
	for _, tt := range tests {
		got, ok := roundHalfUp(big.NewInt(tt.num), tt.den)
		if !ok || got != tt.want {
			t.Errorf("roundHalfUp(%d, %d) = %d, %v; want %d", tt.num, tt.den, got, ok, tt.want)
		}
	}
	if _, ok := roundHalfUp(mul(tiers.MaxLimit, tiers.MaxLimit), 1); ok {
		t.Errorf("roundHalfUp of 2^106 fits an int64")
	}
}

func TestPeriodOf(t *testing.T) {
	nov := Month{2026, time.November}
	tests := []struct {
		name  string
		month Month
		terms []Terms
		want  Period
	}{
		{"calendar month", nov, []Terms{pro(day(2026, 1, 1), time.Time{})}, Period{day(2026, 11, 1), day(2026, 12, 1)}},
		{"anchor 15 across a month end", nov, []Terms{with(pro(day(2026, 1, 1), time.Time{}), func(t *Terms) { t.AnchorDay = 15 })},
			Period{day(2026, 11, 15), day(2026, 12, 15)}},
		{"anchor 28 across a year end", Month{2026, time.December}, []Terms{with(pro(day(2026, 1, 1), time.Time{}), func(t *Terms) { t.AnchorDay = 28 })},
			Period{day(2026, 12, 28), day(2027, 1, 28)}},
		{"leap February", Month{2028, time.February}, []Terms{pro(day(2026, 1, 1), time.Time{})}, Period{day(2028, 2, 1), day(2028, 3, 1)}},
		{"created later in the month: its own anchor", nov, []Terms{with(pro(day(2026, 11, 20), time.Time{}), func(t *Terms) { t.AnchorDay = 15 })},
			Period{day(2026, 11, 15), day(2026, 12, 15)}},
		{"anchor moved from 15 to 1: a shorter period, no gap", nov, []Terms{
			with(pro(day(2026, 1, 1), day(2026, 11, 20)), func(t *Terms) { t.AnchorDay = 15 }),
			pro(day(2026, 11, 20), time.Time{})},
			Period{day(2026, 11, 15), day(2026, 12, 1)}},
		{"the month after it", Month{2026, time.December}, []Terms{
			with(pro(day(2026, 1, 1), day(2026, 11, 20)), func(t *Terms) { t.AnchorDay = 15 }),
			pro(day(2026, 11, 20), time.Time{})},
			Period{day(2026, 12, 1), day(2027, 1, 1)}},
		{"Berlin: from local midnight, an hour short across the change", Month{2026, time.March},
			[]Terms{with(pro(day(2026, 1, 1), time.Time{}), func(t *Terms) { t.TimeZone = "Europe/Berlin" })},
			Period{day(2026, 2, 28).Add(23 * time.Hour), day(2026, 3, 31).Add(22 * time.Hour)}},
		{"New York, anchor 15", nov,
			[]Terms{with(pro(day(2026, 1, 1), time.Time{}), func(t *Terms) { t.TimeZone = "America/New_York"; t.AnchorDay = 15 })},
			Period{day(2026, 11, 15).Add(5 * time.Hour), day(2026, 12, 15).Add(5 * time.Hour)}},
		{"moved from UTC to Tokyo: the next period starts at Tokyo's midnight", nov, []Terms{
			pro(day(2026, 1, 1), day(2026, 11, 20)),
			with(pro(day(2026, 11, 20), time.Time{}), func(t *Terms) { t.TimeZone = "Asia/Tokyo" })},
			Period{day(2026, 11, 1), day(2026, 11, 30).Add(15 * time.Hour)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PeriodOf(tt.month, tt.terms); got != tt.want {
				t.Errorf("PeriodOf = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseMonth(t *testing.T) {
	for _, s := range []string{"", "2026", "2026-1", "2026-13", "2026-00", "0000-05", "2026-11-01", "26-11", "2026/11", "２026-11"} {
		if _, err := ParseMonth("period", s); err == nil {
			t.Errorf("ParseMonth(%q) accepted it", s)
		}
	}
	if m, err := ParseMonth("period", "2026-02"); err != nil || m != (Month{2026, time.February}) {
		t.Errorf("ParseMonth(2026-02) = %v, %v", m, err)
	}
}

// Proration and rounding: each line rounds half up once, from exact
// integer products.
func TestBuild(t *testing.T) {
	nov := Period{day(2026, 11, 1), day(2026, 12, 1)} // 30 days: 2592000 s
	basic := func(from, to time.Time) Terms {
		return Terms{Customer: "acme", From: from, To: to, Plan: "basic", PlanName: "Basic", PriceCents: 1000,
			Currency: "USD", Interval: "month", OveragePrices: map[string]int64{}}
	}
	base := func(plan string, secs, unit, amount int64, desc string) Line {
		return Line{Kind: KindBase, Plan: plan, Quantity: secs, UnitPriceMicros: unit, AmountCents: amount, Description: desc}
	}
	over := func(plan, m string, units, unit, amount int64, desc string) Line {
		return Line{Kind: KindOverage, Plan: plan, Metric: metric(m), Quantity: units, UnitPriceMicros: unit, AmountCents: amount, Description: desc}
	}
	tests := []struct {
		name   string
		period Period
		terms  []Terms
		usage  []Overage
		want   []Line
		total  int64
	}{
		{"whole month", nov, []Terms{pro(day(2026, 1, 1), time.Time{})}, nil,
			[]Line{base("pro", 2592000, 49000000, 4900, "Pro, 49.00 USD per month, for 2592000 s of the period's 2592000 s")}, 4900},
		{"a plan change mid-period", nov, []Terms{basic(day(2026, 1, 1), day(2026, 11, 16)), pro(day(2026, 11, 16), time.Time{})}, nil,
			[]Line{
				base("basic", 1296000, 10000000, 500, "Basic, 10.00 USD per month, for 1296000 s of the period's 2592000 s"),
				base("pro", 1296000, 49000000, 2450, "Pro, 49.00 USD per month, for 1296000 s of the period's 2592000 s"),
			}, 2950},
		{"half a cent rounds up", nov, []Terms{with(pro(day(2026, 11, 16), time.Time{}), func(t *Terms) { t.PriceCents = 4901 })}, nil,
			[]Line{base("pro", 1296000, 49010000, 2451, "Pro, 49.01 USD per month, for 1296000 s of the period's 2592000 s")}, 2451}, // 2450.5
		{"just under half a cent rounds down", nov, []Terms{with(pro(day(2026, 11, 16).Add(time.Second), time.Time{}), func(t *Terms) { t.PriceCents = 4901 })}, nil,
			[]Line{base("pro", 1295999, 49010000, 2450, "Pro, 49.01 USD per month, for 1295999 s of the period's 2592000 s")}, 2450},
		{"anchor 15 across a month end", Period{day(2026, 11, 15), day(2026, 12, 15)},
			[]Terms{with(pro(day(2026, 1, 1), day(2026, 12, 1)), func(t *Terms) { t.AnchorDay = 15 }),
				with(basic(day(2026, 12, 1), time.Time{}), func(t *Terms) { t.AnchorDay = 15 })}, nil,
			[]Line{
				base("pro", 1382400, 49000000, 2613, "Pro, 49.00 USD per month, for 1382400 s of the period's 2592000 s"),    // 16/30 × 4900 = 2613.33
				base("basic", 1209600, 10000000, 467, "Basic, 10.00 USD per month, for 1209600 s of the period's 2592000 s"), // 466.67
			}, 3080},
		{"leap February 2028: 29 days", Period{day(2028, 2, 1), day(2028, 3, 1)},
			[]Terms{pro(day(2026, 1, 1), day(2028, 2, 15)), basic(day(2028, 2, 15), time.Time{})}, nil,
			[]Line{
				base("pro", 1209600, 49000000, 2366, "Pro, 49.00 USD per month, for 1209600 s of the period's 2505600 s"),    // 14/29 × 4900 = 2365.5
				base("basic", 1296000, 10000000, 517, "Basic, 10.00 USD per month, for 1296000 s of the period's 2505600 s"), // 15/29 × 1000 = 517.24
			}, 2883},
		{"a plan with no price still has its line", nov, []Terms{with(basic(day(2026, 1, 1), time.Time{}), func(t *Terms) { t.PriceCents = 0; t.PlanName = "Free"; t.Plan = "free" })}, nil,
			[]Line{base("free", 2592000, 0, 0, "Free, 0.00 USD per month, for 2592000 s of the period's 2592000 s")}, 0},
		{"yearly price", nov, []Terms{with(pro(day(2026, 11, 16), time.Time{}), func(t *Terms) { t.PriceCents = 49000; t.Interval = "year" })}, nil,
			[]Line{base("pro", 1296000, 490000000, 2042, "Pro, 490.00 USD per year, for 1296000 s of the year's 31104000 s")}, 2042}, // 2041.67
		{"weekly price", nov, []Terms{with(pro(day(2026, 11, 16), time.Time{}), func(t *Terms) { t.PriceCents = 1000; t.Interval = "week" })}, nil,
			[]Line{base("pro", 1296000, 10000000, 2143, "Pro, 10.00 USD per week, for 1296000 s of the week's 604800 s")}, 2143}, // 15/7 × 1000 = 2142.86
		{"daily price", nov, []Terms{with(pro(day(2026, 11, 16).Add(12*time.Hour), time.Time{}), func(t *Terms) { t.PriceCents = 101; t.Interval = "day" })}, nil,
			[]Line{base("pro", 1252800, 1010000, 1465, "Pro, 1.01 USD per day, for 1252800 s of the day's 86400 s")}, 1465}, // 14.5 × 101 = 1464.5
		{"terms of no length give no line", nov, []Terms{basic(day(2026, 1, 1), day(2026, 11, 16)), pro(day(2026, 11, 16), day(2026, 11, 16)), basic(day(2026, 11, 16), time.Time{})}, nil,
			[]Line{base("basic", 2592000, 10000000, 1000, "Basic, 10.00 USD per month, for 2592000 s of the period's 2592000 s")}, 1000},
		// Terms are as precise as writes (microseconds): a plan held less
		// than a second keeps its line, at the whole seconds from the
		// second it starts in to the one it ends in, so that the lines
		// still add up to the period.
		{"a plan held under a second, within one", nov, []Terms{
			basic(day(2026, 1, 1), day(2026, 11, 16).Add(200*time.Millisecond)),
			pro(day(2026, 11, 16).Add(200*time.Millisecond), day(2026, 11, 16).Add(700*time.Millisecond)),
			basic(day(2026, 11, 16).Add(700*time.Millisecond), time.Time{})}, nil,
			[]Line{
				base("basic", 1296000, 10000000, 500, "Basic, 10.00 USD per month, for 1296000 s of the period's 2592000 s"),
				base("pro", 0, 49000000, 0, "Pro, 49.00 USD per month, for 0 s of the period's 2592000 s"),
				base("basic", 1296000, 10000000, 500, "Basic, 10.00 USD per month, for 1296000 s of the period's 2592000 s"),
			}, 1000},
		{"a plan held under a second, across one", nov, []Terms{
			basic(day(2026, 1, 1), day(2026, 11, 16).Add(-200*time.Millisecond)),
			pro(day(2026, 11, 16).Add(-200*time.Millisecond), day(2026, 11, 16).Add(300*time.Millisecond)),
			basic(day(2026, 11, 16).Add(300*time.Millisecond), time.Time{})}, nil,
			[]Line{
				base("basic", 1295999, 10000000, 500, "Basic, 10.00 USD per month, for 1295999 s of the period's 2592000 s"),
				base("pro", 1, 49000000, 0, "Pro, 49.00 USD per month, for 1 s of the period's 2592000 s"),
				base("basic", 1296000, 10000000, 500, "Basic, 10.00 USD per month, for 1296000 s of the period's 2592000 s"),
			}, 1000},
		{"a deleted customer's last period", nov, []Terms{pro(day(2026, 1, 1), day(2026, 11, 11))}, nil,
			[]Line{base("pro", 864000, 49000000, 1633, "Pro, 49.00 USD per month, for 864000 s of the period's 2592000 s")}, 1633}, // 1633.33
		{"no terms in the period", nov, []Terms{pro(day(2026, 1, 1), day(2026, 10, 1))}, nil, []Line{}, 0},
		{"overage priced by the terms at each day's end", nov,
			[]Terms{pro(day(2026, 1, 1), day(2026, 11, 16).Add(time.Hour)), basic(day(2026, 11, 16).Add(time.Hour), time.Time{})},
			[]Overage{{day(2026, 11, 2), "api_calls", 1500}, {day(2026, 11, 15), "api_calls", 1}, {day(2026, 11, 16), "api_calls", 7}, {day(2026, 11, 16), "exports", 3}},
			[]Line{
				base("pro", 1299600, 49000000, 2457, "Pro, 49.00 USD per month, for 1299600 s of the period's 2592000 s"),           // 2457.29
				base("basic", 1292400, 10000000, 499, "Basic, 10.00 USD per month, for 1292400 s of the period's 2592000 s"),        // 498.61
				over("pro", "api_calls", 1501, 1000, 150, "1501 overage units of api_calls on Pro at 1000 micros (0.001 USD) each"), // 150.1
				over("basic", "api_calls", 7, 0, 0, "7 overage units of api_calls on Basic, which has no overage price for it: not billed"),
				over("basic", "exports", 3, 0, 0, "3 overage units of exports on Basic, which has no overage price for it: not billed"),
			}, 3106},
		{"overage at half a cent rounds up", nov, []Terms{with(pro(day(2026, 1, 1), time.Time{}), func(t *Terms) { t.PriceCents = 0; t.OveragePrices = map[string]int64{"api_calls": 50} })},
			[]Overage{{day(2026, 11, 30), "api_calls", 100}, {day(2026, 12, 1), "api_calls", 999}},
			[]Line{
				base("pro", 2592000, 0, 0, "Pro, 0.00 USD per month, for 2592000 s of the period's 2592000 s"),
				over("pro", "api_calls", 100, 50, 1, "100 overage units of api_calls on Pro at 50 micros (0.00005 USD) each"), // 0.5 cent
			}, 1},
		{"Tokyo: local dates, a month from local midnight", Period{day(2026, 10, 31).Add(15 * time.Hour), day(2026, 11, 30).Add(15 * time.Hour)},
			[]Terms{with(pro(day(2026, 1, 1), time.Time{}), func(t *Terms) { t.TimeZone = "Asia/Tokyo" })},
			[]Overage{{day(2026, 10, 31), "api_calls", 1000}, {day(2026, 11, 1), "api_calls", 10}, {day(2026, 11, 30), "api_calls", 7}, {day(2026, 12, 1), "api_calls", 1000}},
			[]Line{
				base("pro", 2592000, 49000000, 4900, "Pro, 49.00 USD per month, for 2592000 s of the period's 2592000 s"),
				over("pro", "api_calls", 17, 1000, 2, "17 overage units of api_calls on Pro at 1000 micros (0.001 USD) each"), // 1.7 cents
			}, 4902},
		{"Berlin: a month an hour short is still the month", Period{day(2026, 2, 28).Add(23 * time.Hour), day(2026, 3, 31).Add(22 * time.Hour)},
			[]Terms{with(pro(day(2026, 1, 1), time.Time{}), func(t *Terms) { t.TimeZone = "Europe/Berlin" })}, nil,
			[]Line{base("pro", 2674800, 49000000, 4900, "Pro, 49.00 USD per month, for 2674800 s of the period's 2674800 s")}, 4900},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := Build("acme", tt.period, tt.terms, tt.usage)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(st.Lines, tt.want) {
				t.Errorf("lines\n%s\nwant\n%s", dump(st.Lines), dump(tt.want))
			}
			if st.TotalCents != tt.total || st.Currency != "USD" || st.Period != tt.period {
				t.Errorf("total %d %s over %v, want %d USD over %v", st.TotalCents, st.Currency, st.Period, tt.total, tt.period)
			}
		})
	}
}

func dump(lines []Line) string {
	s := ""
	for _, l := range lines {
		m := "-"
		if l.Metric != nil {
			m = *l.Metric
		}
		s += l.Kind + " " + l.Plan + " " + m + " " + itoa(l.Quantity) + " " + itoa(l.UnitPriceMicros) + " " + itoa(l.AmountCents) + " " + l.Description + "\n"
	}
	return s
}

func itoa(n int64) string { return big.NewInt(n).String() }

func TestBuildConflicts(t *testing.T) {
	nov := Period{day(2026, 11, 1), day(2026, 12, 1)}
	eur := func(from, to time.Time) Terms { return with(pro(from, to), func(t *Terms) { t.Currency = "EUR" }) }
	tests := []struct {
		name  string
		terms []Terms
		usage []Overage
		want  string
	}{
		{"mixed currencies", []Terms{pro(day(2026, 1, 1), day(2026, 11, 10)), eur(day(2026, 11, 10), time.Time{})}, nil,
			"the period of customer acme mixes currencies EUR and USD: one statement bills one currency"},
		{"mixed currencies, the first held under a second", []Terms{
			eur(day(2026, 11, 10).Add(200*time.Millisecond), day(2026, 11, 10).Add(700*time.Millisecond)),
			pro(day(2026, 11, 10).Add(700*time.Millisecond), time.Time{})}, nil,
			"the period of customer acme mixes currencies EUR and USD: one statement bills one currency"},
		{"a price in micros beyond 64 bits", []Terms{with(pro(day(2026, 1, 1), time.Time{}), func(t *Terms) { t.PriceCents = tiers.MaxLimit; t.Interval = "day" })}, nil,
			"the price of pro does not fit a 64-bit integer; this statement cannot be made"},
		{"an overage amount beyond 64 bits", []Terms{with(pro(day(2026, 1, 1), time.Time{}), func(t *Terms) { t.PriceCents = 0; t.OveragePrices = map[string]int64{"api_calls": tiers.MaxLimit} })},
			[]Overage{{day(2026, 11, 2), "api_calls", tiers.MaxLimit}},
			"the overage amount of api_calls does not fit a 64-bit integer; this statement cannot be made"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build("acme", nov, tt.terms, tt.usage)
			var ce *ConflictError
			if !errors.As(err, &ce) || !errors.Is(err, tiers.ErrConflict) || ce.Detail != tt.want {
				t.Errorf("err = %v, want a conflict: %s", err, tt.want)
			}
		})
	}
	// Mixed currencies only count where the period has lines: EUR terms
	// long gone do not make November a conflict.
	st, err := Build("acme", nov, []Terms{eur(day(2025, 1, 1), day(2026, 1, 1)), pro(day(2026, 1, 1), time.Time{})}, nil)
	if err != nil || st.Currency != "USD" {
		t.Errorf("statement = %+v, %v; want USD", st, err)
	}
}

func TestOveragePrices(t *testing.T) {
	price := func(w tiers.Window, micros int64) tiers.Limit {
		return tiers.Limit{Metric: "api_calls", Window: w, Mode: tiers.Soft, OveragePriceMicros: &micros}
	}
	got := OveragePrices([]tiers.Limit{price(tiers.Hour, 3), price(tiers.Month, 1), price(tiers.Day, 2),
		{Metric: "exports", Window: tiers.Day, Mode: tiers.Hard}})
	if want := map[string]int64{"api_calls": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("OveragePrices = %v, want %v (the longest window's)", got, want)
	}
}

// A metric's overage price is its customer's soft limits' before its
// subjects', then the longest window's, whatever the limits' order.
func TestOveragePricesPerSubject(t *testing.T) {
	price := func(n int64) *int64 { return &n }
	soft := func(w tiers.Window, per tiers.Per, p int64) tiers.Limit {
		return tiers.Limit{Metric: "api_calls", Window: w, Mode: tiers.Soft, Per: per, OveragePriceMicros: price(p)}
	}
	for _, tc := range []struct {
		name   string
		limits []tiers.Limit
		want   int64
	}{
		{"one", []tiers.Limit{soft(tiers.Day, tiers.PerCustomer, 10)}, 10},
		{"the longest window", []tiers.Limit{soft(tiers.Month, tiers.PerCustomer, 30), soft(tiers.Day, tiers.PerCustomer, 10)}, 30},
		{"the customer's before a subject's", []tiers.Limit{soft(tiers.Month, tiers.PerSubject, 30), soft(tiers.Day, tiers.PerCustomer, 10)}, 10},
		{"the customer's, the other order", []tiers.Limit{soft(tiers.Day, tiers.PerCustomer, 10), soft(tiers.Month, tiers.PerSubject, 30)}, 10},
		{"a subject's alone", []tiers.Limit{soft(tiers.Hour, tiers.PerSubject, 5), soft(tiers.Day, tiers.PerSubject, 7)}, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := OveragePrices(tc.limits)["api_calls"]; got != tc.want {
				t.Errorf("price %d, want %d", got, tc.want)
			}
		})
	}
}
