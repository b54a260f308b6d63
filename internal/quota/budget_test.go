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
	b := newBudget(parent, 20*time.Millisecond)
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
	b := newBudget(context.Background(), -time.Millisecond)
	b.stop()
	if b.timer != nil {
		t.Error("a timer was started with nothing waiting")
	}
	if !errors.Is(b.Err(), context.DeadlineExceeded) {
		t.Errorf("Err = %v past the deadline, want deadline exceeded", b.Err())
	}
	b2 := newBudget(context.Background(), time.Hour)
	stop := b2.AfterFunc(func() { t.Error("a stopped function ran") })
	if !stop() || stop() {
		t.Error("stop: want true once, then false")
	}
	b2.stop()
}
