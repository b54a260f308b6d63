package catalogfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Error is one problem with a file: where it is and which field it is about.
type Error struct {
	File    string
	Line    int    // 0 when the problem has no line (the file as a whole)
	Field   string // e.g. plans.pro.limits[1].metric; "" for the file as a whole
	Message string
}

func (e Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Errors is every problem found in a file, by line.
type Errors []Error

func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, err := range e {
		lines[i] = err.Error()
	}
	return strings.Join(lines, "\n")
}

func (e Errors) sort() {
	slices.SortStableFunc(e, func(a, b Error) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return strings.Compare(a.Field, b.Field)
	})
}

// Document is a parsed file: its content and where each field was written.
type Document struct {
	Name  string
	File  *File
	lines map[string]int
	// errs are the problems found while decoding: unknown fields, values
	// of the wrong type, duplicate keys. Validate reports them with its own.
	errs Errors
	// bad holds the fields whose value could not be decoded: they are left
	// unset, and what validation says of them, or of what is under them,
	// would only repeat the decoding error.
	bad map[string]bool
}

// decodedBadly reports whether field, or a field it is under, could not be
// decoded.
func (d *Document) decodedBadly(field string) bool {
	for field != "" {
		if d.bad[field] {
			return true
		}
		field = parentField(field)
	}
	return false
}

// Line returns the line field was written on; for a field the file leaves
// out, the line of the nearest enclosing one that it has.
func (d *Document) Line(field string) int {
	for {
		if l, ok := d.lines[field]; ok {
			return l
		}
		if field == "" {
			return 0
		}
		field = parentField(field)
	}
}

// parentField strips the last ".name" or "[i]" of a field path.
func parentField(field string) string {
	i := strings.LastIndexAny(field, ".[")
	if i < 0 {
		return ""
	}
	return field[:i]
}

// maxNodes bounds the nodes a file may expand to: aliases can make a small
// file stand for a huge tree.
const maxNodes = 1_000_000

// Parse reads a catalog file named name (used in errors). It rejects, as
// Errors, what is not YAML and more than one document: what cannot be read
// at all. Unknown fields, duplicate keys and values of the wrong type are
// kept in the Document, for Validate to report with every other problem of
// the file, so that a file's problems are all reported at once.
func Parse(name string, data []byte) (*Document, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, Errors{{File: name, Message: "the file is empty"}}
		}
		return nil, Errors{syntaxError(name, data, err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, Errors{syntaxError(name, data, err)}
		}
		return nil, Errors{{File: name, Line: extra.Line, Message: "a catalog file holds one YAML document"}}
	}
	d := &decoder{name: name, lines: map[string]int{"": 1}, bad: map[string]bool{}, budget: maxNodes}
	f := &File{}
	top := root.Content[0]
	d.value("", top, reflect.ValueOf(f).Elem())
	// A section written with nothing under it would read as "manage this
	// kind, there are none": with --prune, a commented-out list would
	// delete everything. It has to be written {} to mean that.
	if top.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(top.Content); i += 2 {
			if v := resolve(top.Content[i+1]); isNull(v) {
				k := top.Content[i]
				d.fail(k.Line, k.Value, "must be a mapping; write {} for none")
			}
		}
	}
	if d.budget < 0 {
		// What was read of a file cut short says nothing of the rest.
		d.errs.sort()
		return nil, d.errs
	}
	return &Document{Name: name, File: f, lines: d.lines, errs: d.errs, bad: d.bad}, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError turns the YAML library's error about data into an Error with
// its line.
func syntaxError(name string, data []byte, err error) Error {
	msg := err.Error()
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return Error{File: name, Message: strings.TrimPrefix(msg, "yaml: ")}
	}
	line, _ := strconv.Atoi(m[1])
	if l := problemLine(data, m[2]); l > 0 {
		line = l
	}
	return Error{File: name, Line: line, Message: m[2]}
}

