// Command llm is an example of an LLM-style endpoint whose cost, in
// tokens, is known only once the model has answered. The Go client's
// reservation middleware reserves the most a request may cost (its prompt
// and max_tokens) in quotad before the model runs, and commits the tokens
// the model really used after it; the units not used go back at once. The
// model is simulated, deterministically: no network but quotad.
//
//	QUOTAD_URL=http://127.0.0.1:8080 QUOTAD_TOKEN=<check token> go run ./examples/llm
//	curl -H "X-Api-Key: $ACME_KEY" -d '{"prompt": "hello there", "max_tokens": 50}' localhost:8082/v1/completions
//
// The caller is authenticated by the API key quotad issued to its customer
// (POST /v1/customers/acme/keys), which quotad checks and which names the
// customer charged: a request without one is a 401, whatever else it says.
//
// See examples/llm/README.md.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	quotad "github.com/quotad/quotad/client"
	"github.com/quotad/quotad/examples/internal/serve"
)

// Metric is the metric the endpoint's tokens are counted in.
const Metric = "llm_tokens"

// maxBody bounds a completion request's body.
const maxBody = 64 << 10

// maxTokensLimit is the most max_tokens a request may ask for.
const maxTokensLimit = 4096

func main() { serve.Main(run) }

// run serves on LISTEN (default 127.0.0.1:8082) until ctx ends.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	base := serve.Getenv(getenv, "QUOTAD_URL", "http://127.0.0.1:8080")
	addr := serve.Getenv(getenv, "LISTEN", "127.0.0.1:8082")
	srv := &http.Server{Addr: addr, Handler: newServer(quotad.New(base, quotad.WithToken(getenv("QUOTAD_TOKEN"))), 0)}
	fmt.Fprintf(stdout, "listening on %s, reserving %s in quotad at %s\n", addr, Metric, base)
	return serve.Run(ctx, srv)
}

// completionRequest is the body of POST /v1/completions.
type completionRequest struct {
	Prompt    string `json:"prompt"`
	MaxTokens int64  `json:"max_tokens"`
}

// completion is its answer, with the tokens it used.
type completion struct {
	Model   string `json:"model"`
	Text    string `json:"text"`
	Usage   usage  `json:"usage"`
	Reserve string `json:"reservation"`
}

type usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// readCompletionRequest decodes r's body and puts it back, so that both
// the middleware's estimate and the handler can read it.
func readCompletionRequest(r *http.Request) (completionRequest, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return completionRequest{}, fmt.Errorf("the body cannot be read: %w", err)
	}
	if len(body) > maxBody {
		return completionRequest{}, fmt.Errorf("the body is larger than %d bytes", maxBody)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req completionRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return completionRequest{}, fmt.Errorf("the body is not a completion request: %w", err)
	}
	if req.MaxTokens < 1 || req.MaxTokens > maxTokensLimit {
		return completionRequest{}, fmt.Errorf("max_tokens: must be 1 to %d", maxTokensLimit)
	}
	return req, nil
}

// estimate is the most a request may cost: its prompt and max_tokens.
func estimate(r *http.Request) (int64, error) {
	req, err := readCompletionRequest(r)
	if err != nil {
		return 0, err
	}
	return promptTokens(req.Prompt) + req.MaxTokens, nil
}

// newServer is the application: POST /v1/completions behind the
// reservation middleware, charged to the customer of the API key in
// X-Api-Key (a request without one is a 401), each reserve bounded by
// timeout (0: the middleware's default).
func newServer(c *quotad.Client, timeout time.Duration) http.Handler {
	reserve := c.ReservationMiddleware(quotad.ReservationMiddlewareOptions{
		APIKey:   quotad.FromHeader("X-Api-Key"),
		Metric:   quotad.Static(Metric),
		Estimate: estimate,
		// Longer than the model may take: an expired reservation charges
		// nothing.
		TTL:     2 * time.Minute,
		Timeout: timeout,
	})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/completions", reserve(http.HandlerFunc(complete)))
	return mux
}

// complete runs the model and reports the tokens it used.
func complete(w http.ResponseWriter, r *http.Request) {
	req, err := readCompletionRequest(r)
	if err != nil { // the middleware's estimate read it already
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	text, n := model(req.Prompt, req.MaxTokens)
	u := usage{PromptTokens: promptTokens(req.Prompt), CompletionTokens: n}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	// The actual cost: the middleware commits it after this handler, and
	// what was reserved beyond it goes back.
	quotad.ReportCost(r.Context(), u.TotalTokens)
	var id string
	if res, ok := quotad.ReservationFromContext(r.Context()); ok {
		id = res.ID
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(completion{Model: "simulated-1", Text: text, Usage: u, Reserve: id})
}

// promptTokens counts a prompt's tokens: its words, in this simulation.
func promptTokens(prompt string) int64 { return int64(len(strings.Fields(prompt))) }

// model stands in for an LLM, deterministically: it answers the prompt's
// words backwards, twice, as far as maxTokens allows, one token a word.
func model(prompt string, maxTokens int64) (string, int64) {
	words := strings.Fields(prompt)
	slices.Reverse(words)
	answer := append(slices.Clone(words), words...)
	if int64(len(answer)) > maxTokens {
		answer = answer[:maxTokens]
	}
	return strings.Join(answer, " "), int64(len(answer))
}
