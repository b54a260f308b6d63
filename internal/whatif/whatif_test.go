package whatif

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

func date(s string) time.Time {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return t
}

func ptr(v int64) *int64 { return &v }

func TestReplay(t *testing.T) {
	hardDay := tiers.Limit{Metric: "calls", Window: tiers.Day, Limit: 10, Mode: tiers.Hard}
	hardMonth := tiers.Limit{Metric: "calls", Window: tiers.Month, Limit: 25, Mode: tiers.Hard}
	softDay := tiers.Limit{Metric: "calls", Window: tiers.Day, Limit: 10, Mode: tiers.Soft, OveragePercent: 50,
		OveragePriceMicros: ptr(2000)}
	hardWeek := tiers.Limit{Metric: "calls", Window: tiers.Week, Limit: 15, Mode: tiers.Hard}
	rows := func(cust string, used ...int64) []Row {
		var out []Row
		for i, u := range used {
			out = append(out, Row{Customer: []byte(cust), Metric: []byte("calls"), Date: date("2026-01-30").AddDate(0, 0, i), Used: u})
		}
		return out
	}
	tests := []struct {
		name   string
		limits []tiers.Limit
		rows   []Row
		want   []Customer
		total  Figures
		not    int
	}{
		{"under every limit", []tiers.Limit{hardDay}, rows("a", 3, 10, 0), []Customer{}, Figures{}, 0},
		{"hard day", []tiers.Limit{hardDay}, rows("a", 12, 10, 15),
			[]Customer{{Customer: "a", Figures: Figures{PeriodsOver: 2, DeniedUnits: 7}}}, Figures{PeriodsOver: 2, DeniedUnits: 7}, 0},
		// Jan 30, 31 then Feb 1: the month resets on Feb 1.
		{"hard month resets", []tiers.Limit{hardMonth}, rows("a", 20, 20, 20),
			[]Customer{{Customer: "a", Figures: Figures{PeriodsOver: 1, DeniedUnits: 15}}}, Figures{PeriodsOver: 1, DeniedUnits: 15}, 0},
		// Jan 30: the day admits 10 (2 denied, the day over); Jan 31: the
		// month has 5 left (7 denied, the month over); Feb 1: a new month,
		// the day admits 10 (2 denied, the day over).
		{"day and month together", []tiers.Limit{hardDay, {Metric: "calls", Window: tiers.Month, Limit: 15, Mode: tiers.Hard}},
			rows("a", 12, 12, 12),
			[]Customer{{Customer: "a", Figures: Figures{PeriodsOver: 3, DeniedUnits: 2 + 7 + 2}}},
			Figures{PeriodsOver: 3, DeniedUnits: 11}, 0},
		// Soft 10 +50%: admits 15; overage 5 at 2000 micros each.
		{"soft day", []tiers.Limit{softDay}, rows("a", 12, 20, 5),
			[]Customer{{Customer: "a", Figures: Figures{PeriodsOver: 1, DeniedUnits: 5, OverageUnits: 2 + 5, OverageRevenueMicros: 7 * 2000}}},
			Figures{PeriodsOver: 1, DeniedUnits: 5, OverageUnits: 7, OverageRevenueMicros: 14000}, 0},
		// 2026-01-30 is a Friday: Fri, Sat, Sun in one week, Mon the next.
		{"week from Monday", []tiers.Limit{hardWeek}, rows("a", 5, 5, 10, 10),
			[]Customer{{Customer: "a", Figures: Figures{PeriodsOver: 1, DeniedUnits: 5}}}, Figures{PeriodsOver: 1, DeniedUnits: 5}, 0},
		{"demand counts what was denied", []tiers.Limit{hardDay},
			[]Row{{Customer: []byte("a"), Metric: []byte("calls"), Date: date("2026-01-01"), Used: 8, Denied: 4}},
			[]Customer{{Customer: "a", Figures: Figures{PeriodsOver: 1, DeniedUnits: 2}, Recorded: Recorded{DeniedUnits: 4}}},
			Figures{PeriodsOver: 1, DeniedUnits: 2}, 0},
		{"customers apart", []tiers.Limit{hardDay}, append(rows("a", 11), rows("b", 13)...),
			[]Customer{{Customer: "a", Figures: Figures{PeriodsOver: 1, DeniedUnits: 1}}, {Customer: "b", Figures: Figures{PeriodsOver: 1, DeniedUnits: 3}}},
			Figures{PeriodsOver: 2, DeniedUnits: 4}, 0},
		// A store reads a day at a time: customers' rows interleave, and
		// each keeps its own month.
		{"customers interleaved by day", []tiers.Limit{hardMonth},
			[]Row{
				{Customer: []byte("b"), Metric: []byte("calls"), Date: date("2026-01-01"), Used: 10},
				{Customer: []byte("a"), Metric: []byte("calls"), Date: date("2026-01-01"), Used: 20},
				{Customer: []byte("a"), Metric: []byte("calls"), Date: date("2026-01-02"), Used: 20},
				{Customer: []byte("b"), Metric: []byte("calls"), Date: date("2026-01-02"), Used: 10},
			},
			[]Customer{{Customer: "a", Figures: Figures{PeriodsOver: 1, DeniedUnits: 15}}}, Figures{PeriodsOver: 1, DeniedUnits: 15}, 0},
		{"other metrics ignored", []tiers.Limit{hardDay},
			[]Row{{Customer: []byte("a"), Metric: []byte("tokens"), Date: date("2026-01-01"), Used: 80}}, []Customer{}, Figures{}, 0},
		{"not replayed", []tiers.Limit{
			{Metric: "calls", Window: tiers.Minute, Limit: 1, Mode: tiers.Hard},
			{Metric: "calls", Window: tiers.Hour, Limit: 1, Mode: tiers.Hard},
			{Metric: "calls", Window: tiers.Total, Limit: 1, Mode: tiers.Hard},
			{Metric: "calls", Window: tiers.Day, Limit: 1, Mode: tiers.Hard, Per: tiers.PerSubject},
			{Metric: "calls", Window: tiers.Day, Limit: 1, Mode: tiers.Elastic},
		}, rows("a", 100), []Customer{}, Figures{}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(tt.limits)
			for _, row := range tt.rows {
				r.Add(row)
			}
			got := r.Result()
			if !reflect.DeepEqual(got.Customers, tt.want) {
				t.Errorf("customers = %+v, want %+v", got.Customers, tt.want)
			}
			if got.Total != tt.total {
				t.Errorf("total = %+v, want %+v", got.Total, tt.total)
			}
			if len(got.NotReplayed) != tt.not {
				t.Errorf("not replayed = %+v, want %d", got.NotReplayed, tt.not)
			}
		})
	}
}

