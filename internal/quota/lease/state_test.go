package lease

import "testing"

// The store ignores a call on a lease whose seq is not above the last
// call's it applied there (a late copy), while this process takes it as
// applied: a settlement so ignored leaves the lease's unused units
// counted for good, a report leaves other processes reading them as
// used. So a call's seq is drawn once the lease is claimed for it, never
// before: a seq drawn while another call (a refill) was in flight, and
// used after it landed, would be below that call's.
func TestLeaseCallSeqDrawnOnceClaimed(t *testing.T) {
	for _, tc := range []struct {
		name string
		// call starts the call on l under busy, drawing its seq from next;
		// ok: it was started.
		call func(l *lease, next func() int64, busy chan struct{}) (seq int64, ok bool)
	}{
		{"settle", func(l *lease, next func() int64, busy chan struct{}) (int64, bool) {
			st, _, s := l.beginSettle(next, busy)
			return s.Seq, st == settleSend
		}},
		{"report", func(l *lease, next func() int64, busy chan struct{}) (int64, bool) {
			s, ok := l.beginReport(next, busy)
			return s.Seq, ok
		}},
		{"put back", func(l *lease, next func() int64, busy chan struct{}) (int64, bool) {
			_, s := l.putBack(1, next, busy)
			if s == nil {
				return 0, false
			}
			return s.Seq, true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seq int64 = 100
			next := func() int64 { seq++; return seq }
			// Held, with more unused than the store heard: every call is due.
			l := &lease{leased: true, unused: 3, reported: 1}
			// A refill is in flight, its seq drawn once it claimed l.
			l.busy = make(chan struct{})
			refill := next()
			if got, ok := tc.call(l, next, make(chan struct{})); ok {
				t.Fatalf("started as call %d while a refill was in flight", got)
			}
			if seq != refill {
				t.Errorf("drew seq %d while the refill (seq %d) was in flight, want none drawn", seq, refill)
			}
			// The refill lands; the store's last call on l is the refill's.
			close(l.busy)
			l.busy = nil
			got, ok := tc.call(l, next, make(chan struct{}))
			if !ok {
				t.Fatal("not started once the refill landed")
			}
			if got <= refill {
				t.Errorf("call after the refill has seq %d, want above the refill's %d (the store would ignore it as late)", got, refill)
			}
		})
	}
}
