package store_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// FindAccounts reads many accounts at once, each as FindAccount reads it
// alone: plan, overrides (expired ones included) and all; ids that name
// no customer are left out.
func TestFindAccounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, schema := MustOpenSchema(t)
	for _, m := range []string{"api_calls", "exports"} {
		_, _, err := db.Catalog.PutMetric(ctx, write("ops"), tiers.Metric{Key: m})
		mustPut(t, err)
	}
	plans := []tiers.Plan{
		{Key: "free", Name: "Free", Price: usd, Limits: []tiers.Limit{
			{Metric: "api_calls", Window: tiers.Day, Limit: 100, Mode: tiers.Hard}}},
		{Key: "pro", Name: "Pro", Price: usd, Limits: []tiers.Limit{
			{Metric: "api_calls", Window: tiers.Second, Limit: 50, Mode: tiers.Hard, Algorithm: tiers.TokenBucket, Burst: ptr[int64](80)},
			{Metric: "api_calls", Window: tiers.Month, Limit: 100000, Mode: tiers.Soft, OveragePercent: 20, OveragePriceMicros: ptr[int64](5)},
			{Metric: "exports", Window: tiers.Day, Limit: 10, Mode: tiers.Elastic, Ceiling: ptr[int64](30)}}},
		{Key: "bare", Name: "Bare", Price: usd},
	}
	for _, p := range plans {
		_, _, err := db.Catalog.PutPlan(ctx, write("ops"), p, false)
		mustPut(t, err)
	}
	customers := []tiers.Customer{
		{ID: "acme", Plan: "free", Metadata: []byte(`{}`)},
		{ID: "globex", Plan: "pro", Name: "Globex", Metadata: []byte(`{"tier": "gold", "n": 3}`)},
		{ID: "initech", Plan: "pro", Metadata: []byte(`{}`), Anchor: tiers.Anchor{Day: 15}},
		{ID: "hooli", Plan: "bare", Metadata: []byte(`{}`)},
	}
	for _, c := range customers {
		_, _, err := db.Catalog.PutCustomer(ctx, write("ops"), c)
		mustPut(t, err)
	}
	expired, later := t0.Add(-time.Hour), t0.Add(48*time.Hour)
	for _, o := range []tiers.Override{
		{Customer: "globex", Limit: tiers.Limit{Metric: "exports", Window: tiers.Day, Limit: 20, Mode: tiers.Hard}, Reason: "launch"},
		{Customer: "globex", Limit: tiers.Limit{Metric: "api_calls", Window: tiers.Day, Limit: 500, Mode: tiers.Elastic, Ceiling: ptr[int64](900)}, ExpiresAt: &later},
		{Customer: "globex", Limit: tiers.Limit{Metric: "api_calls", Window: tiers.Minute, Limit: 7, Mode: tiers.Hard, Algorithm: tiers.SlidingLog}, ExpiresAt: &expired},
		{Customer: "hooli", Limit: tiers.Limit{Metric: "api_calls", Window: tiers.Hour, Limit: 1, Mode: tiers.Hard}, ExpiresAt: &expired},
	} {
		_, _, err := db.Catalog.PutOverride(ctx, write("ops"), o)
		mustPut(t, err)
	}
	// Many customers on every plan, as a batch of the cache brings them.
	const many = 1200
	if _, err := schema.Pool.Exec(ctx, `
		INSERT INTO customers (id, plan_key, created_at, updated_at)
		SELECT 'c' || i, (ARRAY['free', 'pro', 'bare'])[1 + i % 3], $1, $1 FROM generate_series(1, $2) i`, t0, many); err != nil {
		t.Fatal(err)
	}
	var manyIDs []string
	for i := 1; i <= many; i++ {
		manyIDs = append(manyIDs, fmt.Sprintf("c%d", i))
	}

	tests := []struct {
		name      string
		ids       []string
		want      []string // the ids found, sorted
		overrides map[string]int
	}{
		{name: "none", ids: nil, want: nil},
		{name: "one", ids: []string{"acme"}, want: []string{"acme"}, overrides: map[string]int{"acme": 0}},
		{name: "plans and overrides, expired ones too",
			ids:       []string{"acme", "globex", "initech", "hooli"},
			want:      []string{"acme", "globex", "hooli", "initech"},
			overrides: map[string]int{"acme": 0, "globex": 3, "initech": 0, "hooli": 1}},
		{name: "missing ids are left out", ids: []string{"ghost", "globex", "nobody"},
			want: []string{"globex"}, overrides: map[string]int{"globex": 3}},
		{name: "only missing ids", ids: []string{"ghost"}, want: nil},
		{name: "an id twice", ids: []string{"hooli", "hooli"}, want: []string{"hooli"}},
		{name: "many", ids: append(slices.Clone(manyIDs), "ghost", "acme"),
			want: slices.Sorted(slices.Values(append(slices.Clone(manyIDs), "acme")))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := db.Catalog.FindAccounts(ctx, tt.ids)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for id := range got {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			if !slices.Equal(ids, tt.want) {
				t.Fatalf("found %d accounts %q, want %d %q", len(ids), abbrev(ids), len(tt.want), abbrev(tt.want))
			}
			for id, n := range tt.overrides {
				if len(got[id].Overrides) != n {
					t.Errorf("%s has %d overrides, want %d", id, len(got[id].Overrides), n)
				}
			}
			for i, id := range ids {
				if len(ids) > 10 && i%97 != 0 && id != "acme" {
					continue // every 97th of many
				}
				one, err := db.Catalog.FindAccount(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got[id], one) {
					t.Errorf("FindAccounts[%s] =\n  %+v\nFindAccount(%s) =\n  %+v", id, got[id], id, one)
				}
				if a := got[id]; a.Customer.ID != id || a.Plan.Key != a.Customer.Plan || a.Plan.Name == "" {
					t.Errorf("FindAccounts[%s] = customer %q on plan %q, plan read %q (%q)", id, a.Customer.ID, a.Customer.Plan, a.Plan.Key, a.Plan.Name)
				}
			}
		})
	}
	// What the cache then does with it: the plans' limits as written.
	got, err := db.Catalog.FindAccounts(ctx, []string{"globex", "acme"})
	mustPut(t, err)
	if !reflect.DeepEqual(got["globex"].Plan.Limits, plans[1].Limits) || !reflect.DeepEqual(got["acme"].Plan.Limits, plans[0].Limits) {
		t.Errorf("plan limits = %+v and %+v, want %+v and %+v", got["globex"].Plan.Limits, got["acme"].Plan.Limits, plans[1].Limits, plans[0].Limits)
	}
	if o := got["globex"].Overrides; o[0].Metric != "api_calls" || o[0].Window != tiers.Minute || o[0].ExpiresAt == nil || !o[0].ExpiresAt.Equal(expired) {
		t.Errorf("globex's first override = %+v, want the expired one on api_calls/minute", o[0])
	}
}

