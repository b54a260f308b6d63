package simulate

import (
	"bytes"
	"encoding/csv"
	"reflect"
	"strings"
	"testing"

	"github.com/quotad/quotad/internal/tiers"
)

// handTrace is worked through by hand below for a limit of 3 per second.
// The sliding window counter's buckets start at whole seconds since the
// epoch; its weighted count at e ms into a bucket is
// floor(prev*(1000-e)/1000) + cur.
const handTrace = `unix_ms,customer,cost
0,a,3
100,b,5
1100,a,1
1200,a,2
1500,a,1
1999,a,1
2400,a,1
2450,a,1
2600,a,1
`

// What the sliding window counter decides, and what the exact window
// says given the units the counter admitted in the second before:
//
//	ms    cost  weighted        admit  exact used   exact
//	0     3     0               yes    0            yes
//	100   5 b   0               no     0            no   (cost > limit)
//	1100  1     2 (3*900/1000)  yes    0            yes
//	1200  2     2+1             no     1            yes  wrongly denied
//	1500  1     1+1             yes    1            yes
//	1999  1     0+2             yes    2            yes
//	2400  1     1 (3*600/1000)  yes    2            yes
//	2450  1     1+1             yes    3            no   wrongly admitted: 4 in (1450, 2450]
//	2600  1     1+2             no     3            no
//
// The exact reference, deciding on its own history, admits at 0, 1100,
// 1200 (3 in the window), denies 1500 and 1999, admits 2400, 2450, 2600.
var handDecisions = map[string][]string{
	Exact: {"0,a,3,exact,true,true,0,0", "100,b,5,exact,false,false,0,0",
		"1100,a,1,exact,true,true,0,0", "1200,a,2,exact,true,true,1,1",
		"1500,a,1,exact,false,false,3,3", "1999,a,1,exact,false,false,3,3",
		"2400,a,1,exact,true,true,0,0", "2450,a,1,exact,true,true,1,1",
		"2600,a,1,exact,true,true,2,2"},
	"sliding_window": {"0,a,3,sliding_window,true,true,0,0", "100,b,5,sliding_window,false,false,0,0",
		"1100,a,1,sliding_window,true,true,0,2", "1200,a,2,sliding_window,false,true,1,3",
		"1500,a,1,sliding_window,true,true,1,2", "1999,a,1,sliding_window,true,true,2,2",
		"2400,a,1,sliding_window,true,true,2,1", "2450,a,1,sliding_window,true,false,3,2",
		"2600,a,1,sliding_window,false,false,3,3"},
}

