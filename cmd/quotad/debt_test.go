package main

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/faulttest"
)

// Checks that fail open while PostgreSQL is silent are admitted degraded,
// and their units are owed: /metrics says how many. Once PostgreSQL
// answers again, every process charges what it owes, so the day counters
// hold every unit admitted, the degraded ones included: for a customer
// cached before the outage (its held blocks spent, then its checks
// degraded) and for one first seen during it (looked up only once
// PostgreSQL is back, and charged as of when it was admitted).
func TestFaultDegradedUnitsAreCharged(t *testing.T) {
	_, proxy, servers := MustStartProxied(t, 2, map[string]string{
		"QUOTAD_STORE_FAILURE": "open",
		"QUOTAD_STORE_TIMEOUT": "250ms",
	})
	MustSeed(t, servers[0], "", `[{"metric":"api_calls","window":"day","limit":1000}]`, "warm", "cold")
	admitted := map[string]int64{}
	for _, s := range servers {
		// Each process leases a block of warm. On a busy machine a check
		// may be answered degraded first: it is admitted, so counted.
		eventually(t, func() bool {
			_, a := s.check(`{"customer":"warm","metric":"api_calls"}`)
			if a.Allowed {
				admitted["warm"]++
			}
			return a.Allowed && !a.Degraded
		}, "warm's first check to be admitted from PostgreSQL")
	}
	proxy.BlackHole()
	var degraded int
	for _, run := range []struct {
		customer       string
		workers, count int
	}{{"warm", 8, 60}, {"cold", 4, 8}} {
		tl := runChecks(t, servers, run.workers, run.count, run.customer, nil)
		t.Logf("PostgreSQL silent, %s: %s", run.customer, tl)
		if tl.statuses[http.StatusOK] != run.count {
			t.Fatalf("%s: %s; want every check admitted (failing open)", run.customer, tl)
		}
		admitted[run.customer] += int64(tl.statuses[http.StatusOK])
		degraded += tl.degraded
	}
	if degraded == 0 {
		t.Fatal("no check was answered degraded: the outage did not happen")
	}
	var owed float64
	for _, s := range servers {
		owed += s.metricValue("quotad_degraded_units_owed")
	}
	if owed != float64(degraded) {
		t.Errorf("quotad_degraded_units_owed sums to %v during the outage, want the %d units answered degraded", owed, degraded)
	}
	proxy.Clear()
	for _, s := range servers {
		for _, c := range []string{"warm", "cold"} {
			eventually(t, func() bool { return s.usageOf(c)["day"] == admitted[c] },
				fmt.Sprintf("%s's day usage to be the %d units admitted", c, admitted[c]))
		}
	}
	var repaid float64
	for _, s := range servers {
		if v := s.metricValue("quotad_degraded_units_owed"); v != 0 {
			t.Errorf("%v units still owed after PostgreSQL came back", v)
		}
		repaid += s.metricValue("quotad_degraded_units_repaid_total")
		if v := s.metricValue("quotad_degraded_units_lost_total"); v != 0 {
			t.Errorf("%v units lost, want none: every window is current", v)
		}
	}
	if repaid != float64(degraded) {
		t.Errorf("quotad_degraded_units_repaid_total sums to %v, want the %d units answered degraded", repaid, degraded)
	}
}

// What a process owes when it stops: a graceful stop, PostgreSQL back,
// charges it all; a SIGKILL while PostgreSQL is silent loses at most what
// quotad_degraded_units_owed said, and no unit admitted before.
func TestDebtAcrossRestart(t *testing.T) {
	schema := dbtest.New(t)
	proxy := faulttest.Start(t, hostOf(t, schema.URL))
	env := []string{
		"QUOTAD_DATABASE_URL=" + throughProxy(t, schema.URL, proxy.Addr()),
		"QUOTAD_STORE_FAILURE=open",
		"QUOTAD_STORE_TIMEOUT=250ms",
	}
	const block = 10 // 1% of the day's limit
	first := MustStartProcess(t, schema, env...)
	MustSeed(t, first.server(t), "", `[{"metric":"api_calls","window":"day","limit":1000}]`, "graceful", "killed")

	// outage runs checks of customer against p with PostgreSQL silent, and
	// returns how many were admitted and how many of those degraded.
	outage := func(p *process, customer string) (admitted, degraded int64) {
		s := p.server(t)
		eventually(t, func() bool {
			_, a := s.check(`{"customer":"` + customer + `","metric":"api_calls"}`)
			if a.Allowed {
				admitted++
				if a.Degraded {
					degraded++
				}
			}
			return a.Allowed && !a.Degraded
		}, customer+"'s first check to be admitted from PostgreSQL")
		proxy.BlackHole()
		tl := runChecks(t, []*testServer{s}, 4, 30, customer, nil)
		t.Logf("%s, PostgreSQL silent: %s", customer, tl)
		if tl.statuses[http.StatusOK] != 30 || tl.degraded == 0 {
			t.Fatalf("%s: %s; want 30 admitted, some degraded", customer, tl)
		}
		return admitted + 30, degraded + int64(tl.degraded)
	}

	t.Run("graceful", func(t *testing.T) {
		admitted, degraded := outage(first, "graceful")
		if owed := first.server(t).metricValue("quotad_degraded_units_owed"); owed != float64(degraded) {
			t.Errorf("owed %v, want the %d units answered degraded", owed, degraded)
		}
		proxy.Clear()
		eventually(t, func() bool { return first.server(t).do("GET", "/readyz", "").Status == http.StatusOK },
			"the process to reach PostgreSQL again")
		if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		<-first.done
		if code := first.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("exit code %d after SIGTERM, want 0", code)
		}
		if used := rawDay(t, schema, "graceful"); used != admitted {
			t.Errorf("after a graceful stop the day counter holds %d units, want the %d admitted (%d of them degraded)", used, admitted, degraded)
		}
	})

	t.Run("SIGKILL", func(t *testing.T) {
		p := MustStartProcess(t, schema, env...)
		admitted, degraded := outage(p, "killed")
		owed := int64(p.server(t).metricValue("quotad_degraded_units_owed"))
		if owed != degraded {
			t.Errorf("owed %d, want the %d units answered degraded", owed, degraded)
		}
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.done
		proxy.Clear()
		after := MustStartProcess(t, schema, env...)
		used := after.server(t).usageOf("killed")["day"]
		t.Logf("admitted %d (%d degraded, %d owed at the kill); counted after the restart %d", admitted, degraded, owed, used)
		// Lost: at most what was owed. Counted beyond what was admitted:
		// at most the dead process's block (see TestCrashCostsAtMostTheDeadProcessBlock).
		if used < admitted-owed || used > admitted+block {
			t.Errorf("day used = %d after a SIGKILL, want between %d admitted - %d owed and %d admitted + a block of %d",
				used, admitted, owed, admitted, block)
		}
	})
}
