package store_test

import (
	"context"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/store"
)

// Liveness judges PostgreSQL alive while it answers, silent once a ping
// has no byte back for the silence timeout (a black hole), and alive again
// once it answers, each change heard once.
func TestLivenessJudgesSilence(t *testing.T) {
	t.Parallel()
	db, proxy, _ := openThroughProxy(t)
	ctx := context.Background()

	const silence = 200 * time.Millisecond
	var mu sync.Mutex
	var heard []bool
	var errs []error
	live := store.NewLiveness(db, silence, func(alive bool, err error) {
		mu.Lock()
		defer mu.Unlock()
		heard, errs = append(heard, alive), append(errs, err)
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); live.Run(runCtx) }()
	defer func() { stop(); <-done }()

	alive := func() bool { _, ok := live.Alive(); return ok }
	changes := func() []bool {
		mu.Lock()
		defer mu.Unlock()
		return append([]bool(nil), heard...)
	}
	if !alive() {
		t.Fatal("judged silent at the start")
	}
	aliveCtx, _ := live.Alive()

	proxy.BlackHole()
	waitFor(t, func() bool { return !alive() }, "a black-holed PostgreSQL to be judged silent")
	if aliveCtx.Err() == nil {
		t.Error("the context of the alive judgement did not end with it")
	}
	proxy.Clear()
	waitFor(t, alive, "PostgreSQL to be judged alive again")
	got := changes()
	if len(got) != 2 || got[0] || !got[1] {
		t.Errorf("changes heard %v, want [false true]", got)
	}
	mu.Lock()
	silentErr := errs[0]
	mu.Unlock()
	if silentErr == nil {
		t.Error("judged silent without an error")
	}
	if ctx2, ok := live.Alive(); !ok || ctx2.Err() != nil {
		t.Error("alive again, but its context ended")
	}
}

// waitFor polls cond until it holds, for at most 30 s: a bound on a wait
// on a busy machine, not a measurement.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// The kernel counts bytes a connection received even before the process
// reads them: what tells a process too busy to read its answers from a
// silent server.
func TestQuietForCountsUnreadBytes(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the kernel's count is read on Linux only")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server := <-accepted
	if server == nil {
		t.FailNow()
	}
	defer server.Close()
	if _, err := server.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	// Unread, the byte is counted as soon as the kernel has it.
	waitFor(t, func() bool {
		quiet, known := store.QuietFor(client)
		return known && quiet < time.Second
	}, "the unread answer to count as received")
	buf := make([]byte, 6)
	if _, err := io.ReadFull(client, buf); err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, known := store.QuietFor(a); known {
		t.Error("QuietFor knows of a connection that is not TCP")
	}
}
