package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// tally is what one worker saw. Only its worker writes it, so it needs no
// lock; the run merges the tallies once the workers are done.
type tally struct {
	url       string          // the worker's
	latencies []time.Duration // answers completed in the measured window
	status    map[int]int64   // by status code, same window
	errors    int64           // transport errors completed in the window
	firstErr  error           // the first transport error, in any phase
	total     int64           // answers received in any phase
	allErrors int64           // transport errors in any phase
	dials     int64           // connections opened, in any phase
}

func newTally(url string) *tally {
	return &tally{url: url, status: map[int]int64{}}
}

// summary is a run's result; -json prints it as one line.
type summary struct {
	URLs       int              `json:"urls"`
	Workers    int              `json:"workers"`
	Seconds    float64          `json:"seconds"`  // measured window
	Requests   int64            `json:"requests"` // answers in the window, any status
	RPS        float64          `json:"rps"`
	Status     map[string]int64 `json:"status"`
	Non2xx     int64            `json:"non_2xx"`
	Errors     int64            `json:"errors"` // transport errors in the window
	FirstError string           `json:"first_error,omitempty"`
	P50        float64          `json:"p50_ms"`
	P90        float64          `json:"p90_ms"`
	P99        float64          `json:"p99_ms"`
	Max        float64          `json:"max_ms"`
	Mean       float64          `json:"mean_ms"`
	ByURL      map[string]int64 `json:"by_url"`
	// Total counts every answer, warm-up and the requests still in
	// flight when the window closed included: what the servers answered.
	Total int64 `json:"total"`
	// AllErrors counts transport errors in every phase.
	AllErrors int64 `json:"all_errors"`
	// Connections counts the connections opened in every phase: one per
	// worker unless errors or servers closing connections made more.
	Connections int64 `json:"connections"`
	// DistinctKeys counts the distinct {{key}} values of the answered
	// requests, every phase included (0 when the body has no {{key}}).
	DistinctKeys int64 `json:"distinct_keys"`
	// SeenKeys, with -seen, counts those of this run and the earlier
	// runs the file kept.
	SeenKeys int64 `json:"seen_keys,omitempty"`
}

// summarize merges the workers' tallies over a window of length window.
func summarize(tallies []*tally, window time.Duration, urls int) *summary {
	s := &summary{
		URLs:    urls,
		Workers: len(tallies),
		Seconds: window.Seconds(),
		Status:  map[string]int64{},
		ByURL:   map[string]int64{},
	}
	var lat []time.Duration
	for _, t := range tallies {
		lat = append(lat, t.latencies...)
		for code, n := range t.status {
			s.Status[strconv.Itoa(code)] += n
			s.Requests += n
			if code < 200 || code > 299 {
				s.Non2xx += n
			}
		}
		s.ByURL[t.url] += int64(len(t.latencies))
		s.Errors += t.errors
		s.Total += t.total
		s.AllErrors += t.allErrors
		s.Connections += t.dials
		if s.FirstError == "" && t.firstErr != nil {
			s.FirstError = t.firstErr.Error()
		}
	}
	if window > 0 {
		s.RPS = round(float64(s.Requests)/window.Seconds(), 1)
	}
	slices.Sort(lat)
	s.P50 = ms(percentile(lat, 50))
	s.P90 = ms(percentile(lat, 90))
	s.P99 = ms(percentile(lat, 99))
	s.Max = ms(percentile(lat, 100))
	if len(lat) > 0 {
		var sum time.Duration
		for _, d := range lat {
			sum += d
		}
		s.Mean = ms(sum / time.Duration(len(lat)))
	}
	return s
}

// percentile is the nearest-rank percentile p (0 < p <= 100) of sorted:
// the smallest value with at least p% of the values at or below it. It is
// 0 for no values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = max(1, min(rank, len(sorted)))
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// print writes the human summary, then, with asJSON, one JSON line.
func (s *summary) print(w io.Writer, asJSON bool) error {
	var b strings.Builder
	row := func(label, format string, args ...any) {
		fmt.Fprintf(&b, "%-12s"+format+"\n", append([]any{label}, args...)...)
	}
	row("requests", "%d in %.2fs: %.1f req/s (%d workers, %d URL(s))",
		s.Requests, s.Seconds, s.RPS, s.Workers, s.URLs)
	codes := make([]string, 0, len(s.Status))
	for c := range s.Status {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	var st strings.Builder
	for _, c := range codes {
		fmt.Fprintf(&st, "%s: %d  ", c, s.Status[c])
	}
	row("status", "%s", strings.TrimSpace(st.String()))
	row("non-2xx", "%d", s.Non2xx)
	if s.FirstError != "" {
		row("errors", "%d (first: %s)", s.Errors, s.FirstError)
	} else {
		row("errors", "%d", s.Errors)
	}
	row("latency", "p50 %.3f ms  p90 %.3f ms  p99 %.3f ms  max %.3f ms  mean %.3f ms",
		s.P50, s.P90, s.P99, s.Max, s.Mean)
	row("connections", "%d opened; %d answers and %d errors counting warm-up and the last requests",
		s.Connections, s.Total, s.AllErrors)
	if s.DistinctKeys > 0 {
		if s.SeenKeys > 0 {
			row("keys", "%d distinct answered, counting warm-up and the last requests; %d with the earlier runs of -seen",
				s.DistinctKeys, s.SeenKeys)
		} else {
			row("keys", "%d distinct answered, counting warm-up and the last requests", s.DistinctKeys)
		}
	}
	if len(s.ByURL) > 1 {
		urls := make([]string, 0, len(s.ByURL))
		for u := range s.ByURL {
			urls = append(urls, u)
		}
		slices.Sort(urls)
		for _, u := range urls {
			row("by URL", "%s: %d", u, s.ByURL[u])
		}
	}
	if asJSON {
		line, err := json.Marshal(s)
		if err != nil {
			return err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}
