package api

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// call is a decoded check or refund body, as the handlers use it.
type call struct {
	Customer, Metric, RequestID string
	// APIKey names the customer by one of its API keys, in place of
	// Customer; KeyID is that key's id, once identify has resolved it.
	APIKey string
	KeyID  string
	// Subject is who within the customer spends the units, "" for none.
	Subject string
	// Cost is what the body says, or 1 when it has none.
	Cost   int64
	DryRun bool
	// Items, for a check of items, stand for Metric, Cost and Subject,
	// which are then "", 0 and "": 1 to maxCheckItems of them, in the
	// body's order, each cost 1 when the item has none. Their customers
	// are empty: the check's.
	Items []quota.Item
}

// maxCheckItems is the most items POST /v1/check takes (the engine takes
// up to quota.MaxItems, for Envoy's descriptors).
const maxCheckItems = 16

// itemsInstead is the refusal of metric, cost or subject beside items.
const itemsInstead = "is not taken with items: each item names its own"

func (r checkRequest) call() (call, error) {
	c := call{Customer: r.Customer, APIKey: r.APIKey, Metric: r.Metric, Subject: r.Subject, RequestID: r.RequestID,
		Cost: costOrOne(r.Cost), DryRun: r.DryRun}
	if r.Items == nil {
		return c, nil
	}
	switch {
	case r.Metric != "":
		return call{}, tiers.Invalid("metric", itemsInstead)
	case r.Cost != nil:
		return call{}, tiers.Invalid("cost", itemsInstead)
	case r.Subject != "":
		return call{}, tiers.Invalid("subject", itemsInstead)
	case len(r.Items) == 0 || len(r.Items) > maxCheckItems:
		return call{}, tiers.Invalid("items", fmt.Sprintf("must hold 1 to %d items", maxCheckItems))
	}
	c.Cost = 0
	c.Items = make([]quota.Item, len(r.Items))
	for i, it := range r.Items {
		c.Items[i] = quota.Item{Metric: it.Metric, Cost: costOrOne(it.Cost), Subject: it.Subject}
	}
	return c, nil
}

func (r refundRequest) call() call {
	return call{Customer: r.Customer, APIKey: r.APIKey, Metric: r.Metric, Subject: r.Subject, RequestID: r.RequestID,
		Cost: costOrOne(r.Cost)}
}

// costOrOne is the default cost: a check or refund without one is of 1.
func costOrOne(c *int64) int64 {
	if c == nil {
		return 1
	}
	return *c
}

// decodeCall reads and decodes the body of a check (refund false) or a
// refund. The usual body takes the fast path; any other goes through
// decodeJSON, which gives the canonical error.
func decodeCall(c echo.Context, refund bool) (call, error) {
	bp, err := readBody(c)
	if err != nil {
		return call{}, err
	}
	defer releaseBody(bp, *bp)
	return decodeCallBody(*bp, refund)
}

// decodeCallBody decodes body as decodeCall does.
//
// The fast path stays beside the library because the library costs a
// third of a check. Decoding benchCheckBody into a checkRequest with
// go-json-experiment/json, names exact and once and unknown members
// refused, takes 518 ns of CPU and 2 allocations to the fast path's 117 ns
// and 1; BenchmarkServeCheck with the check decoded that way takes 2,723
// ns of CPU and 5 allocations (304 B) to 2,039 ns and 4 (184 B), +34%
// (medians of 5 runs at GOMAXPROCS=1; BenchmarkDecodeCheckLibrary
// measures the library alone).
func decodeCallBody(body []byte, refund bool) (call, error) {
	if c, ok := fastDecodeCall(body, refund); ok {
		return c, nil
	}
	return decodeCallJSON(body, refund)
}

// decodeCallJSON decodes body with decodeJSON: the canonical decoding of
// a check or refund body, which the fast path must equal.
func decodeCallJSON(body []byte, refund bool) (call, error) {
	if refund {
		var req refundRequest
		if err := decodeJSON(body, &req); err != nil {
			return call{}, err
		}
		return req.call(), nil
	}
	var req checkRequest
	if err := decodeJSON(body, &req); err != nil {
		return call{}, err
	}
	return req.call()
}

