package simulate

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// The workloads Generate makes. Each customer's checks form a Poisson
// process of their own; the workloads differ in its rate over time and
// across customers. The mean rate is given as Load: the units a customer
// asks for per window, divided by the limit.
const (
	// Poisson: a steady rate, Load × limit units per window.
	Poisson = "poisson"
	// OnOff: bursts. On periods (exponential, mean one window) at four
	// times the mean rate alternate with silent off periods (exponential,
	// mean three windows): the mean rate is Poisson's, in bursts.
	OnOff = "onoff"
	// Diurnal: one day's curve over the duration, from a trough at the
	// start through a peak halfway and back: the rate is the mean rate
	// times 1 - 0.8 cos(2π t / duration), 0.2× to 1.8× the mean.
	Diurnal = "diurnal"
	// Heavy: many customers with heavy-tailed rates. Customer i asks at
	// Load × limit × x_i units per window, x_i drawn from a Pareto
	// distribution of scale 0.1 and shape 1.2, capped at 20: half the
	// customers below 0.18, about 6% above 1 (over the limit at Load 1),
	// a few at many times it.
	Heavy = "heavy"
)

// Workloads lists the workloads Generate makes.
var Workloads = []string{Poisson, OnOff, Diurnal, Heavy}

// Shape constants of the workloads (see the workload names).
const (
	onMeanWindows  = 1.0
	offMeanWindows = 3.0
	diurnalSwing   = 0.8
	paretoScale    = 0.1
	paretoShape    = 1.2
	paretoCap      = 20.0
)

// MaxChecks bounds the checks a generated trace is expected to hold.
const MaxChecks = 50_000_000

// Workload describes a generated trace.
type Workload struct {
	Kind      string  // one of Workloads
	Window    int64   // the window's length, ms
	Limit     int64   // units per window the load is measured against
	Load      float64 // mean units asked per window per customer, over Limit
	Cost      int64   // units of every check
	Duration  int64   // ms
	Customers int
	Seed      uint64
	Start     int64 // Unix ms of the trace's start
}

// DefaultStart is where generated traces start: 2026-01-01T00:00:00Z, on
// a whole minute, so that the first window is a whole one.
const DefaultStart = 1767225600000

// Generate makes the checks of workload w. The same w makes the same
// trace, check for check.
func Generate(w Workload) (*Trace, error) {
	if err := w.validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(w.Seed, 0x9e3779b97f4a7c15))
	// Checks per millisecond of a customer at the mean rate.
	mean := w.Load * float64(w.Limit) / float64(w.Cost) / float64(w.Window)
	rates := make([]float64, w.Customers)
	expected := 0.0
	for i := range rates {
		rates[i] = mean
		if w.Kind == Heavy {
			// Inverse transform: x = scale × U^(-1/shape), U in (0, 1].
			u := 1 - rng.Float64()
			rates[i] = mean * min(paretoCap, paretoScale*math.Pow(u, -1/paretoShape))
		}
		expected += rates[i] * float64(w.Duration)
	}
	if expected > MaxChecks {
		return nil, fmt.Errorf("the workload would make about %.0f checks, more than %d: shorten the duration or lower the load or the customers", expected, MaxChecks)
	}
	tr := &Trace{Customers: make([]string, w.Customers), Checks: make([]Check, 0, int(expected*1.01)+16)}
	width := len(fmt.Sprint(w.Customers))
	for i := range w.Customers {
		tr.Customers[i] = fmt.Sprintf("c%0*d", width, i+1)
		emit := func(t float64) {
			tr.Checks = append(tr.Checks, Check{Ms: w.Start + int64(t), Customer: int32(i), Cost: w.Cost})
		}
		switch w.Kind {
		case Poisson, Heavy:
			poissonRun(rng, rates[i], 0, float64(w.Duration), emit)
		case OnOff:
			w.onOff(rng, rates[i], emit)
		case Diurnal:
			w.diurnal(rng, rates[i], emit)
		}
	}
	// Each customer's checks are in order: a stable sort by time keeps
	// checks at the same millisecond in customer order.
	slices.SortStableFunc(tr.Checks, func(a, b Check) int { return cmp.Compare(a.Ms, b.Ms) })
	return tr, nil
}

func (w Workload) validate() error {
	switch {
	case !slices.Contains(Workloads, w.Kind):
		return fmt.Errorf("unknown workload %q; want one of %v", w.Kind, Workloads)
	case w.Window < 1:
		return errors.New("the window must be at least 1 ms")
	case w.Limit < 1:
		return errors.New("the limit must be at least 1")
	case !(w.Load > 0) || math.IsInf(w.Load, 0):
		return errors.New("the load must be above 0")
	case w.Cost < 1 || w.Cost > MaxCost:
		return fmt.Errorf("the cost must be from 1 to %d", int64(MaxCost))
	case w.Duration < 1:
		return errors.New("the duration must be at least 1 ms")
	case w.Customers < 1 || w.Customers > 10_000_000:
		return errors.New("the customers must be from 1 to 10000000")
	}
	return nil
}

// poissonRun emits the times of a Poisson process of rate (per ms) in
// [from, to).
func poissonRun(rng *rand.Rand, rate, from, to float64, emit func(float64)) {
	for t := from + rng.ExpFloat64()/rate; t < to; t += rng.ExpFloat64() / rate {
		emit(t)
	}
}

// onOff emits bursts: on periods at rate × (on + off) / on, silent off
// periods, both of exponential length; the first period is on with the
// share of time on periods have.
func (w Workload) onOff(rng *rand.Rand, rate float64, emit func(float64)) {
	on, off := onMeanWindows*float64(w.Window), offMeanWindows*float64(w.Window)
	burst := rate * (on + off) / on
	isOn := rng.Float64() < on/(on+off)
	for t, end := 0.0, float64(w.Duration); t < end; isOn = !isOn {
		mean := off
		if isOn {
			mean = on
		}
		next := min(end, t+rng.ExpFloat64()*mean)
		if isOn {
			poissonRun(rng, burst, t, next, emit)
		}
		t = next
	}
}

// diurnal emits a Poisson process whose rate follows one day's curve,
// by thinning one of the peak rate.
func (w Workload) diurnal(rng *rand.Rand, rate float64, emit func(float64)) {
	peak := rate * (1 + diurnalSwing)
	day := float64(w.Duration)
	poissonRun(rng, peak, 0, day, func(t float64) {
		at := rate * (1 - diurnalSwing*math.Cos(2*math.Pi*t/day))
		if rng.Float64()*peak < at {
			emit(t)
		}
	})
}
