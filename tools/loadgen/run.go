package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// target is one URL with its request head (request line and headers)
// serialized once (raw client: each request appends Content-Length and
// the body), and its Host and other headers (net/http client).
type target struct {
	url    string
	addr   string // host:port to dial
	head   []byte
	host   string // the Host header: -H Host, else the URL's
	header http.Header
	grpc   bool   // a grpc:// URL: Envoy's rate limit service (see grpc.go)
	domain string // its domain
	// urlT and headT, for a URL whose path has placeholders ({{key}}...,
	// as a body's): the URL and the request head as templates, expanded
	// per request; nil otherwise.
	urlT, headT *bodyTemplate
}

// keyed reports whether t's path draws a {{key}}.
func (t *target) keyed() bool { return t.urlT != nil && t.urlT.hasKey }

// newTargets checks the URLs and serializes each one's request head from
// the header map built from -H once.
func newTargets(urls []string, method string, header http.Header) ([]*target, error) {
	var ts []*target
	for _, raw := range urls {
		if addr, domain, ok, err := grpcTarget(raw); ok {
			if err != nil {
				return nil, err
			}
			ts = append(ts, &target{url: raw, addr: addr, header: header.Clone(), grpc: true, domain: domain})
			continue
		}
		// A path with placeholders is checked as its first expansion.
		var urlT *bodyTemplate
		parsed := raw
		if strings.Contains(raw, "{{") {
			t, err := parseTemplate(raw)
			if err != nil {
				return nil, fmt.Errorf("url %q: %v", raw, err)
			}
			urlT, parsed = t, string(t.expand(nil, 0, 0, 0))
		}
		u, err := url.Parse(parsed)
		if err != nil {
			return nil, fmt.Errorf("url %q: %v", raw, err)
		}
		if u.Scheme != "http" || u.Host == "" {
			return nil, fmt.Errorf("url %q: want http://host:port/path", raw)
		}
		addr := u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), "80")
		}
		host := u.Host
		if h := header.Get("Host"); h != "" {
			host = h
		}
		uri := u.RequestURI()
		if urlT != nil {
			if uri = strings.TrimPrefix(raw, u.Scheme+"://"+u.Host); uri == "" {
				uri = "/"
			}
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, uri, host)
		h := header.Clone()
		h.Del("Host")
		if h.Get("User-Agent") == "" {
			h.Set("User-Agent", "quotad-loadgen")
		}
		if err := h.Write(&b); err != nil {
			return nil, err
		}
		t := &target{url: raw, addr: addr, head: []byte(b.String()), host: host, header: h, urlT: urlT}
		if urlT != nil {
			if t.headT, err = parseTemplate(b.String()); err != nil {
				return nil, fmt.Errorf("url %q: %v", raw, err)
			}
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// spread assigns workers to targets round-robin: worker i gets target
// i mod len(targets).
func spread(workers int, targets []*target) []*target {
	out := make([]*target, workers)
	for i := range out {
		out[i] = targets[i%len(targets)]
	}
	return out
}

// plan is a run, ready to start.
type plan struct {
	targets []*target
	workers int
	warmup  time.Duration
	window  time.Duration
	timeout time.Duration
	method  string
	body    *bodyTemplate // nil: no body
	rawBody string        // the template as given (gRPC targets parse it into descriptors)
	keys    int
	seed    uint64
	zipf    float64 // > 1: Zipf-distributed keys with this exponent; 0: uniform
	sweep   bool    // each key once, then stop
	raw     bool    // write requests by hand rather than with net/http
	keyed   bool    // the body or a URL's path draws a {{key}}
	seen    *keySet // the keys of answered requests (nil: nothing draws a {{key}})
	// commitBelow > 0: each request is a reservation, committed at a cost
	// in [0, commitBelow) once answered 201.
	commitBelow int64
}

// run drives the workers until the window closes (or, with sweep, every
// key was sent once, or ctx is done) and summarizes what they saw.
func (p *plan) run(ctx context.Context) *summary {
	start := time.Now()
	from := start.Add(p.warmup)
	to := from.Add(p.window)
	var next atomic.Int64 // sweep: the next key
	tallies := make([]*tally, p.workers)
	var wg sync.WaitGroup
	for i, t := range spread(p.workers, p.targets) {
		w := p.newWorker(i, t)
		tallies[i] = w.tally
		wg.Go(func() { w.loop(ctx, from, to, &next) })
	}
	wg.Wait()
	window := p.window
	if now := time.Now(); now.Before(to) { // cut short: ctx, or a sweep ended
		window = max(0, now.Sub(from))
	}
	s := summarize(tallies, window, len(p.targets))
	if p.seen != nil {
		s.DistinctKeys = p.seen.count()
	}
	return s
}

// worker sends requests back to back on one keep-alive connection.
type worker struct {
	id      int
	plan    *plan
	target  *target
	rng     *rand.Rand
	zipf    *rand.Zipf // nil: uniform keys
	tally   *tally
	readReq *http.Request // tells http.ReadResponse the method

	conn net.Conn
	br   *bufio.Reader
	body []byte // the expanded body, reused
	req  []byte // the whole request, reused
	seq  uint64

	client *http.Client // net/http: one connection of its own
	grpc   *grpcClient  // a gRPC target's connection
	err    error        // why the worker cannot send (its gRPC connection failed)
}

func (p *plan) newWorker(id int, t *target) *worker {
	w := &worker{
		id:      id,
		plan:    p,
		target:  t,
		rng:     rand.New(rand.NewPCG(p.seed, uint64(id))),
		tally:   newTally(t.url),
		readReq: &http.Request{Method: p.method},
	}
	if p.zipf > 0 {
		// P(k) ∝ (1+k)^-s for k in [0, keys-1]: v = 1 makes key 0 the
		// most frequent, with weight 1.
		w.zipf = rand.NewZipf(w.rng, p.zipf, 1, uint64(p.keys-1))
	}
	if t.grpc {
		w.grpc, w.err = newGRPCClient(t, p.rawBody)
		w.tally.dials++
		return w
	}
	if !p.raw {
		dialer := &net.Dialer{Timeout: p.timeout}
		w.client = &http.Client{Timeout: p.timeout, Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dialer.DialContext(ctx, network, addr)
				if err == nil {
					w.tally.dials++
				}
				return c, err
			},
			MaxConnsPerHost:     1,
			MaxIdleConnsPerHost: 1,
			DisableCompression:  true,
		}}
	}
	return w
}

