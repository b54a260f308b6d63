// Command upsertserver is the naive design quotad's leases are measured
// against: a bare echo/v4 server that answers each check with one atomic
// conditional upsert of the customer's day counter in PostgreSQL, one
// commit per check. It knows no plans, no customers and no short windows
// (every check is judged against one fixed day limit, on a table of its
// own without foreign keys), so it is the cheapest a one-commit-per-check
// service can be. Only for benchmarks: see docs/benchmarks.md.
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
)

const schema = `CREATE TABLE IF NOT EXISTS naive_counters (
    customer text NOT NULL,
    metric text NOT NULL,
    day date NOT NULL,
    used bigint NOT NULL,
    PRIMARY KEY (customer, metric, day))`

// upsert counts cost on the day's counter if it stays within the limit,
// and returns the count after; no row when it would not.
const upsert = `INSERT INTO naive_counters AS c (customer, metric, day, used)
VALUES ($1, $2, $3, $4)
ON CONFLICT (customer, metric, day) DO UPDATE SET used = c.used + EXCLUDED.used
WHERE c.used + EXCLUDED.used <= $5
RETURNING used`

type check struct {
	Customer string `json:"customer"`
	Metric   string `json:"metric"`
	Cost     int64  `json:"cost"`
}

type answer struct {
	Allowed  bool   `json:"allowed"`
	Customer string `json:"customer"`
	Metric   string `json:"metric"`
	Cost     int64  `json:"cost"`
	Used     int64  `json:"used"`
	Limit    int64  `json:"limit"`
}

func main() {
	addr := flag.String("listen", "127.0.0.1:8091", "address to listen on")
	dsn := flag.String("database", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "PostgreSQL URL")
	conns := flag.Int("conns", 32, "PostgreSQL connections")
	limit := flag.Int64("limit", 1_000_000_000, "every counter's day limit")
	flag.Parse()

	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(*dsn)
	if err != nil {
		log.Fatal(err)
	}
	cfg.MaxConns = int32(*conns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, schema); err != nil {
		log.Fatal(err)
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.POST("/v1/check", func(c echo.Context) error {
		var r check
		if err := c.Bind(&r); err != nil {
			return err
		}
		if r.Customer == "" || r.Metric == "" || r.Cost < 1 {
			return echo.NewHTTPError(http.StatusBadRequest, "customer, metric and a positive cost are required")
		}
		a := answer{Customer: r.Customer, Metric: r.Metric, Cost: r.Cost, Limit: *limit}
		day := time.Now().UTC().Truncate(24 * time.Hour)
		err := pool.QueryRow(c.Request().Context(), upsert, r.Customer, r.Metric, day, r.Cost, *limit).Scan(&a.Used)
		switch {
		case err == nil:
			a.Allowed = true
		case errors.Is(err, pgx.ErrNoRows):
			return c.JSON(http.StatusTooManyRequests, a)
		default:
			return echo.NewHTTPError(http.StatusServiceUnavailable, err.Error())
		}
		return c.JSON(http.StatusOK, a)
	})
	log.Fatal(e.Start(*addr))
}