// BenchmarkWhatIf replays 100,000 customers × 90 days of one metric, a day
// at a time, against a day, a month and a soft day limit: the replay's
// arithmetic alone (BenchmarkWhatIfFromHistory in internal/store reads
// the rows from PostgreSQL).
func BenchmarkWhatIf(b *testing.B) {
	const customers, days = 100_000, 90
	start := date("2026-01-01")
	dates := make([]time.Time, days)
	for i := range dates {
		dates[i] = start.AddDate(0, 0, i)
	}
	ids := make([][]byte, customers)
	for i := range ids {
		ids[i] = fmt.Appendf(nil, "cust-%06d", i)
	}
	calls := []byte("calls")
	limits := []tiers.Limit{
		{Metric: "calls", Window: tiers.Day, Limit: 1000, Mode: tiers.Hard},
		{Metric: "calls", Window: tiers.Month, Limit: 20000, Mode: tiers.Soft, OveragePercent: 20, OveragePriceMicros: ptr(100)},
		{Metric: "calls", Window: tiers.Minute, Limit: 10, Mode: tiers.Hard},
	}
	b.ReportAllocs()
	for b.Loop() {
		r := New(limits)
		// A day at a time, as a store reads history.
		for d, day := range dates {
			for c, id := range ids {
				r.Add(Row{Customer: id, Metric: calls, Date: day, Used: int64((c*7 + d*13) % 1200)})
			}
		}
		if res := r.Result(); res.Replayed != customers {
			b.Fatalf("replayed %d customers", res.Replayed)
		}
	}
	b.ReportMetric(float64(customers*days), "rows/op")
}

// days is a HistoryStore that records the days it is asked for and
// whether each read had a deadline; it blocks on the day named stall
// until the read's context ends.
type days struct {
	read     []string
	deadline []bool
	stall    string
}

func (d *days) StreamDay(ctx context.Context, q Query, day time.Time, fn func(Row)) error {
	d.read = append(d.read, day.Format(time.DateOnly))
	_, ok := ctx.Deadline()
	d.deadline = append(d.deadline, ok)
	if day.Format(time.DateOnly) == d.stall {
		<-ctx.Done()
		return ctx.Err()
	}
	fn(Row{Customer: []byte("a"), Metric: []byte("calls"), Date: day, Used: 12})
	return nil
}

type anyPlan struct{}

func (anyPlan) Plan(_ context.Context, key string) (tiers.Plan, error) {
	return tiers.Plan{Key: key}, nil
}
func (anyPlan) Customer(_ context.Context, id string) (tiers.Customer, error) {
	return tiers.Customer{ID: id}, nil
}

// Run reads a day at a time in date order, each day within DayTimeout,
// and refuses more days than one history query may read.
func TestRunReadsDayByDay(t *testing.T) {
	limits := []tiers.LimitSpec{{Metric: "calls", Window: "day", Limit: ptr(10)}}
	ctx := context.Background()

	store := &days{}
	s := Service{Catalog: anyPlan{}, History: store, DayTimeout: time.Minute}
	a, err := s.Run(ctx, Spec{Plan: "free", Limits: limits, From: "2026-02-27", To: "2026-03-02"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"2026-02-27", "2026-02-28", "2026-03-01", "2026-03-02"}; !reflect.DeepEqual(store.read, want) {
		t.Errorf("days read %v, want %v", store.read, want)
	}
	if slices.Contains(store.deadline, false) {
		t.Errorf("a day was read without a deadline: %v", store.deadline)
	}
	if a.Total.DeniedUnits != 4*2 {
		t.Errorf("denied %d, want 8 (2 a day)", a.Total.DeniedUnits)
	}

	// A day that does not answer ends the replay after DayTimeout, though
	// the request itself has no deadline.
	store = &days{stall: "2026-03-01"}
	s = Service{Catalog: anyPlan{}, History: store, DayTimeout: 20 * time.Millisecond}
	if _, err := s.Run(ctx, Spec{Plan: "free", Limits: limits, From: "2026-02-27", To: "2026-03-02"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a stalled day: %v, want the day's deadline", err)
	}

	_, err = s.Run(ctx, Spec{Plan: "free", Limits: limits, From: "2025-01-01", To: "2026-01-02"})
	var ve *tiers.ValidationError
	if !errors.As(err, &ve) || ve.Fields[0].Field != "to" {
		t.Errorf("367 days: %v, want a validation error on to", err)
	}
	if n := Days(Spec{From: "2025-01-01", To: "2025-12-31"}); n != 365 {
		t.Errorf("Days of 2025 = %d", n)
	}
}
