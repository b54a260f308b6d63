package quotad_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	quotad "github.com/quotad/quotad/client"
)

// The grants' methods send what openapi.yaml says and read what quotad
// answers, a void of an unknown grant as ErrGrantNotFound.
func TestGrantMethods(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+string(body))
		w.Header().Set("Content-Type", "application/json")
		switch r.Method {
		case http.MethodPost:
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"id":"grt_AAAAAAAAAAAAAAAA","customer":"acme","metric":"m","amount":5,"remaining":5,"priority":2}`))
		case http.MethodGet:
			w.Write([]byte(`{"grants":[{"id":"grt_AAAAAAAAAAAAAAAA","remaining":3}]}`))
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"status":404,"code":"grant_not_found","title":"Not Found"}`))
		}
	}))
	defer srv.Close()
	c := quotad.New(srv.URL, noRetry)
	ctx := context.Background()
	g, err := c.Grants.Create(ctx, "acme", quotad.GrantSpec{Metric: "m", Amount: 5, Priority: ptr(2), RequestID: "r1"})
	if err != nil || g.ID != "grt_AAAAAAAAAAAAAAAA" || g.Remaining != 5 || g.Priority != 2 {
		t.Fatalf("Grants.Create = %+v, %v", g, err)
	}
	list, err := c.Grants.List(ctx, "acme", true)
	if err != nil || len(list) != 1 || list[0].Remaining != 3 {
		t.Fatalf("Grants.List = %+v, %v", list, err)
	}
	if err := c.Grants.Void(ctx, "grt_BBBBBBBBBBBBBBBB"); !errors.Is(err, quotad.ErrGrantNotFound) {
		t.Fatalf("Grants.Void of an unknown grant = %v; want ErrGrantNotFound", err)
	}
	want := []string{
		`POST /v1/customers/acme/grants {"metric":"m","amount":5,"priority":2,"request_id":"r1"}`,
		`GET /v1/customers/acme/grants?all=true `,
		`DELETE /v1/grants/grt_BBBBBBBBBBBBBBBB `,
	}
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Errorf("request %d = %q; want %q", i, got, want[i])
		}
	}
}
