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
	return fmt.Sprintf("refused to connect to %s: %s (QUOTAD_WEBHOOK_ALLOW_PRIVATE=true allows it)", e.Addr, notPublic)
}

// notPublic says what Refused refuses, in errors.
const notPublic = "not a public address (private, loopback, link-local, shared, reserved or special-purpose)"

// refusedPrefixes are the blocks of IANA's IPv4 and IPv6 Special-Purpose
// Address Registries that are not globally reachable (or are deprecated,
// or carry an address quotad cannot check), and multicast. IPv6 outside
// 2000::/3 is refused anyway (see Refused); the IPv6 blocks here are the
// special ones inside it.
var refusedPrefixes = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // "this network"
		"10.0.0.0/8",      // private (RFC 1918)
		"100.64.0.0/10",   // shared, carrier-grade NAT (RFC 6598)
		"127.0.0.0/8",     // loopback
		"169.254.0.0/16",  // link-local: cloud metadata services live here
		"172.16.0.0/12",   // private
		"192.0.0.0/24",    // IETF protocol assignments: DS-Lite, NAT64 discovery, anycast relays
		"192.0.2.0/24",    // documentation (TEST-NET-1)
		"192.88.99.0/24",  // 6to4 relay anycast, deprecated (RFC 7526)
		"192.168.0.0/16",  // private
		"198.18.0.0/15",   // benchmarking (RFC 2544): lab networks
		"198.51.100.0/24", // documentation (TEST-NET-2)
		"203.0.113.0/24",  // documentation (TEST-NET-3)
		"224.0.0.0/4",     // multicast
		"240.0.0.0/4",     // reserved, and 255.255.255.255 broadcast
		"2001::/23",       // IETF protocol assignments: Teredo (2001::/32, an IPv4 client inside), benchmarking (2001:2::/48), ORCHID
		"2001:db8::/32",   // documentation
		"2002::/16",       // 6to4, deprecated (RFC 7526): its IPv4 address, maybe private, is reached through a relay
		"3fff::/20",       // documentation (RFC 9637)
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// globalUnicast is 2000::/3, IANA's IPv6 global unicast space: loopback,
// unspecified, IPv4-compatible (::/96), discard-only (100::/64),
// unique-local (fc00::/7), link-local (fe80::/10), site-local
// (fec0::/10), SRv6 (5f00::/16), multicast (ff00::/8) and the local-use
// NAT64 prefix (64:ff9b:1::/48, RFC 8215) all lie outside it.
var globalUnicast = netip.MustParsePrefix("2000::/3")

// nat64 is 64:ff9b::/96, the well-known NAT64 prefix (RFC 6052): a NAT64
// gateway connects to the IPv4 address in its last 32 bits, which DNS64
// resolvers hand out for IPv4-only names on IPv6-only networks. That IPv4
// address is what is checked.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// Refused reports whether quotad refuses to deliver to addr unless
// private addresses are allowed: an IPv4 address in refusedPrefixes; an
// IPv6 address outside the global unicast space (2000::/3) or in
// refusedPrefixes; an IPv4-mapped (::ffff:0:0/96) or well-known NAT64
// (64:ff9b::/96) address whose IPv4 address is refused.
func Refused(addr netip.Addr) bool {
	// A zone would make every Prefix.Contains false.
	addr = addr.Unmap().WithZone("")
	if nat64.Contains(addr) {
		b := addr.As16()
		return Refused(netip.AddrFrom4([4]byte(b[12:])))
	}
	if !addr.IsValid() || addr.Is6() && !globalUnicast.Contains(addr) {
		return true
	}
	for _, p := range refusedPrefixes {
		if p.Contains(addr) {
			return true
		}
	}
	return false
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