func (w *worker) loop(ctx context.Context, from, to time.Time, next *atomic.Int64) {
	defer w.close()
	for ctx.Err() == nil {
		key, ok := w.nextKey(next)
		if !ok {
			break
		}
		t0 := time.Now()
		if !t0.Before(to) {
			break
		}
		var status int
		var err error
		switch {
		case w.err != nil:
			status, err = 0, w.err
			time.Sleep(10 * time.Millisecond) // do not spin on a connection that cannot be made
		case w.grpc != nil:
			status, err = w.sendGRPC(ctx, key)
		case w.plan.raw:
			w.build(key)
			status, err = w.do(t0)
		default:
			status, err = w.send(ctx, key)
		}
		t1 := time.Now()
		inWindow := !t1.Before(from) && t1.Before(to)
		if err != nil {
			w.tally.allErrors++
			if w.tally.firstErr == nil {
				w.tally.firstErr = err
			}
			if inWindow {
				w.tally.errors++
			}
			continue
		}
		w.tally.total++
		if w.plan.seen != nil {
			w.plan.seen.add(key)
		}
		if inWindow {
			w.tally.status[status]++
			w.tally.latencies = append(w.tally.latencies, t1.Sub(t0))
		}
	}
}

// nextKey is the next request's {{key}}: uniform in [0, keys) or, with
// zipf, Zipf-distributed over it; with sweep the next key not yet sent
// (false when all were).
func (w *worker) nextKey(next *atomic.Int64) (int, bool) {
	p := w.plan
	switch {
	case p.sweep:
		k := next.Add(1) - 1
		return int(k), k < int64(p.keys)
	case p.keyed && w.zipf != nil:
		return int(w.zipf.Uint64()), true
	case p.keyed:
		return w.rng.IntN(p.keys), true
	}
	return 0, true
}

