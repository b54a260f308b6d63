package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/quotad/quotad/internal/rls"
)

// grpcAddr returns the address s serves gRPC on, from its log.
func (s *testServer) grpcAddr() string {
	s.t.Helper()
	for _, line := range strings.Split(s.logs.String(), "\n") {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "grpc listening" {
			return rec.Addr
		}
	}
	s.t.Fatalf("quotad logged no gRPC address\n%s", s.logs)
	return ""
}

// rlsClient is the generated client of Envoy's rate limit service on a
// quotad, with the health and reflection clients of the same connection.
type rlsClient struct {
	rlsv3.RateLimitServiceClient
	health healthpb.HealthClient
	conn   *grpc.ClientConn
	addr   string
}

// MustDialRLS connects to s's gRPC listener (plaintext, h2c).
func MustDialRLS(t testing.TB, s *testServer) *rlsClient {
	t.Helper()
	addr := s.grpcAddr()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rlsClient{RateLimitServiceClient: rlsv3.NewRateLimitServiceClient(conn), health: healthpb.NewHealthClient(conn), conn: conn, addr: addr}
}

// withGRPC adds a gRPC listener on a free port to env.
func withGRPC(env map[string]string) map[string]string {
	out := map[string]string{"QUOTAD_GRPC_LISTEN": "127.0.0.1:0"}
	for k, v := range env {
		out[k] = v
	}
	return out
}

// asToken returns a context whose calls carry token.
func asToken(token string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
}

// rlsCall asks with the check token; descriptors are key, value lists.
func (c *rlsClient) mustCall(t testing.TB, domain string, descriptors ...*commonrl.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	res, err := c.ShouldRateLimit(asToken(checkToken), &rlsv3.RateLimitRequest{Domain: domain, Descriptors: descriptors})
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return res
}

