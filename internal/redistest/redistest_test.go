package redistest_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/quotad/quotad/internal/redistest"
)

// A prefix's keys are gone once its test ends, however many SCAN pages
// they fill; keys under another prefix stay.
func TestPrefixDeletesItsKeys(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	ctx := context.Background()
	other := redistest.Prefix(t) + "kept"
	if err := c.Do(ctx, c.B().Set().Key(other).Value("1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	var prefix string
	t.Run("writes", func(t *testing.T) {
		prefix = redistest.Prefix(t)
		if !strings.HasPrefix(prefix, "test:") || !strings.HasSuffix(prefix, ":") {
			t.Errorf("prefix %q, want test:<random>:", prefix)
		}
		keys := []string{"a", "{x}b", "c:log"}
		for i := range 2500 { // SCAN COUNT 1000 takes several pages
			keys = append(keys, "k"+strconv.Itoa(i))
		}
		cmds := make(rueidis.Commands, 0, len(keys))
		for _, k := range keys {
			cmds = append(cmds, c.B().Set().Key(prefix+k).Value("1").Build())
		}
		for _, r := range c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				t.Fatal(err)
			}
		}
	})
	if prefix == "" {
		t.FailNow()
	}
	keys, err := c.Do(ctx, c.B().Keys().Pattern(prefix+"*").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("%d keys left under %s, e.g. %s", len(keys), prefix, keys[0])
	}
	if n, err := c.Do(ctx, c.B().Exists().Key(other).Build()).AsInt64(); err != nil || n != 1 {
		t.Errorf("key %s of another test: exists = %d, %v; want 1", other, n, err)
	}
}

// Two calls give two prefixes.
func TestPrefixesDiffer(t *testing.T) {
	t.Parallel()
	if a, b := redistest.Prefix(t), redistest.Prefix(t); a == b {
		t.Errorf("two prefixes are both %q", a)
	}
}

// ping connects to the Redis at url and pings it.
func ping(t *testing.T, url string) error {
	t.Helper()
	o, err := rueidis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	o.DisableCache = true
	c, err := rueidis.NewClient(o)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Do(context.Background(), c.B().Ping().Build()).Error()
}

// A test's own server answers, refuses connections when stopped, and
// answers on the same URL when started again.
func TestServerStopsAndStarts(t *testing.T) {
	t.Parallel()
	s := redistest.StartServer(t)
	url := s.URL()
	if !strings.HasPrefix(url, "redis://127.0.0.1:") || url == "redis://127.0.0.1:6379/0" {
		t.Fatalf("URL %q, want a free port of 127.0.0.1", url)
	}
	if err := ping(t, url); err != nil {
		t.Fatalf("started: %v", err)
	}
	s.Stop()
	if err := ping(t, url); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("stopped: ping = %v, want connection refused", err)
	}
	s.Stop() // stopping a stopped server does nothing
	s.Start()
	if s.URL() != url {
		t.Errorf("started again at %s, was %s", s.URL(), url)
	}
	if err := ping(t, url); err != nil {
		t.Fatalf("started again: %v", err)
	}
	s.Start() // starting a running server does nothing
	if err := ping(t, url); err != nil {
		t.Fatalf("started twice: %v", err)
	}
}

// fatalTB records the first Fatal of a helper instead of failing the
// test; the helper must run in a goroutine of its own, which Fatal ends.
type fatalTB struct {
	testing.TB
	fatal string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// Start fails when its port has been taken while stopped, even though a
// Redis answers there: the answer is not its server's.
func TestServerStartFailsOnATakenPort(t *testing.T) {
	t.Parallel()
	tb := &fatalTB{TB: t}
	s := redistest.StartServer(tb)
	s.Stop()

	port := strings.TrimSuffix(strings.TrimPrefix(s.URL(), "redis://127.0.0.1:"), "/0")
	thief := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := thief.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = thief.Process.Kill()
		_ = thief.Wait()
	})
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for ping(t, s.URL()) != nil {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the other redis-server on port %s does not answer", port)
		}
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Start()
	}()
	<-done
	if !strings.Contains(tb.fatal, "exited") {
		t.Fatalf("Start on a taken port: Fatal %q, want redis-server exited", tb.fatal)
	}
	t.Logf("Start on a taken port: %s", tb.fatal)
}
