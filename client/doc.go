// Package quotad is a Go client for quotad, the quota and billing-tier
// service, and an HTTP middleware that checks quotad before a handler.
//
// It uses the standard library only, so a backend can add it without
// pulling in quotad's own dependencies. Import it under the name quotad:
//
//	import quotad "github.com/quotad/quotad/client"
//
//	c := quotad.New("http://quotad:8080", quotad.WithToken(token))
//	res, err := c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "api_calls"})
//	if err != nil {
//		// quotad could not answer: unreachable, or a *Problem
//	} else if !res.Allowed {
//		// denied: a result, not an error; res.RetryAfter says when to try again
//	}
//
// # Layout
//
// The Client's own methods are the calls a backend makes while it serves
// requests: Check and Refund; Reserve, Commit, Release and Reservation;
// CheckFeature; Usage, SubjectUsage and Entitlements; Middleware and
// ReservationMiddleware; and Healthz and Readyz. The rest of the API is in
// services, one per resource, held in the Client's fields and sharing its
// transport, token, retries and errors:
//
//	c.Metrics     List, Get, Put, Delete, Usage
//	c.Plans       List, Get, Put, PutGrandfathered, Delete, Versions, Version, Migrate, WhatIf
//	c.Customers   List, Get, Put, Delete, Suspend, Resume, Limits, SetTotal, ResetUsage, UsageHistory
//	c.Overrides   List, Get, Put, Delete, and GetPer, PutPer, DeletePer for one per subject
//	c.Features    Get, Put, Delete (a customer's features and their overrides)
//	c.Keys        Create, List, ListIncludingRevoked, Get, Revoke
//	c.Grants      Create, List, Void
//	c.Webhooks    List, Get, Put, Delete, Deliveries
//	c.Statements  Get, GetCSV, List, ListCSV
//	c.Audit       List
//
// For example:
//
//	plan, created, err := c.Plans.Put(ctx, "pro", quotad.PlanSpec{...})
//	cust, err := c.Customers.Get(ctx, "acme")
//	key, err := c.Keys.Create(ctx, "acme", quotad.KeySpec{Name: "ci"})
//
// # Items and subjects
//
// One check may charge several metrics at once, all or none: Items in
// place of Metric, Cost and Subject, each item answered in
// CheckResult.Items. Subject names who within the customer spends the
// units (an end user, an IP), which the metric's limits per subject count
// apart; a check by APIKey without one counts for the key's id, and a
// metric with such a limit checked without any is ErrSubjectRequired.
// SubjectUsage reads a subject's windows beside the customer's.
//
//	res, err := c.Check(ctx, quotad.CheckRequest{Customer: "acme", Items: []quotad.CheckItem{
//		{Metric: "api_calls", Subject: "user-42"},
//		{Metric: "llm_tokens", Cost: 900, Subject: "user-42"},
//	}})
//
// # Errors
//
// An error answer of quotad is returned as a *Problem, the RFC 9457 problem
// document quotad sends, with its stable Code and, for validation failures,
// one FieldError per bad field. Sentinels such as ErrCustomerNotFound,
// ErrNotFound (any 404), ErrConflict and ErrPreconditionFailed match it with
// errors.Is. An error answer that is not a problem document (from a proxy,
// say) becomes a *Problem with the answer's status and no code. A denied
// check (429) is not an error: Check returns a CheckResult with Allowed
// false.
//
// # Retries
//
// Calls that are safe to repeat are retried on transport errors and on
// 502, 503 and 504, with capped exponential backoff and full jitter, up to
// the RetryPolicy's attempts, honouring Retry-After on 503, and never past
// the context's end: GET, PUT and DELETE (a reservation's Release too), a
// reservation's Commit (idempotent by cost: a repeat answers the same),
// and a check, refund or Reserve that carries a RequestID (quotad answers
// its repeat without charging again). A check, refund or Reserve without a
// RequestID is sent once.
//
// # Concurrency control
//
// Metrics, plans, customers and overrides carry a Version and an ETag. Pass
// IfMatch(etag) to a Put or Delete to have quotad refuse it with 412
// (ErrPreconditionFailed) if the resource changed meanwhile; IfMatch("*")
// requires that it exists. A Put says whether it created the resource.
//
// # Lists
//
// Lists are Go iterators (iter.Seq2) that fetch pages as the loop goes on
// and stop at the first error:
//
//	for cust, err := range c.Customers.List(ctx, quotad.CustomerFilter{Plan: "pro"}) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(cust.ID)
//	}
//
// # Middleware
//
// Client.Middleware returns a func(http.Handler) http.Handler that checks
// quotad before the handler: the metric and cost are functions of the
// request (Static, StaticCost), and so is its subject, if any
// (MiddlewareOptions.Subject). Who is charged comes from authentication,
// never from the request's own say-so: either the API key quotad issued
// (MiddlewareOptions.APIKey, e.g. FromHeader("X-Api-Key"); a request
// without one is answered 401), or the customer the application's own
// authentication established (MiddlewareOptions.Customer, e.g.
// FromContext with the key its auth middleware stores the customer
// under). A customer id read from a header, the query or the path would
// let any caller spend any customer's quota. A denied check is answered
// 429 with Retry-After and the RateLimit headers; an allowed one goes on to
// the handler with the RateLimit headers set. When quotad cannot be reached
// in time the request goes on (fail open, the default) or is answered 503
// (fail closed).
//
// # Costs known afterwards
//
// When a request's cost is known only once it is done (an LLM call's
// tokens), Reserve holds an estimate in every window, as an admitted
// check would, Commit settles the actual cost (what was not used goes
// back; what went beyond is counted too) and Release gives it all back. A
// denied Reserve is a result, as a denied check is. ReservationMiddleware
// does it around a handler: it reserves Estimate(r) before, and commits
// the cost the handler reports with ReportCost after (or releases, if the
// handler failed without reporting).
//
// Answers are decoded leniently: fields a newer quotad adds are ignored.
package quotad
