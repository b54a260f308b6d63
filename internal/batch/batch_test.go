package batch

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// A Group sends a call at once when nothing is in flight, and gathers the
// calls made while a batch is in flight into the next one: 1 call in the
// first batch, the 50 that waited in the second.
func TestBatcherGathersWhileInFlight(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	b := New[int](func(_ context.Context, calls []int) error {
		mu.Lock()
		sizes = append(sizes, len(calls))
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			close(entered)
			<-release
		}
		for i := range calls {
			calls[i] *= 10
		}
		return nil
	}, 256, 1, time.Minute)
	var wg sync.WaitGroup
	results := make([]int, 51)
	do := func(i int) {
		r, sent, err := b.Do(context.Background(), i)
		if err != nil || !sent {
			t.Errorf("call %d: sent %v, %v", i, sent, err)
		}
		results[i] = r
	}
	wg.Go(func() { do(0) })
	<-entered
	for i := 1; i <= 50; i++ {
		wg.Go(func() { do(i) })
	}
	// Every call waits in the queue before the first batch returns:
	// polled, as the goroutines start, within a bound.
	deadline := time.After(time.Minute)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		b.mu.Lock()
		n := len(b.queue)
		b.mu.Unlock()
		if n == 50 {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%d calls queued after a minute, want 50", n)
		}
	}
	close(release)
	wg.Wait()
	if len(sizes) != 2 || sizes[0] != 1 || sizes[1] != 50 {
		t.Errorf("batch sizes %v, want [1 50]", sizes)
	}
	for i, r := range results {
		if r != 10*i {
			t.Errorf("call %d came back %d, want %d", i, r, 10*i)
		}
	}
}

// A caller whose context ends before its call is sent leaves the queue: the
// call is never made, and the caller knows it (no doubt); one whose call
// is in flight knows it may have been applied.
func TestBatcherCallerLeaves(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var made []int
	b := New[int](func(_ context.Context, calls []int) error {
		mu.Lock()
		made = append(made, calls...)
		mu.Unlock()
		if calls[0] == 1 {
			close(entered)
			<-release
		}
		return nil
	}, 256, 1, time.Minute)
	inFlight := make(chan error)
	ctx1, cancel1 := context.WithCancel(context.Background())
	go func() {
		_, sent, err := b.Do(ctx1, 1)
		if !sent {
			t.Error("the call in flight: sent = false")
		}
		inFlight <- err
	}()
	<-entered
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, sent, err := b.Do(ctx2, 2); sent || !errors.Is(err, tiers.ErrUnavailable) {
		t.Errorf("a queued call whose caller left: sent %v, %v; want not sent, unavailable", sent, err)
	}
	cancel1()
	if err := <-inFlight; !errors.Is(err, tiers.ErrUnavailable) {
		t.Errorf("a call in flight whose caller left: %v, want unavailable", err)
	}
	close(release)
	if _, _, err := b.Do(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(made) != 2 || made[0] != 1 || made[1] != 3 {
		t.Errorf("calls made %v, want [1 3]: the call whose caller left before it was sent is never made", made)
	}
}
