package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// fakeRLS answers OK for customers whose id ends in an even digit,
// OVER_LIMIT for the others, and notes what it was sent that it should
// not have been.
type fakeRLS struct {
	rlsv3.UnimplementedRateLimitServiceServer
	mu       sync.Mutex
	calls    int
	problems []string
}

func (f *fakeRLS) ShouldRateLimit(ctx context.Context, r *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	md, _ := metadata.FromIncomingContext(ctx)
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer t" {
		f.problems = append(f.problems, fmt.Sprintf("authorization %v", got))
	}
	if r.GetDomain() != "api_calls" || len(r.GetDescriptors()) != 2 || len(r.GetDescriptors()[0].GetEntries()) != 2 ||
		r.GetDescriptors()[1].GetEntries()[0].GetKey() != "customer" {
		f.problems = append(f.problems, fmt.Sprintf("request %v", r))
		return &rlsv3.RateLimitResponse{}, nil
	}
	id := r.GetDescriptors()[0].GetEntries()[0].GetValue()
	if !strings.HasPrefix(id, "c") {
		f.problems = append(f.problems, "customer "+id)
	}
	code := rlsv3.RateLimitResponse_OK
	if (id[len(id)-1]-'0')%2 == 1 {
		code = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	return &rlsv3.RateLimitResponse{OverallCode: code}, nil
}

// A grpc:// URL loads Envoy's rate limit service: descriptors from the
// body, the domain from the path, -H as metadata, OK as 200 and
// OVER_LIMIT as 429, one connection per worker.
func TestRunAgainstRateLimitService(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRLS{}
	g := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(g, f)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	profile := filepath.Join(t.TempDir(), "loadgen.pprof")
	s := runJSON(t, "-url", "grpc://"+ln.Addr().String()+"/api_calls", "-c", "3", "-warmup", "100ms", "-d", "500ms", "-keys", "10",
		"-cpuprofile", profile,
		"-H", "Authorization: Bearer t", "-H", "Content-Type: application/json",
		"-body", "customer=c{{key}},metric=api_calls;customer=d{{key}}")
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.problems) > 0 {
		t.Errorf("the service saw: %v", f.problems[:min(5, len(f.problems))])
	}
	if s.Errors != 0 || s.AllErrors != 0 {
		t.Errorf("errors = %d, all_errors = %d (first: %s), want none", s.Errors, s.AllErrors, s.FirstError)
	}
	if s.Status["200"] == 0 || s.Status["429"] == 0 || s.Non2xx != s.Status["429"] {
		t.Errorf("status %v: want OK as 200 and OVER_LIMIT as 429", s.Status)
	}
	if int64(f.calls) != s.Total || s.Connections != 3 {
		t.Errorf("the service answered %d calls, loadgen counted %d, over %d connections (want 3)", f.calls, s.Total, s.Connections)
	}
	if fi, err := os.Stat(profile); err != nil || fi.Size() == 0 {
		t.Errorf("-cpuprofile: no profile written (%v)", err)
	}
}

func TestGRPCURLErrors(t *testing.T) {
	for _, u := range []string{"grpc://", "grpc://127.0.0.1/api_calls"} {
		if _, _, err := parseFlags([]string{"-url", u}, &strings.Builder{}); err == nil {
			t.Errorf("-url %s: no error", u)
		}
	}
	// A body that is no descriptors stops the run before it starts.
	_, _, err := parseFlags([]string{"-url", "grpc://127.0.0.1:1/api_calls", "-body", "customer"}, &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "want key=value") {
		t.Errorf("-body customer: error %v, want one saying key=value", err)
	}
}

// A body template is parsed into descriptors once; only values with
// placeholders are filled per request.
func TestDescriptorTemplate(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       string // the request's descriptors, holes shown as ?
		holes      int
		err        string
	}{
		{name: "one entry", body: "customer=c{{key}}", want: "[customer=?]", holes: 1},
		{name: "literals and holes", body: "customer=c{{key}},metric=api_calls;customer=d{{key/10}}-{{seq}}",
			want: "[customer=? metric=api_calls] [customer=?]", holes: 2},
		{name: "empty value", body: "customer=", want: "[customer=]"},
		{name: "no =", body: "customer", err: `descriptor entry "customer": want key=value`},
		{name: "placeholder in a key", body: "c{{key}}=x", err: "keys are literal"},
		{name: "unknown placeholder", body: "customer={{nope}}", err: "unknown placeholder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, holes, err := descriptorTemplate(tc.body)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range holes {
				h.entry.Value = "?"
			}
			var got []string
			for _, d := range req.GetDescriptors() {
				var es []string
				for _, e := range d.GetEntries() {
					es = append(es, e.GetKey()+"="+e.GetValue())
				}
				got = append(got, "["+strings.Join(es, " ")+"]")
			}
			if g := strings.Join(got, " "); g != tc.want || len(holes) != tc.holes {
				t.Errorf("descriptors %s with %d holes, want %s with %d", g, len(holes), tc.want, tc.holes)
			}
		})
	}
}

// Each request fills the holes anew: the values it sends are its own.
func TestSendGRPCFillsEachRequest(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	seen := &recordRLS{}
	g := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(g, seen)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	p, _, err := parseFlags([]string{"-url", "grpc://" + ln.Addr().String() + "/api_calls", "-c", "1",
		"-body", "customer=c{{key}},metric=api_calls;customer=d{{key/10}}-{{seq}}"}, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	w := p.newWorker(3, p.targets[0])
	defer w.close()
	for _, key := range []int{42, 7} {
		if _, err := w.sendGRPC(context.Background(), key); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"api_calls: customer=c42 metric=api_calls; customer=d4-3-0", "api_calls: customer=c7 metric=api_calls; customer=d0-3-1"}
	if fmt.Sprint(seen.requests) != fmt.Sprint(want) {
		t.Errorf("the service was sent %q, want %q", seen.requests, want)
	}
}

// recordRLS answers OK and keeps each request in the form
// "domain: key=value key=value; key=value".
type recordRLS struct {
	rlsv3.UnimplementedRateLimitServiceServer
	mu       sync.Mutex
	requests []string
}

func (f *recordRLS) ShouldRateLimit(_ context.Context, r *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	var ds []string
	for _, d := range r.GetDescriptors() {
		var es []string
		for _, e := range d.GetEntries() {
			es = append(es, e.GetKey()+"="+e.GetValue())
		}
		ds = append(ds, strings.Join(es, " "))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.GetDomain()+": "+strings.Join(ds, "; "))
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}, nil
}
