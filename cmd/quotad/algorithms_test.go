package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAdminLimitAlgorithms writes a limit with each algorithm, in a plan
// and in overrides, through the real HTTP stack, and reads them back where
// the API shows limits: plans, overrides, effective limits, usage and the
// audit log. Short windows show their algorithm, the default named; token
// buckets show their size; long windows show neither. What GET returns can
// be PUT back unchanged.
func TestAdminLimitAlgorithms(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	for _, m := range []string{"api_calls", "tokens", "exports"} {
		s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/"+m, `{}`)
	}
	const terms = `"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null`
	plan := s.mustDo(http.StatusCreated, "PUT", "/v1/plans/rates", `{"limits":[
		{"metric":"api_calls","window":"second","limit":50},
		{"metric":"api_calls","window":"minute","limit":600,"algorithm":"fixed_window","burst":null},
		{"metric":"tokens","window":"second","limit":10000,"algorithm":"sliding_log"},
		{"metric":"tokens","window":"minute","limit":600,"algorithm":"token_bucket","burst":50},
		{"metric":"exports","window":"second","limit":5,"algorithm":"token_bucket"},
		{"metric":"exports","window":"minute","limit":60,"algorithm":"sliding_window"},
		{"metric":"api_calls","window":"day","limit":100000,"algorithm":null,"burst":null}]}`).JSON(t)
	const planLimits = `[
		{"metric":"api_calls","window":"second","limit":50,` + terms + `,"algorithm":"sliding_window"},
		{"metric":"api_calls","window":"minute","limit":600,` + terms + `,"algorithm":"fixed_window"},
		{"metric":"tokens","window":"second","limit":10000,` + terms + `,"algorithm":"sliding_log"},
		{"metric":"tokens","window":"minute","limit":600,` + terms + `,"algorithm":"token_bucket","burst":50},
		{"metric":"exports","window":"second","limit":5,` + terms + `,"algorithm":"token_bucket","burst":5},
		{"metric":"exports","window":"minute","limit":60,` + terms + `,"algorithm":"sliding_window"},
		{"metric":"api_calls","window":"day","limit":100000,` + terms + `}]`
	MustEqualJSON(t, "limits of the created plan", plan["limits"], planLimits)
	got := s.mustDo(http.StatusOK, "GET", "/v1/plans/rates", "").JSON(t)
	MustEqualJSON(t, "limits of GET plan", got["limits"], planLimits)
	list := s.mustDo(http.StatusOK, "GET", "/v1/plans", "").JSON(t)
	MustEqualJSON(t, "limits of the listed plan", list["plans"].([]any)[0].(map[string]any)["limits"], planLimits)

	t.Run("a plan as GET returns it can be PUT back", func(t *testing.T) {
		body, err := json.Marshal(map[string]any{
			"name": got["name"], "description": got["description"], "price": got["price"], "limits": got["limits"],
		})
		if err != nil {
			t.Fatal(err)
		}
		back := s.forT(t).mustDo(http.StatusOK, "PUT", "/v1/plans/rates", string(body), "If-Match", etagOf(1)).JSON(t)
		MustEqualJSON(t, "limits after PUT back", back["limits"], planLimits)
	})

	s.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme", `{"plan":"rates"}`)
	o := s.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme/overrides/api_calls/second",
		`{"limit":10,"algorithm":"token_bucket","burst":40,"reason":"bursty client"}`).JSON(t)
	for _, o := range []map[string]any{o, s.mustDo(http.StatusOK, "GET", "/v1/customers/acme/overrides/api_calls/second", "").JSON(t)} {
		if o["algorithm"] != "token_bucket" || o["burst"] != float64(40) || o["limit"] != float64(10) {
			t.Errorf("token bucket override = %v, want algorithm token_bucket, burst 40, limit 10", o)
		}
	}
	s.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme/overrides/tokens/minute", `{"limit":100,"algorithm":"sliding_log"}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme/overrides/tokens/day", `{"limit":5000,"algorithm":null,"burst":null}`)
	t.Run("overrides", func(t *testing.T) {
		body := s.forT(t).mustDo(http.StatusOK, "GET", "/v1/customers/acme/overrides", "").JSON(t)
		var shown []string
		for _, it := range body["overrides"].([]any) {
			shown = append(shown, shownTerms(it.(map[string]any)))
		}
		want := []string{
			"api_calls/second algorithm=token_bucket burst=40",
			"tokens/minute algorithm=sliding_log burst=-",
			"tokens/day algorithm=- burst=-",
		}
		if !slices.Equal(shown, want) {
			t.Errorf("overrides show %q, want %q", shown, want)
		}
	})

	const effective = `{"customer":"acme","plan":"rates","limits":[
		{"metric":"api_calls","window":"second","limit":10,` + terms + `,"algorithm":"token_bucket","burst":40,"source":"override","expires_at":null},
		{"metric":"api_calls","window":"minute","limit":600,` + terms + `,"algorithm":"fixed_window","source":"plan","expires_at":null},
		{"metric":"api_calls","window":"day","limit":100000,` + terms + `,"source":"plan","expires_at":null},
		{"metric":"exports","window":"second","limit":5,` + terms + `,"algorithm":"token_bucket","burst":5,"source":"plan","expires_at":null},
		{"metric":"exports","window":"minute","limit":60,` + terms + `,"algorithm":"sliding_window","source":"plan","expires_at":null},
		{"metric":"tokens","window":"second","limit":10000,` + terms + `,"algorithm":"sliding_log","source":"plan","expires_at":null},
		{"metric":"tokens","window":"minute","limit":100,` + terms + `,"algorithm":"sliding_log","source":"override","expires_at":null},
		{"metric":"tokens","window":"day","limit":5000,` + terms + `,"source":"override","expires_at":null}]}`
	MustEqualJSON(t, "effective limits", s.mustDo(http.StatusOK, "GET", "/v1/customers/acme/limits", "").JSON(t), effective)

	wantUsage := []string{
		"api_calls/second algorithm=token_bucket burst=40",
		"api_calls/minute algorithm=fixed_window burst=-",
		"api_calls/day algorithm=- burst=-",
		"exports/second algorithm=token_bucket burst=5",
		"exports/minute algorithm=sliding_window burst=-",
		"tokens/second algorithm=sliding_log burst=-",
		"tokens/minute algorithm=sliding_log burst=-",
		"tokens/day algorithm=- burst=-",
	}
	t.Run("usage", func(t *testing.T) {
		for _, token := range []string{adminToken, checkToken} {
			body := s.forT(t).mustDo(http.StatusOK, "GET", "/v1/customers/acme/usage", "", "Authorization", "Bearer "+token).JSON(t)
			var shown []string
			for _, it := range body["usage"].([]any) {
				shown = append(shown, shownTerms(it.(map[string]any)))
			}
			if !slices.Equal(shown, wantUsage) {
				t.Errorf("usage shows %q, want %q", shown, wantUsage)
			}
		}
	})

	t.Run("a refund's usage shows them too", func(t *testing.T) {
		s := s.forT(t)
		s.mustDo(http.StatusOK, "POST", "/v1/check", `{"customer":"acme","metric":"exports"}`)
		body := s.mustDo(http.StatusOK, "POST", "/v1/refund", `{"customer":"acme","metric":"exports"}`).JSON(t)
		var shown []string
		for _, it := range body["usage"].([]any) {
			shown = append(shown, shownTerms(it.(map[string]any)))
		}
		if want := wantUsage[3:5]; !slices.Equal(shown, want) {
			t.Errorf("refund usage shows %q, want %q", shown, want)
		}
	})

	t.Run("an override replaced without algorithm takes the default", func(t *testing.T) {
		s := s.forT(t)
		o := s.mustDo(http.StatusOK, "PUT", "/v1/customers/acme/overrides/api_calls/second", `{"limit":10}`).JSON(t)
		if got := shownTerms(o); got != "api_calls/second algorithm=sliding_window burst=-" {
			t.Errorf("replaced override shows %s", got)
		}
	})

	t.Run("the audit log shows them", func(t *testing.T) {
		events := s.forT(t).mustDo(http.StatusOK, "GET", "/v1/audit?limit=1000", "").JSON(t)["events"].([]any)
		var planAfter, overrideBefore map[string]any
		for _, e := range events {
			e := e.(map[string]any)
			switch {
			case e["resource"] == "plans/rates" && e["action"] == "create":
				planAfter, _ = e["after"].(map[string]any)
			case e["resource"] == "customers/acme/overrides/api_calls/second" && e["action"] == "update":
				overrideBefore, _ = e["before"].(map[string]any)
			}
		}
		if planAfter == nil || overrideBefore == nil {
			t.Fatalf("audit log lacks the plan's creation or the override's update: %v", events)
		}
		MustEqualJSON(t, "audited plan limits", planAfter["limits"], planLimits)
		if got := shownTerms(overrideBefore); got != "api_calls/second algorithm=token_bucket burst=40" {
			t.Errorf("audited override before its update shows %s", got)
		}
	})
}

