package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/tiers"
)

// MaxBodyBytes is the largest request body quotad reads.
const MaxBodyBytes = 64 << 10

// decodeJSON decodes body, one JSON object, strictly into dst: beyond what
// encoding/json checks (syntax, types, unknown fields), keys must name
// fields exactly and appear once per object, and null is refused except
// for fields tagged nullable:"true" (see strictCheck). Every error is a 400
// about one field.
func decodeJSON(body []byte, dst any) error {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return invalid("", "the request body is empty; send a JSON object")
	}
	if trimmed[0] != '{' {
		return invalid("", "the request body must be a JSON object")
	}
	if !utf8.Valid(body) {
		return invalid("", "the request body must be UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		// encoding/json names neither array indexes nor the parents of an
		// unknown field, and nothing at all for a bad time: find the field.
		var syntax *json.SyntaxError
		if !errors.As(err, &syntax) && !errors.Is(err, io.ErrUnexpectedEOF) {
			if field, message, ok := strictCheck(body, reflect.TypeOf(dst), false); ok {
				return invalid(field, message)
			}
		}
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalid("", "the request body must hold exactly one JSON object")
	}
	// encoding/json takes what quotad refuses: keys equal to a field's name
	// only under case folding ("CUSTOMER", "coſt"), repeated keys (the last
	// wins) and null (which leaves a Go value as it is).
	if field, message, ok := strictCheck(body, reflect.TypeOf(dst), true); ok {
		return invalid(field, message)
	}
	return nil
}

// jsonError explains a decoding error in terms of the request's fields.
func jsonError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return invalid("", fmt.Sprintf("the request body is not valid JSON (at byte %d)", syntax.Offset))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("", "the request body is not valid JSON (it ends early)")
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "body"
		}
		return invalid(field, "must be "+describe(typ.Type))
	}
	// encoding/json reports unknown fields only in its message.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return invalid(strings.Trim(name, `"`), "is not a known field")
	}
	var timeErr *time.ParseError
	if errors.As(err, &timeErr) {
		return invalid("", "times must be RFC 3339, e.g. 2026-12-01T00:00:00Z")
	}
	return invalid("", "the request body does not fit the expected shape")
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// fieldByJSONName returns the field of struct t that the key name names
// exactly. (encoding/json would also take a key equal under case folding;
// quotad does not.)
func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// describe names the JSON shape of a Go type for a client.
func describe(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[time.Time]():
		return "an RFC 3339 time, e.g. 2026-12-01T00:00:00Z"
	case t == reflect.TypeFor[json.RawMessage]():
		return "JSON"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a JSON array"
	}
	return "a JSON object"
}

