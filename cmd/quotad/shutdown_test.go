package main

import (
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/faulttest"
)

// A SIGTERM while PostgreSQL is silent: the process ends within the
// shutdown timeout all the same (no drain here), and says which units it
// could not give back.
func TestShutdownEndsWithPostgreSQLSilent(t *testing.T) {
	t.Parallel()
	const shutdownTimeout = 2 * time.Second
	schema := dbtest.New(t)
	proxy := faulttest.Start(t, hostOf(t, schema.URL))
	p := MustStartProcess(t, schema,
		"QUOTAD_DATABASE_URL="+throughProxy(t, schema.URL, proxy.Addr()),
		"QUOTAD_STORE_TIMEOUT=250ms",
		"QUOTAD_SHUTDOWN_TIMEOUT="+shutdownTimeout.String())
	s := p.server(t)
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"day","limit":1000}]`, "acme")
	if _, a := s.check(`{"customer":"acme","metric":"api_calls"}`); !a.Allowed || a.Degraded {
		t.Fatalf("first check: %+v", a) // it leases 11 units: 1 for it, a block of 10
	}
	proxy.BlackHole()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(shutdownTimeout + 30*time.Second): // a bound on the wait, far beyond the timeout
		t.Fatalf("still running %s after SIGTERM, the shutdown timeout %s", time.Since(start), shutdownTimeout)
	}
	took := time.Since(start)
	t.Logf("exited %s after SIGTERM", took.Round(time.Millisecond))
	// The timeout, and a busy machine's slack to notice it and exit.
	if took > shutdownTimeout+2*time.Second {
		t.Errorf("exited %s after SIGTERM, want within the shutdown timeout %s (and slack)", took, shutdownTimeout)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit code %d, want 1: the shutdown did not finish", code)
	}
	// The block's 10 units, or 11: the store counts the first check's
	// unit as held until the lease's next report, which never came.
	if log := p.logged(); !regexp.MustCompile(`"shutdown did not finish[^\n]*"lease_units_not_given_back":1[01],`).MatchString(log) {
		t.Errorf("the log does not say the block's units could not be given back:\n%s", log)
	}
}

// A SIGTERM under load from keep-alive clients: /readyz answers 503 at
// once, every request during the drain is answered (none fails on a
// connection the server closed), and the process then stops cleanly.
func TestDrainFailsNoRequest(t *testing.T) {
	t.Parallel()
	const drain = 3 * time.Second
	schema := dbtest.New(t)
	p := MustStartProcess(t, schema, "QUOTAD_DRAIN_TIMEOUT="+drain.String())
	s := p.server(t)
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"day","limit":1000000}]`, "acme")

	var answered, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			client := &http.Client{Timeout: 10 * time.Second} // keep-alive: one connection, reused
			defer client.CloseIdleConnections()
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("POST", p.URL+"/v1/check", strings.NewReader(`{"customer":"acme","metric":"api_calls"}`))
				req.Header.Set("Authorization", "Bearer "+checkToken)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, resp.Status)
					continue
				}
				answered.Add(1)
			}
		})
	}
	eventually(t, func() bool { return answered.Load() >= 200 }, "200 checks answered before the signal")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()
	// Readiness turns as soon as the signal is handled.
	eventually(t, func() bool { return s.do("GET", "/readyz", "").Status == http.StatusServiceUnavailable },
		"/readyz to answer 503 once the drain began")
	turned := time.Since(signalled)
	before := answered.Load()
	// Load goes on during the drain, then stops, as a load balancer's
	// would once it took the process out of rotation.
	eventually(t, func() bool { return answered.Load() >= before+200 }, "200 checks answered during the drain")
	close(stop)
	wg.Wait()
	t.Logf("readiness 503 %s after SIGTERM; %d checks answered, %d during the drain, %d failed",
		turned.Round(time.Millisecond), answered.Load(), answered.Load()-before, failed.Load())
	if failed.Load() != 0 {
		t.Errorf("%d requests failed (the first: %v), want none", failed.Load(), firstErr.Load())
	}
	if answered.Load() == before {
		t.Error("no request was answered during the drain")
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second): // a bound on the wait
		t.Fatal("quotad did not exit after the drain")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after a drained shutdown, want 0", code)
	}
	if log := p.logged(); strings.Contains(log, "not given back") {
		t.Errorf("a clean shutdown logged units not given back:\n%s", log)
	}
}
