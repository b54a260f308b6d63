package api

import (
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

// call is a decoded check or refund body, as the handlers use it.
type call struct {
	Customer, Metric, RequestID string
	// APIKey names the customer by one of its API keys, in place of
	// Customer.
	APIKey string
	// Cost is what the body says, or 1 when it has none.
	Cost   int64
	DryRun bool
}

func (r checkRequest) call() call {
	return call{Customer: r.Customer, APIKey: r.APIKey, Metric: r.Metric, RequestID: r.RequestID, Cost: costOrOne(r.Cost), DryRun: r.DryRun}
}

func (r refundRequest) call() call {
	return call{Customer: r.Customer, APIKey: r.APIKey, Metric: r.Metric, RequestID: r.RequestID, Cost: costOrOne(r.Cost)}
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
func decodeCallBody(body []byte, refund bool) (call, error) {
	if c, ok := fastDecodeCall(body, refund); ok {
		return c, nil
	}
	if refund {
		var req refundRequest
		err := decodeJSON(body, &req)
		return req.call(), err
	}
	var req checkRequest
	err := decodeJSON(body, &req)
	return req.call(), err
}

// The fields of a check body, as bits of a set.
const (
	fieldCustomer = 1 << iota
	fieldMetric
	fieldCost
	fieldDryRun
	fieldRequestID
	fieldAPIKey
)

// fastDecodeCall decodes, without reflection, a check or refund body of
// the usual shape: one object whose keys are field names without escapes,
// each at most once; strings without escapes; cost a plain integer that
// fits int64; dry_run true or false (checks only); white space anywhere
// JSON allows it. ok is false for any other body, valid or not: the caller
// must then use decodeJSON. When ok, the result is exactly the call
// decodeJSON makes of body (FuzzFastDecodeCall checks it).
func fastDecodeCall(body []byte, refund bool) (f call, ok bool) {
	p := fastParser{b: body}
	if p.space() != '{' {
		return f, false
	}
	p.i++
	var seen int
	var customer, apiKey, metric, requestID []byte
	var cost int64
	var given *int64 // &cost once the body gives a cost
	if p.space() == '}' {
		p.i++
	} else {
		for {
			if p.space() != '"' {
				return f, false
			}
			key, ok := p.plainString()
			if !ok || p.space() != ':' {
				return f, false
			}
			p.i++
			p.space()
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
			default:
				return f, false
			}
			if !ok || seen&field != 0 {
				return f, false
			}
			seen |= field
			c := p.space()
			p.i++
			if c == '}' {
				break
			}
			if c != ',' {
				return f, false
			}
		}
	}
	if p.space() != 0 || p.i < len(p.b) {
		return f, false // trailing data
	}
	// One allocation for the four strings.
	var buf [128]byte
	all := string(append(append(append(append(buf[:0], customer...), apiKey...), metric...), requestID...))
	n := len(customer)
	f.Customer = all[:n]
	f.APIKey = all[n : n+len(apiKey)]
	n += len(apiKey)
	f.Metric = all[n : n+len(metric)]
	f.RequestID = all[n+len(metric):]
	f.Cost = costOrOne(given)
	return f, true
}

// fastParser reads a JSON text byte by byte.
type fastParser struct {
	b []byte
	i int
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
