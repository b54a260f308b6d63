package api

import (
	"context"
	"encoding/csv"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/billing"
	"github.com/quotad/quotad/internal/tiers"
)

// Billing makes statements. *billing.Service implements it; its errors are
// *tiers.ValidationError, tiers.ErrCustomerNotFound, *billing.ConflictError
// and tiers.ErrUnavailable.
type Billing interface {
	Statement(ctx context.Context, customer, month string) (billing.Statement, error)
	Statements(ctx context.Context, month string, page tiers.Page) ([]billing.Statement, bool, error)
}

var _ Billing = (*billing.Service)(nil)

// billingHandlers serve what customers are billed, and would be: the
// statements, as JSON or CSV, and what-ifs.
type billingHandlers struct {
	billing        Billing
	whatIf         WhatIf
	log            *slog.Logger
	requestTimeout time.Duration
}

const contentTypeCSV = "text/csv; charset=utf-8"

// csvHeader names the columns of a statement's CSV: one row per line.
var csvHeader = []string{"customer", "period_start", "period_end", "currency", "kind", "plan", "metric",
	"quantity", "unit_price_micros", "amount_cents", "description"}

// wantsCSV reports whether the request's Accept header asks for text/csv
// (with a q above 0).
func wantsCSV(c echo.Context) bool {
	for _, v := range c.Request().Header.Values(echo.HeaderAccept) {
		for _, r := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(r))
			if err != nil || mt != "text/csv" {
				continue
			}
			if q, ok := params["q"]; ok {
				if f, err := strconv.ParseFloat(q, 64); err != nil || f <= 0 {
					continue
				}
			}
			return true
		}
	}
	return false
}

// writeCSVRows writes one row per line of st.
func writeCSVRows(w *csv.Writer, st billing.Statement) error {
	for _, l := range st.Lines {
		metric := ""
		if l.Metric != nil {
			metric = *l.Metric
		}
		err := w.Write([]string{st.Customer, st.Period.Start.Format(time.RFC3339), st.Period.End.Format(time.RFC3339),
			st.Currency, l.Kind, l.Plan, metric, strconv.FormatInt(l.Quantity, 10),
			strconv.FormatInt(l.UnitPriceMicros, 10), strconv.FormatInt(l.AmountCents, 10), l.Description})
		if err != nil {
			return err
		}
	}
	return nil
}

// respondCSV answers RFC 4180 CSV (lines end in CRLF): the header row,
// then one row per line of the statements next returns, a batch at a
// time until it returns none and no error. Each batch is written and
// flushed to the client before the next is asked for, so that the file's
// size does not bound what quotad holds. An error from the first batch
// answers a problem document; a later one comes after the 200: the
// transfer is then cut short (no end of the chunked body, the connection
// closed), which clients read as an error, never as a whole file.
func (h *billingHandlers) respondCSV(c echo.Context, next func() ([]billing.Statement, error)) error {
	batch, err := next()
	if err != nil {
		return err
	}
	res := c.Response()
	res.Header().Set(echo.HeaderContentType, contentTypeCSV)
	res.WriteHeader(http.StatusOK)
	w := csv.NewWriter(res)
	w.UseCRLF = true
	_ = w.Write(csvHeader)
	for {
		for _, st := range batch {
			if err := writeCSVRows(w, st); err != nil {
				return h.cutCSV(c, err)
			}
		}
		w.Flush()
		if err := w.Error(); err != nil {
			return h.cutCSV(c, err)
		}
		res.Flush()
		if len(batch) == 0 {
			return nil
		}
		if batch, err = next(); err != nil {
			return h.cutCSV(c, err)
		}
	}
}

// cutCSV ends a CSV answer that failed after its 200 was sent: it logs
// why and aborts the response (see respondCSV).
func (h *billingHandlers) cutCSV(c echo.Context, err error) error {
	if c.Request().Context().Err() == nil {
		h.log.Error("statements CSV cut short", "path", c.Request().URL.Path, "error", err)
	}
	panic(http.ErrAbortHandler)
}

func (h *billingHandlers) noBilling() error {
	return problemf(http.StatusNotFound, codeNotFound, details[codeNotFound])
}

func (h *billingHandlers) getStatement(c echo.Context) error {
	if h.billing == nil {
		return h.noBilling()
	}
	st, err := h.billing.Statement(c.Request().Context(), param(c, "customer"), c.QueryParam("period"))
	if err != nil {
		return err
	}
	if !wantsCSV(c) {
		return respond(c, http.StatusOK, st)
	}
	sent := false
	return h.respondCSV(c, func() ([]billing.Statement, error) {
		if sent {
			return nil, nil
		}
		sent = true
		return []billing.Statement{st}, nil
	})
}

// csvPageSize is how many statements the CSV of every customer computes
// at once, and so the most it holds.
const csvPageSize = 100

// streamsStatements reports whether c asks for the CSV of every
// customer's statement, which listStatements streams.
func streamsStatements(c echo.Context) bool {
	return c.Path() == "/v1/statements" && wantsCSV(c)
}

func (h *billingHandlers) listStatements(c echo.Context) error {
	if h.billing == nil {
		return h.noBilling()
	}
	ctx := c.Request().Context()
	month := c.QueryParam("period")
	if streamsStatements(c) {
		// Every customer in one file, with no pages, written a page of
		// customers at a time as they are computed. The request timeout
		// bounds each page, not the whole file.
		page, done := tiers.Page{Limit: csvPageSize}, false
		return h.respondCSV(c, func() ([]billing.Statement, error) {
			for !done {
				pctx, cancel := context.WithTimeout(ctx, h.requestTimeout)
				list, more, err := h.billing.Statements(pctx, month, page)
				cancel()
				if err != nil {
					return nil, err
				}
				done = !more || len(list) == 0
				if len(list) > 0 {
					page.After = list[len(list)-1].Customer
					return list, nil
				}
			}
			return nil, nil
		})
	}
	p, err := page(c, tiers.ValidCustomerID)
	if err != nil {
		return err
	}
	items, more, err := h.billing.Statements(ctx, month, p)
	if err != nil {
		return err
	}
	if items == nil {
		items = []billing.Statement{}
	}
	last := ""
	if len(items) > 0 {
		last = items[len(items)-1].Customer
	}
	return respond(c, http.StatusOK, list("statements", items, nextCursor(more, last)))
}
