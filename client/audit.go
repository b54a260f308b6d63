package quotad

import (
	"context"
	"iter"
	"net/http"
)

// AuditService reads the audit log.
type AuditService service

// List lists the audit log, newest first.
func (s *AuditService) List(ctx context.Context, f AuditFilter) iter.Seq2[AuditEvent, error] {
	return paginate(ctx, func(ctx context.Context, cursor string) (page[AuditEvent], error) {
		var out struct {
			Events     []AuditEvent `json:"events"`
			NextCursor string       `json:"next_cursor"`
		}
		q := listQuery(cursor, f.PageSize)
		if f.Customer != "" {
			q.Set("customer", f.Customer)
		}
		_, err := s.client.do(ctx, call{method: http.MethodGet, path: "/v1/audit", query: q, retry: true, out: &out})
		return page[AuditEvent]{out.Events, out.NextCursor}, err
	})
}