func rlDesc(cost uint64, kv ...string) *commonrl.RateLimitDescriptor {
	d := &commonrl.RateLimitDescriptor{}
	if cost > 0 {
		d.HitsAddend = wrapperspb.UInt64(cost)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &commonrl.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func rlCodes(res *rlsv3.RateLimitResponse) string {
	var s []string
	for _, st := range res.GetStatuses() {
		s = append(s, st.GetCode().String())
	}
	return res.GetOverallCode().String() + " [" + strings.Join(s, " ") + "]"
}

// usedDay returns customer's used units of api_calls' day window.
func (s *testServer) usedDay(customer string) float64 {
	s.t.Helper()
	return s.used(customer, "day")
}

// used returns customer's used units of api_calls' window, as GET usage
// reports them.
func (s *testServer) used(customer, window string) float64 {
	s.t.Helper()
	r := s.mustDo(http.StatusOK, "GET", "/v1/customers/"+customer+"/usage", "")
	for _, u := range r.JSON(s.t)["usage"].([]any) {
		if m := u.(map[string]any); m["window"] == window {
			return m["used"].(float64)
		}
	}
	s.t.Fatalf("no %s window in %s", window, r.Body)
	return 0
}

// Descriptors become checks; two descriptors, one over its limit: the
// other is not counted.
func TestRLSDescriptorsAllOrNothing(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, withGRPC(nil))
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"day","limit":3}]`, "a", "b")
	c := MustDialRLS(t, s)
	if res := c.mustCall(t, "api_calls", rlDesc(3, "customer", "b")); rlCodes(res) != "OK [OK]" {
		t.Fatalf("b's 3 units: %s, want OK", rlCodes(res))
	}
	if got := s.usedDay("b"); got != 3 {
		t.Fatalf("b used %v, want 3", got)
	}
	res := c.mustCall(t, "api_calls", rlDesc(0, "customer", "a"), rlDesc(0, "customer", "b", "metric", "api_calls"))
	if rlCodes(res) != "OVER_LIMIT [OK OVER_LIMIT]" {
		t.Errorf("a and b: %s, want OVER_LIMIT [OK OVER_LIMIT]", rlCodes(res))
	}
	if st := res.GetStatuses()[1]; st.GetCurrentLimit().GetRequestsPerUnit() != 3 || st.GetCurrentLimit().GetUnit() != rlsv3.RateLimitResponse_RateLimit_DAY ||
		st.GetLimitRemaining() != 0 || st.GetDurationUntilReset().AsDuration() <= 0 {
		t.Errorf("b's status %v, want 3 per DAY, 0 remaining, a reset ahead", st)
	}
	if got := s.usedDay("a"); got != 0 {
		t.Errorf("a used %v after a request b's limit denied, want 0: all or nothing", got)
	}
	if res := c.mustCall(t, "api_calls", rlDesc(0, "customer", "a")); rlCodes(res) != "OK [OK]" || s.usedDay("a") != 1 {
		t.Errorf("a alone: %s, used %v; want OK, 1", rlCodes(res), s.usedDay("a"))
	}
}

// The headers a gRPC answer asks Envoy to add are those the HTTP check
// sends for the same check, allowed and denied, in the forms
// --ratelimit-headers names (the default's, and every other). Two
// customers in the same state are checked once each way; a second
// boundary between the two calls may change a reset, so a mismatch is
// tried again with two new customers.
func TestRLSHeadersAreTheHTTPCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		forms string // QUOTAD_RATELIMIT_HEADERS
		names []string
	}{
		{"", []string{"Ratelimit", "Ratelimit-Policy", "Retry-After"}},
		{"draft7,legacy,x", []string{"Ratelimit", "Ratelimit-Policy", "Ratelimit-Limit", "Ratelimit-Remaining", "Ratelimit-Reset",
			"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Retry-After"}},
	} {
		name := tc.forms
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := MustStartServer(t, nil, withGRPC(map[string]string{"QUOTAD_RATELIMIT_HEADERS": tc.forms}))
			const attempts = 5
			var customers []string
			for i := range 2 * attempts {
				customers = append(customers, fmt.Sprintf("c%d", i))
			}
			MustSeed(t, s, "", `[{"metric":"api_calls","window":"minute","limit":2},{"metric":"api_calls","window":"day","limit":100}]`, customers...)
			c := MustDialRLS(t, s)
			grpcHeaders := func(res *rlsv3.RateLimitResponse) map[string]string {
				h := map[string]string{}
				for _, v := range res.GetResponseHeadersToAdd() {
					h[http.CanonicalHeaderKey(v.GetKey())] = v.GetValue()
				}
				return h
			}
			httpHeaders := func(customer string) (map[string]string, int) {
				r, _ := s.check(`{"customer":"` + customer + `","metric":"api_calls","cost":2}`)
				h := map[string]string{}
				for _, k := range tc.names {
					if v := r.Header.Get(k); v != "" {
						h[k] = v
					}
				}
				return h, r.Status
			}
			for _, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
				var g, h map[string]string
				for i := 0; i < attempts; i++ {
					viaGRPC, viaHTTP := customers[2*i], customers[2*i+1]
					res := c.mustCall(t, "api_calls", rlDesc(2, "customer", viaGRPC))
					var st int
					h, st = httpHeaders(viaHTTP)
					g = grpcHeaders(res)
					if res.GetOverallCode() != want || st != map[rlsv3.RateLimitResponse_Code]int{rlsv3.RateLimitResponse_OK: 200, rlsv3.RateLimitResponse_OVER_LIMIT: 429}[want] {
						t.Fatalf("gRPC %s, HTTP %d; want %s on both", rlCodes(res), st, want)
					}
					if fmt.Sprint(g) == fmt.Sprint(h) {
						break
					}
				}
				if fmt.Sprint(g) != fmt.Sprint(h) {
					t.Errorf("%s: gRPC headers %v, HTTP headers %v", want, g, h)
				}
				// Every form's headers are there (but Retry-After, only
				// over the limit).
				if n := len(tc.names) - 1; len(g) != n && !(want == rlsv3.RateLimitResponse_OVER_LIMIT && len(g) == n+1) {
					t.Errorf("%s: gRPC headers %v, want the %d of %v", want, g, n, tc.names)
				}
				if want == rlsv3.RateLimitResponse_OVER_LIMIT && g["Retry-After"] == "" {
					t.Errorf("over the limit without Retry-After: %v", g)
				}
			}
		})
	}
}

func TestRLSAuthAndMalformed(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, withGRPC(nil))
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"day","limit":10}]`, "a")
	c := MustDialRLS(t, s)
	ok := &rlsv3.RateLimitRequest{Domain: "api_calls", Descriptors: []*commonrl.RateLimitDescriptor{rlDesc(0, "customer", "a")}}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		req  *rlsv3.RateLimitRequest
		want codes.Code
	}{
		{"no token", context.Background(), ok, codes.Unauthenticated},
		{"wrong token", asToken("nope"), ok, codes.Unauthenticated},
		{"check token", asToken(checkToken), ok, codes.OK},
		{"admin token", asToken(adminToken), ok, codes.OK},
		{"no descriptors", asToken(checkToken), &rlsv3.RateLimitRequest{Domain: "api_calls"}, codes.InvalidArgument},
		{"empty entries", asToken(checkToken), &rlsv3.RateLimitRequest{Domain: "api_calls", Descriptors: []*commonrl.RateLimitDescriptor{{}}}, codes.InvalidArgument},
		{"no metric, no domain", asToken(checkToken), &rlsv3.RateLimitRequest{Descriptors: []*commonrl.RateLimitDescriptor{rlDesc(0, "customer", "a")}}, codes.InvalidArgument},
		{"huge hits_addend", asToken(checkToken), &rlsv3.RateLimitRequest{Domain: "api_calls",
			Descriptors: []*commonrl.RateLimitDescriptor{rlDesc(1<<40, "customer", "a")}}, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.ShouldRateLimit(tc.ctx, tc.req)
			if got := status.Code(err); got != tc.want {
				t.Errorf("code %s (%v), want %s", got, err, tc.want)
			}
		})
	}
	if got := s.usedDay("a"); got != 2 {
		t.Errorf("a used %v, want the 2 authenticated checks", got)
	}
	for answer, want := range map[string]float64{"ok": 2, "unauthenticated": 2, "invalid_argument": 4} {
		if got := s.metricValue(`quotad_rls_requests_total{answer="` + answer + `"}`); got != want {
			t.Errorf("quotad_rls_requests_total{answer=%q} = %v, want %v", answer, got, want)
		}
	}
	// gRPC checks count among the checks, as HTTP checks do;
	// unauthenticated calls are not checks.
	if _, err := c.ShouldRateLimit(asToken(checkToken), &rlsv3.RateLimitRequest{Domain: "api_calls",
		Descriptors: []*commonrl.RateLimitDescriptor{rlDesc(100, "customer", "a")}}); err != nil {
		t.Fatal(err)
	}
	for decision, want := range map[string]float64{"allowed": 2, "denied": 1, "rejected": 4} {
		if got := s.metricValue(`quotad_checks_total{decision="` + decision + `"}`); got != want {
			t.Errorf("quotad_checks_total{decision=%q} = %v, want %v", decision, got, want)
		}
	}
}

