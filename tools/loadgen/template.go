package main

import (
	"fmt"
	"strconv"
	"strings"
)

// segment kinds of a body template.
const (
	literal = iota
	keyHole // {{key}}
	seqHole // {{seq}}
)

type segment struct {
	kind int
	text string // for literal
	div  int    // for keyHole: the key is divided by it ({{key/N}}); 1 for {{key}}
}

// bodyTemplate is a request body with placeholders, parsed once and
// expanded into a reused buffer per request.
type bodyTemplate struct {
	segs   []segment
	hasKey bool
}

// parseTemplate splits s at its placeholders: {{key}}, {{key/N}} (the
// key divided by N, N > 0: the group a key is in, such as the customer of
// a subject) and {{seq}}; any other {{name}} is an error, so that a typo
// is not sent verbatim.
func parseTemplate(s string) (*bodyTemplate, error) {
	t := &bodyTemplate{}
	for s != "" {
		i := strings.Index(s, "{{")
		if i < 0 {
			t.add(segment{kind: literal, text: s})
			break
		}
		if i > 0 {
			t.add(segment{kind: literal, text: s[:i]})
		}
		rest := s[i:]
		end := strings.Index(rest, "}}")
		if end < 0 {
			return nil, fmt.Errorf("body: unclosed {{ at %q", rest)
		}
		name := rest[2:end]
		switch {
		case name == "key":
			t.add(segment{kind: keyHole, div: 1})
		case name == "seq":
			t.add(segment{kind: seqHole})
		case strings.HasPrefix(name, "key/"):
			n, err := strconv.Atoi(name[len("key/"):])
			if err != nil || n < 1 {
				return nil, fmt.Errorf("body: %s: want {{key/N}} with N a positive integer", rest[:end+2])
			}
			t.add(segment{kind: keyHole, div: n})
		default:
			return nil, fmt.Errorf("body: unknown placeholder %s (want {{key}}, {{key/N}} or {{seq}})", rest[:end+2])
		}
		s = rest[end+2:]
	}
	return t, nil
}

func (t *bodyTemplate) add(s segment) {
	t.segs = append(t.segs, s)
	if s.kind == keyHole {
		t.hasKey = true
	}
}

// expand appends the body of one request to dst: every {{key}} becomes key,
// every {{key/N}} key/N, every {{seq}} "worker-seq", which is unique in a
// run as long as each worker numbers its requests.
func (t *bodyTemplate) expand(dst []byte, key int, worker int, seq uint64) []byte {
	for _, s := range t.segs {
		switch s.kind {
		case literal:
			dst = append(dst, s.text...)
		case keyHole:
			dst = strconv.AppendInt(dst, int64(key/s.div), 10)
		case seqHole:
			dst = strconv.AppendInt(dst, int64(worker), 10)
			dst = append(dst, '-')
			dst = strconv.AppendUint(dst, seq, 10)
		}
	}
	return dst
}