// The fields of a check body, as bits of a set.
const (
	fieldCustomer = 1 << iota
	fieldMetric
	fieldCost
	fieldDryRun
	fieldRequestID
	fieldAPIKey
	fieldSubject
	fieldItems
)

// fastDecodeCall decodes, without reflection, a check or refund body of
// the usual shape: one object whose keys are field names without escapes,
// each at most once; strings without escapes; costs plain integers that
// fit int64; dry_run true or false and items (1 to maxCheckItems objects
// of metric, cost and subject, without metric, cost or subject beside
// them) in checks only; white space anywhere JSON allows it. ok is false
// for any other body, valid or not: the caller must then use decodeJSON.
// When ok, the result is exactly the call decodeCallJSON makes of body
// (FuzzFastDecodeCall checks it). It allocates once for the strings, and
// once more for items.
func fastDecodeCall(body []byte, refund bool) (f call, ok bool) {
	p := fastParser{b: body}
	if p.space() != '{' {
		return f, false
	}
	p.i++
	var seen int
	var customer, apiKey, metric, subject, requestID []byte
	var cost int64
	var given *int64 // &cost once the body gives a cost
	// The items are read twice: checked and measured here, taken after
	// (see withItems), so that a check of one metric needs no room for
	// them.
	var itemsAt, items, itemBytes int
	for first := true; ; first = false {
		key, end, ok := p.nextKey(first)
		if !ok {
			return f, false
		}
		if end {
			break
		}
		var field int
		switch string(key) {
		case "customer":
			field = fieldCustomer
			customer, ok = p.plainString()
		case "api_key":
			field = fieldAPIKey
			apiKey, ok = p.plainString()
		case "metric":
			field = fieldMetric
			metric, ok = p.plainString()
		case "subject":
			field = fieldSubject
			subject, ok = p.plainString()
		case "request_id":
			field = fieldRequestID
			requestID, ok = p.plainString()
		case "cost":
			field = fieldCost
			cost, ok = p.integer()
			given = &cost
		case "dry_run":
			if refund {
				return f, false
			}
			field = fieldDryRun
			f.DryRun, ok = p.boolean()
		case "items":
			if refund {
				return f, false
			}
			field = fieldItems
			itemsAt = p.i
			items, itemBytes, ok = p.items(nil)
		default:
			return f, false
		}
		if !ok || seen&field != 0 {
			return f, false
		}
		seen |= field
	}
	if p.space() != 0 || p.i < len(p.b) {
		return f, false // trailing data
	}
	if seen&fieldItems != 0 {
		if len(metric) > 0 || given != nil || len(subject) > 0 {
			return f, false // refused: the canonical decoder says which field
		}
		return withItems(f, body, itemsAt, items, itemBytes, customer, apiKey, requestID), true
	}
	// One allocation for the five strings.
	var buf [128]byte
	all := string(append(append(append(append(append(buf[:0], customer...), apiKey...), metric...), subject...), requestID...))
	n := len(customer)
	f.Customer = all[:n]
	f.APIKey = all[n : n+len(apiKey)]
	n += len(apiKey)
	f.Metric = all[n : n+len(metric)]
	n += len(metric)
	f.Subject = all[n : n+len(subject)]
	f.RequestID = all[n+len(subject):]
	f.Cost = costOrOne(given)
	return f, true
}

// withItems completes f, a check of items read by fastDecodeCall, with
// its strings and its items: those of the array at body[at:], which holds
// n items whose strings take size bytes. It allocates once for the
// strings, once for the items.
func withItems(f call, body []byte, at, n, size int, customer, apiKey, requestID []byte) call {
	var sb strings.Builder
	sb.Grow(len(customer) + len(apiKey) + len(requestID) + size)
	take := func(b []byte) string {
		start := sb.Len()
		sb.Write(b)
		return sb.String()[start:]
	}
	f.Customer, f.APIKey, f.RequestID = take(customer), take(apiKey), take(requestID)
	f.Items = make([]quota.Item, 0, n)
	p := fastParser{b: body, i: at}
	p.items(func(metric, subject []byte, cost int64) {
		f.Items = append(f.Items, quota.Item{Metric: take(metric), Cost: cost, Subject: take(subject)})
	})
	return f
}

