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
	"sync"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/tiers"
)

// MaxBodyBytes is the largest request body quotad reads.
const MaxBodyBytes = 64 << 10

// decodeJSON decodes body, one JSON object, strictly into dst, with
// go-json-experiment/json: a key must name a field exactly (case
// included) and appear once per object, at any depth (metadata included),
// and null is refused except for fields tagged nullable:"true" (see
// decodeNull). Every error is a 400 about one field, named by its path
// ("limits[1].mode"), for the first problem in the body.
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
	if err := jsonv2.Unmarshal(body, dst, decodeOptions(reflect.TypeOf(dst))); err != nil {
		// A body that is not one JSON value, even further on than the
		// problem the library stopped at, is told so first (the library
		// refuses data after the value as it refuses bad syntax); and the
		// library's decoding of a struct reads keys as values, so that "{{"
		// ends early to it: the text is judged by reading it as JSON text.
		text := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
		if _, terr := text.ReadValue(); terr != nil {
			err = terr
		} else if !atEnd(text) {
			return invalid("", "the request body must hold exactly one JSON object")
		}
		return decodeError(body, reflect.TypeOf(dst), err)
	}
	return nil
}

// atEnd reports whether nothing but white space follows the value dec
// read.
func atEnd(dec *jsontext.Decoder) bool {
	_, err := dec.ReadToken()
	return err == io.EOF
}

// decodeOptionsByType caches decodeOptions: the null check is a function
// of the request type.
var decodeOptionsByType sync.Map // reflect.Type -> jsonv2.Options

// decodeOptions are the options decodeJSON decodes into a t with. Names
// are matched exactly and at most once per object by default. The body is
// valid UTF-8 when they are used: allowing invalid UTF-8 only lets an
// escaped lone surrogate ("\ud800") through as U+FFFD, as encoding/json
// did.
func decodeOptions(t reflect.Type) jsonv2.Options {
	if o, ok := decodeOptionsByType.Load(t); ok {
		return o.(jsonv2.Options)
	}
	o := jsonv2.JoinOptions(
		jsonv2.RejectUnknownMembers(true),
		jsontext.AllowInvalidUTF8(true),
		jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, v any) error {
			return decodeNull(dec, t, v)
		})),
	)
	decodeOptionsByType.Store(t, o)
	return o
}

// errNull is the refusal of a null where quotad takes none.
var errNull = errors.New("must not be null")

// decodeNull is called before every value decoded into root: it takes a
// null where root has a field tagged nullable:"true" (the library would
// take null anywhere, as the zero value), refuses any other, and leaves
// what is not null to the library.
func decodeNull(dec *jsontext.Decoder, root reflect.Type, v any) error {
	if dec.PeekKind() != 'n' {
		return jsonv2.SkipFunc
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	ptr := dec.StackPointer()
	if !nullable(root, ptr) {
		return &jsonv2.SemanticError{JSONPointer: ptr, Err: errNull}
	}
	// What the library makes of null: a type's own reading of it (metadata
	// keeps "null"), else the zero value.
	if u, ok := v.(json.Unmarshaler); ok {
		return u.UnmarshalJSON([]byte("null"))
	}
	reflect.ValueOf(v).Elem().SetZero()
	return nil
}

// nullable reports whether the value at ptr of a t is a field tagged
// nullable:"true". Array elements and map values never are.
func nullable(t reflect.Type, ptr jsontext.Pointer) bool {
	var f reflect.StructField
	for name := range ptr.Tokens() {
		f = reflect.StructField{} // the value is not a field unless found below
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			var known bool
			if f, known = fieldByJSONName(t, name); !known {
				return false
			}
			t = f.Type
		case reflect.Slice, reflect.Map:
			t = t.Elem()
		default:
			return false
		}
	}
	return isNullable(f)
}

// decodeError explains a decoding error in terms of the request's fields.
func decodeError(body []byte, t reflect.Type, err error) error {
	var semantic *jsonv2.SemanticError
	var syntactic *jsontext.SyntacticError
	switch {
	case errors.As(err, &syntactic) && syntactic.Err == jsontext.ErrDuplicateName:
		if at, want, ok := misfit(t, syntactic.JSONPointer); ok {
			return invalid(fieldPath(body, at), "must be "+describe(want))
		}
		return invalid(fieldPath(body, syntactic.JSONPointer), "appears more than once")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("", "the request body is not valid JSON (it ends early)")
	case syntactic != nil:
		return invalid("", fmt.Sprintf("the request body is not valid JSON (at byte %d)", syntactic.ByteOffset+1))
	case !errors.As(err, &semantic) || semantic.JSONPointer == "":
	case semantic.Err == errNull:
		return invalid(fieldPath(body, semantic.JSONPointer), errNull.Error())
	case semantic.Err == jsonv2.ErrUnknownName:
		return invalid(fieldPath(body, semantic.JSONPointer), "is not a known field")
	case semantic.GoType != nil:
		return invalid(fieldPath(body, semantic.JSONPointer), "must be "+describe(semantic.GoType))
	}
	return invalid("", "the request body does not fit the expected shape")
}

// misfit finds, for a repeated key at ptr in a value of t, the value on
// the way to it that t has no room for: the library reads a value of the
// wrong type to its end before it refuses it, and finds a repeated key in
// it first. It returns that value's pointer and the type it should have.
// Free-form JSON (metadata) has room for anything.
func misfit(t reflect.Type, ptr jsontext.Pointer) (jsontext.Pointer, reflect.Type, bool) {
	var at jsontext.Pointer
	for name := range ptr.Tokens() {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == rawMessageType {
			return "", nil, false
		}
		switch _, err := strconv.ParseUint(name, 10, 0); {
		case reflect.PointerTo(t).Implements(jsonUnmarshaler):
			return at, t, true
		case t.Kind() == reflect.Struct:
			f, known := fieldByJSONName(t, name)
			if !known {
				return at, t, err == nil // an index: an array in place of an object
			}
			t = f.Type
		case t.Kind() == reflect.Map:
			t = t.Elem()
		case t.Kind() == reflect.Slice && err == nil:
			t = t.Elem()
		default:
			return at, t, true
		}
		at = at.AppendToken(name)
	}
	return "", nil, false
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// fieldPath names the value at ptr in body, a JSON text valid up to that
// value, as quotad names fields: "limits[1].mode", "metadata.a". The
// pointer alone would not do: "/capacity/1" may be an array's element or
// a member named "1".
func fieldPath(body []byte, ptr jsontext.Pointer) string {
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	var b strings.Builder
	for name := range ptr.Tokens() {
		if dec.PeekKind() == '[' {
			if _, err := dec.ReadToken(); err == nil {
				n, _ := strconv.Atoi(name)
				for range n {
					dec.SkipValue()
				}
				b.WriteString("[" + strconv.Itoa(n) + "]")
				continue
			}
		}
		if dec.PeekKind() == '{' {
			dec.ReadToken()
			for {
				tok, err := dec.ReadToken()
				if err != nil || tok.Kind() != '"' || tok.String() == name {
					break
				}
				dec.SkipValue()
			}
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(name)
	}
	return b.String()
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// fieldByJSONName returns the field of struct t that the key name names
// exactly, as the library matches names.
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

// isNullable reports whether a request field may be sent as null: it is
// tagged nullable:"true".
func isNullable(f reflect.StructField) bool { return f.Tag.Get("nullable") == "true" }

// describe names the JSON shape of a Go type for a client.
func describe(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[time.Time]():
		return "an RFC 3339 time, e.g. 2026-12-01T00:00:00Z"
	case t == rawMessageType:
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
