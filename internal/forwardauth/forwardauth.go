// Package forwardauth decides, from the headers a gateway forwards (nginx
// auth_request, Traefik ForwardAuth, Caddy forward_auth, Envoy ext_authz),
// which check a request stands for: the customer, from a customer-id header
// or an API key mapped to a customer, the metric and cost, from headers or
// from a table of the original request's routes, and the subject, from a
// header the rules name. It reads its rules from
// one optional YAML file and knows nothing of HTTP servers or of quotas.
package forwardauth

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/quotad/quotad/internal/tiers"
)

// The default header names.
const (
	DefaultCustomerHeader = "X-Quotad-Customer"
	DefaultMetricHeader   = "X-Quotad-Metric"
	DefaultCostHeader     = "X-Quotad-Cost"
	DefaultMethodHeader   = "X-Forwarded-Method"
	DefaultURIHeader      = "X-Forwarded-Uri"
)

// MaxCost is the largest cost a header or a route may give, as for a check.
const MaxCost = 1_000_000_000

// digestPrefix marks an API key given as the hex SHA-256 of the key.
const digestPrefix = "sha256:"

// File is the configuration file's shape. Every field is optional.
type File struct {
	Headers Headers `yaml:"headers"`
	// APIKeys maps each API key, as the client sends it or as
	// "sha256:<hex of its SHA-256>", to a customer id.
	APIKeys map[string]string `yaml:"api_keys"`
	// Routes decide metric and cost from the original request; when there
	// are any, the metric and cost headers are not read.
	Routes []RouteSpec `yaml:"routes"`
	// Unmatched is what a request that matches no route gets: "deny" (the
	// default; ErrNoRoute) or "allow" (no check at all).
	Unmatched string `yaml:"unmatched"`
	// Case is how routes match the case of a path: "insensitive" (the
	// default, as Express and ASP.NET route: "/V1/x" is "/v1/x") or
	// "sensitive", for an upstream that tells them apart.
	Case string `yaml:"case"`
}

// Headers names the headers read. Empty names take the defaults; APIKey
// has none: without it the customer comes from the customer header.
type Headers struct {
	Customer string `yaml:"customer"`
	Metric   string `yaml:"metric"`
	Cost     string `yaml:"cost"`
	// APIKey names the header holding the client's API key. When set, the
	// customer comes from the key and the customer header is not read: from
	// APIKeys first, else from the keys quotad issued (Call.APIKey).
	APIKey string `yaml:"api_key"`
	// Subject names the header holding the check's subject (who within
	// the customer: an end user, an IP), which limits per subject count
	// apart. It has no default: a client must not choose its own subject,
	// so the header is read only when the gateway is said to set it.
	// Without it (or when the request has none), a check by a key quotad
	// issued counts for the key's id.
	Subject string `yaml:"subject"`
	// Method and URI name the headers holding the original request's method
	// and request URI, for the route table.
	Method string `yaml:"method"`
	URI    string `yaml:"uri"`
}

// RouteSpec is one entry of the route table.
type RouteSpec struct {
	// Match is a net/http ServeMux pattern without a host: "[METHOD ]/path",
	// where a path ending in "/" matches everything below it, {name}
	// matches one segment and {name...} the rest; GET also matches HEAD.
	// The most specific pattern wins. The path must be canonical (see
	// canonicalPath), but for the trailing slash of a prefix, and is
	// matched against the request's canonical path: a trailing slash is
	// not significant there, so {$} ends no path but "/{$}".
	Match string `yaml:"match"`
	// Metric is what the route's requests count; it may be left out on a
	// route that requires a feature, which then counts nothing.
	Metric string `yaml:"metric"`
	// Cost defaults to 1.
	Cost *int64 `yaml:"cost"`
	// Feature, when set, is a feature the customer must be granted (see
	// tiers.Account.Feature): without it the request is refused before
	// anything is counted.
	Feature string `yaml:"feature"`
}

