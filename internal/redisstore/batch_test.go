package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/redistest"
	"github.com/quotad/quotad/internal/tiers"
)

// Checks that find their shard's calls all on their way wait, then go
// together in one call of the script, each answered as if it had gone
// alone: the writes of those whose keys held what they expected, what
// every key held.
func TestWaitingChecksShareOneCall(t *testing.T) {
	t.Parallel()
	server := redistest.StartServer(t)
	s := connectedAt(t, server.URL())
	ctx := context.Background()
	redis := server.Client()
	if err := redis.Do(ctx, redis.B().Set().Key("p:{api_calls/c0}:s").Value("held|").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	l := s.laneOf(0)
	l.mu.Lock()
	l.sending = lanesInFlight // as if that many calls were on their way
	l.mu.Unlock()

	const n = 10
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	ops := make([]*quota.SharedOp, n)
	errs := make(chan error, n)
	for i := range ops {
		c := fmt.Sprintf("c%d", i)
		ops[i] = &quota.SharedOp{Write: true, Expect: []string{""}, Set: []string{"0 1000 0 " + strconv.Itoa(i+1) + "|"}, TTLMs: []int64{60_000},
			Charges: []quota.Charge{{Customer: c, Metric: "api_calls", Cost: 1, At: at, Spans: []quota.Span{{
				Key: quota.CounterKey{Customer: c, Metric: "api_calls", Window: tiers.Second, Start: at}}}}}}
		go func() { errs <- s.Run(ctx, ops[i]) }()
	}
	for deadline := time.Now().Add(10 * time.Second); ; { // a bound on the wait
		l.mu.Lock()
		queued := len(l.queue)
		l.mu.Unlock()
		if queued == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d checks waiting", queued, n)
		}
		<-time.After(time.Millisecond) // polling: the checks queue as they run
	}
	before := scriptCalls(t, server)
	l.mu.Lock()
	l.sending-- // one came back
	l.mu.Unlock()
	s.next(l)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if calls := scriptCalls(t, server) - before; calls != 1 {
		t.Errorf("%d checks waiting went in %d calls, want 1", n, calls)
	}
	for i, op := range ops {
		wantFound, wantWritten := "", true
		if i == 0 {
			wantFound, wantWritten = "held|", false // it expected no key
		}
		if op.Written != wantWritten || len(op.Found) != 1 || op.Found[0] != wantFound {
			t.Errorf("check %d: written %t, found %q; want %t, [%q]", i, op.Written, op.Found, wantWritten, wantFound)
		}
		want := op.Set[0]
		if !wantWritten {
			want = "held|"
		}
		if got, _ := redis.Do(ctx, redis.B().Get().Key(s.key(op.Charges[0].Customer, "api_calls", "", false)).Build()).ToString(); got != want {
			t.Errorf("check %d: key holds %q, want %q", i, got, want)
		}
	}
}

// scriptCalls returns how many times the server has run a script (an
// EVALSHA that found no script, which rueidis follows with an EVAL, not
// counted).
func scriptCalls(t *testing.T, server *redistest.Server) int {
	t.Helper()
	c := server.Client()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(info, "\r\n") {
		if name, stats, ok := strings.Cut(line, ":calls="); ok && strings.HasPrefix(name, "cmdstat_eval") {
			calls, rest, _ := strings.Cut(stats, ",")
			_, failed, _ := strings.Cut(rest, "failed_calls=")
			k, err1 := strconv.Atoi(calls)
			f, err2 := strconv.Atoi(failed)
			if err1 != nil || err2 != nil {
				t.Fatalf("INFO commandstats: %q", line)
			}
			n += k - f
		}
	}
	return n
}

// One call answers each of its checks as if it had gone alone, whatever
// the others' outcomes: a write of two keys that held what it expected, a
// look whose key held what it expected, a look and a write whose keys had
// changed (each answered with what its keys held, nothing written).
func TestOneCallAnswersEachCheck(t *testing.T) {
	t.Parallel()
	server := redistest.StartServer(t)
	s := storeAt(t, server.URL())
	ctx := context.Background()
	redis := server.Client()
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	charge := func(customer string, global bool) quota.Charge {
		c := quota.Charge{Customer: customer, Metric: "api_calls", Cost: 1, At: at, Spans: []quota.Span{{
			Key: quota.CounterKey{Customer: customer, Metric: "api_calls", Window: tiers.Second, Start: at}}}}
		if global {
			c.MetricCapacity = true
			c.Globals = []quota.GlobalKey{{Metric: "api_calls", Window: tiers.Second, Start: at}}
		}
		return c
	}
	held := map[string]string{
		s.key("c1", "api_calls", "", false): "0 1000 0 1|",
		s.key("c2", "api_calls", "", false): "0 1000 0 2|",
		s.key("c3", "api_calls", "", false): "0 1000 0 3|",
	}
	for k, v := range held {
		if err := redis.Do(ctx, redis.B().Set().Key(k).Value(v).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	ops := []*quota.SharedOp{
		{Charges: []quota.Charge{charge("c0", true)}, Write: true, Expect: []string{"", ""},
			Set: []string{"0 1000 0 1|", "0 1000 0 7|"}, TTLMs: []int64{60_000, 0}},
		{Charges: []quota.Charge{charge("c1", false)}, Expect: []string{"0 1000 0 1|"}},
		{Charges: []quota.Charge{charge("c2", false)}, Expect: []string{""}},
		{Charges: []quota.Charge{charge("c3", false)}, Write: true, Expect: []string{"0 1000 0 2|"},
			Set: []string{"0 1000 0 4|"}, TTLMs: []int64{60_000}},
	}
	wants := []struct {
		written bool
		found   []string
	}{
		{true, []string{"", ""}},
		{false, []string{"0 1000 0 1|"}},
		{false, []string{"0 1000 0 2|"}},
		{false, []string{"0 1000 0 3|"}},
	}
	batch := make([]*pending, len(ops))
	for i, op := range ops {
		batch[i] = &pending{op: op}
	}
	before := scriptCalls(t, server)
	s.send(batch)
	if calls := scriptCalls(t, server) - before; calls != 1 {
		t.Errorf("%d script calls, want 1", calls)
	}
	for i, p := range batch {
		if p.err != nil {
			t.Fatalf("check %d: %v", i, p.err)
		}
		if got, want := p.op, wants[i]; got.Written != want.written || !slices.Equal(got.Found, want.found) {
			t.Errorf("check %d: written %t, found %q; want %t, %q", i, got.Written, got.Found, want.written, want.found)
		}
		if ms := time.Since(time.UnixMilli(p.op.AnsweredMs)); ms < -time.Minute || ms > time.Minute {
			t.Errorf("check %d: answered at %d, not the server's time", i, p.op.AnsweredMs)
		}
	}
	held[s.key("c0", "api_calls", "", true)] = "0 1000 0 1|"
	held[s.globalKey("api_calls")] = "0 1000 0 7|"
	for k, want := range held {
		if got, _ := redis.Do(ctx, redis.B().Get().Key(k).Build()).ToString(); got != want {
			t.Errorf("%s holds %q, want %q", k, got, want)
		}
	}
	if ttl, _ := redis.Do(ctx, redis.B().Pttl().Key(s.globalKey("api_calls")).Build()).AsInt64(); ttl != -1 {
		t.Errorf("the global key expires in %d ms, want never (0)", ttl)
	}
}