// shownTerms sums up the algorithm and burst a limit-like answer shows,
// "-" for an absent field.
func shownTerms(m map[string]any) string {
	get := func(k string) any {
		if v, ok := m[k]; ok {
			return v
		}
		return "-"
	}
	return fmt.Sprintf("%v/%v algorithm=%v burst=%v", m["metric"], m["window"], get("algorithm"), get("burst"))
}

// algoAnswer is what TestCheckAlgorithms reads of a check answer.
type algoAnswer struct {
	Allowed    bool   `json:"allowed"`
	RetryAfter *int64 `json:"retry_after"`
	Limits     []struct {
		Used      int64     `json:"used"`
		Remaining int64     `json:"remaining"`
		ResetAt   time.Time `json:"reset_at"`
	} `json:"limits"`
}

// TestCheckAlgorithms checks each algorithm through the real HTTP stack on
// the system clock, with minute windows so that a test run stays well
// inside one window's arithmetic: what passes, when the next check could,
// and the headers that say so. A run that crosses a whole minute (where
// fixed and sliding windows move on) is repeated with a fresh customer.
func TestCheckAlgorithms(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	metrics := []string{"sliding", "fixed", "log", "bucket"}
	for _, m := range metrics {
		s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/"+m, `{}`)
	}
	s.mustDo(http.StatusCreated, "PUT", "/v1/plans/algos", `{"limits":[
		{"metric":"sliding","window":"minute","limit":3},
		{"metric":"fixed","window":"minute","limit":3,"algorithm":"fixed_window"},
		{"metric":"log","window":"minute","limit":3,"algorithm":"sliding_log"},
		{"metric":"bucket","window":"minute","limit":60,"algorithm":"token_bucket","burst":3}]}`)
	check := func(customer, metric string, cost int) (response, algoAnswer) {
		t.Helper()
		r := s.do("POST", "/v1/check", fmt.Sprintf(`{"customer":%q,"metric":%q,"cost":%d}`, customer, metric, cost),
			"Authorization", "Bearer "+checkToken)
		var a algoAnswer
		if err := json.Unmarshal(r.Body, &a); err != nil || len(a.Limits) != 1 {
			t.Fatalf("%s: %d %s (%v)", metric, r.Status, r.Body, err)
		}
		return r, a
	}
	for _, m := range metrics {
		t.Run(m, func(t *testing.T) {
			t.Parallel()
			for attempt := 0; ; attempt++ {
				c := fmt.Sprintf("%s-%d", m, attempt)
				s.mustDo(http.StatusCreated, "PUT", "/v1/customers/"+c, `{"plan":"algos"}`)
				first := time.Now().UTC()
				err := checkAlgorithm(c, m, first, check)
				if time.Now().UTC().Truncate(time.Minute).Equal(first.Truncate(time.Minute)) || attempt == 1 {
					if err != nil {
						t.Error(err)
					}
					return
				}
			}
		})
	}
}