// An unknown customer or metric: OVER_LIMIT, nothing counted; with
// unknown: allow, OK for it and the others counted.
func TestRLSUnknownCustomer(t *testing.T) {
	t.Parallel()
	allow := filepath.Join(t.TempDir(), "rls.yaml")
	if err := os.WriteFile(allow, []byte("entries:\n  customer: tenant\nunknown: allow\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, config, key, want string
		used                    float64
	}{
		{"deny", "", "customer", "OVER_LIMIT [OK OVER_LIMIT OVER_LIMIT]", 0},
		{"allow", allow, "tenant", "OK [OK OK OK]", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := MustStartServer(t, nil, withGRPC(map[string]string{"QUOTAD_RLS_CONFIG": tc.config}))
			MustSeed(t, s, "", `[{"metric":"api_calls","window":"day","limit":10}]`, "a")
			c := MustDialRLS(t, s)
			res := c.mustCall(t, "api_calls", rlDesc(0, tc.key, "a"), rlDesc(0, tc.key, "ghost"), rlDesc(0, tc.key, "a", "metric", "nope"))
			if rlCodes(res) != tc.want {
				t.Errorf("%s, want %s", rlCodes(res), tc.want)
			}
			if got := s.usedDay("a"); got != tc.used {
				t.Errorf("a used %v, want %v", got, tc.used)
			}
		})
	}
}

