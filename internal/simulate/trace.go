// Package simulate measures how far quotad's short-window algorithms stray
// from an exact moving window on a trace of checks: it replays the trace
// through each algorithm, as quotad's in-process counter decides it, and
// judges every decision against the exact moving window (see Window).
//
// A trace is a customer's checks in time order, read from CSV or made by
// one of the seeded workload generators.
package simulate

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Check is one check of a trace: Cost units of customer Customer (an
// index into Trace.Customers) at Ms, in Unix milliseconds.
type Check struct {
	Ms       int64
	Customer int32
	Cost     int64
}

// Trace is a sequence of checks in time order, and the customers they name.
type Trace struct {
	Customers []string
	Checks    []Check
}

// MaxCost is the largest cost a trace's check may have.
const MaxCost = 1 << 40

// MaxUnixMs is the latest time a trace's check may have: the end of year
// 9999, far from where time arithmetic overflows.
const MaxUnixMs = 253402300799999

// Header is the header line a trace's CSV may start with.
const Header = "unix_ms,customer,cost"

// ParseCSV reads a trace from CSV lines unix_ms,customer,cost (the header
// line optional, a byte-order mark before it too; blank lines skipped).
// unix_ms is an integer from 0 to MaxUnixMs,
// customer is not empty, and cost is an integer from 1 to MaxCost. The
// checks are sorted by time, stably, when they are not in order. An error
// names the line it was found on.
func ParseCSV(r io.Reader) (*Trace, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	tr := &Trace{}
	index := map[string]int32{}
	first := true
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("line %d: %w", pe.Line, pe.Err)
			}
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue // a line of spaces is blank too
		}
		if first {
			first = false
			rec[0] = strings.TrimPrefix(rec[0], "\ufeff") // a byte-order mark, as spreadsheets write
			if isHeader(rec) {
				continue
			}
		}
		c, name, err := parseRecord(rec)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		i, ok := index[name]
		if !ok {
			if len(tr.Customers) == 1<<31-1 {
				return nil, fmt.Errorf("line %d: too many customers", line)
			}
			i = int32(len(tr.Customers))
			name = strings.Clone(name)
			tr.Customers = append(tr.Customers, name)
			index[name] = i
		}
		c.Customer = i
		tr.Checks = append(tr.Checks, c)
	}
	tr.Sort()
	return tr, nil
}

func isHeader(rec []string) bool {
	if len(rec) != 3 {
		return false
	}
	for i, want := range strings.Split(Header, ",") {
		if !strings.EqualFold(strings.TrimSpace(rec[i]), want) {
			return false
		}
	}
	return true
}

func parseRecord(rec []string) (Check, string, error) {
	if len(rec) != 3 {
		return Check{}, "", fmt.Errorf("want 3 fields (%s), got %d", Header, len(rec))
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(rec[0]), 10, 64)
	if err != nil || ms < 0 || ms > MaxUnixMs {
		return Check{}, "", fmt.Errorf("unix_ms %q is not an integer from 0 to %d (the end of year 9999)", rec[0], int64(MaxUnixMs))
	}
	name := strings.TrimSpace(rec[1])
	if name == "" {
		return Check{}, "", errors.New("customer is empty")
	}
	cost, err := strconv.ParseInt(strings.TrimSpace(rec[2]), 10, 64)
	if err != nil || cost < 1 || cost > MaxCost {
		return Check{}, "", fmt.Errorf("cost %q is not an integer from 1 to %d", rec[2], int64(MaxCost))
	}
	return Check{Ms: ms, Cost: cost}, name, nil
}

// Sort puts the checks in time order, keeping the order of checks at the
// same millisecond.
func (tr *Trace) Sort() {
	less := func(a, b Check) int { return cmp.Compare(a.Ms, b.Ms) }
	if !slices.IsSortedFunc(tr.Checks, less) {
		slices.SortStableFunc(tr.Checks, less)
	}
}

// WriteCSV writes the trace as ParseCSV reads it, with the header.
func (tr *Trace) WriteCSV(w io.Writer) error {
	buf := make([]byte, 0, 64<<10)
	buf = append(buf, Header+"\n"...)
	for _, c := range tr.Checks {
		buf = strconv.AppendInt(buf, c.Ms, 10)
		buf = append(buf, ',')
		buf = appendField(buf, tr.Customers[c.Customer])
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, c.Cost, 10)
		buf = append(buf, '\n')
		if len(buf) > 60<<10 {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	_, err := w.Write(buf)
	return err
}

// appendField appends s as one CSV field, quoted when it needs to be.
func appendField(buf []byte, s string) []byte {
	if !strings.ContainsAny(s, ",\"\r\n") {
		return append(buf, s...)
	}
	buf = append(buf, '"')
	buf = append(buf, strings.ReplaceAll(s, `"`, `""`)...)
	return append(buf, '"')
}

// Units returns the units the trace's checks ask for, per customer.
func (tr *Trace) Units() []int64 {
	units := make([]int64, len(tr.Customers))
	for _, c := range tr.Checks {
		units[c.Customer] += c.Cost
	}
	return units
}

// Busiest returns the customer that asks for the most units (the first of
// them on a tie), or -1 for an empty trace.
func (tr *Trace) Busiest() int32 {
	best := int32(-1)
	var most int64
	for i, u := range tr.Units() {
		if u > most {
			best, most = int32(i), u
		}
	}
	return best
}
