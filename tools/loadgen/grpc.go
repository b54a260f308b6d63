package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// A grpc://host:port/DOMAIN URL loads Envoy's rate limit service
// (ShouldRateLimit) with the request's domain DOMAIN. Its body template
// is the request's descriptors in the form of Envoy's client_cmd:
// key=value entries joined by ",", descriptors joined by ";" (such as
// "customer=c{{key}}"). -H headers are sent as metadata (names in lower
// case; Content-Type is dropped, gRPC sets its own). An OK answer counts
// as status 200, OVER_LIMIT as 429; a gRPC error is a transport error.
// Each worker has a connection of its own, as over HTTP.

// grpcTarget reports whether raw is a gRPC URL, and its address and
// domain.
func grpcTarget(raw string) (addr, domain string, ok bool, err error) {
	if !strings.HasPrefix(raw, "grpc://") {
		return "", "", false, nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Port() == "" {
		return "", "", true, fmt.Errorf("url %q: want grpc://host:port/domain", raw)
	}
	return u.Host, strings.TrimPrefix(u.Path, "/"), true, nil
}

// grpcMetadata turns -H headers into gRPC metadata.
func grpcMetadata(h http.Header) metadata.MD {
	md := metadata.MD{}
	for name, values := range h {
		switch strings.ToLower(name) {
		case "content-type", "user-agent", "host":
			continue
		}
		md.Append(strings.ToLower(name), values...)
	}
	return md
}

// grpcClient is a worker's connection to the rate limit service.
type grpcClient struct {
	conn   *grpc.ClientConn
	client rlsv3.RateLimitServiceClient
	md     metadata.MD
}

func newGRPCClient(t *target) (*grpcClient, error) {
	conn, err := grpc.NewClient(t.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &grpcClient{conn: conn, client: rlsv3.NewRateLimitServiceClient(conn), md: grpcMetadata(t.header)}, nil
}

// descriptors parses an expanded body into descriptors.
func descriptors(body []byte) ([]*commonrl.RateLimitDescriptor, error) {
	var out []*commonrl.RateLimitDescriptor
	for _, d := range strings.Split(string(body), ";") {
		desc := &commonrl.RateLimitDescriptor{}
		for _, e := range strings.Split(d, ",") {
			k, v, ok := strings.Cut(e, "=")
			if !ok {
				return nil, fmt.Errorf("descriptor entry %q: want key=value", e)
			}
			desc.Entries = append(desc.Entries, &commonrl.RateLimitDescriptor_Entry{Key: k, Value: v})
		}
		out = append(out, desc)
	}
	return out, nil
}

// sendGRPC asks the rate limit service once.
func (w *worker) sendGRPC(ctx context.Context, key int) (int, error) {
	p := w.plan
	w.body = p.body.expand(w.body[:0], key, w.id, w.seq)
	w.seq++
	ds, err := descriptors(w.body)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(ctx, w.grpc.md), p.timeout)
	defer cancel()
	res, err := w.grpc.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: w.target.domain, Descriptors: ds})
	if err != nil {
		return 0, err
	}
	switch res.GetOverallCode() {
	case rlsv3.RateLimitResponse_OK:
		return http.StatusOK, nil
	case rlsv3.RateLimitResponse_OVER_LIMIT:
		return http.StatusTooManyRequests, nil
	}
	return 0, fmt.Errorf("overall_code %s", res.GetOverallCode())
}
