package api

import (
	"bytes"
	"context"
	"encoding/csv"
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
// then the rows rows writes. The file is made whole before anything is
// sent, so that an error anywhere answers a problem rather than a file
// cut short.
func respondCSV(c echo.Context, rows func(w *csv.Writer) error) error {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.UseCRLF = true
	_ = w.Write(csvHeader)
	if err := rows(w); err != nil {
		return err
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderContentType, contentTypeCSV)
	c.Response().WriteHeader(http.StatusOK)
	_, err := c.Response().Write(b.Bytes())
	return err
}

func (s *Server) noBilling() error {
	return problemf(http.StatusNotFound, codeNotFound, details[codeNotFound])
}

func (s *Server) getStatement(c echo.Context) error {
	if s.billing == nil {
		return s.noBilling()
	}
	st, err := s.billing.Statement(c.Request().Context(), param(c, "customer"), c.QueryParam("period"))
	if err != nil {
		return err
	}
	if !wantsCSV(c) {
		return respond(c, http.StatusOK, st)
	}
	return respondCSV(c, func(w *csv.Writer) error { return writeCSVRows(w, st) })
}

// csvPageSize is how many statements the CSV of every customer reads at
// once.
const csvPageSize = maxPageSize

func (s *Server) listStatements(c echo.Context) error {
	if s.billing == nil {
		return s.noBilling()
	}
	ctx := c.Request().Context()
	month := c.QueryParam("period")
	if wantsCSV(c) {
		// Every customer in one file, with no pages: a conflict anywhere
		// answers 409.
		return respondCSV(c, func(w *csv.Writer) error {
			page := tiers.Page{Limit: csvPageSize}
			for {
				list, more, err := s.billing.Statements(ctx, month, page)
				if err != nil {
					return err
				}
				for _, st := range list {
					if err := writeCSVRows(w, st); err != nil {
						return err
					}
				}
				if !more || len(list) == 0 {
					return nil
				}
				page.After = list[len(list)-1].Customer
			}
		})
	}
	p, err := page(c, tiers.ValidCustomerID)
	if err != nil {
		return err
	}
	items, more, err := s.billing.Statements(ctx, month, p)
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