// A bad rate limit service file stops quotad at start-up, naming the line.
func TestRunRejectsBadRLSConfig(t *testing.T) {
	t.Parallel()
	typo := filepath.Join(t.TempDir(), "typo.yaml")
	if err := os.WriteFile(typo, []byte("entries:\n  costumer: tenant\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"QUOTAD_RLS_CONFIG": typo, "QUOTAD_DATABASE_URL": "postgres://nobody@127.0.0.1:1/none"}
	var out bytes.Buffer
	err := run(context.Background(), []string{"quotad"}, func(k string) string { return env[k] }, &out)
	if want := `line 2: unknown field "costumer" in entries`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("run error = %v, want one containing %q", err, want)
	}
}

// Health checking and reflection answer without a token; quotad stops
// cleanly with a health watch still open (cut off at the shutdown
// timeout).
func TestRLSHealthAndReflection(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, withGRPC(map[string]string{"QUOTAD_SHUTDOWN_TIMEOUT": "1s"}))
	c := MustDialRLS(t, s)
	for _, service := range []string{"", rls.ServiceName} {
		eventually(t, func() bool {
			res, err := c.health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: service})
			return err == nil && res.GetStatus() == healthpb.HealthCheckResponse_SERVING
		}, fmt.Sprintf("health of %q to say SERVING", service))
	}
	stream, err := reflectionpb.NewServerReflectionClient(c.conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	res, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sv := range res.GetListServicesResponse().GetService() {
		names = append(names, sv.GetName())
	}
	for _, want := range []string{rls.ServiceName, "grpc.health.v1.Health"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, want %s among them", names, want)
		}
	}
	_ = stream.CloseSend()
	watch, err := c.health.Watch(context.Background(), &healthpb.HealthCheckRequest{Service: rls.ServiceName})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := watch.Recv(); err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health watch: %v, %v; want SERVING", res, err)
	}
	// Stopped, quotad says NOT_SERVING, then stops serving gRPC too.
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if res, err := watch.Recv(); err == nil && res.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health watch while stopping: %v, want NOT_SERVING or the stream's end", res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.health.Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("health after shutdown: %v, want Unavailable", err)
	}
}

