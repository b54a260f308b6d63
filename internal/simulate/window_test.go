package simulate

import "testing"

// TestWindowHandComputed walks an exact window of one second through cases
// worked out by hand: a unit admitted at t counts at t .. t+999 and not at
// t+1000.
func TestWindowHandComputed(t *testing.T) {
	w := NewWindow(1000)
	steps := []struct {
		op        string // "add", "used" or "fits"
		at, units int64
		want      int64 // used, or 1/0 for fits (limit 3)
	}{
		{"used", 0, 0, 0},
		{"add", 0, 1, 0},
		{"used", 0, 0, 1},
		{"add", 500, 2, 0},
		{"used", 999, 0, 3},
		{"fits", 999, 1, 0},  // 3 + 1 > 3
		{"used", 1000, 0, 2}, // the unit of t=0 left at 1000
		{"fits", 1000, 1, 1},
		{"add", 1000, 1, 0},
		{"used", 1499, 0, 3},
		{"used", 1500, 0, 1}, // the units of t=500 left
		{"add", 1500, 1, 0},
		{"add", 1500, 1, 0}, // same millisecond
		{"used", 1500, 0, 3},
		{"used", 1999, 0, 3},
		{"used", 2000, 0, 2},
		{"used", 2499, 0, 2},
		{"used", 2500, 0, 0},
		{"fits", 2500, 3, 1},
		{"fits", 2500, 4, 0},
		{"used", 100000, 0, 0},
	}
	for i, s := range steps {
		switch s.op {
		case "add":
			w.Add(s.at, s.units)
		case "used":
			if got := w.Used(s.at); got != s.want {
				t.Fatalf("step %d: Used(%d) = %d, want %d", i, s.at, got, s.want)
			}
		case "fits":
			if got := w.Fits(s.at, s.units, 3); got != (s.want == 1) {
				t.Fatalf("step %d: Fits(%d, %d, 3) = %t, want %t", i, s.at, s.units, got, s.want == 1)
			}
		}
	}
}

// TestWindowAgainstSum holds the window to a plain sum over every unit
// ever admitted, on a long irregular sequence that also exercises the
// queue's compaction.
func TestWindowAgainstSum(t *testing.T) {
	const length = 60
	w := NewWindow(length)
	var all []admitted
	now := int64(0)
	for i := range 20000 {
		now += int64(i*7919%13) / 4 // steps of 0..3 ms, often 0
		if i%5 != 4 {
			units := int64(i%3 + 1)
			w.Add(now, units)
			all = append(all, admitted{now, units})
		}
		var want int64 // the units admitted since now-length, newest first
		for j := len(all) - 1; j >= 0 && all[j].ms > now-length; j-- {
			want += all[j].units
		}
		if got := w.Used(now); got != want {
			t.Fatalf("step %d at %d: Used = %d, want %d", i, now, got, want)
		}
		if len(w.queue) > 2*(length+1)+2 {
			t.Fatalf("step %d: queue holds %d entries for a window of %d ms", i, len(w.queue), length)
		}
	}
}
