package main

import (
	"context"
	"fmt"
	"net"
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
	s := runJSON(t, "-url", "grpc://"+ln.Addr().String()+"/api_calls", "-c", "3", "-warmup", "100ms", "-d", "500ms", "-keys", "10",
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
}

func TestGRPCURLErrors(t *testing.T) {
	for _, u := range []string{"grpc://", "grpc://127.0.0.1/api_calls"} {
		if _, _, err := parseFlags([]string{"-url", u}, &strings.Builder{}); err == nil {
			t.Errorf("-url %s: no error", u)
		}
	}
}
