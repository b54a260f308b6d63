package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/keys"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/rlheaders"
	"github.com/quotad/quotad/internal/tiers"
)

// The check path's micro-benchmarks. Speed is never asserted; compare runs
// with benchstat:
//
//	go test -run '^$' -bench 'Check' -benchmem -count 6 ./internal/api/

// benchCheckBody is a typical check body, as backends send it.
var benchCheckBody = []byte(`{"customer":"c4217","metric":"api_calls","cost":1}`)

// benchDecision is a typical answer: a second and a day window, allowed.
var benchDecision = quota.Decision{
	Allowed: true, Customer: "c4217", Metric: "api_calls", Cost: 1,
	Limits: []quota.WindowResult{
		{Window: tiers.Second, Mode: tiers.Hard, Limit: 1000, Used: 12, Remaining: 988,
			ResetAt: time.Date(2026, 11, 22, 10, 0, 1, 0, time.UTC), State: quota.StateOK, Length: time.Second},
		{Window: tiers.Day, Mode: tiers.Soft, Limit: 1_000_000, Used: 5120, Remaining: 994_880,
			ResetAt: time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), State: quota.StateOK, Length: 24 * time.Hour},
	},
}

// BenchmarkDecodeCheck decodes a check body as the handler does.
func BenchmarkDecodeCheck(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchCheckBody)))
	for b.Loop() {
		if _, err := decodeCallBody(benchCheckBody, false); err != nil {
			b.Fatal(err)
		}
	}
}

// benchSubjectBody and benchItemsBody are a check with a subject and a
// check of items, as backends send them.
var (
	benchSubjectBody = []byte(`{"customer":"c4217","metric":"api_calls","cost":1,"subject":"user-8812"}`)
	benchItemsBody   = []byte(`{"customer":"c4217","items":[{"metric":"api_calls"},{"metric":"llm_tokens","cost":900,"subject":"user-8812"}]}`)
)

// BenchmarkDecodeCheckSubject decodes a check with a subject: the fast
// path, one allocation.
func BenchmarkDecodeCheckSubject(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchSubjectBody)))
	for b.Loop() {
		if c, err := decodeCallBody(benchSubjectBody, false); err != nil || c.Subject == "" {
			b.Fatal(c, err)
		}
	}
}

// BenchmarkDecodeCheckItems decodes a check of two items: the fast path,
// two allocations (the strings, the items).
func BenchmarkDecodeCheckItems(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchItemsBody)))
	for b.Loop() {
		if c, err := decodeCallBody(benchItemsBody, false); err != nil || len(c.Items) != 2 {
			b.Fatal(c, err)
		}
	}
}

// BenchmarkDecodeCheckGeneral decodes a check body with the general
// decoder, which the handler falls back on for unusual bodies.
func BenchmarkDecodeCheckGeneral(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchCheckBody)))
	for b.Loop() {
		var req checkRequest
		if err := decodeJSON(benchCheckBody, &req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeCheckAnswer encodes a check answer as the handler does,
// into a reused buffer.
func BenchmarkEncodeCheckAnswer(b *testing.B) {
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		var ok bool
		if buf, ok = appendCheckAnswer(buf[:0], &benchDecision); !ok {
			b.Fatal("not encoded")
		}
	}
}

// BenchmarkEncodeCheckAnswerJSON encodes a check answer with
// encoding/json, as the handler did before appendCheckAnswer.
func BenchmarkEncodeCheckAnswerJSON(b *testing.B) {
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := writeJSONBody(&buf, newCheckResponse(benchDecision)); err != nil {
			b.Fatal(err)
		}
	}
}

// benchChecker answers every check with benchDecision.
type benchChecker struct{ fuzzChecker }

func (benchChecker) Check(context.Context, quota.Request) (quota.Decision, error) {
	return benchDecision, nil
}

// benchWriter is a ResponseWriter reused across requests: only the server's
// own allocations are counted.
type benchWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *benchWriter) Header() http.Header { return w.h }

func (w *benchWriter) WriteHeader(status int) { w.status = status }

func (w *benchWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return len(p), nil
}

func (w *benchWriter) reset() {
	clear(w.h)
	w.status, w.n = 0, 0
}