// problemLine returns the line of data where the YAML library finds the
// problem msg, 0 if it cannot tell. The library's own line is often that
// of the mapping the problem is in (an indentation mistake on line 4 is
// "line 1: did not find expected key"), and it exposes no other. The
// first lines of data read without msg up to the line with the mistake,
// and with it from there on: the line is found by bisection.
func problemLine(data []byte, msg string) int {
	var ends []int // ends[i] is the end of line i+1, its newline included
	for i, c := range data {
		if c == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	fails := func(lines int) bool {
		m := yamlLine.FindStringSubmatch(fmt.Sprint(decodeAll(data[:ends[lines-1]])))
		return m != nil && m[2] == msg
	}
	i := sort.Search(len(ends), func(i int) bool { return fails(i + 1) })
	if i == len(ends) {
		return 0
	}
	return i + 1
}

// decodeAll reads every document of data and returns the first error.
func decodeAll(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

type decoder struct {
	name   string
	lines  map[string]int
	errs   Errors
	bad    map[string]bool
	budget int
}

func (d *decoder) fail(line int, field, msg string) {
	d.errs = append(d.errs, Error{File: d.name, Line: line, Field: field, Message: msg})
}

// failValue reports that the value of field could not be decoded.
func (d *decoder) failValue(n *yaml.Node, field, msg string) {
	d.fail(n.Line, field, msg)
	d.bad[field] = true
}

// spend counts a node against the budget and reports whether it may be read.
func (d *decoder) spend(n *yaml.Node) bool {
	d.budget--
	if d.budget == -1 {
		d.fail(n.Line, "", fmt.Sprintf("the file expands to more than %d nodes", maxNodes))
	}
	return d.budget >= 0
}

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names what a node is, for "must be X, got Y".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	if isNull(n) {
		return "null"
	}
	return strconv.Quote(n.Value)
}

var (
	nodeType = reflect.TypeFor[*yaml.Node]()
	timeType = reflect.TypeFor[time.Time]()
)

// value decodes n into v, recording the line of every field.
func (d *decoder) value(field string, n *yaml.Node, v reflect.Value) {
	n = resolve(n)
	if n == nil || !d.spend(n) {
		return
	}
	switch v.Type() {
	case nodeType:
		if !isNull(n) {
			v.Set(reflect.ValueOf(n))
		}
		return
	case timeType:
		t, err := time.Parse(time.RFC3339, n.Value)
		if n.Kind != yaml.ScalarNode || err != nil {
			d.failValue(n, field, "must be an RFC 3339 time, e.g. 2027-01-01T00:00:00Z, got "+describe(n))
			return
		}
		v.Set(reflect.ValueOf(t))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if isNull(n) {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		d.value(field, n, p.Elem())
		v.Set(p)
	case reflect.Struct:
		d.structure(field, n, v)
	case reflect.Map:
		d.mapping(field, n, v)
	case reflect.Slice:
		if isNull(n) {
			return
		}
		if n.Kind != yaml.SequenceNode {
			d.failValue(n, field, "must be a list, got "+describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			f := fmt.Sprintf("%s[%d]", field, i)
			d.lines[f] = item.Line
			d.value(f, item, s.Index(i))
		}
		v.Set(s)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || isNull(n) {
			d.failValue(n, field, "must be a string, got "+describe(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Int64:
		var i int64
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil {
			d.failValue(n, field, "must be an integer, got "+describe(n))
			return
		}
		v.SetInt(i)
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			d.failValue(n, field, "must be true or false, got "+describe(n))
			return
		}
		v.SetBool(b)
	default:
		panic("catalogfile: cannot decode into " + v.Type().String())
	}
}

// keys walks the pairs of a mapping node, reporting a non-mapping, keys
// that are not scalars and duplicate keys, and calls fn for the others.
func (d *decoder) keys(field string, n *yaml.Node, fn func(key *yaml.Node, child string, value *yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		d.failValue(n, field, "must be a mapping, got "+describe(n))
		return
	}
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.fail(k.Line, field, "keys must be strings, got "+describe(k))
			continue
		}
		child := k.Value
		if field != "" {
			child = field + "." + k.Value
		}
		if first, dup := seen[k.Value]; dup {
			d.fail(k.Line, child, fmt.Sprintf("duplicate key (first at line %d)", first))
			continue
		}
		seen[k.Value] = k.Line
		d.lines[child] = k.Line
		fn(k, child, val)
	}
}

func (d *decoder) mapping(field string, n *yaml.Node, v reflect.Value) {
	if isNull(n) {
		return
	}
	m := reflect.MakeMap(v.Type())
	d.keys(field, n, func(k *yaml.Node, child string, val *yaml.Node) {
		e := reflect.New(v.Type().Elem()).Elem()
		if t := e.Type(); t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct && isNull(resolve(val)) {
			// "api_calls:" with nothing under it: an entry of defaults.
			e.Set(reflect.New(t.Elem()))
		} else {
			d.value(child, val, e)
		}
		m.SetMapIndex(reflect.ValueOf(k.Value), e)
	})
	v.Set(m)
}

func (d *decoder) structure(field string, n *yaml.Node, v reflect.Value) {
	if isNull(n) {
		return
	}
	t := v.Type()
	names := make([]string, t.NumField())
	for i := range names {
		names[i], _, _ = strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
	}
	d.keys(field, n, func(k *yaml.Node, child string, val *yaml.Node) {
		i := slices.Index(names, k.Value)
		if i < 0 {
			d.fail(k.Line, child, "unknown field; known fields: "+strings.Join(names, ", "))
			return
		}
		d.value(child, val, v.Field(i))
	})
}
