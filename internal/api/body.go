package api

import (
	"io"
	"sync"

	"github.com/labstack/echo/v4"
)

// Request bodies are read into pooled buffers: a check reads one per
// request, and io.ReadAll behind an http.MaxBytesReader allocated three
// times for it.
const (
	bodyBufferSize = 1 << 10  // what a buffer starts with: a check body is ~100 bytes
	maxPooledBody  = 16 << 10 // larger buffers (admin bodies) are left to the GC
)

var bodyPool = sync.Pool{New: func() any {
	b := make([]byte, 0, bodyBufferSize)
	return &b
}}

// readBody reads the request body, after checking its declared type and
// size. It answers, in this order: 415 unless the body is declared as
// JSON, 413 when it exceeds MaxBodyBytes (by Content-Length or by what is
// sent), and 400 when it cannot be read. The body lives in a pooled buffer
// that releaseBody takes back: nothing may keep a reference into it.
func readBody(c echo.Context) (*[]byte, error) {
	req := c.Request()
	if !isJSON(req.Header.Get(echo.HeaderContentType)) {
		return nil, echo.ErrUnsupportedMediaType
	}
	if req.ContentLength > MaxBodyBytes {
		return nil, echo.ErrStatusRequestEntityTooLarge
	}
	bp := bodyPool.Get().(*[]byte)
	b := (*bp)[:0]
	if req.Body != nil {
		// Read at most MaxBodyBytes+1 bytes: one more is too many.
		for len(b) <= MaxBodyBytes {
			if len(b) == cap(b) {
				b = append(b, 0)[:len(b)] // grow
			}
			n, err := req.Body.Read(b[len(b):min(cap(b), MaxBodyBytes+1)])
			b = b[:len(b)+n]
			if err == io.EOF {
				break
			}
			if err != nil {
				releaseBody(bp, b)
				return nil, invalid("", "the request body could not be read")
			}
		}
	}
	*bp = b
	if len(b) > MaxBodyBytes {
		releaseBody(bp, b)
		return nil, echo.ErrStatusRequestEntityTooLarge
	}
	return bp, nil
}

// releaseBody returns a buffer readBody gave out, holding b, to the pool.
func releaseBody(bp *[]byte, b []byte) {
	if cap(b) > maxPooledBody {
		return
	}
	*bp = b[:0]
	bodyPool.Put(bp)
}

// decodeBody reads a JSON object into dst: readBody's answers, then 400
// when the body is not one JSON object that fits dst (see decodeJSON).
func decodeBody(c echo.Context, dst any) error {
	bp, err := readBody(c)
	if err != nil {
		return err
	}
	defer releaseBody(bp, *bp)
	return decodeJSON(*bp, dst)
}
