package quotad

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

// writeHeader applies write options.
func writeHeader(opts []WriteOption) http.Header {
	h := http.Header{}
	for _, o := range opts {
		o(&h)
	}
	return h
}

// get fetches one resource into out and sets its ETag.
func (c *Client) get(ctx context.Context, path string, out any, meta *Meta) error {
	r, err := c.do(ctx, call{method: http.MethodGet, path: path, retry: true, out: out})
	if err != nil {
		return err
	}
	setETag(meta, r)
	return nil
}

// put writes a resource and says whether it was created.
func (c *Client) put(ctx context.Context, path string, body, out any, meta *Meta, opts []WriteOption) (bool, error) {
	return c.putQuery(ctx, path, nil, body, out, meta, opts)
}

// putQuery is put with query parameters.
func (c *Client) putQuery(ctx context.Context, path string, query url.Values, body, out any, meta *Meta, opts []WriteOption) (bool, error) {
	r, err := c.do(ctx, call{method: http.MethodPut, path: path, query: query, body: body, header: writeHeader(opts),
		retry: true, ok: []int{http.StatusOK, http.StatusCreated}, out: out})
	if err != nil {
		return false, err
	}
	setETag(meta, r)
	return r.status == http.StatusCreated, nil
}

// del deletes a resource.
func (c *Client) del(ctx context.Context, path string, opts []WriteOption) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: path, header: writeHeader(opts),
		retry: true, ok: []int{http.StatusNoContent, http.StatusOK}})
	return err
}

// setETag takes the answer's ETag, or makes it of the version.
func setETag(meta *Meta, r *response) {
	if meta == nil {
		return
	}
	if tag := r.header.Get("ETag"); tag != "" {
		meta.ETag = tag
	} else if meta.Version > 0 {
		meta.ETag = etagOf(meta.Version)
	}
}

// page is one page of a list.
type page[T any] struct {
	items      []T
	nextCursor string
}

// paginate follows next_cursor from the first page on, yielding every item
// and stopping at the first error. fetch gets one page from a cursor ("" for
// the first).
func paginate[T any](ctx context.Context, fetch func(ctx context.Context, cursor string) (page[T], error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		cursor := ""
		for {
			p, err := fetch(ctx, cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range p.items {
				if !yield(it, nil) {
					return
				}
			}
			if p.nextCursor == "" || p.nextCursor == cursor {
				return
			}
			cursor = p.nextCursor
		}
	}
}

// listQuery is the query of a list page.
func listQuery(cursor string, pageSize int) url.Values {
	q := url.Values{}
	if pageSize > 0 {
		q.Set("limit", strconv.Itoa(pageSize))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return q
}

// fillETags sets the ETag of listed resources from their versions.
func fillETags[T any](items []T, meta func(*T) *Meta) {
	for i := range items {
		m := meta(&items[i])
		m.ETag = etagOf(m.Version)
	}
}

// Healthz returns nil while quotad runs.
func (c *Client) Healthz(ctx context.Context) error {
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/healthz"})
	return err
}

// Readyz returns nil when quotad is ready to serve, else a *Problem
// matching ErrUnavailable that says why. It is not retried.
func (c *Client) Readyz(ctx context.Context) error {
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/readyz"})
	return err
}
