package api

import (
	"net/http"
	"net/netip"
	"strings"
)

// codeMisdirected answers a request, made while no token is configured,
// whose Host names no loopback host.
const codeMisdirected = "misdirected_request"

// errForeignHost is the answer to such a request, made once: the check
// runs on every request without tokens, the check path's included.
var errForeignHost = problemf(http.StatusMisdirectedRequest, codeMisdirected,
	"without tokens quotad answers only requests whose Host is a loopback name or address (localhost, 127.0.0.1, [::1])")

// loopbackHost reports whether host, a request's Host (with or without a
// port), names this machine's loopback interface: localhost or a name
// under .localhost (RFC 6761: never given to anyone, and resolved to
// loopback by browsers themselves), an address of 127.0.0.0/8, or ::1 in
// brackets. Without tokens this is what keeps a web page the operator
// visits from calling quotad through a name it rebinds to 127.0.0.1 (DNS
// rebinding): the browser then sends the page's own host name. It runs on
// every request without tokens, so it only slices strings: no allocation.
func loopbackHost(host string) bool {
	name, port := host, ""
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return false
		}
		name, port = host[1:end], host[end+1:]
		if port != "" && port[0] != ':' {
			return false
		}
	} else if i := strings.IndexByte(host, ':'); i >= 0 {
		name, port = host[:i], host[i:]
	}
	if port != "" && !isPort(port[1:]) {
		return false
	}
	name = strings.TrimSuffix(name, ".") // the absolute form, localhost.
	const local = "localhost"
	if len(name) >= len(local) && strings.EqualFold(name[len(name)-len(local):], local) {
		rest := name[:len(name)-len(local)]
		return rest == "" || len(rest) > 1 && rest[len(rest)-1] == '.'
	}
	if !strings.HasPrefix(host, "[") {
		return loopback4(name)
	}
	// (A malformed address in brackets costs ParseAddr's error.)
	ip, err := netip.ParseAddr(name)
	return err == nil && ip.Is6() && ip.Zone() == "" && ip.Unmap().IsLoopback()
}

// loopback4 reports whether s is a dotted-quad address of 127.0.0.0/8.
func loopback4(s string) bool {
	for i := range 4 {
		n, j := 0, 0
		for j < len(s) && j < 4 && s[j] >= '0' && s[j] <= '9' {
			n = n*10 + int(s[j]-'0')
			j++
		}
		switch {
		case j == 0 || j > 3 || n > 255 || j > 1 && s[0] == '0':
			return false
		case i == 0 && n != 127:
			return false
		case i < 3 && (j == len(s) || s[j] != '.'):
			return false
		case i == 3:
			return j == len(s)
		}
		s = s[j+1:]
	}
	return false
}

// isPort reports whether s is a port number: one to five digits.
func isPort(s string) bool {
	if s == "" || len(s) > 5 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