// PostgreSQL out of reach: failing open, the gRPC answer is OK (as the
// HTTP check's 200, degraded), and health says NOT_SERVING as /readyz
// says 503; failing closed, the call is Unavailable. Both recover.
func TestRLSDatabaseDown(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"open", "closed"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			_, proxy, servers := MustStartProxied(t, 1, withGRPC(map[string]string{
				"QUOTAD_STORE_FAILURE": policy,
				"QUOTAD_STORE_TIMEOUT": "250ms",
			}))
			s := servers[0]
			MustSeed(t, s, "", `[{"metric":"api_calls","window":"day","limit":1000}]`, "cold")
			c := MustDialRLS(t, s)
			eventually(t, func() bool {
				res, err := c.health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: rls.ServiceName})
				return err == nil && res.GetStatus() == healthpb.HealthCheckResponse_SERVING
			}, "health to say SERVING")
			proxy.BlackHole()
			// "cold" was never checked: its lookup needs PostgreSQL.
			res, err := c.ShouldRateLimit(asToken(checkToken), &rlsv3.RateLimitRequest{Domain: "api_calls",
				Descriptors: []*commonrl.RateLimitDescriptor{rlDesc(0, "customer", "cold")}})
			switch policy {
			case "open":
				if err != nil || res.GetOverallCode() != rlsv3.RateLimitResponse_OK {
					t.Errorf("open: %v, %v; want OK", res, err)
				}
			case "closed":
				if status.Code(err) != codes.Unavailable {
					t.Errorf("closed: %v, %v; want Unavailable", res, err)
				}
			}
			eventually(t, func() bool {
				res, err := c.health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: rls.ServiceName})
				return err == nil && res.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING
			}, "health to say NOT_SERVING")
			proxy.Clear()
			eventually(t, func() bool {
				res, err := c.ShouldRateLimit(asToken(checkToken), &rlsv3.RateLimitRequest{Domain: "api_calls",
					Descriptors: []*commonrl.RateLimitDescriptor{rlDesc(0, "customer", "cold")}})
				return err == nil && res.GetOverallCode() == rlsv3.RateLimitResponse_OK && s.usedDay("cold") >= 1
			}, "checks to reach PostgreSQL again")
			eventually(t, func() bool {
				res, err := c.health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: rls.ServiceName})
				return err == nil && res.GetStatus() == healthpb.HealthCheckResponse_SERVING
			}, "health to say SERVING again")
		})
	}
}

// Requests of two descriptors from many clients through two processes:
// "b" has room for 4 requests, "a" for many more, in short windows shared
// in Redis (counted by sliding window, or by sliding log, whose undone
// takes give back their units from the log's entry they were counted in),
// or in day windows served from leases. Exactly 4 pass, and "a" is charged
// for those 4 only, as every process reads it.
//
// No answer may be degraded: failing open, a check the store could not
// serve in time is allowed and counted nowhere, so an OK answer would not
// be one of the 4. quotad_store_errors_total counts such checks; the test
// says so apart from a wrong count.
func TestRLSAllOrNothingAcrossProcesses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, window, limits string
		redis                bool
		// decays: the window's count falls once its minute is over (a
		// sliding window weighs the previous minute's units less and less)
		decays bool
	}{
		{"minute in Redis", "minute", `[{"metric":"api_calls","window":"minute","limit":20},{"metric":"api_calls","window":"day","limit":1000}]`, true, true},
		{"sliding log minute in Redis", "minute", `[{"metric":"api_calls","window":"minute","limit":20,"algorithm":"sliding_log"},{"metric":"api_calls","window":"day","limit":1000}]`, true, false},
		{"day from leases", "day", `[{"metric":"api_calls","window":"day","limit":20}]`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			if tc.redis {
				env = redisEnv(t)
			}
			servers := MustStartServers(t, 2, withGRPC(env))
			MustSeed(t, servers[0], "", tc.limits, "a", "b")
			clients := []*rlsClient{MustDialRLS(t, servers[0]), MustDialRLS(t, servers[1])}
			if tc.decays {
				// The counts read below are 4 and 20 while the minute of
				// the burst lasts (Redis's clock is this machine's): a
				// minute with less than the reads' bound left is waited
				// out, so that the burst and the reads fall in one minute.
				if left := time.Until(time.Now().Truncate(time.Minute).Add(time.Minute)); left < 35*time.Second {
					<-time.After(left + 10*time.Millisecond)
				}
			}
			const workers, each = 16, 5
			results := make(chan string, workers*each)
			errs := make(chan error, workers*each)
			for w := range workers {
				go func() {
					for i := range each {
						res, err := clients[(w+i)%2].ShouldRateLimit(asToken(checkToken), &rlsv3.RateLimitRequest{Domain: "api_calls",
							Descriptors: []*commonrl.RateLimitDescriptor{rlDesc(1, "customer", "a"), rlDesc(5, "customer", "b")}})
						errs <- err
						results <- res.GetOverallCode().String()
					}
				}()
			}
			counts := map[string]int{}
			for range workers * each {
				if err := <-errs; err != nil {
					t.Error(err)
				}
				counts[<-results]++
			}
			degraded := servers[0].metricValue("quotad_store_errors_total") + servers[1].metricValue("quotad_store_errors_total")
			if degraded > 0 {
				t.Errorf("%v checks were answered without the store (degraded: allowed, counted nowhere)", degraded)
			}
			if counts["OK"] != 4 || counts["OVER_LIMIT"] != workers*each-4 {
				t.Errorf("answers %v, want exactly 4 OK (%v checks degraded)", counts, degraded)
			}
			// A process reads another's leased units once they are reported
			// (every second): every process comes to read the same counts.
			for i, s := range servers {
				for _, customer := range []string{"a", "b"} {
					want := map[string]float64{"a": 4, "b": 20}[customer]
					// As eventually, saying what was read.
					deadline := time.Now().Add(30 * time.Second)
					tick := time.NewTicker(20 * time.Millisecond)
					for got := s.used(customer, tc.window); got != want; got = s.used(customer, tc.window) {
						if time.Now().After(deadline) {
							t.Fatalf("timed out waiting for process %d to read %s's %s usage %v: it reads %v", i, customer, tc.window, want, got)
						}
						<-tick.C
					}
					tick.Stop()
				}
			}
		})
	}
}

