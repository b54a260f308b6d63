package forwardauth

import (
	"net/http"
	"testing"
)

// benchRoutes is the documented route table, with keys in the file.
const benchRoutes = `
headers:
  api_key: X-Api-Key
api_keys:
  sk-acme: acme
routes:
  - match: POST /v1/completions
    metric: llm_calls
    cost: 10
  - match: /v1/exports/
    metric: exports
  - match: GET /v1/items/{id}
    metric: reads
  - match: /v1/
    metric: api_calls
unmatched: deny
`

// BenchmarkResolveRoute resolves requests whose paths are already
// canonical, the common case on a gateway's request path.
func BenchmarkResolveRoute(b *testing.B) {
	r, err := Parse([]byte(benchRoutes))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, method, uri, want string }{
		{"exact", "POST", "/v1/completions", "llm_calls"},
		{"prefix", "GET", "/v1/exports/7/file?page=2", "exports"},
		{"wildcard", "GET", "/v1/items/42", "reads"},
		// Not canonical: decoded, folded and trimmed first.
		{"folded", "GET", "/V1/Items/%34%32/", "reads"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req := Request{Method: "GET", Header: http.Header{
				"X-Api-Key":          {"sk-acme"},
				"X-Forwarded-Method": {bc.method},
				"X-Forwarded-Uri":    {bc.uri},
			}}
			b.ReportAllocs()
			for b.Loop() {
				c, err := r.Resolve(req)
				if err != nil || c.Metric != bc.want {
					b.Fatalf("Resolve = %+v, %v; want %s", c, err, bc.want)
				}
			}
		})
	}
}
