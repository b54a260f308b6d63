package store_test

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
	"github.com/quotad/quotad/internal/whatif"
)

// The customers active since a day come most recent first, then most used;
// older history and deleted customers' history are left out.
func TestFindActiveCustomers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	MustSeed(t, db, nil, "busy", "quiet", "denied", "yesterday", "lastweek", "gone")
	yesterday, lastWeek := day0.AddDate(0, 0, -1), day0.AddDate(0, 0, -7)
	err := db.History.AddHistory(ctx, []quota.HistoryDelta{
		{Customer: "busy", Metric: "api_calls", Date: day0, Used: 50},
		{Customer: "busy", Metric: "exports", Date: day0, Used: 5},
		{Customer: "quiet", Metric: "api_calls", Date: day0, Used: 3},
		{Customer: "quiet", Metric: "api_calls", Date: yesterday, Used: 1000},
		// Denied units count as use: their checks loaded the customer too.
		{Customer: "denied", Metric: "api_calls", Date: day0, Denied: 20},
		{Customer: "yesterday", Metric: "api_calls", Date: yesterday, Used: 9000},
		{Customer: "lastweek", Metric: "api_calls", Date: lastWeek, Used: 1e6},
		{Customer: "gone", Metric: "api_calls", Date: day0, Used: 1e6},
		// History outlives customers: never created, or deleted.
		{Customer: "deleted", Metric: "api_calls", Date: day0, Used: 1e6},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Catalog.DeleteCustomer(ctx, write("ops"), "gone"); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		since time.Time
		limit int
		want  []string
	}{
		// quiet used more over both days than denied, but its latest day
		// comes first: the order is by latest day, then by all use since.
		{"today and yesterday", yesterday, 10, []string{"quiet", "busy", "denied", "yesterday"}},
		{"today", day0, 10, []string{"busy", "denied", "quiet"}},
		{"the most active", yesterday, 2, []string{"quiet", "busy"}},
		{"a week", lastWeek, 10, []string{"quiet", "busy", "denied", "yesterday", "lastweek"}},
		{"none asked", yesterday, 0, nil},
		{"nothing since", day0.AddDate(0, 0, 1), 10, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := db.History.FindActiveCustomers(ctx, tt.since, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("FindActiveCustomers(%s, %d) = %q, want %q", tt.since.Format(time.DateOnly), tt.limit, got, tt.want)
			}
		})
	}
}

// BenchmarkWhatIfFromHistory replays a plan's 100,000 customers × 90 days
// of history from PostgreSQL, as POST /v1/what-if does (whatif.Service
// over this store: a query a day, and the replay), and reports the CPU
// time of this process and of its PostgreSQL connections per replay.
// Setting it up writes 9,000,000 history rows (about a minute);
// QUOTAD_BENCH_WHATIF_CUSTOMERS sets fewer customers.
func BenchmarkWhatIfFromHistory(b *testing.B) {
	ctx := context.Background()
	customers, days := 100_000, 90
	if n, err := strconv.Atoi(os.Getenv("QUOTAD_BENCH_WHATIF_CUSTOMERS")); err == nil && n > 0 {
		customers = n
	}
	db, s := MustOpenSchema(b)
	MustSeed(b, db, nil, "template")
	// Every other customer is the template's copy; its history rows vary
	// by customer and day, 0 to 1,199 units, a few denied.
	rows, err := s.Pool.Query(ctx, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'customers' AND column_name <> 'id' ORDER BY ordinal_position`)
	if err != nil {
		b.Fatal(err)
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		b.Fatal(err)
	}
	list := strings.Join(cols, ", ")
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, st := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO customers (id, ` + list + `) SELECT 'cust-' || lpad(g::text, 6, '0'), ` + list +
			` FROM customers, generate_series(1, $1::int) g WHERE id = 'template'`, []any{customers}},
		{`INSERT INTO usage_history (customer_id, metric, day, used, denied)
		 SELECT c.id, 'api_calls', $1::date + d, (hashtext(c.id) + d * 13) & 1023 + d % 200, d % 7
		 FROM customers c, generate_series(0, $2::int - 1) d WHERE c.id <> 'template'
		 ORDER BY d, c.id`, []any{start, days}}, // as quotad writes it: a day at a time
		{`ANALYZE customers, usage_history`, nil},
	} {
		if _, err := s.Pool.Exec(ctx, st.sql, st.args...); err != nil {
			b.Fatal(err)
		}
	}
	spec := whatif.Spec{Plan: "p", From: "2026-01-01", To: start.AddDate(0, 0, days-1).Format(time.DateOnly),
		Limits: []tiers.LimitSpec{
			{Metric: "api_calls", Window: "day", Limit: ptr[int64](1000)},
			{Metric: "api_calls", Window: "month", Limit: ptr[int64](20000), Mode: "soft", OveragePercent: ptr[int64](20),
				OveragePriceMicros: ptr[int64](100)},
		}}
	// The replay reads through a pool of its own, whose server processes
	// it can name, so that it can report their CPU time beside its own:
	// on a busy machine wall time says little.
	pool, err := pgxpool.New(ctx, s.URL+"&application_name=whatif_bench")
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	rdb, err := store.New(ctx, pool)
	if err != nil {
		b.Fatal(err)
	}
	svc := whatif.Service{Catalog: tiers.NewService(db.Catalog, db.Audit, time.Now, nil), History: rdb.History}
	if err := pool.Ping(ctx); err != nil {
		b.Fatal(err)
	}
	serverCPU := func() time.Duration {
		rows, err := s.Pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = 'whatif_bench'`)
		if err != nil {
			b.Fatal(err)
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			b.Fatal(err)
		}
		var sum time.Duration
		for _, pid := range pids {
			sum += procCPU(b, int(pid))
		}
		return sum
	}
	clientCPU := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	server0, client0 := serverCPU(), clientCPU()
	b.ResetTimer()
	for b.Loop() {
		a, err := svc.Run(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		if a.Replayed != int64(customers) || a.Total.DeniedUnits == 0 {
			b.Fatalf("replayed %d customers, %+v; want %d, some denied", a.Replayed, a.Total, customers)
		}
	}
	b.ReportMetric(float64(customers*days), "rows/op")
	b.ReportMetric((serverCPU()-server0).Seconds()/float64(b.N), "server-cpu-s/op")
	b.ReportMetric((clientCPU()-client0).Seconds()/float64(b.N), "client-cpu-s/op")
}

// procCPU returns the CPU time a local process has used, from
// /proc/PID/stat (PostgreSQL on this machine); 0 when it cannot be read.
func procCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command's closing parenthesis: state is the 3rd
	// field of the line, utime and stime the 14th and 15th.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}
