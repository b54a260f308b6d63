package simulate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// Exact names the reference in results: the exact moving window used as
// a limiter itself (it admits a check iff the check fits).
const Exact = "exact"

// metric is the metric every simulated check counts.
const metric = "simulated"

// Config says how to replay a trace.
type Config struct {
	Window tiers.Window // second or minute
	Limit  int64        // units per window, hard
	// Burst is a token bucket's size; 0 means the limit.
	Burst int64
	// Algorithms are replayed in this order, after the exact reference.
	Algorithms []tiers.Algorithm
	// Detail, when set, gets one CSV line per check and algorithm (the
	// exact reference included), after DetailHeader.
	Detail io.Writer
	// ChartBuckets, when above 0, has Run record Report.Chart with at most
	// that many buckets of time.
	ChartBuckets int
	// MemoryKeys, when above 0, has Run measure each algorithm's bytes per
	// key over that many keys (see MeasureBytesPerKey).
	MemoryKeys int
}

// DetailHeader is the header of the per-check CSV: window_used is the
// units the algorithm admitted to the customer in the last window before
// the check, what exact_admit is decided from; algorithm_used is the count
// the algorithm's counter reported before the check.
const DetailHeader = "unix_ms,customer,cost,algorithm,admitted,exact_admit,window_used,algorithm_used\n"

// Result is how one algorithm decided a trace.
type Result struct {
	Algorithm string
	Checks    int64
	Admitted  int64
	// AdmittedUnits is the units of the admitted checks.
	AdmittedUnits int64
	// WronglyAdmitted counts checks the algorithm admitted that the exact
	// moving window, given the units the algorithm had admitted in the
	// window, would have denied; WronglyDenied the reverse.
	WronglyAdmitted int64
	WronglyDenied   int64
	// Per customer, the share of the customer's checks wrongly admitted
	// (denied): the 99th percentile over customers with checks, and the
	// largest share.
	AdmittedP99, AdmittedMax float64
	DeniedP99, DeniedMax     float64
	// CustomersAdmitted (CustomersDenied) counts the customers with at
	// least one check wrongly admitted (denied).
	CustomersAdmitted, CustomersDenied int
	// Peak is the most units the algorithm admitted to one customer in any
	// moving window of the window's length: at PeakAt, to PeakCustomer.
	Peak         int64
	PeakAt       int64
	PeakCustomer string
	// BytesPerKey is the live heap per key of the algorithm's counter
	// (see MeasureBytesPerKey), or 0 when not measured.
	BytesPerKey float64
}

// Wrong returns the checks decided wrongly.
func (r *Result) Wrong() int64 { return r.WronglyAdmitted + r.WronglyDenied }

// Report is the outcome of replaying a trace.
type Report struct {
	Window    tiers.Window
	Limit     int64
	Burst     int64
	Customers int
	Checks    int
	// Results: the exact reference first, then Config.Algorithms.
	Results []Result
	// Chart is recorded when Config.ChartBuckets is set and the trace has
	// checks.
	Chart *Chart
	// MemoryKeys is how many keys bytes per key were measured over (0:
	// not measured).
	MemoryKeys int
}

// Chart is what an algorithm admitted to one customer over time: for
// each bucket of time, the most units it had admitted in the moving
// window (of the limit's length) at any moment of the bucket.
type Chart struct {
	Customer string
	Start    int64 // Unix ms of the first bucket
	Bucket   int64 // ms per bucket
	Window   int64 // ms
	Limit    int64
	Names    []string  // per series: the algorithm
	Peaks    [][]int64 // per series, per bucket
}

// lane replays the trace through one algorithm.
type lane struct {
	name    string
	counter quota.Counter // nil: the exact reference
	charge  [1]quota.Charge
	span    [1]quota.Span
	out     [1]quota.Outcome
	windows []Window // per customer: what this algorithm admitted
	wrongA  []int64  // per customer: checks wrongly admitted
	wrongD  []int64
	res     Result
	peaks   []int64 // chart, per bucket
	sampled int     // chart buckets sampled so far
}

// Validate reports what is wrong with cfg.
func (cfg *Config) Validate() error {
	switch {
	case !cfg.Window.Short():
		return errors.New("the window must be second or minute")
	case cfg.Limit < 1 || cfg.Limit > tiers.MaxLimit:
		return fmt.Errorf("the limit must be from 1 to %d", tiers.MaxLimit)
	case cfg.Burst < 0 || cfg.Burst > tiers.MaxLimit:
		return fmt.Errorf("the burst must be from 1 to %d, or 0 for the limit", tiers.MaxLimit)
	}
	for _, a := range cfg.Algorithms {
		if int(a) >= len(tiers.Algorithms) {
			return fmt.Errorf("unknown algorithm %v", a)
		}
		if a == tiers.SlidingLog && cfg.Limit > tiers.MaxLogLimit {
			return fmt.Errorf("a sliding log takes limits up to %d", tiers.MaxLogLimit)
		}
	}
	return nil
}

// limitOf returns the limit cfg sets for algorithm a, as quotad's catalog
// would hold it.
func (cfg *Config) limitOf(a tiers.Algorithm) tiers.Limit {
	l := tiers.Limit{Metric: metric, Window: cfg.Window, Limit: cfg.Limit, Mode: tiers.Hard, Algorithm: a}
	if a == tiers.TokenBucket && cfg.Burst > 0 {
		burst := cfg.Burst
		l.Burst = &burst
	}
	return l
}