// A descriptor's api_key entry is resolved as a check's api_key is: an
// issued key counts for its customer; a revoked or unknown one is over
// the limit, and nothing of its request is counted.
func TestRLSByAPIKey(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, withGRPC(nil))
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"day","limit":10}]`, "a")
	k := MustCreateKey(t, s, "a", `{}`)
	c := MustDialRLS(t, s)
	if res := c.mustCall(t, "api_calls", rlDesc(2, "api_key", k.Key)); rlCodes(res) != "OK [OK]" {
		t.Fatalf("by a live key: %s, want OK [OK]", rlCodes(res))
	}
	if got := s.usedDay("a"); got != 2 {
		t.Errorf("a used %v after a descriptor of 2 by key, want 2", got)
	}
	s.mustDo(http.StatusNoContent, "DELETE", "/v1/keys/"+k.ID, "")
	res := c.mustCall(t, "api_calls", rlDesc(1, "customer", "a"), rlDesc(1, "api_key", k.Key))
	if rlCodes(res) != "OVER_LIMIT [OK OVER_LIMIT]" {
		t.Errorf("by a revoked key: %s, want OVER_LIMIT [OK OVER_LIMIT]", rlCodes(res))
	}
	if got := s.usedDay("a"); got != 2 {
		t.Errorf("a used %v after a request with a revoked key, want 2 (nothing counted)", got)
	}
}

// mustReport asks for hits of customer's llm_tokens (0: a look), and
// returns the answer's codes and the units its descriptor has left.
func (c *rlsClient) mustReport(t testing.TB, domain, customer string, hits uint64) (string, uint32) {
	t.Helper()
	d := rlDesc(0, "customer", customer, "metric", "llm_tokens")
	d.HitsAddend = wrapperspb.UInt64(hits) // 0 too: a look
	res := c.mustCall(t, domain, d)
	return rlCodes(res), res.GetStatuses()[0].GetLimitRemaining()
}

// Envoy AI Gateway's sequence, through gRPC, in a domain that counts over
// the limit: a request is looked at first (hits_addend 0: what remains,
// counting nothing), its answer's tokens reported once it has streamed
// (counted even over the limit, and then answered OVER_LIMIT), and the
// next request's look is over the limit. Then many reports through two
// processes (leases): every token counted once, exactly those within the
// limit answered OK.
func TestRLSAIGatewayCountsTokensOverLimit(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "rls.yaml")
	if err := os.WriteFile(cfg, []byte("domains:\n  ai-gateway:\n    count_over_limit: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	servers := MustStartServers(t, 2, withGRPC(map[string]string{"QUOTAD_RLS_CONFIG": cfg}))
	s := servers[0]
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/llm_tokens", `{}`)
	MustSeed(t, s, "", `[{"metric":"llm_tokens","window":"day","limit":1000}]`, "acme", "beta")
	clients := []*rlsClient{MustDialRLS(t, servers[0]), MustDialRLS(t, servers[1])}
	c := clients[0]
	for i, step := range []struct {
		domain    string
		hits      uint64
		want      string
		remaining uint32
		used      float64
	}{
		{"ai-gateway", 0, "OK [OK]", 1000, 0},
		{"ai-gateway", 0, "OK [OK]", 1000, 0},
		{"ai-gateway", 600, "OK [OK]", 400, 600},
		{"ai-gateway", 0, "OK [OK]", 400, 600},
		{"ai-gateway", 0, "OK [OK]", 400, 600},
		// Elsewhere, hits over the limit are refused and not counted.
		{"other", 401, "OVER_LIMIT [OVER_LIMIT]", 400, 600},
		{"ai-gateway", 994, "OVER_LIMIT [OVER_LIMIT]", 0, 1594},
		{"ai-gateway", 0, "OVER_LIMIT [OVER_LIMIT]", 0, 1594},
		{"ai-gateway", 6, "OVER_LIMIT [OVER_LIMIT]", 0, 1600},
	} {
		code, remaining := c.mustReport(t, step.domain, "acme", step.hits)
		if code != step.want || remaining != step.remaining {
			t.Errorf("step %d (%s, %d hits): %s, %d remaining; want %s, %d", i, step.domain, step.hits, code, remaining, step.want, step.remaining)
		}
		if got := s.used("acme", "day"); got != step.used {
			t.Errorf("step %d (%s, %d hits): acme used %v, want %v", i, step.domain, step.hits, got, step.used)
		}
	}
	for decision, want := range map[string]float64{"allowed": 5, "denied": 4} {
		if got := s.metricValue(`quotad_checks_total{decision="` + decision + `"}`); got != want {
			t.Errorf("quotad_checks_total{decision=%q} = %v, want %v", decision, got, want)
		}
	}

	// Through two processes: 80 reports of 20 tokens against 1000.
	const workers, each, tokens = 16, 5, 20
	results := make(chan string, workers*each)
	for w := range workers {
		go func() {
			for i := range each {
				res, err := clients[(w+i)%2].ShouldRateLimit(asToken(checkToken), &rlsv3.RateLimitRequest{Domain: "ai-gateway",
					Descriptors: []*commonrl.RateLimitDescriptor{rlDesc(tokens, "customer", "beta", "metric", "llm_tokens")}})
				if err != nil {
					t.Error(err)
				}
				results <- res.GetOverallCode().String()
			}
		}()
	}
	counts := map[string]int{}
	for range workers * each {
		counts[<-results]++
	}
	degraded := servers[0].metricValue("quotad_store_errors_total") + servers[1].metricValue("quotad_store_errors_total")
	if degraded > 0 {
		t.Errorf("%v checks were answered without the store (degraded: allowed, counted nowhere)", degraded)
	}
	if counts["OK"] != 1000/tokens || counts["OVER_LIMIT"] != workers*each-1000/tokens {
		t.Errorf("answers %v, want exactly %d OK (%v checks degraded)", counts, 1000/tokens, degraded)
	}
	for i, s := range servers {
		eventually(t, func() bool { return s.used("beta", "day") == workers*each*tokens },
			fmt.Sprintf("process %d to read beta's %d tokens", i, workers*each*tokens))
		if code, remaining := clients[i].mustReport(t, "ai-gateway", "beta", 0); code != "OVER_LIMIT [OVER_LIMIT]" || remaining != 0 {
			t.Errorf("process %d: a look at beta: %s, %d remaining; want OVER_LIMIT, 0", i, code, remaining)
		}
	}
}
