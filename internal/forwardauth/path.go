package forwardauth

import "strings"

// A path is matched against the route table in its canonical form, the one
// an upstream's own normalisation cannot make into another route: upstreams
// differ (Express routes case-insensitively and ignores a trailing slash,
// some servers strip ";params" or decode "%2e%2e" before resolving dot
// segments), so what could read as another path on one of them is refused
// instead of guessed at. The canonical form of a path:
//   - is decoded: "%41" is "A"; a percent escape of "/", ".", "\", ";", "%"
//     (double encoding), or a control character is refused, as is a
//     malformed one;
//   - has no "." or ".." segment, and no ";", backslash, "#", "?" or
//     control character, raw or encoded (each refused);
//   - has no empty segment ("/a//b" is "/a/b") and no trailing slash
//     ("/a/" is "/a"; "/" stays "/");
//   - is lower case (ASCII letters) unless the file says "case: sensitive".
//
// canonicalPath returns p in that form, or why it has none. It allocates
// only when p is not canonical already.
func canonicalPath(p string, fold bool) (canon, refused string) {
	if p == "" || p[0] != '/' {
		return "", `does not start with "/"`
	}
	// The common case: nothing to decode, fold or collapse.
	clean := true
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '%', fold && 'A' <= c && c <= 'Z':
			clean = false
		case c == '/' && (i+1 == len(p) && i > 0 || i+1 < len(p) && p[i+1] == '/'):
			clean = false // a trailing slash or an empty segment
		default:
			if what, why := refusedByte(c); what != "" {
				return "", "has " + what + why
			}
		}
		if c == '/' {
			if why := dotSegment(p[i+1:]); why != "" {
				return "", why
			}
		}
	}
	if clean {
		return p, ""
	}

	b := make([]byte, 0, len(p))
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '%':
			if i+2 >= len(p) || !isHex(p[i+1]) || !isHex(p[i+2]) {
				return "", `has a malformed percent escape (a "%" not followed by two hex digits)`
			}
			c = unhex(p[i+1])<<4 | unhex(p[i+2])
			if what, why := refusedEscape(c); what != "" {
				return "", "has " + what + " (" + p[i:i+3] + ")" + why
			}
			if what, why := refusedByte(c); what != "" {
				return "", "has " + what + " encoded as " + p[i:i+3] + why
			}
			i += 2
		case c == '/' && len(b) > 0 && b[len(b)-1] == '/':
			continue // an empty segment
		}
		if fold {
			c = lowerByte(c)
		}
		b = append(b, c)
	}
	if len(b) > 1 && b[len(b)-1] == '/' {
		b = b[:len(b)-1]
	}
	return string(b), ""
}

// refusedByte says what c is, and why it is refused, when it may not
// stand in a path, as it is or decoded; what is "" when it may.
func refusedByte(c byte) (what, why string) {
	switch {
	case c < 0x20 || c == 0x7f:
		return "a control character", ""
	case c == ';':
		return `a ";"`, ", which some upstreams take for a parameter and strip before routing"
	case c == '\\':
		return "a backslash", `, which some upstreams read as "/"`
	case c == '#' || c == '?':
		return `a "` + string(c) + `"`, " in the path"
	}
	return "", ""
}

// refusedEscape says what c is, and why, when it may not be
// percent-encoded in a path; what is "" when it may.
func refusedEscape(c byte) (what, why string) {
	switch c {
	case '/':
		return `an encoded "/"`, ", which some upstreams decode before routing"
	case '.':
		return `an encoded "."`, ", which some upstreams decode before resolving dot segments"
	case '%':
		return `an encoded "%"`, ": a path encoded twice"
	}
	return "", ""
}

// dotSegment says why the segment that rest starts with is refused: "" for
// any but "." and "..".
func dotSegment(rest string) string {
	seg, _, _ := strings.Cut(rest, "/")
	if seg == "." || seg == ".." {
		return `has a "` + seg + `" segment, which upstreams resolve differently`
	}
	return ""
}

// lowerASCII returns s with ASCII letters in lower case, as canonicalPath
// folds paths: route patterns are folded so.
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = lowerByte(c)
	}
	return string(b)
}

func lowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