// build writes the next request into w.req.
func (w *worker) build(key int) {
	p := w.plan
	if t := w.target.headT; t != nil {
		w.req = t.expand(w.req[:0], key, w.id, w.seq)
	} else {
		w.req = append(w.req[:0], w.target.head...)
	}
	if p.body != nil {
		w.body = p.body.expand(w.body[:0], key, w.id, w.seq)
		w.seq++
		w.req = append(w.req, "Content-Length: "...)
		w.req = strconv.AppendInt(w.req, int64(len(w.body)), 10)
		w.req = append(w.req, "\r\n\r\n"...)
		w.req = append(w.req, w.body...)
	} else {
		w.req = append(w.req, "\r\n"...)
	}
}

// do sends w.req and reads the answer, draining its body. A transport
// error closes the connection; the next request dials anew.
func (w *worker) do(now time.Time) (int, error) {
	if w.conn == nil {
		c, err := net.DialTimeout("tcp", w.target.addr, w.plan.timeout)
		if err != nil {
			// Do not spin on a refused connection.
			time.Sleep(10 * time.Millisecond)
			return 0, err
		}
		w.conn = c
		w.tally.dials++
		if w.br == nil {
			w.br = bufio.NewReaderSize(c, 8<<10)
		} else {
			w.br.Reset(c)
		}
	}
	if err := w.conn.SetDeadline(now.Add(w.plan.timeout)); err != nil {
		w.close()
		return 0, err
	}
	if _, err := w.conn.Write(w.req); err != nil {
		w.close()
		return 0, err
	}
	resp, err := http.ReadResponse(w.br, w.readReq)
	if err != nil {
		w.close()
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("connection closed by the server: %w", err)
		}
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		w.close()
		return 0, err
	}
	if resp.Close {
		w.close()
	}
	return resp.StatusCode, nil
}

// send sends one request with net/http, as a backend would: a body and a
// request of their own, the headers copied, the answer drained.
func (w *worker) send(ctx context.Context, key int) (int, error) {
	p := w.plan
	var body io.Reader
	if p.body != nil {
		body = bytes.NewReader(p.body.expand(nil, key, w.id, w.seq))
		w.seq++
	}
	u := w.target.url
	if t := w.target.urlT; t != nil {
		u = string(t.expand(nil, key, w.id, w.seq))
	}
	req, err := http.NewRequestWithContext(ctx, p.method, u, body)
	if err != nil {
		return 0, err
	}
	req.Header = w.target.header.Clone()
	req.Host = w.target.host // net/http ignores a Host in req.Header
	resp, err := w.client.Do(req)
	if err != nil {
		time.Sleep(time.Millisecond) // do not spin on a refused connection
		return 0, err
	}
	if p.commitBelow > 0 {
		return w.commit(ctx, resp)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}

// commit reads a reservation's answer and, when it is a 201, commits the
// reservation at a cost drawn from [0, commitBelow).
func (w *worker) commit(ctx context.Context, resp *http.Response) (int, error) {
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		return resp.StatusCode, err
	}
	var answer struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(data, &answer); err != nil || answer.ID == "" {
		return 0, fmt.Errorf("a reservation answer without an id: %.200s", data)
	}
	body := strconv.AppendInt([]byte(`{"cost":`), w.rng.Int64N(w.plan.commitBelow), 10)
	body = append(body, '}')
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.target.url+"/"+answer.ID+"/commit", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header = w.target.header.Clone()
	req.Host = w.target.host
	resp, err = w.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}

func (w *worker) close() {
	if w.grpc != nil {
		w.grpc.conn.Close()
	}
	if w.client != nil {
		w.client.CloseIdleConnections()
	}
	if w.conn != nil {
		w.conn.Close()
		w.conn = nil
	}
}
