package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/console"
)

// Role is what a token may do.
type Role uint8

// The roles. An admin token may do everything; a check token may only check,
// refund, reserve and read a customer's usage.
const (
	RoleCheck Role = iota + 1
	RoleAdmin
)

// Token is one configured bearer token.
type Token struct {
	Name   string // the actor recorded in the audit log
	Secret string
	Role   Role
}

// MinTokenLength is the fewest characters a token's secret may have.
const MinTokenLength = 16

// sampleTokens are secrets quotad's documentation and docker-compose.yml
// have printed: known to anyone who read them, they are refused.
var sampleTokens = map[string]bool{"change-me-admin": true, "change-me-check": true}

// ParseTokens parses a comma-separated token list: each entry is "secret"
// or "name:secret" (split at the first colon). Unnamed tokens are named
// "<prefix>#N" by their 1-based position in the list. A secret shorter
// than MinTokenLength, or a sample value of the documentation, is an
// error, which names the token but never says its secret.
func ParseTokens(list string, role Role) ([]Token, error) {
	prefix := "admin"
	if role == RoleCheck {
		prefix = "check"
	}
	var out []Token
	for i, entry := range strings.Split(list, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		t := Token{Role: role, Name: prefix + "#" + strconv.Itoa(i+1), Secret: entry}
		if name, secret, ok := strings.Cut(entry, ":"); ok {
			if name == "" || secret == "" {
				return nil, fmt.Errorf("%s token %d: want name:secret with both parts non-empty", prefix, i+1)
			}
			t.Name, t.Secret = name, secret
		}
		switch n := utf8.RuneCountInString(t.Secret); {
		case sampleTokens[t.Secret]:
			return nil, fmt.Errorf("%s token %d (%s): its secret is a sample value from quotad's documentation; make one of your own, such as the output of openssl rand -hex 24", prefix, i+1, t.Name)
		case n < MinTokenLength:
			return nil, fmt.Errorf("%s token %d (%s): want a secret of at least %d characters, got %d; make one, such as the output of openssl rand -hex 24", prefix, i+1, t.Name, MinTokenLength, n)
		}
		out = append(out, t)
	}
	return out, nil
}

// authenticator checks bearer tokens in constant time: every configured
// token is compared, over fixed-length digests, whatever the input.
type authenticator struct {
	tokens  []Token
	digests [][sha256.Size]byte
}

func newAuthenticator(tokens []Token) *authenticator {
	a := &authenticator{tokens: tokens}
	for _, t := range tokens {
		a.digests = append(a.digests, sha256.Sum256([]byte(t.Secret)))
	}
	return a
}

func (a *authenticator) enabled() bool { return len(a.tokens) > 0 }

// identify returns the token whose secret is presented, if any.
func (a *authenticator) identify(secret string) (*Token, bool) {
	d := sha256.Sum256([]byte(secret))
	match := -1
	for i := range a.digests {
		if subtle.ConstantTimeCompare(d[:], a.digests[i][:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return nil, false
	}
	return &a.tokens[match], true
}

// anonymous is the actor of every request when no token is configured.
var anonymous = Token{Name: "anonymous", Role: RoleAdmin}

// checkRoutes are the routes a check token may call.
var checkRoutes = func() map[string]bool {
	m := map[string]bool{
		http.MethodPost + " /v1/check":                           true,
		http.MethodPost + " /v1/refund":                          true,
		http.MethodPost + " /v1/features/check":                  true,
		http.MethodGet + " /v1/customers/:customer/usage":        true,
		http.MethodGet + " /v1/customers/:customer/entitlements": true,
		http.MethodGet + " " + forwardAuthPath:                   true,
		http.MethodPost + " /v1/reservations":                    true,
		http.MethodGet + " /v1/reservations/:id":                 true,
		http.MethodDelete + " /v1/reservations/:id":              true,
		http.MethodPost + " /v1/reservations/:id/commit":         true,
	}
	for _, method := range forwardAuthMethods {
		m[method+" "+forwardAuthPath+"/*"] = true
	}
	return m
}()

// openPaths need no token.
var openPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// isOpen reports whether a request path needs no token: the open paths and
// the console's static files (whose data calls carry the admin token).
func isOpen(path string) bool {
	return openPaths[path] || strings.HasPrefix(path, console.Prefix)
}

// authenticate returns the request's token: none for the open paths,
// anonymous when no token is configured. It runs after routing, so that
// c.Path() names the matched route; it answers 401 and 403 before the
// router's own 404 and 405. Without tokens, a request whose Host is not
// a loopback one is refused with 421 first, whatever its path (see
// loopbackHost).
func (s *Server) authenticate(c echo.Context) (*Token, error) {
	if !s.auth.enabled() && !loopbackHost(c.Request().Host) {
		return nil, errForeignHost
	}
	if isOpen(c.Request().URL.Path) {
		return nil, nil
	}
	if !s.auth.enabled() {
		return &anonymous, nil
	}
	h := c.Request().Header.Get(echo.HeaderAuthorization)
	scheme, secret, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, echo.ErrUnauthorized
	}
	t, ok := s.auth.identify(strings.TrimSpace(secret))
	if !ok {
		return nil, echo.ErrUnauthorized
	}
	if t.Role != RoleAdmin && !checkRoutes[c.Request().Method+" "+c.Path()] {
		return nil, echo.ErrForbidden
	}
	return t, nil
}

// actor returns the audit name of the request's token.
func actor(c echo.Context) string {
	return tokenOf(c).Name
}

// tokenOf returns the request's token: anonymous when none is configured.
func tokenOf(c echo.Context) *Token {
	if rc, ok := c.(*requestContext); ok && rc.token != nil {
		return rc.token
	}
	return &anonymous
}
