package tiers

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Length bounds for free text. They keep rows small; the API's body limit
// bounds everything else.
const (
	maxNameLen        = 200
	maxDescriptionLen = 2000
	maxReasonLen      = 500
	maxLimitsPerPlan  = 500
	maxCreditRates    = 500
)

// Longest metric or plan key, customer id and subject.
const (
	MaxKeyLen        = 63
	MaxCustomerIDLen = 128
	MaxSubjectLen    = 128
)

// ValidKey reports whether s is a valid metric or plan key:
// ^[a-z0-9][a-z0-9_.-]{0,62}$.
func ValidKey(s string) bool {
	if len(s) == 0 || len(s) > MaxKeyLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// ValidCustomerID reports whether s is a valid customer id:
// ^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$.
func ValidCustomerID(s string) bool {
	if len(s) == 0 || len(s) > MaxCustomerIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == ':' || c == '@' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// ValidSubject reports whether s is a valid subject, who within a
// customer spends units: ^[A-Za-z0-9._:@/-]{1,128}$ (an end user's id, an
// IP address, an API key's id).
func ValidSubject(s string) bool {
	if len(s) == 0 || len(s) > MaxSubjectLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.' || c == '_' || c == ':' || c == '@' || c == '/' || c == '-':
		default:
			return false
		}
	}
	return true
}

// UniqueLimitRule is the rule that keeps a plan's limits, and a
// customer's overrides, apart: a customer-wide limit and a limit per
// subject may share a metric and window, two customer-wide ones may not.
const UniqueLimitRule = "a metric+window+per appears at most once"

const (
	perRule        = "must be one of customer, subject"
	windowRule     = "must be one of second, minute, hour, day, week, month, total"
	keyRule        = "must match ^[a-z0-9][a-z0-9_.-]{0,62}$"
	customerIDRule = "must match ^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$"
	// SubjectRule is what a subject must match, as a client is told.
	SubjectRule = "must match ^[A-Za-z0-9._:@/-]{1,128}$"
)

// CheckKey returns a ValidationError naming field unless key is a valid
// metric or plan key.
func CheckKey(field, key string) error {
	if !ValidKey(key) {
		return Invalid(field, keyRule)
	}
	return nil
}

// CheckCustomerID returns a ValidationError naming field unless id is a valid
// customer id.
func CheckCustomerID(field, id string) error {
	if !ValidCustomerID(id) {
		return Invalid(field, customerIDRule)
	}
	return nil
}

// CheckPer returns a ValidationError naming field unless s names a per
// (customer or subject).
func CheckPer(field, s string) error {
	var p problems
	p.checkPer(field, s)
	return p.err()
}

// checkText validates free text: valid UTF-8, no NUL, at most max runes.
func (p *problems) checkText(field, s string, max int) {
	switch {
	case !utf8.ValidString(s):
		p.add(field, "must be valid UTF-8")
	case strings.IndexByte(s, 0) >= 0:
		p.add(field, "must not contain NUL characters")
	case utf8.RuneCountInString(s) > max:
		p.add(field, fmt.Sprintf("must be at most %d characters", max))
	}
}

// checkPer parses a limit's per, reporting field unless it names one; ok
// is false then.
func (p *problems) checkPer(field, s string) (per Per, ok bool) {
	per, ok = ParsePer(s)
	if !ok {
		p.add(field, perRule)
	}
	return per, ok
}

// overrideKey checks an override's address as a request names it and
// returns its key; per "" is the customer.
func (p *problems) overrideKey(customer, metric, window, per string) LimitKey {
	if !ValidCustomerID(customer) {
		p.add("customer", customerIDRule)
	}
	if !ValidKey(metric) {
		p.add("metric", keyRule)
	}
	w, ok := ParseWindow(window)
	if !ok {
		p.add("window", windowRule)
	}
	k := LimitKey{Metric: metric, Window: w}
	if per != "" {
		k.Per, _ = p.checkPer("per", per)
	}
	return k
}

// checkRate validates a credit rate's credits or per: 1..MaxLimit.
func (p *problems) checkRate(field string, v int64) {
	if v < 1 || v > MaxLimit {
		p.add(field, fmt.Sprintf("must be an integer between 1 and %d", MaxLimit))
	}
}

// checkCount validates a limit-like integer: 0..MaxLimit.
func (p *problems) checkCount(field string, v int64) {
	if v < 0 || v > MaxLimit {
		p.add(field, fmt.Sprintf("must be an integer between 0 and %d", MaxLimit))
	}
}

// CheckText returns what is wrong with a free text of at most n characters
// (a name, a reason), or "": it must be UTF-8, without control characters.
func CheckText(s string, n int) string {
	switch {
	case !utf8.ValidString(s):
		return "must be UTF-8"
	case utf8.RuneCountInString(s) > n:
		return fmt.Sprintf("must be at most %d characters", n)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return "must not contain control characters"
		}
	}
	return ""
}
