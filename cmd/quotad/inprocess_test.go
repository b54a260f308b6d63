package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/api"
	"github.com/quotad/quotad/internal/billing"
	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/grants"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
	"github.com/quotad/quotad/internal/whatif"
)

// inProcess is quotad assembled in process, as run wires it, on a manual
// clock: the PostgreSQL store, the catalog and its cache, the quota engine
// and the HTTP server, with the parts stackOptions asks for.
type inProcess struct {
	t      *testing.T
	db     *store.DB
	cache  *tiers.Cache
	clock  *quotafake.Clock
	engine *quota.Engine
	srv    *api.Server
}

// stackOptions says what an inProcess is built over and which optional
// parts it wires; each test asks only for the parts it exercises.
type stackOptions struct {
	schema   *dbtest.Schema   // shared with other processes; a fresh one when nil
	clock    *quotafake.Clock // the manual clock every part reads
	leases   bool             // the engine serves long windows from leases
	grants   bool             // the engine draws grants, the grants' routes are served
	features bool             // the feature checks are served
	billing  bool             // the statements are served
	whatIf   bool             // the what-if route is served
}

// mustInProcess assembles an inProcess as o says.
func mustInProcess(t *testing.T, o stackOptions) *inProcess {
	t.Helper()
	schema := o.schema
	if schema == nil {
		schema = dbtest.New(t)
	}
	db, err := store.New(context.Background(), schema.Pool)
	if err != nil {
		t.Fatal(err)
	}
	clock := o.clock
	cache := tiers.NewCache(db.Catalog, 0)
	// A check waits for PostgreSQL as long as the test servers' do
	// (testStoreTimeout): a busy machine can hold one past the default
	// (250ms), and it would then be admitted without being counted.
	qo := quota.Options{Catalog: cache, Counts: db.Ledger, Requests: db.Ledger, Maintenance: db.Ledger, Audits: db.Audit,
		History: db.History, Clock: clock, StoreTimeout: 30 * time.Second}
	if o.leases {
		qo.Leases = lease.NewPool(db.Ledger, clock)
	}
	if o.grants {
		qo.Grants = db.Grants
	}
	engine := quota.New(qo)
	catalog := tiers.NewService(db.Catalog, db.Audit, clock.Now, cache.Invalidate)
	cfg := api.Config{Metrics: catalog, Plans: catalog, Customers: catalog, Overrides: catalog,
		FeatureOverrides: catalog, Audit: catalog, Checker: engine}
	if o.grants {
		svc := grants.NewService(db.Grants, clock.Now)
		svc.Changed = func(customer string) { cache.Invalidate(tiers.Change{Kind: tiers.CustomerChanged, Key: customer}) }
		cfg.Grants = svc
	}
	if o.features {
		cfg.Features = tiers.NewFeatureChecker(cache, clock.Now)
	}
	if o.billing {
		cfg.Billing = billing.NewService(db.Billing, clock.Now)
	}
	if o.whatIf {
		cfg.WhatIf = &whatif.Service{Catalog: catalog, History: db.History}
	}
	return &inProcess{t: t, db: db, cache: cache, clock: clock, engine: engine, srv: api.New(cfg)}
}

// do sends a request from loopback, with a JSON body when there is one and
// the Accept header when accept is not empty.
func (s *inProcess) do(method, path, body, accept string) *httptest.ResponseRecorder {
	s.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Host = "localhost" // a server without tokens answers loopback Hosts only
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	s.srv.ServeHTTP(rec, req)
	return rec
}

// write makes each write (path, a space, its JSON body: a PUT; the path
// alone: a DELETE), failing the test on any answer but 200, 201 and 204.
func (s *inProcess) write(writes ...string) {
	s.t.Helper()
	for _, w := range writes {
		path, body, _ := strings.Cut(w, " ")
		method := http.MethodPut
		if body == "" {
			method = http.MethodDelete
		}
		if rec := s.do(method, path, body, ""); rec.Code >= 300 {
			s.t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
	}
}