// Rules are a parsed configuration, ready to resolve requests. A Rules is
// safe for concurrent use.
type Rules struct {
	headers        Headers
	keys           map[[sha256.Size]byte]string
	mux            *http.ServeMux
	routes         map[string]route // by the pattern given to mux
	allowUnmatched bool
	// fold is true when routes match case-insensitively: patterns and
	// paths are matched in lower case.
	fold bool
}

type route struct {
	metric  string
	cost    int64
	feature string
	match   string // the pattern as the file wrote it
}

// Default returns the rules without a file: customer, metric and cost from
// the X-Quotad-* headers.
func Default() *Rules {
	r, err := fromFile(File{})
	if err != nil {
		panic(err) // the empty file is valid
	}
	return r
}

// Load reads the rules from the YAML file at path.
func Load(path string) (*Rules, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("forward-auth config: %w", err)
	}
	r, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("forward-auth config %s: %w", path, err)
	}
	return r, nil
}

// Parse parses rules from YAML. Unknown fields, duplicate keys and more than
// one document are errors, so that a typo stops quotad at start-up.
func Parse(data []byte) (*Rules, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err == nil {
		// yaml's own message names the Go type ("field api_kye not found
		// in type forwardauth.Headers"), not the file's section.
		if err := unknownFields(&doc, reflect.TypeOf(File{}), ""); err != nil {
			return nil, err
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("want one YAML document")
	}
	return fromFile(f)
}

// unknownFields returns an error for the first key of n, a node read into
// a value of type t at path (such as "headers" or "routes[1]"; "" for the
// top level), that t has no field for: it names the key, its line, the
// section and the keys allowed there.
func unknownFields(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := unknownFields(c, t, path); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		if t.Kind() != reflect.Slice {
			return nil // yaml's decoder reports the type mismatch
		}
		for i, c := range n.Content {
			if err := unknownFields(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		if t.Kind() != reflect.Struct {
			return nil // maps take any key
		}
		fields := map[string]reflect.Type{}
		var names []string
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if name != "" && name != "-" {
				fields[name] = t.Field(i).Type
				names = append(names, name)
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ft, ok := fields[k.Value]
			if !ok {
				where := "at the top level"
				if path != "" {
					where = "in " + path
				}
				return fmt.Errorf("line %d: unknown field %q %s: want one of %s", k.Line, k.Value, where, strings.Join(names, ", "))
			}
			sub := k.Value
			if path != "" {
				sub = path + "." + k.Value
			}
			if err := unknownFields(v, ft, sub); err != nil {
				return err
			}
		}
	}
	return nil
}

func fromFile(f File) (*Rules, error) {
	h := f.Headers
	for _, field := range []struct {
		name string
		v    *string
		def  string
	}{
		{"customer", &h.Customer, DefaultCustomerHeader},
		{"metric", &h.Metric, DefaultMetricHeader},
		{"cost", &h.Cost, DefaultCostHeader},
		{"api_key", &h.APIKey, ""},
		{"subject", &h.Subject, ""},
		{"method", &h.Method, DefaultMethodHeader},
		{"uri", &h.URI, DefaultURIHeader},
	} {
		if *field.v == "" {
			*field.v = field.def
			continue
		}
		if !validHeaderName(*field.v) {
			return nil, fmt.Errorf("headers.%s: %q is not a header name", field.name, *field.v)
		}
		*field.v = http.CanonicalHeaderKey(*field.v)
	}
	r := &Rules{headers: h, keys: map[[sha256.Size]byte]string{}, routes: map[string]route{}}

	if h.APIKey == "" && len(f.APIKeys) > 0 {
		return nil, errors.New("api_keys: set headers.api_key, the header that carries them")
	}
	for key, customer := range f.APIKeys {
		d, err := keyDigest(key)
		if err != nil {
			return nil, fmt.Errorf("api_keys: %w", err)
		}
		if !tiers.ValidCustomerID(customer) {
			return nil, fmt.Errorf("api_keys: customer %q is not a valid customer id", customer)
		}
		if other, ok := r.keys[d]; ok && other != customer {
			return nil, fmt.Errorf("api_keys: one key maps to both %q and %q", other, customer)
		}
		r.keys[d] = customer
	}

	switch f.Unmatched {
	case "", "deny":
	case "allow":
		r.allowUnmatched = true
	default:
		return nil, fmt.Errorf("unmatched: want deny or allow, got %q", f.Unmatched)
	}
	if f.Unmatched != "" && len(f.Routes) == 0 {
		return nil, errors.New("unmatched: there are no routes")
	}
	switch f.Case {
	case "", "insensitive":
		r.fold = true
	case "sensitive":
	default:
		return nil, fmt.Errorf("case: want insensitive or sensitive, got %q", f.Case)
	}
	if f.Case != "" && len(f.Routes) == 0 {
		return nil, errors.New("case: there are no routes")
	}
	if len(f.Routes) > 0 {
		r.mux = http.NewServeMux()
	}
	for i, spec := range f.Routes {
		pattern, rt, err := addRoute(r.mux, spec, r.fold)
		if err != nil {
			return nil, fmt.Errorf("routes[%d]: %w", i, err)
		}
		r.routes[pattern] = rt
	}
	return r, nil
}

// keyDigest returns the SHA-256 of an api_keys entry: given, or computed.
func keyDigest(key string) ([sha256.Size]byte, error) {
	var d [sha256.Size]byte
	hexDigest, isDigest := strings.CutPrefix(key, digestPrefix)
	if !isDigest {
		if key == "" {
			return d, errors.New("an empty key")
		}
		return sha256.Sum256([]byte(key)), nil
	}
	b, err := hex.DecodeString(hexDigest)
	if err != nil || len(b) != sha256.Size {
		return d, fmt.Errorf("%.20s...: want sha256: and 64 hex digits", key)
	}
	copy(d[:], b)
	return d, nil
}

// addRoute registers spec's pattern on mux, in lower case when fold is
// true, and returns the pattern registered; it turns ServeMux's panics on
// bad or conflicting patterns into errors.
func addRoute(mux *http.ServeMux, spec RouteSpec, fold bool) (pattern string, rt route, err error) {
	switch {
	case spec.Metric == "" && spec.Feature == "":
		return "", rt, errors.New("want a metric, a feature or both")
	case spec.Metric != "" && !tiers.ValidKey(spec.Metric):
		return "", rt, fmt.Errorf("metric %q: must match ^[a-z0-9][a-z0-9_.-]{0,62}$", spec.Metric)
	case spec.Feature != "" && !tiers.ValidKey(spec.Feature):
		return "", rt, fmt.Errorf("feature %q: must match ^[a-z0-9][a-z0-9_.-]{0,62}$", spec.Feature)
	case spec.Metric == "" && spec.Cost != nil:
		return "", rt, errors.New("cost: the route counts no metric")
	}
	rt = route{metric: spec.Metric, cost: 1, feature: spec.Feature, match: spec.Match}
	if spec.Cost != nil {
		if *spec.Cost < 1 || *spec.Cost > MaxCost {
			return "", rt, fmt.Errorf("cost %d: want 1 to %d", *spec.Cost, MaxCost)
		}
		rt.cost = *spec.Cost
	}
	_, path, _ := strings.Cut(spec.Match, " ")
	if !strings.HasPrefix(strings.TrimSpace(path), "/") && !strings.HasPrefix(spec.Match, "/") {
		return "", rt, fmt.Errorf("match %q: want [METHOD ]/path", spec.Match)
	}
	start := strings.IndexByte(spec.Match, '/')
	path = spec.Match[start:]
	if err := canonicalPattern(path); err != nil {
		return "", rt, fmt.Errorf("match %q: %w", spec.Match, err)
	}
	pattern = spec.Match
	if fold {
		pattern = spec.Match[:start] + lowerASCII(path)
	}
	defer func() {
		if p := recover(); p != nil {
			msg := fmt.Sprint(p)
			if strings.Contains(msg, "conflicts with") {
				msg = "matches the same requests as an earlier route, with none more specific"
			}
			err = fmt.Errorf("match %q: %s", spec.Match, msg)
		}
	}()
	mux.Handle(pattern, http.NotFoundHandler())
	return pattern, rt, nil
}

// canonicalPattern returns an error when the path of a pattern could
// never be a canonical path (see canonicalPath), wildcards and a prefix's
// trailing slash aside.
func canonicalPattern(path string) error {
	if path == "/{$}" {
		return nil // the root alone
	}
	p, ok := strings.CutSuffix(path, "/{$}")
	if ok {
		return fmt.Errorf("a trailing slash is not significant in a path: write %s", p)
	}
	if p != "/" {
		p = strings.TrimSuffix(p, "/")
	}
	if strings.Contains(p, "%") {
		return errors.New("the path must be written decoded, without percent escapes")
	}
	canon, refused := canonicalPath(p, false)
	switch {
	case refused != "":
		return errors.New("the path " + refused + ": no request path matching it would be accepted")
	case canon != p:
		return fmt.Errorf("the path is not canonical: write %s", canon)
	}
	return nil
}

// validHeaderName reports whether s is an HTTP field name (an RFC 9110
// token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// Headers returns the header names in use, in canonical form.
func (r *Rules) Headers() Headers { return r.headers }

// Request is a forward-auth request as a gateway sends it.
type Request struct {
	// Method is the forward-auth request's own method.
	Method string
	// Suffix is what follows the forward-auth path, query included, as
	// Envoy's ext_authz appends the original request's path to its path
	// prefix: "" when nothing follows; otherwise it starts with "/".
	Suffix string
	Header http.Header
}

// Call is the check a request stands for.
type Call struct {
	// Customer is the customer, from its header or from APIKeys; "" when
	// APIKey is set.
	Customer string
	// APIKey is a key of the API-key header that APIKeys does not name:
	// the caller resolves it among the keys quotad issued.
	APIKey string
	// Metric and Cost are the check's; Metric is "" for a route that
	// only requires a feature.
	Metric string
	Cost   int64
	// Feature is the feature the route requires, "" for none.
	Feature string
	// Subject is the subject header's value, "" without one (the caller
	// may then count a key it resolves as the subject).
	Subject string
	// Route is the route table's pattern that matched, "" without a table.
	Route string
	// Pass is true for a request that matched no route under "unmatched:
	// allow": it is let through without a check, and the other fields but
	// APIKey are empty.
	Pass bool
}

// Errors of Resolve, besides *HeaderError.
var (
	// ErrNoKey is a request without the API-key header (when one is
	// configured).
	ErrNoKey = errors.New("forwardauth: no API key")
	// ErrUnknownKey is an API key that maps to no customer. Resolve does
	// not return it (it leaves unknown keys to the caller, in Call.APIKey);
	// the caller may, for a key it does not know either.
	ErrUnknownKey = errors.New("forwardauth: unknown API key")
	// ErrNoRoute is a request that matches no route, under "unmatched: deny".
	ErrNoRoute = errors.New("forwardauth: no route matches the request")
)

// HeaderError is a header that is missing or malformed.
type HeaderError struct {
	Header  string
	Message string
}

func (e *HeaderError) Error() string { return e.Header + ": " + e.Message }

// PathError is an original request path without a canonical form (see
// canonicalPath): an upstream might serve it as another route than the
// one quotad would match, so it is refused, whatever "unmatched" says.
type PathError struct {
	// Header is the header the path came from, or "path" for a path
	// appended to the forward-auth path (Envoy).
	Header string
	// Reason says what is wrong, as a predicate of "the path": `has a
	// ".." segment, ...`.
	Reason string
}

func (e *PathError) Error() string { return e.Header + ": the path " + e.Reason }

// Resolve returns the check req stands for. Its errors are ErrNoKey,
// ErrNoRoute, *HeaderError and *PathError; with any of them but ErrNoKey, the Call's
// APIKey is still set when the key needs resolving, so that the caller
// may refuse an unknown key first. The customer and metric it
// returns are not validated beyond being present: the check does that.
func (r *Rules) Resolve(req Request) (Call, error) {
	var c Call
	if r.headers.APIKey != "" {
		key := req.Header.Get(r.headers.APIKey)
		if key == "" {
			return c, ErrNoKey
		}
		if customer, ok := r.keys[sha256.Sum256([]byte(key))]; ok {
			c.Customer = customer
		} else {
			c.APIKey = key
		}
	} else if c.Customer = req.Header.Get(r.headers.Customer); c.Customer == "" {
		// The gateway sets this header, not the client: without it the
		// gateway is misconfigured.
		return c, &HeaderError{r.headers.Customer, "is required"}
	}
	if r.headers.Subject != "" {
		c.Subject = req.Header.Get(r.headers.Subject)
	}

	if r.mux == nil {
		c.Metric = req.Header.Get(r.headers.Metric)
		if c.Metric == "" {
			return c, &HeaderError{r.headers.Metric, "is required"}
		}
		c.Cost = 1
		if v, ok := req.Header[r.headers.Cost]; ok {
			n, err := strconv.ParseInt(v[0], 10, 64)
			if len(v) > 1 || err != nil || n < 1 || n > MaxCost || v[0][0] == '+' {
				return c, &HeaderError{r.headers.Cost, fmt.Sprintf("must be one integer from 1 to %d", MaxCost)}
			}
			c.Cost = n
		}
		return c, nil
	}

	method, path, err := r.original(req)
	if err != nil {
		return c, err
	}
	rt, ok := r.routes[r.match(method, path)]
	switch {
	case ok:
		c.Metric, c.Cost, c.Feature, c.Route = rt.metric, rt.cost, rt.feature, rt.match
		if c.Metric == "" {
			c.Cost = 0
		}
	case r.allowUnmatched:
		// A key to resolve stays: an unknown key is refused even here.
		return Call{Pass: true, APIKey: c.APIKey}, nil
	default:
		return c, ErrNoRoute
	}
	return c, nil
}

// original returns the original request's method and canonical path, for
// the route table: from the suffix when there is one (Envoy), else from the
// method and URI headers. The query plays no part.
func (r *Rules) original(req Request) (method, path string, err error) {
	method, uri, header := req.Method, req.Suffix, "path"
	if uri == "" {
		method, uri, header = req.Header.Get(r.headers.Method), req.Header.Get(r.headers.URI), r.headers.URI
		if method == "" {
			return "", "", &HeaderError{r.headers.Method, "is required with a route table"}
		}
		if uri == "" {
			return "", "", &HeaderError{header, "is required with a route table"}
		}
		if !validHeaderName(method) {
			return "", "", &HeaderError{r.headers.Method, "must be an HTTP method"}
		}
	}
	uri, _, _ = strings.Cut(uri, "?")
	if !strings.HasPrefix(uri, "/") {
		return "", "", &HeaderError{header, "must be an origin-form request URI, such as /v1/items?page=2"}
	}
	path, refused := canonicalPath(uri, r.fold)
	if refused != "" {
		return "", "", &PathError{Header: header, Reason: refused}
	}
	return method, path, nil
}

// match returns the pattern of the route table that matches the method
// and canonical path, "" when none does.
func (r *Rules) match(method, path string) string {
	req := matchRequests.Get().(*http.Request)
	req.Method, req.URL.Path = method, path
	_, pattern := r.mux.Handler(req)
	matchRequests.Put(req)
	return pattern
}

// matchRequests are the requests match hands ServeMux, which keeps none:
// one would escape to the heap on every match otherwise.
var matchRequests = sync.Pool{New: func() any {
	// ServeMux matches the host too when a pattern names one; none does.
	return &http.Request{URL: &url.URL{}, Host: "gateway"}
}}