func TestRunHandTrace(t *testing.T) {
	tr, err := ParseCSV(strings.NewReader(handTrace))
	if err != nil {
		t.Fatal(err)
	}
	var detail bytes.Buffer
	rep, err := Run(t.Context(), tr, Config{Window: tiers.Second, Limit: 3,
		Algorithms: []tiers.Algorithm{tiers.SlidingWindow}, Detail: &detail, ChartBuckets: 10})
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{
		{Algorithm: Exact, Checks: 9, Admitted: 6, AdmittedUnits: 9,
			Peak: 3, PeakAt: 0, PeakCustomer: "a"},
		{Algorithm: "sliding_window", Checks: 9, Admitted: 6, AdmittedUnits: 8,
			WronglyAdmitted: 1, WronglyDenied: 1,
			// a: 1 of 8 checks each way; b: none. The 99th percentile of
			// two customers is the larger.
			AdmittedP99: 0.125, AdmittedMax: 0.125, DeniedP99: 0.125, DeniedMax: 0.125,
			CustomersAdmitted: 1, CustomersDenied: 1,
			Peak: 4, PeakAt: 2450, PeakCustomer: "a"},
	}
	if !reflect.DeepEqual(rep.Results, want) {
		t.Errorf("results:\n got %+v\nwant %+v", rep.Results, want)
	}
	if rep.Checks != 9 || rep.Customers != 2 || rep.Burst != 3 {
		t.Errorf("report %+v", rep)
	}

	lines := strings.Split(strings.TrimSuffix(detail.String(), "\n"), "\n")
	if lines[0]+"\n" != DetailHeader {
		t.Errorf("detail header %q", lines[0])
	}
	for alg, decisions := range handDecisions {
		var got []string
		for _, l := range lines[1:] {
			if strings.Contains(l, ","+alg+",") {
				got = append(got, l)
			}
		}
		if !reflect.DeepEqual(got, decisions) {
			t.Errorf("%s decided\n%s\nwant\n%s", alg, strings.Join(got, "\n"), strings.Join(decisions, "\n"))
		}
	}

	// The chart follows a (11 units asked, b 5) in buckets of one second:
	// the most each held in the window at any moment of each second.
	ch := rep.Chart
	wantChart := &Chart{Customer: "a", Start: 0, Bucket: 1000, Window: 1000, Limit: 3,
		Names: []string{Exact, "sliding_window"}, Peaks: [][]int64{{3, 3, 3}, {3, 3, 4}}}
	if !reflect.DeepEqual(ch, wantChart) {
		t.Errorf("chart %+v, want %+v", ch, wantChart)
	}

	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"9 checks of 2 customers; limit 3 per second",
		"1 (11.1111%)", "12.5000%/12.5000%", "22.2222%        1/1", "+1 (1.33x)", "+0 (1.00x)"} {
		if !strings.Contains(table.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, table.String())
		}
	}
	t.Logf("\n%s", table.String())
}

// Over generated workloads, every algorithm's figures hold together: the
// exact reference is never wrong and never over the limit; an algorithm
// goes over the limit iff it wrongly admitted a check; the detail says
// what the counts say.
func TestRunInvariants(t *testing.T) {
	for _, kind := range Workloads {
		w := Workload{Kind: kind, Window: 1000, Limit: 20, Load: 1.2, Cost: 1,
			Duration: 60_000, Customers: 4, Seed: 7, Start: DefaultStart}
		if kind == Heavy {
			w.Customers = 30
		}
		tr, err := Generate(w)
		if err != nil {
			t.Fatal(err)
		}
		var detail bytes.Buffer
		rep, err := Run(t.Context(), tr, Config{Window: tiers.Second, Limit: 20, Algorithms: tiers.Algorithms, Detail: &detail})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Results) != 1+len(tiers.Algorithms) {
			t.Fatalf("%d results", len(rep.Results))
		}
		recs, err := csv.NewReader(&detail).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		counted := map[string]*Result{}
		for _, r := range recs[1:] {
			res := counted[r[3]]
			if res == nil {
				res = &Result{}
				counted[r[3]] = res
			}
			res.Checks++
			switch r[4] + r[5] {
			case "truefalse":
				res.WronglyAdmitted++
			case "falsetrue":
				res.WronglyDenied++
			}
			if r[4] == "true" {
				res.Admitted++
			}
		}
		for _, res := range rep.Results {
			if res.Checks != int64(len(tr.Checks)) {
				t.Errorf("%s %s: %d checks of %d", kind, res.Algorithm, res.Checks, len(tr.Checks))
			}
			if (res.Peak > 20) != (res.WronglyAdmitted > 0) {
				t.Errorf("%s %s: peak %d with %d wrongly admitted", kind, res.Algorithm, res.Peak, res.WronglyAdmitted)
			}
			if res.Algorithm == Exact && (res.Wrong() != 0 || res.Peak > 20) {
				t.Errorf("%s exact: %+v", kind, res)
			}
			c := counted[res.Algorithm]
			if c == nil || c.Checks != res.Checks || c.Admitted != res.Admitted ||
				c.WronglyAdmitted != res.WronglyAdmitted || c.WronglyDenied != res.WronglyDenied {
				t.Errorf("%s %s: detail counts %+v, report %+v", kind, res.Algorithm, c, res)
			}
			if res.AdmittedP99 > res.AdmittedMax || res.DeniedP99 > res.DeniedMax {
				t.Errorf("%s %s: percentile above the maximum: %+v", kind, res.Algorithm, res)
			}
		}
	}
}

