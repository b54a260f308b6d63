// Command loadgen is quotad's HTTP load generator, closed-loop: each of -c
// workers keeps one keep-alive connection and sends its next request as
// soon as the previous answer is read. After an unmeasured warm-up it
// measures for -d and prints requests, req/s, status counts, transport
// errors and latency percentiles. scripts/bench.sh (make bench) drives it.
//
//	loadgen -url http://127.0.0.1:8080/v1/check -c 64 -d 8s -warmup 2s -keys 10000 \
//	  -H 'Content-Type: application/json' \
//	  -body '{"customer":"c{{key}}","metric":"api_calls","cost":1,"request_id":"r1-{{seq}}"}'
//
// The body is a template. {{key}} is a random integer in [0, -keys), drawn
// once per request (every {{key}} of a request gets the same one):
// uniform, or with -zipf s Zipf-distributed, key k drawn with a
// probability proportional to (k+1)^-s, so key 0 is the most frequent;
// {{key/N}} is that key divided by N (the group it is in: the customer of
// a subject, say); {{seq}} is unique per request in the run: the worker's number and its
// request counter, such as 12-3456. A URL's path may hold the same
// placeholders, expanded with the body's:
//
//	loadgen -url 'http://127.0.0.1:8080/v1/customers/c{{key}}/entitlements' -keys 10000 Repeat -url to spread the workers
//
// round-robin over several servers. A grpc://host:port/DOMAIN URL loads
// Envoy's rate limit service instead (see grpc.go).
//
// The keys of answered requests (warm-up and the last requests included)
// are counted: the summary says how many distinct ones were sent. With
// -seen FILE, the set is also kept in FILE across runs (read before the
// run, written after it), and the summary counts its union too: the
// distinct keys several runs sent a server.
//
// With -commit-below N, each request is a reservation (POST
// /v1/reservations) and, once answered 201, the commit of it (POST
// /v1/reservations/{id}/commit) at a cost drawn uniformly from [0, N): the
// pair counts as one request, its status the commit's (the reserve's when
// it was not 201), its latency both (net/http client only).
//
// With -sweep, {{key}} takes each value of [0, -keys) once, spread over
// the workers, and the run stops when all were sent (or after -d): a way
// to warm a server's caches for every key. It has no warm-up.
//
// To keep the generator cheap beside the server it loads, requests are
// written by hand: the request line and headers (from a header map built
// once) are serialized once per URL, each body is expanded into a reused
// buffer, each answer is parsed with http.ReadResponse and its body drained
// and discarded. Latencies of every answer completed in the measured window
// are kept and sorted at the end.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/textproto"
	"os"
	"runtime/pprof"
	"strings"
	"time"
)

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	p, opts, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	var seen *keySet // the keys of earlier runs, with -seen
	if opts.seenFile != "" {
		if seen, err = readSeen(opts.seenFile, p.keys); err != nil {
			return err
		}
	}
	if opts.cpuProfile != "" {
		f, err := os.Create(opts.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	s := p.run(ctx)
	if opts.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if seen != nil {
		seen.union(p.seen)
		s.SeenKeys = seen.count()
		if err := seen.write(opts.seenFile); err != nil {
			return err
		}
	}
	if err := s.print(stdout, opts.json); err != nil {
		return err
	}
	if s.Requests == 0 {
		return errors.New("no answer in the measured window")
	}
	return nil
}

// options are the flags that are not part of the plan.
type options struct {
	json       bool   // print the JSON summary line
	seenFile   string // -seen
	cpuProfile string // -cpuprofile
}

func parseFlags(args []string, stderr io.Writer) (*plan, options, error) {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var urls, headers []string
	fs.Func("url", "`URL` to load: http://, or grpc://host:port/domain for Envoy's rate limit service, the body then "+
		"its descriptors as customer=c{{key}},metric=m;... (repeatable: workers are spread round-robin)",
		func(v string) error { urls = append(urls, v); return nil })
	fs.Func("H", "request header `'Name: value'` (repeatable)",
		func(v string) error { headers = append(headers, v); return nil })
	conc := fs.Int("c", 64, "workers, each with one keep-alive connection")
	window := fs.Duration("d", 8*time.Second, "measured duration")
	warmup := fs.Duration("warmup", 2*time.Second, "unmeasured warm-up before it")
	timeout := fs.Duration("timeout", 5*time.Second, "per request, connecting included")
	body := fs.String("body", "", "request body `template`: {{key}} and {{seq}} are replaced per request")
	keys := fs.Int("keys", 10000, "{{key}} is drawn from [0, keys)")
	seed := fs.Uint64("seed", 1, "seed of the key draws (worker i uses seed and i)")
	zipf := fs.Float64("zipf", 0, "draw {{key}} Zipf-distributed with this exponent `s` (> 1): key k with a probability "+
		"proportional to (k+1)^-s, key 0 the most frequent; 0 draws uniformly")
	method := fs.String("method", "", "HTTP method (default POST with -body, GET without)")
	sweep := fs.Bool("sweep", false, "send each key once, then stop (warms caches; no warm-up)")
	commitBelow := fs.Int64("commit-below", 0, "each request is a reservation, committed at a cost drawn from [0, `N`) "+
		"once answered 201; the pair counts as one request (net/http client only)")
	asJSON := fs.Bool("json", false, "also print the summary as one JSON line")
	cpuProfile := fs.String("cpuprofile", "", "write the load generator's own CPU profile (the whole run) to `FILE`: "+
		"whether the generator, not the server, is what limits a run")
	seenFile := fs.String("seen", "", "keep the set of keys sent (and answered) in `FILE` across runs with the same -keys: "+
		"read before the run if it exists, written after; the summary counts the keys of all of them")
	client := fs.String("client", "net/http", "how requests are sent: net/http (an http.Client per worker, each request "+
		"built as a backend would) or raw (requests written by hand on the connection: the generator costs less, "+
		"so the server's own cost weighs more in a ratio)")
	if err := fs.Parse(args); err != nil {
		return nil, options{}, err
	}
	if fs.NArg() > 0 {
		return nil, options{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	switch {
	case len(urls) == 0:
		return nil, options{}, errors.New("no -url")
	case *conc < len(urls):
		return nil, options{}, fmt.Errorf("-c %d: want at least one worker per URL (%d)", *conc, len(urls))
	case *window <= 0 || *warmup < 0 || *timeout <= 0:
		return nil, options{}, errors.New("-d and -timeout must be positive, -warmup not negative")
	case *keys < 1:
		return nil, options{}, errors.New("-keys must be at least 1")
	case *zipf != 0 && !(*zipf > 1 && !math.IsInf(*zipf, 1)):
		return nil, options{}, fmt.Errorf("-zipf %v: want an exponent above 1, or 0 for uniform draws", *zipf)
	case *zipf != 0 && *sweep:
		return nil, options{}, errors.New("-zipf and -sweep: a sweep draws nothing")
	case strings.ContainsAny(*method, " \t\r\n"):
		return nil, options{}, fmt.Errorf("-method %q: not a method", *method)
	case *client != "net/http" && *client != "raw":
		return nil, options{}, fmt.Errorf("-client %q: want net/http or raw", *client)
	case *commitBelow < 0 || *commitBelow > 0 && *client != "net/http":
		return nil, options{}, errors.New("-commit-below: want a positive cost bound, with the net/http client")
	}
	p := &plan{
		workers: *conc,
		warmup:  *warmup,
		window:  *window,
		timeout: *timeout,
		method:  *method,
		keys:    *keys,
		seed:    *seed,
		zipf:    *zipf,
		sweep:   *sweep,
		raw:     *client == "raw",

		commitBelow: *commitBelow,
	}
	if p.sweep {
		p.warmup = 0
	}
	if *body != "" {
		t, err := parseTemplate(*body)
		if err != nil {
			return nil, options{}, err
		}
		p.body, p.rawBody = t, *body
	}
	if p.method == "" {
		p.method = "GET"
		if p.body != nil {
			p.method = "POST"
		}
	}
	header := http.Header{}
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(h, "\r\n") {
			return nil, options{}, fmt.Errorf("-H %q: want 'Name: value'", h)
		}
		switch textproto.CanonicalMIMEHeaderKey(name) {
		case "Content-Length", "Transfer-Encoding":
			return nil, options{}, fmt.Errorf("-H %q: loadgen sets %s itself", h, name)
		}
		header.Add(name, strings.TrimSpace(value))
	}
	targets, err := newTargets(urls, p.method, header)
	if err != nil {
		return nil, options{}, err
	}
	p.targets = targets
	p.keyed = p.body != nil && p.body.hasKey
	for _, t := range targets {
		p.keyed = p.keyed || t.keyed()
	}
	if p.keyed {
		p.seen = newKeySet(p.keys)
	} else if *seenFile != "" {
		return nil, options{}, errors.New("-seen: neither the body nor a URL has a {{key}}")
	}
	for _, t := range targets {
		if t.grpc {
			if _, _, err := descriptorTemplate(p.rawBody); err != nil {
				return nil, options{}, fmt.Errorf("-body: %w", err)
			}
			break
		}
	}
	return p, options{json: *asJSON, seenFile: *seenFile, cpuProfile: *cpuProfile}, nil
}
