package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/faulttest"
	"github.com/quotad/quotad/internal/redistest"
)

// A machine with every core busy, its memory churned and PostgreSQL
// working hard makes PostgreSQL slow, not silent: a check waits for it
// rather than fail over. These tests saturate the machine themselves
// (processes that spin and allocate, PostgreSQL sessions that compute and
// write) beside four quotad processes at their production store timeout,
// and stop it when they end.

// burnEnv makes the test binary a burner (see TestHelperBurn).
const burnEnv = "QUOTAD_TEST_BURN"

// TestHelperBurn is not a test: run by saturate as a process of its own,
// it keeps every core busy and churns memory until it is killed.
func TestHelperBurn(t *testing.T) {
	if os.Getenv(burnEnv) == "" {
		t.Skip("a helper process of the saturation tests")
	}
	for range runtime.NumCPU() {
		go func() {
			var keep [][]byte
			for i := 0; ; i++ {
				b := make([]byte, 1<<20)
				for j := 0; j < len(b); j += 4096 {
					b[j] = byte(i)
				}
				keep = append(keep, b)
				if len(keep) > 128 { // up to 128 MiB live per core, churned
					keep = keep[1:]
				}
			}
		}()
	}
	select {}
}

// saturate loads the machine until the test ends: two burner processes
// per core, and four PostgreSQL sessions on admin's database that compute
// and write without pause.
func saturate(t *testing.T, admin string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	for range 2 * runtime.NumCPU() {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBurn$")
		cmd.Env = append(os.Environ(), burnEnv+"=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	table := fmt.Sprintf("burn_%d", time.Now().UnixNano())
	for i := range 4 {
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if _, err := conn.Exec(ctx, `CREATE UNLOGGED TABLE `+table+` (n bigint, pad text)`); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				c, err := pgx.Connect(context.Background(), admin)
				if err == nil {
					_, _ = c.Exec(context.Background(), `DROP TABLE IF EXISTS `+table)
					_ = c.Close(context.Background())
				}
			})
		}
		wg.Go(func() {
			defer conn.Close(context.Background())
			for ctx.Err() == nil {
				// Errors are of the load alone (cancelled at the end).
				_, _ = conn.Exec(ctx, `SELECT sum(i * i) FROM generate_series(1, 3000000) i`)
				_, _ = conn.Exec(ctx, `INSERT INTO `+table+` SELECT i, repeat('x', 100) FROM generate_series(1, 50000) i`)
				_, _ = conn.Exec(ctx, `DELETE FROM `+table)
			}
		})
	}
}

// 400 checks at once over four processes at a hard day limit of 100 (and
// a minute window in Redis), the machine saturated, the store timeouts at
// their defaults: exactly 100 admitted, none degraded. Then PostgreSQL goes silent (a black hole),
// the machine still saturated: checks beyond the blocks held are admitted
// degraded, and once PostgreSQL answers again the day counts every unit
// admitted.
func TestSaturatedMachineHoldsHardLimits(t *testing.T) {
	schema, admin := dbtest.NewDatabase(t)
	proxy := faulttest.Start(t, hostOf(t, schema.URL))
	env := []string{
		"QUOTAD_DATABASE_URL=" + throughProxy(t, schema.URL, proxy.Addr()),
		"QUOTAD_REDIS_URL=" + redistest.ServerURL(t),
		"QUOTAD_REDIS_PREFIX=" + redistest.Prefix(t),
		// The defaults, not the tests' long ones.
		"QUOTAD_STORE_TIMEOUT=250ms",
		"QUOTAD_REDIS_TIMEOUT=250ms",
		"QUOTAD_STORE_FAILURE=open",
		"QUOTAD_DB_MAX_CONNS=6",
	}
	servers := make([]*testServer, 4)
	for i := range servers {
		servers[i] = MustStartProcess(t, schema, env...).server(t)
	}
	// The minute window is counted in Redis, the day in PostgreSQL: every
	// check needs both.
	MustSeed(t, servers[0], "", `[{"metric":"api_calls","window":"minute","limit":10000},{"metric":"api_calls","window":"day","limit":100}]`, "acme", "beta")
	saturate(t, admin)

	t.Run("slow", func(t *testing.T) {
		tl := runChecks(t, servers, 400, 400, "acme", nil)
		t.Logf("saturated: %s", tl)
		if tl.admitted != 100 || tl.degraded != 0 || tl.statuses[http.StatusTooManyRequests] != 300 {
			t.Errorf("%s; want exactly 100 admitted, 300 denied, none degraded", tl)
		}
	})

	t.Run("silent", func(t *testing.T) {
		admitted := int64(0)
		for _, s := range servers { // each process leases a block of beta
			eventually(t, func() bool {
				_, a := s.check(`{"customer":"beta","metric":"api_calls"}`)
				if a.Allowed {
					admitted++
				}
				return a.Allowed && !a.Degraded
			}, "beta's first check to be admitted from PostgreSQL")
		}
		proxy.BlackHole()
		tl := runChecks(t, servers, 400, 400, "beta", nil)
		proxy.Clear()
		t.Logf("saturated, PostgreSQL silent: %s", tl)
		if tl.statuses[http.StatusOK] != 400 || tl.degraded == 0 {
			t.Fatalf("%s; want all 400 admitted (failing open), some degraded", tl)
		}
		admitted += 400
		for _, s := range servers {
			eventually(t, func() bool { return s.usageOf("beta")["day"] == admitted },
				fmt.Sprintf("beta's day usage to be the %d units admitted", admitted))
		}
	})
}
