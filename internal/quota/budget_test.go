package quota

import (
	"context"
	"errors"
	"testing"
	"time"
)

type budgetKey struct{}

// A budget keeps its check's values but not its cancellation, ends at its
// deadline, and ends the contexts derived from it then (through
// AfterFunc, without a goroutine each).
func TestBudget(t *testing.T) {
	t.Parallel()
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), budgetKey{}, "v"))
	cancel() // the client went away
	b := newBudget(parent, 20*time.Millisecond, nil)
	defer b.stop()
	if b.Value(budgetKey{}) != "v" {
		t.Error("the check's value is lost")
	}
	if err := b.Err(); err != nil {
		t.Fatalf("Err = %v before the deadline, although the parent is canceled", err)
	}
	child, stopChild := context.WithTimeout(b, time.Hour)
	defer stopChild()
	if d, _ := child.Deadline(); !d.Equal(b.deadline) {
		t.Errorf("the child's deadline is %v, want the budget's %v", d, b.deadline)
	}
	select {
	case <-child.Done(): // a bound on the wait, not a measurement
	case <-time.After(10 * time.Second):
		t.Fatal("the child did not end with the budget")
	}
	if !errors.Is(b.Err(), context.DeadlineExceeded) || !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Errorf("Err = %v, child %v; want deadline exceeded", b.Err(), child.Err())
	}
	// Contexts derived once it ended end at once.
	late, stopLate := context.WithCancel(b)
	defer stopLate()
	select {
	case <-late.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a context derived from an ended budget did not end")
	}
}

// A budget nothing waited on arms no timer, and still tells when its time
// is up.
func TestBudgetUnarmed(t *testing.T) {
	t.Parallel()
	b := newBudget(context.Background(), -time.Millisecond, nil)
	b.stop()
	if b.timer != nil {
		t.Error("a timer was started with nothing waiting")
	}
	if !errors.Is(b.Err(), context.DeadlineExceeded) {
		t.Errorf("Err = %v past the deadline, want deadline exceeded", b.Err())
	}
	b2 := newBudget(context.Background(), time.Hour, nil)
	stop := b2.AfterFunc(func() { t.Error("a stopped function ran") })
	if !stop() || stop() {
		t.Error("stop: want true once, then false")
	}
	b2.stop()
}

// A set hands its budget to its next check only if nothing looked at it;
// one that was looked at (a store call may still hold it) is never reused,
// and a reused budget carries the new check's values and deadline.
func TestBudgetReuse(t *testing.T) {
	t.Parallel()
	first := context.WithValue(context.Background(), budgetKey{}, "first")
	second := context.WithValue(context.Background(), budgetKey{}, "second")
	cases := []struct {
		name  string
		look  func(b *budget)
		reuse bool
	}{
		{"untouched", func(*budget) {}, true},
		{"Deadline", func(b *budget) { b.Deadline() }, false},
		{"Done", func(b *budget) { b.Done() }, false},
		{"Err", func(b *budget) { _ = b.Err() }, false},
		{"Value", func(b *budget) { b.Value(budgetKey{}) }, false},
		{"derived", func(b *budget) { _, stop := context.WithCancel(b); stop() }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &set{}
			b := s.budgetFor(first, time.Hour, nil)
			c.look(b)
			b.stop()
			s.release()
			next := s.budgetFor(second, time.Minute, nil)
			defer next.stop()
			if (next == b) != c.reuse {
				t.Fatalf("reused = %v, want %v", next == b, c.reuse)
			}
			if v := next.Value(budgetKey{}); v != "second" {
				t.Errorf("the next check's budget has value %v, want its own", v)
			}
			if d, _ := next.Deadline(); time.Until(d) > time.Minute {
				t.Errorf("the next check's deadline is %v away, past its own minute", time.Until(d))
			}
			if c.reuse {
				return
			}
			if v := b.Value(budgetKey{}); v != "first" {
				t.Errorf("a budget looked at changed under its holder: value %v", v)
			}
		})
	}
}