// abbrev shortens a long list of ids for a failure message.
func abbrev(ids []string) []string {
	if len(ids) > 8 {
		return append(slices.Clone(ids[:8]), "…")
	}
	return ids
}

// FindCustomers' Query keeps the customers whose id or name contains it,
// ignoring case and taking % and _ literally; it combines with Plan and
// pages as the plain list does.
func TestFindCustomersQuery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := MustOpenSchema(t)
	_, _, err := db.Catalog.PutMetric(ctx, write("ops"), tiers.Metric{Key: "api_calls"})
	mustPut(t, err)
	for _, key := range []string{"free", "pro"} {
		_, _, err := db.Catalog.PutPlan(ctx, write("ops"), tiers.Plan{Key: key, Name: key, Price: usd}, false)
		mustPut(t, err)
	}
	for _, c := range []tiers.Customer{
		{ID: "acme", Plan: "free", Name: "Acme Inc."},
		{ID: "acme-eu", Plan: "pro", Name: "Acme Europe"},
		{ID: "globex", Plan: "pro", Name: "Globex INCORPORATED"},
		{ID: "100_pct", Plan: "free", Name: "100% Corp"},
		{ID: "initech", Plan: "free", Name: ""},
	} {
		c.Metadata = []byte(`{}`)
		_, _, err := db.Catalog.PutCustomer(ctx, write("ops"), c)
		mustPut(t, err)
	}
	tests := []struct {
		name string
		f    tiers.CustomerFilter
		want []string
	}{
		{"no query", tiers.CustomerFilter{}, []string{"100_pct", "acme", "acme-eu", "globex", "initech"}},
		{"id prefix", tiers.CustomerFilter{Query: "acme"}, []string{"acme", "acme-eu"}},
		{"name, any case", tiers.CustomerFilter{Query: "inc"}, []string{"acme", "globex"}},
		{"inside the id", tiers.CustomerFilter{Query: "TECH"}, []string{"initech"}},
		{"percent is literal", tiers.CustomerFilter{Query: "%"}, []string{"100_pct"}},
		{"underscore is literal", tiers.CustomerFilter{Query: "_"}, []string{"100_pct"}},
		{"with a plan", tiers.CustomerFilter{Query: "acme", Plan: "pro"}, []string{"acme-eu"}},
		{"nothing", tiers.CustomerFilter{Query: "zzz"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			page := tiers.Page{Limit: 1}
			for {
				f := tt.f
				f.Page = page
				items, more, err := db.Catalog.FindCustomers(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range items {
					got = append(got, c.ID)
				}
				if !more {
					break
				}
				page.After = items[len(items)-1].ID
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// A customer's time zone is stored by name and read back resolved; a
// change of zone pins the day, week and month windows in progress, and
// opens billing terms in the new zone (past periods keep theirs).
func TestCustomerTimeZone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	mustPut(t, second(db.Catalog.PutPlan(ctx, write("ops"), tiers.Plan{Key: "pro", Name: "Pro", Price: usd}, false)))
	berlin, err := tiers.LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	newYork, err := tiers.LoadZone("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) tiers.Write { return tiers.Write{Actor: "ops", At: t0.Add(d)} } // t0: Sunday 2026-11-22 10:00 UTC
	put := func(w tiers.Write, loc *time.Location, name string) tiers.Customer {
		t.Helper()
		c, _, err := db.Catalog.PutCustomer(ctx, w, tiers.Customer{ID: "acme", Plan: "pro", Metadata: []byte(`{}`),
			TimeZone: name, Anchor: tiers.Anchor{Day: 15, Loc: loc}})
		mustPut(t, err)
		return c
	}
	check := func(step string, wantZone string, wantLoc *time.Location, want tiers.Anchor) {
		t.Helper()
		c, err := db.Catalog.FindCustomer(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		accts, err := db.Catalog.FindAccounts(ctx, []string{"acme"})
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range []tiers.Customer{c, accts["acme"].Customer} {
			if got.TimeZone != wantZone || got.Anchor.Loc != wantLoc {
				t.Errorf("%s: time zone %q (%v), want %q (%v)", step, got.TimeZone, got.Anchor.Loc, wantZone, wantLoc)
			}
			if got.Anchor.PinnedDay != want.PinnedDay || got.Anchor.PinnedWeek != want.PinnedWeek || got.Anchor.PinnedMonth != want.PinnedMonth {
				t.Errorf("%s: pins\n%+v\nwant\n%+v", step, got.Anchor, want)
			}
		}
	}
	utcDay := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }

	put(at(0), time.UTC, "UTC")
	check("created in UTC", "UTC", time.UTC, tiers.Anchor{})

	put(at(time.Hour), berlin, "Europe/Berlin")
	check("moved to Berlin", "Europe/Berlin", berlin, tiers.Anchor{
		PinnedDay:   tiers.Pin{Start: utcDay(2026, 11, 22), End: utcDay(2026, 11, 23)},
		PinnedWeek:  tiers.Pin{Start: utcDay(2026, 11, 16), End: utcDay(2026, 11, 23)},
		PinnedMonth: tiers.Pin{Start: utcDay(2026, 11, 15), End: utcDay(2026, 12, 15)},
	})

	// Later the same day, to New York: the pins of the UTC windows stay.
	put(at(2*time.Hour), newYork, "America/New_York")
	check("then to New York", "America/New_York", newYork, tiers.Anchor{
		PinnedDay:   tiers.Pin{Start: utcDay(2026, 11, 22), End: utcDay(2026, 11, 23)},
		PinnedWeek:  tiers.Pin{Start: utcDay(2026, 11, 16), End: utcDay(2026, 11, 23)},
		PinnedMonth: tiers.Pin{Start: utcDay(2026, 11, 15), End: utcDay(2026, 12, 15)},
	})

	// Past periods keep the zone they were counted in.
	terms, err := db.Billing.FindTerms(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	var zones []string
	for _, tm := range terms {
		zones = append(zones, tm.TimeZone)
	}
	if want := []string{"UTC", "Europe/Berlin", "America/New_York"}; !slices.Equal(zones, want) {
		t.Errorf("terms' zones = %q, want %q", zones, want)
	}
}
