package quotad_test

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// fakeReservation is a reservation the fake holds, as quotad's contract
// describes them: held until committed, released or expired.
type fakeReservation struct {
	id, customer, metric, requestID string
	cost                            int64
	state                           string
	// answer is the first commit's answer, repeated to a commit of the
	// same cost.
	committed int64
	answer    map[string]any
}

// handleReservations adds quotad's reservation routes to the fake: they
// count against the same per-minute limit and counter as its checks, for
// customer acme or the API key qk_acme.
func (f *fakeQuotad) handleReservations(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/reservations", f.reserve)
	mux.HandleFunc("POST /v1/reservations/{id}/commit", f.commit)
	mux.HandleFunc("DELETE /v1/reservations/{id}", f.release)
	mux.HandleFunc("GET /v1/reservations/{id}", f.getReservation)
}

func writeFakeProblem(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "urn:quotad:problem:" + code, "title": http.StatusText(status),
		"status": status, "code": code})
}

// usage is the fake's one window, as a commit's answer shows it; f.mu is
// held.
func (f *fakeQuotad) usage() []any {
	return []any{map[string]any{"metric": "llm_tokens", "window": "minute", "limit": f.limit, "used": f.used,
		"remaining": max(0, f.limit-f.used), "overage": 0, "reset_at": "2026-11-22T10:01:00Z"}}
}

// limits is the fake's one window, as answers show it; f.mu is held.
func (f *fakeQuotad) limits(state string) []any {
	return []any{map[string]any{"window": "minute", "limit": f.limit, "used": f.used, "remaining": max(0, f.limit-f.used),
		"reset_at": "2026-11-22T10:01:00Z", "mode": "hard", "state": state}}
}

func (f *fakeQuotad) reserve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Customer   string `json:"customer"`
		APIKey     string `json:"api_key"`
		Metric     string `json:"metric"`
		Cost       int64  `json:"cost"`
		TTLSeconds int    `json:"ttl_seconds"`
		RequestID  string `json:"request_id"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || (req.Customer == "") == (req.APIKey == "") || req.Cost < 1 ||
		req.TTLSeconds < 0 || req.TTLSeconds > 3600 {
		writeFakeProblem(w, http.StatusBadRequest, "validation_failed")
		return
	}
	if req.APIKey != "" {
		if req.APIKey != "qk_acme" {
			writeFakeProblem(w, http.StatusForbidden, "invalid_api_key")
			return
		}
		req.Customer = "acme"
	}
	if req.Customer != "acme" {
		writeFakeProblem(w, http.StatusNotFound, "customer_not_found")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("RateLimit-Policy", `"`+req.Metric+`/minute";q=`+strconv.FormatInt(f.limit, 10)+`;w=60`)
	if req.Cost > f.limit {
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"allowed": false, "customer": req.Customer, "metric": req.Metric,
			"cost": req.Cost, "retry_after": nil, "limits": f.limits("exceeded"), "code": "cost_exceeds_limit",
			"detail": "a cost of " + strconv.FormatInt(req.Cost, 10) + " can never pass the " + req.Metric + "/minute limit of " +
				strconv.FormatInt(f.limit, 10) + "; do not retry"})
		return
	}
	if f.used+req.Cost > f.limit {
		w.Header().Set("Retry-After", "42")
		w.Header().Set("RateLimit", `"`+req.Metric+`/minute";r=`+strconv.FormatInt(max(0, f.limit-f.used), 10)+`;t=42`)
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"allowed": false, "customer": req.Customer, "metric": req.Metric,
			"cost": req.Cost, "retry_after": 42, "limits": f.limits("exceeded")})
		return
	}
	f.used += req.Cost
	id := "rsv_" + strconv.Itoa(len(f.reservations)+1)
	f.reservations[id] = &fakeReservation{id: id, customer: req.Customer, metric: req.Metric, cost: req.Cost,
		requestID: req.RequestID, state: "held"}
	w.Header().Set("RateLimit", `"`+req.Metric+`/minute";r=`+strconv.FormatInt(f.limit-f.used, 10)+`;t=42`)
	writeJSON(w, http.StatusCreated, map[string]any{"id": id, "customer": req.Customer, "metric": req.Metric, "cost": req.Cost,
		"expires_at": "2026-11-22T10:05:00Z", "allowed": true, "overage": false, "elastic": false, "retry_after": 0,
		"limits": f.limits("ok")})
}

func (f *fakeQuotad) commit(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Cost *int64 `json:"cost"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Cost == nil || *req.Cost < 0 || *req.Cost > 1_000_000_000 {
		writeFakeProblem(w, http.StatusBadRequest, "validation_failed")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	res, ok := f.reservations[r.PathValue("id")]
	switch {
	case !ok:
		writeFakeProblem(w, http.StatusNotFound, "reservation_not_found")
	case res.state == "expired":
		writeFakeProblem(w, http.StatusGone, "reservation_expired")
	case res.state == "committed" && res.committed == *req.Cost:
		writeJSON(w, http.StatusOK, res.answer)
	case res.state != "held":
		writeFakeProblem(w, http.StatusConflict, "conflict")
	default:
		actual := *req.Cost
		before := f.used - res.cost
		f.used = before + actual
		over := max(0, f.used-max(f.limit, before))
		res.state, res.committed = "committed", actual
		res.answer = map[string]any{"id": res.id, "reserved": res.cost, "committed": actual, "released": max(0, res.cost-actual),
			"over": over, "limits": f.usage()}
		writeJSON(w, http.StatusOK, res.answer)
	}
}

func (f *fakeQuotad) release(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	res, ok := f.reservations[r.PathValue("id")]
	switch {
	case !ok:
		writeFakeProblem(w, http.StatusNotFound, "reservation_not_found")
	case res.state == "held":
		f.used -= res.cost
		res.state = "released"
		w.WriteHeader(http.StatusNoContent)
	case res.state == "released" || res.state == "expired":
		w.WriteHeader(http.StatusNoContent)
	default:
		writeFakeProblem(w, http.StatusConflict, "conflict")
	}
}

func (f *fakeQuotad) getReservation(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	res, ok := f.reservations[r.PathValue("id")]
	if !ok {
		writeFakeProblem(w, http.StatusNotFound, "reservation_not_found")
		return
	}
	view := map[string]any{"id": res.id, "customer": res.customer, "metric": res.metric, "cost": res.cost, "state": res.state,
		"committed": nil, "over": 0, "expires_at": "2026-11-22T10:05:00Z", "created_at": "2026-11-22T10:00:00Z", "request_id": nil}
	if res.requestID != "" {
		view["request_id"] = res.requestID
	}
	if res.state == "committed" {
		view["committed"], view["over"] = res.committed, res.answer["over"]
	}
	writeJSON(w, http.StatusOK, view)
}

// expire does what quotad does at a held reservation's expiry.
func (f *fakeQuotad) expire(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if res := f.reservations[id]; res != nil && res.state == "held" {
		f.used -= res.cost
		res.state = "expired"
	}
}

// reservationState is a reservation's state in the fake.
func (f *fakeQuotad) reservationState(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if res := f.reservations[id]; res != nil {
		return res.state
	}
	return ""
}
