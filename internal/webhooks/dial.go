package webhooks

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// DefaultTimeout is how long a receiver has to answer a delivery.
const DefaultTimeout = 10 * time.Second

// RefusedError is a connection quotad would not open: the address is
// private, loopback, link-local or otherwise not on the public internet.
type RefusedError struct{ Addr netip.Addr }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refused to connect to %s: a private, loopback or link-local address (QUOTAD_WEBHOOK_ALLOW_PRIVATE=true allows it)", e.Addr)
}

// sharedSpace is 100.64.0.0/10, carrier-grade NAT, which netip does not
// count as private.
var sharedSpace = netip.MustParsePrefix("100.64.0.0/10")

// Refused reports whether quotad refuses to deliver to addr unless
// private addresses are allowed: loopback, private (RFC 1918, fc00::/7),
// link-local (169.254/16, fe80::/10, which holds cloud metadata
// services), unspecified, multicast and shared (100.64/10) addresses,
// IPv4-mapped IPv6 forms included.
func Refused(addr netip.Addr) bool {
	addr = addr.Unmap()
	return !addr.IsValid() || addr.IsLoopback() || addr.IsPrivate() || addr.IsLinkLocalUnicast() ||
		addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast() || addr.IsMulticast() ||
		addr.IsUnspecified() || sharedSpace.Contains(addr) ||
		(addr.Is4() && addr.As4()[0] == 0) // 0.0.0.0/8: "this network"
}

// control is the dialer's check of the address it is about to connect
// to: after name resolution, so a name that resolves to a private address
// (at the time of the connection: DNS rebinding gains nothing) is refused.
func control(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("dial %s: not an IP address", address)
	}
	if Refused(addr) {
		return &RefusedError{Addr: addr.Unmap()}
	}
	return nil
}

// NewClient returns the HTTP client deliveries are POSTed with: a timeout
// for the whole exchange (DefaultTimeout if 0 or less), no proxy, no
// redirects (a 3xx answer is a failed attempt) and, unless allowPrivate,
// a dialer that refuses the addresses Refused names.
func NewClient(timeout time.Duration, allowPrivate bool) *http.Client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = control
	}
	tr := &http.Transport{
		Proxy:                 nil, // a proxy would connect for us, unchecked
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