// Run replays tr through the exact reference and every algorithm of cfg,
// each with a counter of its own, and judges every decision. It stops
// early with ctx's error when ctx is done.
func Run(ctx context.Context, tr *Trace, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	length := cfg.Window.Length().Milliseconds()
	lanes := []*lane{{name: Exact}}
	for _, a := range cfg.Algorithms {
		l := &lane{name: a.String(), counter: quota.NewSliding()}
		l.span[0].Rule = quota.RuleFor(cfg.limitOf(a), tiers.Metric{Key: metric})
		lanes = append(lanes, l)
	}
	n := len(tr.Customers)
	for _, l := range lanes {
		l.res.Algorithm = l.name
		l.windows = make([]Window, n)
		for i := range l.windows {
			l.windows[i].Length = length
		}
		l.wrongA, l.wrongD = make([]int64, n), make([]int64, n)
		l.res.PeakAt = -1
	}
	rep := &Report{Window: cfg.Window, Limit: cfg.Limit, Burst: cfg.Burst, Customers: n, Checks: len(tr.Checks)}
	if rep.Burst == 0 {
		rep.Burst = cfg.Limit
	}
	chart := newChart(tr, cfg, length, lanes)
	if chart != nil {
		rep.Chart = chart.Chart
	}
	var detail *bufio.Writer
	var line []byte
	if cfg.Detail != nil {
		detail = bufio.NewWriterSize(cfg.Detail, 256<<10)
		detail.WriteString(DetailHeader)
	}
	checks := make([]int64, n) // per customer
	for i, c := range tr.Checks {
		if i%(1<<16) == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		checks[c.Customer]++
		charted := chart != nil && c.Customer == chart.customer
		for _, l := range lanes {
			w := &l.windows[c.Customer]
			if charted {
				chart.advance(l, c.Ms)
			}
			used := w.Used(c.Ms)
			exact := used+c.Cost <= cfg.Limit
			admitted, algUsed := exact, used
			if l.counter != nil {
				var err error
				if admitted, err = l.take(ctx, cfg.Window, tr.Customers[c.Customer], c); err != nil {
					return nil, err
				}
				algUsed = l.out[0].Used
			}
			after := used
			l.res.Checks++
			if admitted {
				w.Add(c.Ms, c.Cost)
				after += c.Cost
				l.res.Admitted++
				l.res.AdmittedUnits += c.Cost
				if after > l.res.Peak {
					l.res.Peak, l.res.PeakAt, l.res.PeakCustomer = after, c.Ms, tr.Customers[c.Customer]
				}
			}
			switch {
			case admitted && !exact:
				l.res.WronglyAdmitted++
				l.wrongA[c.Customer]++
			case !admitted && exact:
				l.res.WronglyDenied++
				l.wrongD[c.Customer]++
			}
			if charted {
				chart.record(l, c.Ms, after)
			}
			if detail != nil {
				line = appendDetail(line[:0], c, tr.Customers[c.Customer], l.name, admitted, exact, used, algUsed)
				detail.Write(line)
			}
		}
	}
	if detail != nil {
		if err := detail.Flush(); err != nil {
			return nil, fmt.Errorf("write the detail: %w", err)
		}
	}
	for _, l := range lanes {
		l.res.AdmittedP99, l.res.AdmittedMax, l.res.CustomersAdmitted = shares(l.wrongA, checks)
		l.res.DeniedP99, l.res.DeniedMax, l.res.CustomersDenied = shares(l.wrongD, checks)
		rep.Results = append(rep.Results, l.res)
		if chart != nil {
			chart.finish(l)
		}
	}
	if cfg.MemoryKeys > 0 {
		for i, a := range cfg.Algorithms {
			var err error
			rep.Results[1+i].BytesPerKey, rep.MemoryKeys, err = MeasureBytesPerKey(ctx, cfg, a, cfg.MemoryKeys)
			if err != nil {
				return nil, err
			}
		}
	}
	return rep, nil
}

// take asks the lane's counter about check c, as quotad's engine would for
// a customer with one hard limit in window w.
func (l *lane) take(ctx context.Context, w tiers.Window, customer string, c Check) (bool, error) {
	at := time.UnixMilli(c.Ms).UTC()
	start, end := quota.Bounds(w, at, tiers.Anchor{})
	l.span[0].Key = quota.CounterKey{Customer: customer, Metric: metric, Window: w, Start: start}
	l.span[0].End = end
	l.charge[0] = quota.Charge{Customer: customer, Metric: metric, Cost: c.Cost, At: at, Spans: l.span[:], Out: l.out[:]}
	return l.counter.Take(ctx, l.charge[:])
}

func appendDetail(b []byte, c Check, customer, alg string, admitted, exact bool, used, algUsed int64) []byte {
	b = strconv.AppendInt(b, c.Ms, 10)
	b = append(b, ',')
	b = appendField(b, customer)
	b = append(b, ',')
	b = strconv.AppendInt(b, c.Cost, 10)
	b = append(b, ',')
	b = append(b, alg...)
	b = append(b, ',')
	b = strconv.AppendBool(b, admitted)
	b = append(b, ',')
	b = strconv.AppendBool(b, exact)
	b = append(b, ',')
	b = strconv.AppendInt(b, used, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, algUsed, 10)
	return append(b, '\n')
}

// shares returns, over customers with checks, the 99th percentile
// (nearest rank) and the largest of wrong[i]/checks[i], and how many
// customers have wrong[i] > 0.
func shares(wrong, checks []int64) (p99, most float64, hit int) {
	var s []float64
	for i, n := range checks {
		if n > 0 {
			s = append(s, float64(wrong[i])/float64(n))
		}
		if wrong[i] > 0 {
			hit++
		}
	}
	if len(s) == 0 {
		return 0, 0, 0
	}
	slices.Sort(s)
	rank := (99*len(s) + 99) / 100 // ceil(0.99 n)
	return s[rank-1], s[len(s)-1], hit
}
