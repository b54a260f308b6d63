package simulate

// Window is the exact moving window of one customer: the units admitted
// in the last Length milliseconds, kept as a queue of (time, units). At
// time now it holds the units admitted at times t with now-Length < t <=
// now; a unit admitted at t stops counting at t+Length. It is the ground
// truth the algorithms are judged against: a check of cost k at now fits
// iff Used(now) + k <= limit.
//
// Times passed to it never go back.
type Window struct {
	Length int64 // milliseconds
	queue  []admitted
	head   int // queue[head:] are the units still in the window
	sum    int64
}

type admitted struct {
	ms    int64
	units int64
}

// NewWindow returns an empty exact window of length milliseconds.
func NewWindow(length int64) *Window { return &Window{Length: length} }

// Used returns the units admitted in the window that ends at now.
func (w *Window) Used(now int64) int64 {
	for w.head < len(w.queue) && w.queue[w.head].ms <= now-w.Length {
		w.sum -= w.queue[w.head].units
		w.head++
	}
	// Drop what left the window once it is half the queue, so the queue
	// stays within twice the entries in the window.
	if w.head > 0 && w.head*2 >= len(w.queue) {
		w.queue = append(w.queue[:0], w.queue[w.head:]...)
		w.head = 0
	}
	return w.sum
}

// Fits reports whether cost more units at now stay within limit.
func (w *Window) Fits(now, cost, limit int64) bool { return w.Used(now)+cost <= limit }

// Add counts units admitted at now (no earlier than any time before).
func (w *Window) Add(now, units int64) {
	if n := len(w.queue); n > w.head && w.queue[n-1].ms == now {
		w.queue[n-1].units += units
	} else {
		w.queue = append(w.queue, admitted{now, units})
	}
	w.sum += units
}