// isJSON reports whether a Content-Type is application/json (parameters
// such as charset aside).
func isJSON(ct string) bool {
	if ct == "" {
		return false
	}
	// What clients send, without parameters, needs no parsing (which
	// allocates a map for them): ParseMediaType folds the type to lower case
	// and would take it too.
	if asciiEqualFold(ct, echo.MIMEApplicationJSON) {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// asciiEqualFold reports whether s and t are equal under ASCII case
// folding. (strings.EqualFold folds Unicode too: it would take
// "application/jſon", which ParseMediaType refuses.)
func asciiEqualFold(s, t string) bool {
	if len(s) != len(t) {
		return false
	}
	for i := 0; i < len(s); i++ {
		a, b := s[i], t[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// param returns a path parameter, percent-decoded exactly once. echo routes
// on the raw path only when it differs from the decoded one (an encoded
// slash, say); otherwise its parameters are decoded already, and decoding
// them again would turn "a%2541" into "aA".
func param(c echo.Context, name string) string {
	v := c.Param(name)
	if c.Request().URL.RawPath == "" {
		return v
	}
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

// wholeSegments reports whether no path parameter holds a slash: a path
// with more segments than its route is a 404. echo lets a route's last
// parameter take the rest of the path, so that /v1/metrics/a/b would reach
// /v1/metrics/:metric with "a/b"; a parameter never holds a slash of the
// path itself (an encoded one, %2F, stays encoded in the raw value and is
// judged by the handler).
func wholeSegments(c echo.Context) bool {
	names := c.ParamNames()
	for i, v := range c.ParamValues() {
		if i < len(names) && names[i] == "*" {
			continue // a wildcard route takes the rest of the path
		}
		if strings.Contains(v, "/") {
			return false
		}
	}
	return true
}

// Page sizes.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// cursor encoding: opaque to clients, versioned for us.
const cursorPrefix = "c1:"

func encodeCursor(after string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + after))
}

func decodeCursor(s string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return "", false
	}
	after, ok := strings.CutPrefix(string(b), cursorPrefix)
	if !ok || after == "" || len(after) > 256 || !utf8.ValidString(after) || strings.IndexByte(after, 0) >= 0 {
		return "", false
	}
	return after, true
}

// pageParams reads limit and cursor from the query.
func pageParams(c echo.Context) (limit int, after string, err error) {
	limit = defaultPageSize
	if v := c.QueryParam("limit"); v != "" || c.QueryParams().Has("limit") {
		n, convErr := strconv.Atoi(v)
		if convErr != nil || n < 1 || n > maxPageSize {
			return 0, "", invalid("limit", fmt.Sprintf("must be an integer between 1 and %d", maxPageSize))
		}
		limit = n
	}
	if c.QueryParams().Has("cursor") {
		a, ok := decodeCursor(c.QueryParam("cursor"))
		if !ok {
			return 0, "", invalid("cursor", "is not a cursor this service returned")
		}
		after = a
	}
	return limit, after, nil
}

// page reads a tiers.Page from the query; valid reports whether a decoded
// cursor names a possible position for this list.
func page(c echo.Context, valid func(string) bool) (tiers.Page, error) {
	limit, after, err := pageParams(c)
	if err != nil {
		return tiers.Page{}, err
	}
	if after != "" && !valid(after) {
		return tiers.Page{}, invalid("cursor", "is not a cursor this service returned")
	}
	return tiers.Page{Limit: limit, After: after}, nil
}

// boolQuery reads the query parameter name as true or false (false when
// it is absent); anything else is a 400 about it.
func boolQuery(c echo.Context, name string) (bool, error) {
	switch v := c.QueryParam(name); {
	case v == "true":
		return true, nil
	case v == "false", v == "" && !c.QueryParams().Has(name):
		return false, nil
	}
	return false, invalid(name, "must be true or false")
}

// ifMatch parses the If-Match header. Only strong entity tags can match
// (RFC 9110 13.1.1); anything unparseable matches nothing.
func ifMatch(c echo.Context) tiers.Precondition {
	values := c.Request().Header.Values(headerIfMatch)
	if len(values) == 0 {
		return tiers.Precondition{}
	}
	p := tiers.Precondition{Set: true}
	for _, v := range values {
		for _, tag := range strings.Split(v, ",") {
			tag = strings.TrimSpace(tag)
			if tag == "*" {
				p.Any = true
				continue
			}
			if len(tag) < 2 || tag[0] != '"' || tag[len(tag)-1] != '"' {
				continue // weak or malformed: never matches
			}
			if n, err := strconv.ParseInt(tag[1:len(tag)-1], 10, 64); err == nil {
				p.Versions = append(p.Versions, n)
			}
		}
	}
	return p
}

// etag is the strong entity tag of a resource version.
func etag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }

// writeJSONBody encodes v as JSON onto w.
func writeJSONBody(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	return enc.Encode(v)
}

// respond writes v as a JSON response.
func respond(c echo.Context, status int, v any) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	c.Response().WriteHeader(status)
	return writeJSONBody(c.Response(), v)
}

// respondResource writes a versioned resource with its ETag: 201 when it
// was created (with Location, the request's path), else 200.
func respondResource(c echo.Context, created bool, version int64, v any) error {
	return respondResourceAt(c, created, version, v, c.Request().URL.Path)
}

// respondResourceAt is respondResource for a resource whose address is
// location, where the path alone does not name it.
func respondResourceAt(c echo.Context, created bool, version int64, v any, location string) error {
	c.Response().Header().Set(headerETag, etag(version))
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		c.Response().Header().Set(echo.HeaderLocation, location)
	}
	return respond(c, status, v)
}