// benchConfig configures a Server as cmd/quotad does (a check token,
// JSON logs at info level) over benchChecker.
func benchConfig() Config {
	return Config{
		Checker: benchChecker{},
		Tokens: []Token{
			{Name: "admin", Secret: "adm-secret", Role: RoleAdmin},
			{Name: "backend", Secret: "chk-secret", Role: RoleCheck},
		},
		Logger: slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
}

// benchServer is a Server of benchConfig.
func benchServer() *Server { return New(benchConfig()) }

// benchRequest is one POST /v1/check whose body can be read again.
type benchRequest struct {
	req  *http.Request
	body *bytes.Reader
	w    *benchWriter
}

func newBenchRequest() *benchRequest {
	r := &benchRequest{body: bytes.NewReader(benchCheckBody), w: &benchWriter{h: http.Header{}}}
	r.req, _ = http.NewRequest(http.MethodPost, "/v1/check", r.body)
	r.req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	r.req.Header.Set(echo.HeaderAuthorization, "Bearer chk-secret")
	r.req.ContentLength = int64(len(benchCheckBody))
	return r
}

func (r *benchRequest) serve(tb testing.TB, s *Server) {
	r.body.Reset(benchCheckBody)
	r.w.reset()
	s.ServeHTTP(r.w, r.req)
	if r.w.status != http.StatusOK {
		tb.Fatalf("status %d", r.w.status)
	}
}

func BenchmarkServeCheck(b *testing.B) {
	s := benchServer()
	r := newBenchRequest()
	b.ReportAllocs()
	for b.Loop() {
		r.serve(b, s)
	}
}

// BenchmarkServeCheckOlderForms is BenchmarkServeCheck answering the rate
// limit headers in draft 7's, the legacy and GitHub's forms
// (--ratelimit-headers draft7,legacy,x): what six more headers cost.
func BenchmarkServeCheckOlderForms(b *testing.B) {
	cfg := benchConfig()
	cfg.RateLimitHeaders = rlheaders.Draft7 | rlheaders.Legacy | rlheaders.X
	s := New(cfg)
	r := newBenchRequest()
	b.ReportAllocs()
	for b.Loop() {
		r.serve(b, s)
	}
}

// BenchmarkServeCheckWithoutTokens is BenchmarkServeCheck on a server
// without tokens, as `make run` starts it: no token to compare, but the
// request's Host is checked to be a loopback one.
func BenchmarkServeCheckWithoutTokens(b *testing.B) {
	s := New(Config{Checker: benchChecker{},
		Logger: slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	r := newBenchRequest()
	r.req.Header.Del(echo.HeaderAuthorization)
	r.req.Host = "localhost:8080"
	b.ReportAllocs()
	for b.Loop() {
		r.serve(b, s)
	}
}

func BenchmarkServeCheckParallel(b *testing.B) {
	s := benchServer()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := newBenchRequest()
		for pb.Next() {
			r.serve(b, s)
		}
	})
}

// benchKeyBody is benchCheckBody naming its customer by an API key.
var benchKeyBody = []byte(`{"api_key":"qk_7Gx2PbQ9rT4kLmN8sV1wXyZ3aB5cD6eF","metric":"api_calls","cost":1}`)

// benchKeyServer is benchServer resolving API keys with a keys.Verifier
// that holds 10,000 keys, benchKeyBody's among them.
func benchKeyServer(b *testing.B) *Server {
	b.Helper()
	v := keys.NewVerifier(nil, time.Now)
	var key string
	if err := json.Unmarshal(benchKeyBody, &struct {
		APIKey *string `json:"api_key"`
	}{&key}); err != nil {
		b.Fatal(err)
	}
	v.Add(keys.Live{ID: "key_AAAAAAAAAAAAAAAA", Customer: "c4217", Digest: keys.DigestOf(key)})
	for i := range 9999 {
		v.Add(keys.Live{ID: fmt.Sprintf("key_%016d", i), Customer: fmt.Sprintf("c%d", i), Digest: keys.DigestOf(fmt.Sprintf("qk_%032d", i))})
	}
	cfg := benchConfig()
	cfg.KeyResolver = v
	return New(cfg)
}

// BenchmarkServeCheckByKey is BenchmarkServeCheck by API key: the
// difference is what resolving a key from memory costs.
func BenchmarkServeCheckByKey(b *testing.B) {
	s := benchKeyServer(b)
	r := newBenchRequest()
	b.ReportAllocs()
	for b.Loop() {
		r.body.Reset(benchKeyBody)
		r.req.ContentLength = int64(len(benchKeyBody))
		r.w.reset()
		s.ServeHTTP(r.w, r.req)
		if r.w.status != http.StatusOK {
			b.Fatalf("status %d", r.w.status)
		}
	}
}

// BenchmarkDecodeCheckByKey decodes a check body by key as the handler
// does.
func BenchmarkDecodeCheckByKey(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if c, err := decodeCallBody(benchKeyBody, false); err != nil || c.APIKey == "" {
			b.Fatal(c, err)
		}
	}
}

// BenchmarkDecodeCheckLibrary decodes the check bodies of the fast-path
// benchmarks with github.com/go-json-experiment/json, with quotad's
// strictness (names exact and once per object, unknown members refused),
// into the same call: what the fast path saves.
func BenchmarkDecodeCheckLibrary(b *testing.B) {
	for _, bc := range []struct {
		name string
		body []byte
	}{{"one", benchCheckBody}, {"subject", benchSubjectBody}, {"items", benchItemsBody}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				var req checkRequest
				if err := jsonv2.Unmarshal(bc.body, &req, jsonv2.RejectUnknownMembers(true)); err != nil {
					b.Fatal(err)
				}
				if _, err := req.call(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
