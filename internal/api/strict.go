package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// strictCheck finds the first thing, in document order, that quotad refuses
// in data, one syntactically valid JSON value read as type t, although
// encoding/json might take it:
//   - a key that appears twice in one object, at any depth (metadata
//     included): "appears more than once";
//   - a key that names no field exactly (encoding/json folds case, and
//     matches "CUSTOMER" or "coſt"): "is not a known field";
//   - a null where t's field is not tagged nullable:"true", or as an array
//     element or map value: "must not be null";
//   - a value of the wrong type: "must be ...".
//
// It names the value by its path ("limits[1].mode", "metadata.a"). ok is
// false when it finds nothing wrong.
//
// decoded tells that encoding/json decoded data into t without error. Every
// value the walk reaches then has its field's type: encoding/json decoded
// it into that field (the walk stops at the first key that names no field
// exactly, and at a repeated one), and the walk refuses null before it
// looks at a value. So values are not decoded again: what that would
// find, a value of the wrong type, cannot be there (TestStrictCheckDecoded
// and FuzzDecodeRequest check that the answer is the same).
func strictCheck(data []byte, t reflect.Type, decoded bool) (field, message string, ok bool) {
	w := walker{data: data, decoded: decoded}
	if w.value(t) {
		return "", "", false
	}
	return w.field, w.message, true
}

// walker walks a syntactically valid JSON text. It never panics on an
// invalid one (it reports a problem or stops instead), but it only judges
// valid ones.
type walker struct {
	data []byte
	i    int
	path []pathSegment
	// decoded skips the type check of values (see strictCheck).
	decoded bool

	field, message string
}

// pathSegment is an object key or, when key is unset, an array index.
type pathSegment struct {
	key   string
	index int
	isKey bool
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// fail records a problem at the current path; it returns false so that a
// caller can return it.
func (w *walker) fail(message string) bool {
	var b strings.Builder
	for _, s := range w.path {
		if !s.isKey {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.key)
	}
	w.field, w.message = b.String(), message
	return false
}

func (w *walker) skipSpace() {
	for w.i < len(w.data) {
		switch w.data[w.i] {
		case ' ', '\t', '\r', '\n':
			w.i++
		default:
			return
		}
	}
}

// peek returns the next byte after white space, or 0 at the end.
func (w *walker) peek() byte {
	w.skipSpace()
	if w.i < len(w.data) {
		return w.data[w.i]
	}
	return 0
}

// isNull reports whether the next value is null, and skips it if so.
func (w *walker) isNull() bool {
	if w.peek() == 'n' && bytes.HasPrefix(w.data[w.i:], []byte("null")) {
		w.i += 4
		return true
	}
	return false
}

// skipValue skips the next value and returns it.
func (w *walker) skipValue() []byte {
	w.skipSpace()
	start := w.i
	depth := 0
	for w.i < len(w.data) {
		switch c := w.data[w.i]; c {
		case '"':
			w.skipString()
			if depth == 0 {
				return w.data[start:w.i]
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return w.data[start:w.i]
			}
			depth--
			if depth == 0 {
				w.i++
				return w.data[start:w.i]
			}
		case ',', ' ', '\t', '\r', '\n':
			if depth == 0 {
				return w.data[start:w.i]
			}
		}
		w.i++
	}
	return w.data[start:w.i]
}

// skipString skips the string starting at the current quote.
func (w *walker) skipString() {
	for w.i++; w.i < len(w.data); w.i++ {
		switch w.data[w.i] {
		case '\\':
			w.i++
		case '"':
			w.i++
			return
		}
	}
}

// key reads an object key and the colon after it, and returns the key
// decoded. ok is false on anything but a string.
func (w *walker) key() (string, bool) {
	if w.peek() != '"' {
		return "", false
	}
	start := w.i
	w.skipString()
	raw := w.data[start:w.i]
	if w.peek() != ':' {
		return "", false
	}
	w.i++
	if bytes.IndexByte(raw, '\\') < 0 && len(raw) >= 2 {
		return string(raw[1 : len(raw)-1]), true
	}
	var k string
	if json.Unmarshal(raw, &k) != nil {
		return "", false
	}
	return k, true
}

// members walks the members of the object at the current position: member
// is called with each key, the walker positioned on its value, and returns
// false to stop. The object's keys must be unique.
func (w *walker) members(member func(key string) bool) bool {
	w.i++ // {
	var seen map[string]bool
	for {
		switch w.peek() {
		case '}':
			w.i++
			return true
		case ',':
			w.i++
		case 0:
			return true // invalid JSON: not ours to judge
		}
		k, ok := w.key()
		if !ok {
			return true
		}
		w.path = append(w.path, pathSegment{key: k, isKey: true})
		if seen[k] {
			return w.fail("appears more than once")
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[k] = true
		if !member(k) {
			return false
		}
		w.path = w.path[:len(w.path)-1]
	}
}

// elements walks the elements of the array at the current position, as
// members does.
func (w *walker) elements(element func() bool) bool {
	w.i++ // [
	for n := 0; ; n++ {
		switch w.peek() {
		case ']':
			w.i++
			return true
		case ',':
			w.i++
		case 0:
			return true
		}
		w.path = append(w.path, pathSegment{index: n})
		if !element() {
			return false
		}
		w.path = w.path[:len(w.path)-1]
	}
}

// value walks the next value as type t.
func (w *walker) value(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	kind := t.Kind()
	switch {
	case t == rawMessageType:
		return w.free()
	case reflect.PointerTo(t).Implements(jsonUnmarshaler) ||
		(kind != reflect.Struct && kind != reflect.Map && kind != reflect.Slice):
		v := w.skipValue()
		if w.decoded {
			return true
		}
		if json.Unmarshal(v, reflect.New(t).Interface()) != nil {
			return w.fail("must be " + describe(t))
		}
		return true
	case kind == reflect.Slice:
		if w.peek() != '[' {
			w.skipValue()
			return w.fail("must be a JSON array")
		}
		return w.elements(func() bool {
			if w.isNull() {
				return w.fail("must not be null")
			}
			return w.value(t.Elem())
		})
	}
	if w.peek() != '{' {
		w.skipValue()
		return w.fail("must be a JSON object")
	}
	return w.members(func(key string) bool {
		var elem reflect.Type
		nullable := false
		if kind == reflect.Struct {
			f, known := fieldByJSONName(t, key)
			if !known {
				return w.fail("is not a known field")
			}
			elem, nullable = f.Type, isNullable(f)
		} else {
			elem = t.Elem() // a map's values, never nullable
		}
		if w.isNull() {
			if nullable {
				return true
			}
			return w.fail("must not be null")
		}
		return w.value(elem)
	})
}

// free walks free-form JSON (metadata), where only repeated keys are
// wrong.
func (w *walker) free() bool {
	switch w.peek() {
	case '{':
		return w.members(func(string) bool { return w.free() })
	case '[':
		return w.elements(w.free)
	}
	w.skipValue()
	return true
}

// isNullable reports whether a request field may be sent as null: it is
// tagged nullable:"true".
func isNullable(f reflect.StructField) bool { return f.Tag.Get("nullable") == "true" }
