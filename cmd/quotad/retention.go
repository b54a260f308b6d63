package main

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/store"
)

// retainDuration is the value of a --retain-* flag: a Go duration (72h,
// 90m) or a whole number of days (400d); 0 keeps the rows forever.
type retainDuration time.Duration

// UnmarshalText reads 400d as 400 days, anything else as a Go duration.
func (d *retainDuration) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseInt(n, 10, 32)
		if err != nil {
			return fmt.Errorf("want a duration such as 400d (days) or 72h, got %q", s)
		}
		*d = retainDuration(time.Duration(days) * 24 * time.Hour)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 400d (days) or 72h, got %q", s)
	}
	*d = retainDuration(v)
	return nil
}

// String writes whole days as 400d, and 0 as 0 (forever).
func (d retainDuration) String() string {
	v := time.Duration(d)
	if v != 0 && v%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(v/(24*time.Hour)), 10) + "d"
	}
	if v == 0 {
		return "0"
	}
	return v.String()
}

// checkRetention rejects a negative --retain-* value, naming where it
// came from (see config.from).
func (c *config) checkRetention() error {
	for _, f := range []struct {
		flag string
		v    retainDuration
	}{
		{"retain-history", c.RetainHistory},
		{"retain-audit", c.RetainAudit},
		{"retain-reservations", c.RetainReservations},
		{"retain-deliveries", c.RetainDeliveries},
	} {
		if f.v < 0 {
			return fmt.Errorf("%s: want a duration of 0 (keep forever) or more, such as 400d, got %s", c.from(f.flag), f.v)
		}
	}
	return c.retention().Validate()
}

// retention is the engine's retention policy from the --retain-* flags.
func (c *config) retention() quota.Retention {
	return quota.Retention{
		History:      time.Duration(c.RetainHistory),
		Audit:        time.Duration(c.RetainAudit),
		Reservations: time.Duration(c.RetainReservations),
		Deliveries:   time.Duration(c.RetainDeliveries),
	}
}

// retentionLogValue lists the retention for the start-up log.
func (c *config) retentionLogValue() slog.Value {
	return slog.GroupValue(
		slog.String("history", c.RetainHistory.String()),
		slog.String("audit", c.RetainAudit.String()),
		slog.String("reservations", c.RetainReservations.String()),
		slog.String("deliveries", c.RetainDeliveries.String()),
	)
}

// newPurgeObserver returns what hears each purge: a debug line of what
// went, and quotad_purged_rows_total{table}, registered on reg.
func newPurgeObserver(log *slog.Logger, reg prometheus.Registerer) func(quota.Purged) {
	rows := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "quotad_purged_rows_total",
		Help: "Rows the retention purge deleted, by table (see docs/operations.md, Retention).",
	}, []string{"table"})
	for _, t := range store.PurgedTables() {
		rows.WithLabelValues(t)
	}
	reg.MustRegister(rows)
	return func(p quota.Purged) {
		attrs := make([]any, 0, 2*len(p)+2)
		attrs = append(attrs, "rows", p.Total())
		for t, n := range p {
			rows.WithLabelValues(t).Add(float64(n))
			attrs = append(attrs, t, n)
		}
		log.Debug("purged", attrs...)
	}
}
