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
// Each worker has a connection of its own, as over HTTP, and sends one
// request at a time; like the raw HTTP client, it builds its request once
// and sets only the values with placeholders per request, so that the
// generator's own work weighs little beside the server's.

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

// grpcClient is a worker's connection to the rate limit service, and the
// request it sends again and again: parsed from the body template once,
// only the values with placeholders set anew per request (a worker waits
// for each answer before its next request, so the request is never in use
// twice at once).
type grpcClient struct {
	conn   *grpc.ClientConn
	client rlsv3.RateLimitServiceClient
	md     metadata.MD
	ctx    context.Context // the run's context with md, made at the first request
	req    *rlsv3.RateLimitRequest
	holes  []valueHole
	buf    []byte
}

// valueHole is an entry whose value has placeholders.
type valueHole struct {
	entry *commonrl.RateLimitDescriptor_Entry
	value *bodyTemplate
}

// Flow control windows of the generator's connections: fixed, as Envoy's
// HTTP/2 client has them (it sends no pings to size them), so that each
// answer is not followed by a ping of gRPC's bandwidth estimate that the
// server must answer. Answers are a few hundred bytes.
const (
	grpcStreamWindow = 64 << 10
	grpcConnWindow   = 1 << 20
)

func newGRPCClient(t *target, body string) (*grpcClient, error) {
	req, holes, err := descriptorTemplate(body)
	if err != nil {
		return nil, err
	}
	req.Domain = t.domain
	conn, err := grpc.NewClient(t.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStaticStreamWindowSize(grpcStreamWindow), grpc.WithStaticConnWindowSize(grpcConnWindow))
	if err != nil {
		return nil, err
	}
	return &grpcClient{conn: conn, client: rlsv3.NewRateLimitServiceClient(conn), md: grpcMetadata(t.header), req: req, holes: holes}, nil
}

// descriptorTemplate parses a body template into a request's descriptors:
// key=value entries joined by ",", descriptors joined by ";". Keys are
// literal; a value may hold placeholders ({{key}}, {{seq}}, ...), and
// those values are returned as holes to fill per request.
func descriptorTemplate(body string) (*rlsv3.RateLimitRequest, []valueHole, error) {
	req := &rlsv3.RateLimitRequest{}
	var holes []valueHole
	for _, d := range strings.Split(body, ";") {
		desc := &commonrl.RateLimitDescriptor{}
		for _, e := range strings.Split(d, ",") {
			k, v, ok := strings.Cut(e, "=")
			if !ok {
				return nil, nil, fmt.Errorf("descriptor entry %q: want key=value", e)
			}
			if strings.Contains(k, "{{") {
				return nil, nil, fmt.Errorf("descriptor entry %q: keys are literal, only values take placeholders", e)
			}
			t, err := parseTemplate(v)
			if err != nil {
				return nil, nil, err
			}
			entry := &commonrl.RateLimitDescriptor_Entry{Key: k}
			switch {
			case len(t.segs) == 0:
			case len(t.segs) == 1 && t.segs[0].kind == literal:
				entry.Value = t.segs[0].text
			default:
				holes = append(holes, valueHole{entry: entry, value: t})
			}
			desc.Entries = append(desc.Entries, entry)
		}
		req.Descriptors = append(req.Descriptors, desc)
	}
	return req, holes, nil
}

// sendGRPC asks the rate limit service once.
func (w *worker) sendGRPC(ctx context.Context, key int) (int, error) {
	c := w.grpc
	for _, h := range c.holes {
		c.buf = h.value.expand(c.buf[:0], key, w.id, w.seq)
		h.entry.Value = string(c.buf)
	}
	w.seq++
	if c.ctx == nil {
		c.ctx = metadata.NewOutgoingContext(ctx, c.md)
	}
	ctx, cancel := context.WithTimeout(c.ctx, w.plan.timeout)
	defer cancel()
	res, err := c.client.ShouldRateLimit(ctx, c.req)
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
