package simulate

import (
	"math"
	"reflect"
	"slices"
	"testing"
)

// workload returns a workload of one customer at load 1 of 100 units a
// second, for seconds.
func workload(kind string, seconds int64) Workload {
	return Workload{Kind: kind, Window: 1000, Limit: 100, Load: 1, Cost: 1,
		Duration: seconds * 1000, Customers: 1, Seed: 1, Start: DefaultStart}
}

func mustGenerate(t *testing.T, w Workload) *Trace {
	t.Helper()
	tr, err := Generate(w)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range tr.Checks {
		if c.Ms < w.Start || c.Ms >= w.Start+w.Duration || (i > 0 && c.Ms < tr.Checks[i-1].Ms) || c.Cost != w.Cost {
			t.Fatalf("check %d %+v: out of order or outside the run", i, c)
		}
	}
	return tr
}

// perWindow returns the units of tr in each window of w.
func perWindow(tr *Trace, w Workload) []float64 {
	counts := make([]float64, w.Duration/w.Window)
	for _, c := range tr.Checks {
		counts[(c.Ms-w.Start)/w.Window] += float64(c.Cost)
	}
	return counts
}

func meanVar(xs []float64) (mean, variance float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(xs)-1)
}

func within(t *testing.T, what string, got, want, tolerance float64) {
	t.Helper()
	if math.Abs(got-want) > tolerance*want {
		t.Errorf("%s = %.4g, want %.4g ± %.0f%%", what, got, want, tolerance*100)
	} else {
		t.Logf("%s = %.4g (want %.4g)", what, got, want)
	}
}

func TestGenerateIsReproducible(t *testing.T) {
	for _, kind := range Workloads {
		w := workload(kind, 30)
		w.Customers, w.Limit = 20, 20
		a, b := mustGenerate(t, w), mustGenerate(t, w)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two traces of seed 1 differ", kind)
		}
		w.Seed = 2
		if c := mustGenerate(t, w); reflect.DeepEqual(a.Checks, c.Checks) {
			t.Errorf("%s: seeds 1 and 2 make the same trace", kind)
		}
	}
}

func TestGenerateRejectsBadWorkloads(t *testing.T) {
	for _, change := range []func(*Workload){
		func(w *Workload) { w.Kind = "square" },
		func(w *Workload) { w.Limit = 0 },
		func(w *Workload) { w.Load = 0 },
		func(w *Workload) { w.Load = math.NaN() },
		func(w *Workload) { w.Cost = 0 },
		func(w *Workload) { w.Duration = 0 },
		func(w *Workload) { w.Customers = 0 },
		func(w *Workload) { w.Load = 1e6 }, // too many checks
	} {
		w := workload(Poisson, 10)
		change(&w)
		if _, err := Generate(w); err == nil {
			t.Errorf("Generate(%+v) succeeded", w)
		}
	}
}

// A steady Poisson process: the asked mean, and counts per window as
// dispersed as a Poisson distribution's (variance = mean).
func TestPoissonShape(t *testing.T) {
	w := workload(Poisson, 1000)
	mean, variance := meanVar(perWindow(mustGenerate(t, w), w))
	within(t, "units per window", mean, 100, 0.02)
	within(t, "variance over mean", variance/mean, 1, 0.15)
}

// On/off bursts: the same mean, but in bursts: many silent windows and
// some of more than twice the limit.
func TestOnOffShape(t *testing.T) {
	w := workload(OnOff, 4000)
	w.Cost = 2
	counts := perWindow(mustGenerate(t, w), w)
	mean, variance := meanVar(counts)
	within(t, "units per window", mean, 100, 0.08)
	if variance/mean < 20 {
		t.Errorf("variance over mean = %.1f, want bursts (far above 1)", variance/mean)
	}
	silent := 0
	for _, c := range counts {
		if c == 0 {
			silent++
		}
	}
	within(t, "share of silent windows", float64(silent)/float64(len(counts)), 0.5, 0.25)
	if m := slices.Max(counts); m < 250 {
		t.Errorf("busiest window asks %.0f units, want bursts above 2.5 limits", m)
	}
}

// The diurnal curve: rate(t) = mean (1 - 0.8 cos(2πt/D)) puts
// 1/2 + 0.8/π of the checks in the middle half of the run.
func TestDiurnalShape(t *testing.T) {
	w := workload(Diurnal, 2000)
	tr := mustGenerate(t, w)
	within(t, "units per window", float64(len(tr.Checks))/2000, 100, 0.02)
	middle := 0
	for _, c := range tr.Checks {
		if at := c.Ms - w.Start; at >= w.Duration/4 && at < 3*w.Duration/4 {
			middle++
		}
	}
	within(t, "share in the middle half", float64(middle)/float64(len(tr.Checks)), 0.5+0.8/math.Pi, 0.02)
}

// Heavy-tailed customers: Pareto(0.1, 1.2) rates put about 6% of the
// customers over the limit, the median near 0.18 of it, and most checks
// on the busiest tenth.
func TestHeavyShape(t *testing.T) {
	w := workload(Heavy, 60)
	w.Customers, w.Limit = 2000, 10
	tr := mustGenerate(t, w)
	units := tr.Units()
	rates := make([]float64, len(units)) // units per window over the limit
	for i, u := range units {
		rates[i] = float64(u) / 60 / 10
	}
	slices.Sort(rates)
	within(t, "median customer's load", rates[len(rates)/2], paretoScale*math.Pow(2, 1/paretoShape), 0.15)
	over := len(rates) - slices.IndexFunc(rates, func(r float64) bool { return r > 1 })
	within(t, "share of customers over the limit", float64(over)/float64(len(rates)), math.Pow(paretoScale, paretoShape), 0.3)
	var top, all float64
	for i, r := range rates {
		all += r
		if i >= len(rates)*9/10 {
			top += r
		}
	}
	if share := top / all; share < 0.5 {
		t.Errorf("the busiest tenth asks %.0f%% of the units, want most", share*100)
	} else {
		t.Logf("the busiest tenth asks %.0f%% of the units", share*100)
	}
	if tr.Busiest() < 0 || units[tr.Busiest()] != slices.Max(units) {
		t.Errorf("Busiest = %d, not the customer asking for the most", tr.Busiest())
	}
}
