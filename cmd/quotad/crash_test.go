package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
)

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// MustBuildBinary builds quotad once per test run and returns its path.
func MustBuildBinary(t testing.TB) string {
	t.Helper()
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "quotad-test-bin")
		if err != nil {
			binaryErr = err
			return
		}
		binaryPath = filepath.Join(dir, "quotad")
		out, err := exec.Command("go", "build", "-o", binaryPath, ".").CombinedOutput()
		if err != nil {
			binaryErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	return binaryPath
}

// process is quotad running as its own OS process.
type process struct {
	cmd  *exec.Cmd
	URL  string
	done chan struct{}

	logMu sync.Mutex
	log   strings.Builder // what it wrote to stdout
}

// logged returns what p has logged so far.
func (p *process) logged() string {
	p.logMu.Lock()
	defer p.logMu.Unlock()
	return p.log.String()
}

// MustStartProcess runs the built binary on schema, with env ("NAME=value"
// pairs) on top of the test defaults, and waits until it listens; it is
// killed when the test ends, if it still runs.
func MustStartProcess(t testing.TB, schema *dbtest.Schema, env ...string) *process {
	t.Helper()
	cmd := exec.Command(MustBuildBinary(t))
	cmd.Env = append(os.Environ(),
		"QUOTAD_DATABASE_URL="+schema.URL,
		"QUOTAD_LISTEN=127.0.0.1:0",
		"QUOTAD_ADMIN_TOKENS=ops:"+adminToken,
		"QUOTAD_CHECK_TOKENS=backend:"+checkToken,
		"QUOTAD_LOG_LEVEL=info", // "listening" is logged at info
		"QUOTAD_DB_WAIT=0s",
		"QUOTAD_DRAIN_TIMEOUT=0s", // no load balancer to wait for
		"QUOTAD_STORE_TIMEOUT="+testStoreTimeout,
		"QUOTAD_REDIS_TIMEOUT="+testStoreTimeout,
	)
	cmd.Env = append(cmd.Env, env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.logMu.Lock()
			p.log.Write(sc.Bytes())
			p.log.WriteByte('\n')
			p.logMu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" {
				addr <- rec.Addr
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("quotad (pid %d) log:\n%s", cmd.Process.Pid, p.logged())
		}
	})
	select {
	case a := <-addr:
		p.URL = "http://" + a
	case <-p.done:
		t.Fatal("quotad exited before listening")
	case <-time.After(30 * time.Second):
		t.Fatal("quotad did not start listening")
	}
	return p
}

// server returns a testServer talking to p, for the harness's helpers.
func (p *process) server(t testing.TB) *testServer { return &testServer{t: t, URL: p.URL} }

// A crash costs a customer at most the killed process's unused blocks: the
// units it reserved stay counted until the window ends, so after a restart
// the day counter lies between the checks answered allowed and the checks
// sent plus one block, and never above the limit.
func TestCrashCostsAtMostTheDeadProcessBlock(t *testing.T) {
	t.Parallel()
	const limit, block = 10000, 100 // a block is 1% of the limit
	schema := dbtest.New(t)
	first := MustStartProcess(t, schema)
	s := first.server(t)
	MustSeed(t, s, "", fmt.Sprintf(`[{"metric":"api_calls","window":"day","limit":%d}]`, limit), "acme")

	var sent, allowed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 10 * time.Second}
	for range 16 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("POST", first.URL+"/v1/check", strings.NewReader(`{"customer":"acme","metric":"api_calls","cost":1}`))
				req.Header.Set("Authorization", "Bearer "+checkToken)
				req.Header.Set("Content-Type", "application/json")
				sent.Add(1)
				resp, err := client.Do(req)
				if err != nil {
					return // the process is gone
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					allowed.Add(1)
				}
			}
		})
	}
	// Kill it under load, once it has admitted a few blocks' worth.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(30 * time.Second)
	for allowed.Load() < 5*block {
		select {
		case <-first.done:
			t.Fatal("quotad exited under load")
		case <-timeout:
			t.Fatalf("only %d checks admitted in 30 s", allowed.Load())
		case <-tick.C:
		}
	}
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.done
	close(stop)
	wg.Wait()

	second := MustStartProcess(t, schema)
	used := second.server(t).usageOf("acme")["day"]
	t.Logf("sent %d, answered allowed %d, counted after restart %d", sent.Load(), allowed.Load(), used)
	if used < allowed.Load() || used > sent.Load()+block || used > limit {
		t.Errorf("day used = %d after a crash, want between %d answered allowed and %d sent + %d, at most %d",
			used, allowed.Load(), sent.Load(), block, limit)
	}
	if _, ans := second.server(t).check(`{"customer":"acme","metric":"api_calls"}`); !ans.Allowed || ans.Limits[0].Used != used+1 {
		t.Errorf("first check after the restart: %+v, want allowed with used %d", ans, used+1)
	}
}
