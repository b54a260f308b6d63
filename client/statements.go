package quotad

import (
	"context"
	"io"
	"iter"
	"net/http"
	"net/url"
	"time"
)

// Statement is what a customer owes for one billing period.
type Statement struct {
	Customer string `json:"customer"`
	Period   struct {
		Start time.Time `json:"start"`
		End   time.Time `json:"end"`
	} `json:"period"`
	// Currency is every line's (ISO 4217).
	Currency   string          `json:"currency"`
	Lines      []StatementLine `json:"lines"`
	TotalCents int64           `json:"total_cents"`
}

// StatementLine is one line of a statement.
type StatementLine struct {
	// Kind is "base" (a plan, prorated by the seconds the customer was on
	// it) or "overage" (a metric's overage units on a plan).
	Kind string `json:"kind"`
	Plan string `json:"plan"`
	// Metric is set on overage lines only.
	Metric *string `json:"metric"`
	// Quantity: seconds on the plan (base), overage units (overage).
	Quantity int64 `json:"quantity"`
	// UnitPriceMicros, in millionths of the currency: the plan's price for
	// one whole interval (base), one overage unit's (overage).
	UnitPriceMicros int64 `json:"unit_price_micros"`
	// AmountCents is rounded half up to whole cents.
	AmountCents int64  `json:"amount_cents"`
	Description string `json:"description"`
}

// StatementsService reads customers' statements, as JSON or CSV.
type StatementsService service

// Get returns the customer's statement for the billing period that
// starts in period (YYYY-MM). A deleted customer's past periods answer
// too. Errors match ErrValidation (a bad or future period),
// ErrCustomerNotFound, ErrConflict (mixed currencies).
func (s *StatementsService) Get(ctx context.Context, customer, period string) (*Statement, error) {
	var out Statement
	_, err := s.client.do(ctx, call{method: http.MethodGet, path: pathf("/v1/customers/%s/statement", customer),
		query: url.Values{"period": {period}}, retry: true, out: &out})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// GetCSV writes the customer's statement for period to w as CSV:
// a header row, then one row per line.
func (s *StatementsService) GetCSV(ctx context.Context, customer, period string, w io.Writer) error {
	_, err := s.client.do(ctx, call{method: http.MethodGet, path: pathf("/v1/customers/%s/statement", customer),
		query: url.Values{"period": {period}}, retry: true, csv: w})
	return err
}

// List yields the statement of every customer billed in the period,
// deleted ones too, by customer id, page by page.
func (s *StatementsService) List(ctx context.Context, period string) iter.Seq2[Statement, error] {
	return paginate(ctx, func(ctx context.Context, cursor string) (page[Statement], error) {
		var out struct {
			Statements []Statement `json:"statements"`
			NextCursor string      `json:"next_cursor"`
		}
		q := listQuery(cursor, 0)
		q.Set("period", period)
		_, err := s.client.do(ctx, call{method: http.MethodGet, path: "/v1/statements", query: q, retry: true, out: &out})
		return page[Statement]{out.Statements, out.NextCursor}, err
	})
}

// ListCSV writes the statements of every customer billed in period
// to w as one CSV file, without pages, for an invoicing tool: a header
// row, then one row per line. Once quotad has answered, the file is copied
// as it arrives and not retried.
func (s *StatementsService) ListCSV(ctx context.Context, period string, w io.Writer) error {
	_, err := s.client.do(ctx, call{method: http.MethodGet, path: "/v1/statements",
		query: url.Values{"period": {period}}, retry: true, csv: w})
	return err
}