// items reads an array of 1 to maxCheckItems item objects, each with
// metric, cost (1 when absent) and subject at most once, and tells item,
// if not nil, of each. It returns how many there were, and how many bytes
// their strings take.
func (p *fastParser) items(item func(metric, subject []byte, cost int64)) (n, size int, ok bool) {
	if p.i >= len(p.b) || p.b[p.i] != '[' {
		return 0, 0, false
	}
	p.i++
	for n < maxCheckItems {
		if p.space() != '{' {
			return 0, 0, false // an empty array too: refused
		}
		p.i++
		var metric, subject []byte
		cost := int64(1)
		var seen int
		for first := true; ; first = false {
			key, end, ok := p.nextKey(first)
			if !ok {
				return 0, 0, false
			}
			if end {
				break
			}
			var field int
			switch string(key) {
			case "metric":
				field = fieldMetric
				metric, ok = p.plainString()
			case "subject":
				field = fieldSubject
				subject, ok = p.plainString()
			case "cost":
				field = fieldCost
				cost, ok = p.integer()
			default:
				return 0, 0, false
			}
			if !ok || seen&field != 0 {
				return 0, 0, false
			}
			seen |= field
		}
		if item != nil {
			item(metric, subject, cost)
		}
		n++
		size += len(metric) + len(subject)
		c := p.space()
		p.i++
		if c == ']' {
			return n, size, true
		}
		if c != ',' {
			return 0, 0, false
		}
	}
	return 0, 0, false // too many: refused
}

// fastParser reads a JSON text byte by byte.
type fastParser struct {
	b []byte
	i int
}

// nextKey reads on in an object whose '{' is read: past the '}' that ends
// it (end), or past the next member's key and ':' and the white space
// before its value, which it leaves to the caller. first says no member
// has been read yet, and so no ',' comes before the key.
func (p *fastParser) nextKey(first bool) (key []byte, end, ok bool) {
	switch c := p.space(); {
	case c == '}':
		p.i++
		return nil, true, true
	case !first && c == ',':
		p.i++
		p.space()
	case !first:
		return nil, false, false
	}
	key, ok = p.plainString()
	if !ok || p.space() != ':' {
		return nil, false, false
	}
	p.i++
	p.space()
	return key, false, true
}

// space skips JSON white space and returns the next byte, or 0 at the end.
func (p *fastParser) space() byte {
	for ; p.i < len(p.b); p.i++ {
		switch c := p.b[p.i]; c {
		case ' ', '\t', '\n', '\r':
		default:
			return c
		}
	}
	return 0
}

// plainString reads a string without escapes, of valid UTF-8, and returns
// its contents (which alias the body).
func (p *fastParser) plainString() ([]byte, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	start := p.i + 1
	ascii := true
	for i := start; i < len(p.b); i++ {
		switch c := p.b[i]; {
		case c == '"':
			s := p.b[start:i]
			if !ascii && !utf8.Valid(s) {
				return nil, false
			}
			p.i = i + 1
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// integer reads a JSON number that is an integer without fraction or
// exponent and fits int64, as strconv.ParseInt takes it.
func (p *fastParser) integer() (int64, bool) {
	i := p.i
	neg := i < len(p.b) && p.b[i] == '-'
	if neg {
		i++
	}
	start := i
	var n uint64
	for ; i < len(p.b) && '0' <= p.b[i] && p.b[i] <= '9'; i++ {
		if i-start >= 19 { // 19 digits always fit; more need the careful path
			return 0, false
		}
		n = n*10 + uint64(p.b[i]-'0')
	}
	digits := i - start
	switch {
	case digits == 0, digits > 1 && p.b[start] == '0': // not JSON
		return 0, false
	case i < len(p.b) && (p.b[i] == '.' || p.b[i] == 'e' || p.b[i] == 'E'): // not an integer
		return 0, false
	case !neg && n > 1<<63-1, neg && n > 1<<63:
		return 0, false
	}
	p.i = i
	if neg {
		return -int64(n), true
	}
	return int64(n), true
}

// boolean reads true or false.
func (p *fastParser) boolean() (bool, bool) {
	rest := p.b[p.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		p.i += 4
		return true, true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		p.i += 5
		return false, true
	}
	return false, false
}
