// Package faulttest puts a fault injector no one here wrote (Shopify's
// toxiproxy, run in the test process) between a test's client and a
// server: connections reset, a server gone silent, a slow network.
package faulttest

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Proxy is a toxiproxy proxy in front of one server.
type Proxy struct {
	t testing.TB
	p *toxiproxy.Proxy
}

// Start starts a proxy on a free loopback port in front of upstream
// (host:port), passing everything through until told otherwise, and
// stops it when the test ends.
func Start(t testing.TB, upstream string) *Proxy {
	t.Helper()
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(server, "upstream", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("start the fault proxy: %v", err)
	}
	t.Cleanup(p.Stop)
	return &Proxy{t: t, p: p}
}

// Addr is where the proxy listens.
func (f *Proxy) Addr() string { return f.p.Listen }

// add adds a toxic of type typ, with attrs, on both directions.
func (f *Proxy) add(typ string, attrs map[string]any) {
	f.t.Helper()
	for _, stream := range []string{"upstream", "downstream"} {
		body, err := json.Marshal(map[string]any{"name": typ + "_" + stream, "type": typ, "stream": stream, "attributes": attrs})
		if err != nil {
			f.t.Fatal(err)
		}
		if _, err := f.p.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
			f.t.Fatalf("add toxic %s: %v", typ, err)
		}
	}
}

// Reset resets every connection that carries data, until Clear: as a
// network that drops connections, or a server that restarts, would.
func (f *Proxy) Reset() { f.add("reset_peer", map[string]any{"timeout": 0}) }

// BlackHole drops every byte, without closing anything, until Clear: the
// server went silent.
func (f *Proxy) BlackHole() { f.add("timeout", map[string]any{"timeout": 0}) }

// Latency delays every byte by d, each way, until Clear.
func (f *Proxy) Latency(d time.Duration) {
	f.add("latency", map[string]any{"latency": d.Milliseconds()})
}

// Clear removes every fault.
func (f *Proxy) Clear() { f.p.Toxics.ResetToxics(context.Background()) }