// checkAlgorithm runs three checks of metric m for customer c, which
// pass, and two that do not, and returns what went wrong.
func checkAlgorithm(c, m string, first time.Time, check func(customer, metric string, cost int) (response, algoAnswer)) error {
	for i := range 3 {
		if r, a := check(c, m, 1); r.Status != http.StatusOK || a.Limits[0].Used != int64(i+1) || a.Limits[0].Remaining != int64(2-i) {
			return fmt.Errorf("check %d: %d %s, want 200 with used %d", i+1, r.Status, r.Body, i+1)
		}
	}
	r, a := check(c, m, 1)
	if r.Status != http.StatusTooManyRequests || a.Allowed || a.RetryAfter == nil {
		return fmt.Errorf("fourth check: %d %s, want 429 with a retry_after", r.Status, r.Body)
	}
	if got := r.Header.Get("Retry-After"); got != strconv.FormatInt(*a.RetryAfter, 10) {
		return fmt.Errorf("Retry-After %q, retry_after %d", got, *a.RetryAfter)
	}
	if got := r.Header.Get("RateLimit-Policy"); got != fmt.Sprintf(`"%s/minute";q=3;w=60`, m) && m != "bucket" {
		return fmt.Errorf("RateLimit-Policy %q", got)
	}
	if !strings.Contains(r.Header.Get("RateLimit"), ";r=0;") {
		return fmt.Errorf("RateLimit %q, want r=0", r.Header.Get("RateLimit"))
	}
	retry, reset := *a.RetryAfter, a.Limits[0].ResetAt
	switch m {
	case "fixed", "sliding":
		// The bucket's end, a whole minute; fixed: the count starts
		// again there.
		if !reset.Equal(reset.Truncate(time.Minute)) || reset.Sub(first) > time.Minute || retry < 1 || retry > 60 {
			return fmt.Errorf("reset_at %v, retry_after %d: want the next whole minute, 1..60 s", reset, retry)
		}
	case "log":
		// The first unit leaves a minute after it was admitted.
		if d := reset.Sub(first); d < time.Minute-time.Second || d > time.Minute+5*time.Second || retry < 55 || retry > 60 {
			return fmt.Errorf("reset_at %v (%v after the first check), retry_after %d: want about a minute", reset, d, retry)
		}
	case "bucket":
		// 60 a minute: one token a second, all three in 3 s.
		if d := reset.Sub(first); retry != 1 || d < 2*time.Second || d > 8*time.Second {
			return fmt.Errorf("reset_at %v (%v after the first check), retry_after %d: want 1 s and about 3 s", reset, d, retry)
		}
	}
	if r, _ := check(c, m, 4); r.Status != http.StatusTooManyRequests || m == "bucket" && !strings.Contains(string(r.Body), `"retry_after":null`) {
		return fmt.Errorf("cost 4 above a burst or limit of 3: %d %s, want 429 (never, for the bucket)", r.Status, r.Body)
	}
	return nil
}

// A token bucket of limit 0 without a burst (it admits nothing) shows no
// burst, so that what GET returns can be PUT back: a burst of 0 is refused.
func TestZeroTokenBucketRoundTrip(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/api_calls", `{}`)
	got := s.mustDo(http.StatusCreated, "PUT", "/v1/plans/zero",
		`{"limits":[{"metric":"api_calls","window":"second","limit":0,"algorithm":"token_bucket"}]}`).JSON(t)
	body, err := json.Marshal(map[string]any{"name": got["name"], "description": got["description"],
		"price": got["price"], "limits": got["limits"]})
	if err != nil {
		t.Fatal(err)
	}
	if r := s.do("PUT", "/v1/plans/zero", string(body)); r.Status != http.StatusOK {
		t.Errorf("PUT back of what PUT returned: %d %s", r.Status, r.Body)
	}
}
