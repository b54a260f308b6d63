package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/rueidis"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/redisstore"
	"github.com/quotad/quotad/internal/redistest"
	"github.com/quotad/quotad/internal/tiers"
)

// BenchmarkSharedCheck is a check of a second and a minute window through
// Redis, from 32 goroutines a core (quotad's checks arrive concurrently,
// and rueidis pipelines them), over 10,000 customers: what a check costs
// quotad and Redis together, the round trip included. The Redis is the
// benchmark's own, so that its CPU time per check (redis-µs/op, from INFO
// cpu) and its scripts' (redis-script-µs/op, INFO commandstats: the
// commands a script calls included, measured by the clock) are the
// checks' alone, and calls/op its script calls per check (below 1 when
// checks share calls); quotad-µs/op is this process's CPU time per check
// (the engines and the Redis client, the benchmark's loop included). With
// two processes, the checks take the two engines in turn, so that each
// key is written by both: the case where a process decided on a state the
// other has changed since.
//
// The -1percore cases have a goroutine a core: checks rarely find
// another's call on its way, so each makes a call of its own, the cost of
// a call undivided (quotad's checks when few come at once).
func BenchmarkSharedCheck(b *testing.B) {
	for _, perCore := range []int{32, 1} {
		for _, processes := range []int{1, 2} {
			name := strconv.Itoa(processes) + "proc"
			if perCore != 32 {
				name += "-" + strconv.Itoa(perCore) + "percore"
			}
			b.Run(name, func(b *testing.B) {
				benchmarkShared(b, processes, perCore)
			})
		}
	}
}

func benchmarkShared(b *testing.B, processes, perCore int) {
	catalog := quotafake.NewCatalog()
	catalog.PutMetric("api_calls", nil)
	ids := make([]string, 10_000)
	for i := range ids {
		ids[i] = "c" + strconv.Itoa(i)
		catalog.PutCustomer(ids[i], tiers.Anchor{}, []tiers.Limit{
			{Metric: "api_calls", Window: tiers.Second, Limit: tiers.MaxLimit},
			{Metric: "api_calls", Window: tiers.Minute, Limit: tiers.MaxLimit},
		})
	}
	server := redistest.StartServer(b)
	engines := make([]*quota.Engine, processes)
	for i := range engines {
		s, err := redisstore.New(server.URL(), redisstore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(s.Close)
		ledger := quotafake.NewLedger()
		engines[i] = quota.New(quota.Options{Catalog: catalog, Counts: ledger, Requests: ledger, Maintenance: ledger, Audits: ledger,
			Shared: s, SharedClock: true})
	}
	ctx := context.Background()
	var seq atomic.Int64
	cpu0, script0, calls0 := redisTimes(b, server.Client())
	own0, ownOK := processCPU()
	b.ReportAllocs()
	b.SetParallelism(perCore)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(seq.Add(1)) * 7919
		for pb.Next() {
			i++
			d, err := engines[i%processes].Check(ctx, quota.Request{Customer: ids[i/processes%len(ids)], Metric: "api_calls", Cost: 1})
			if err != nil || !d.Allowed || d.Degraded {
				b.Error(d, err)
				return
			}
		}
	})
	b.StopTimer()
	own1, _ := processCPU()
	cpu1, script1, calls1 := redisTimes(b, server.Client())
	if ownOK {
		b.ReportMetric(float64((own1-own0).Microseconds())/float64(b.N), "quotad-µs/op")
	}
	b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "redis-µs/op")
	b.ReportMetric(float64(script1-script0)/float64(b.N), "redis-script-µs/op")
	b.ReportMetric(float64(calls1-calls0)/float64(b.N), "calls/op")
}

// redisTimes returns the CPU time Redis has used (INFO cpu, user and
// system) and the time its scripts took (EVAL and EVALSHA in INFO
// commandstats), in µs, and how many scripts it ran.
func redisTimes(b *testing.B, c rueidis.Client) (cpu, script, calls int64) {
	b.Helper()
	info := func(section string) string {
		s, err := c.Do(context.Background(), c.B().Info().Section(section).Build()).ToString()
		if err != nil {
			b.Fatalf("INFO %s: %v", section, err)
		}
		return s
	}
	for _, line := range strings.Split(info("cpu"), "\r\n") {
		name, v, _ := strings.Cut(line, ":")
		if name == "used_cpu_sys" || name == "used_cpu_user" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu: %q", line)
			}
			cpu += int64(f * 1e6)
		}
	}
	for _, line := range strings.Split(info("commandstats"), "\r\n") {
		_, stats, ok := strings.Cut(line, ":calls=")
		if !strings.HasPrefix(line, "cmdstat_eval") || !ok {
			continue
		}
		n, rest, _ := strings.Cut(stats, ",")
		usec, _, _ := strings.Cut(strings.TrimPrefix(rest, "usec="), ",")
		k, err1 := strconv.ParseInt(n, 10, 64)
		u, err2 := strconv.ParseInt(usec, 10, 64)
		if err1 != nil || err2 != nil {
			b.Fatalf("INFO commandstats: %q", line)
		}
		calls += k
		script += u
	}
	return cpu, script, calls
}