func TestRunRejectsBadConfigs(t *testing.T) {
	tr := &Trace{}
	for _, cfg := range []Config{
		{Window: tiers.Hour, Limit: 10},
		{Window: tiers.Second, Limit: 0},
		{Window: tiers.Second, Limit: 10, Burst: -1},
		{Window: tiers.Second, Limit: tiers.MaxLogLimit + 1, Algorithms: []tiers.Algorithm{tiers.SlidingLog}},
		{Window: tiers.Second, Limit: 10, Algorithms: []tiers.Algorithm{9}},
	} {
		if _, err := Run(t.Context(), tr, cfg); err == nil {
			t.Errorf("Run(%+v) succeeded", cfg)
		}
	}
}

// A burst of the limit just before a second's boundary and another just
// after it: a fixed window starts again at the boundary and admits both,
// twice the limit within 2 ms; the others admit the first only, but for a
// token bucket of twice the limit's burst, which admits both too.
func TestAlgorithmsOnABoundaryBurst(t *testing.T) {
	var tr Trace
	tr.Customers = []string{"a"}
	for _, ms := range []int64{999, 1000} {
		for range 10 {
			tr.Checks = append(tr.Checks, Check{Ms: ms, Cost: 1})
		}
	}
	for _, burst := range []int64{0, 20} {
		rep, err := Run(t.Context(), &tr, Config{Window: tiers.Second, Limit: 10, Burst: burst, Algorithms: tiers.Algorithms})
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range rep.Results {
			admitted := int64(10)
			if res.Algorithm == "fixed_window" || (res.Algorithm == "token_bucket" && burst == 20) {
				admitted = 20
			}
			if res.Admitted != admitted || res.Peak != admitted || res.WronglyAdmitted != admitted-10 || res.WronglyDenied != 0 {
				t.Errorf("burst %d, %s: admitted %d (peak %d, %d wrongly), want %d",
					burst, res.Algorithm, res.Admitted, res.Peak, res.WronglyAdmitted, admitted)
			}
		}
	}
}

// What each algorithm is known to do, on bursts and on steady traffic
// near the limit: the sliding log decides as the exact window does; a
// fixed window counts only units that are in the moving window too, so it
// never denies wrongly, and goes over the limit, up to twice it; a
// sliding window counter stays within twice the limit; a token bucket
// within its burst plus the limit.
func TestAlgorithmsBounds(t *testing.T) {
	const limit = 20
	for _, kind := range []string{OnOff, Poisson} {
		for _, burst := range []int64{0, 30} {
			w := Workload{Kind: kind, Window: 1000, Limit: limit, Load: 1, Cost: 1,
				Duration: 60_000, Customers: 4, Seed: 11, Start: DefaultStart}
			tr, err := Generate(w)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Run(t.Context(), tr, Config{Window: tiers.Second, Limit: limit, Burst: burst, Algorithms: tiers.Algorithms})
			if err != nil {
				t.Fatal(err)
			}
			exact := rep.Results[0]
			for _, res := range rep.Results[1:] {
				t.Logf("%s burst %d %s: %d admitted, %d wrongly, %d wrongly denied, peak %d",
					kind, burst, res.Algorithm, res.Admitted, res.WronglyAdmitted, res.WronglyDenied, res.Peak)
				bad := false
				switch res.Algorithm {
				case "sliding_log":
					bad = res.Wrong() != 0 || res.Peak > limit || res.Admitted != exact.Admitted
				case "fixed_window":
					bad = res.WronglyDenied != 0 || res.Peak <= limit || res.Peak > 2*limit
				case "sliding_window":
					bad = res.Peak > 2*limit
				case "token_bucket":
					bad = res.Peak > rep.Burst+limit
				}
				if bad {
					t.Errorf("%s, burst %d, %s: %+v", kind, burst, res.Algorithm, res)
				}
			}
		}
	}
}
