package kubeconfig

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// AddressPolicy decides which addresses the hub may connect to on behalf of an
// untrusted kubeconfig. Loopback, link-local (cloud metadata services among them),
// unspecified and multicast addresses, and the hub's own API endpoints, are refused
// unless they are in Allowed. It is applied when a connection is made, to the address
// actually dialled, so neither a DNS name that resolves to a refused address nor a
// redirect gets round it.
type AddressPolicy struct {
	// Allowed are networks an admin allows even though they would be refused
	// (--import-allowed-networks), e.g. 127.0.0.0/8 for downstream clusters on the
	// hub's own machine.
	Allowed []netip.Prefix
	// Own are the hub's own API endpoints. An unspecified address (0.0.0.0:6443)
	// stands for that port on every address of this machine.
	Own []netip.AddrPort
	// RefusePrivate refuses private networks too (10.0.0.0/8, 172.16.0.0/12,
	// 192.168.0.0/16, the shared 100.64.0.0/10 and IPv6 unique local fc00::/7):
	// the services of the hub's own network, for connections a workspace user names.
	RefusePrivate bool
	// For and Flag name, in refusals, what the connection was for and the flag that
	// allows an address; default an imported cluster and --import-allowed-networks.
	For, Flag string
	// localAddrs lists this machine's addresses; nil means net.InterfaceAddrs.
	localAddrs func() ([]net.Addr, error)
}

// AddressError is a connection the policy refused.
type AddressError struct {
	Address   netip.AddrPort
	Why       string
	For, Flag string
}

func (e *AddressError) Error() string {
	what, flag := e.For, e.Flag
	if what == "" {
		what, flag = "an imported cluster", "--import-allowed-networks"
	}
	return fmt.Sprintf("the hub does not connect to %s for %s: it is %s (an admin can allow it with %s)", e.Address, what, e.Why, flag)
}

// ParsePrefixes parses CIDRs, or single addresses, into prefixes.
func ParsePrefixes(values []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range values {
		if p, err := netip.ParsePrefix(v); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a CIDR nor an IP address", v)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// Check returns an *AddressError if the policy refuses addr.
func (p *AddressPolicy) Check(addr netip.AddrPort) error {
	ip := addr.Addr().Unmap()
	addr = netip.AddrPortFrom(ip, addr.Port())
	for _, allowed := range p.Allowed {
		if allowed.Contains(ip) {
			return nil
		}
	}
	if why := p.refused(ip, addr.Port()); why != "" {
		return &AddressError{Address: addr, Why: why, For: p.For, Flag: p.Flag}
	}
	// An IPv4 address written in an IPv6 form that a gateway on the way turns back
	// into it: refused as that IPv4 address would be.
	if v4, form, ok := embeddedIPv4(ip); ok {
		if why := p.refused(v4, addr.Port()); why != "" {
			return &AddressError{Address: addr, Why: fmt.Sprintf("%s (%s, written as %s)", why, v4, form), For: p.For, Flag: p.Flag}
		}
	}
	return nil
}

// refused says why the policy refuses ip at port, or "".
func (p *AddressPolicy) refused(ip netip.Addr, port uint16) string {
	switch {
	case ip.IsLoopback():
		return "a loopback address"
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		return "a link-local address (where cloud metadata services answer)"
	case ip.IsUnspecified():
		return "the unspecified address, which reaches this machine"
	case ip.IsMulticast() || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "a multicast or broadcast address"
	case p.RefusePrivate && (ip.IsPrivate() || sharedAddressSpace.Contains(ip)):
		return "a private address"
	}
	for _, own := range p.Own {
		if own.Port() != port {
			continue
		}
		if own.Addr().Unmap() == ip {
			return "the hub's own API server"
		}
		if own.Addr().IsUnspecified() && p.isLocal(ip) {
			return "the hub's own API server (it listens on every address of this machine)"
		}
	}
	return ""
}

// sharedAddressSpace is carrier-grade NAT's (RFC 6598), private to a provider.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// IPv6 prefixes that carry an IPv4 address a translator or relay reaches.
var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052
	nat64Local     = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215
	sixToFour      = netip.MustParsePrefix("2002::/16")      // RFC 3056
	teredo         = netip.MustParsePrefix("2001::/32")      // RFC 4380
	ipv4Compatible = netip.MustParsePrefix("::/96")          // RFC 4291, deprecated
)

// embeddedIPv4 is the IPv4 address ip carries in a NAT64, 6to4, Teredo or
// IPv4-compatible form, and the form's name.
func embeddedIPv4(ip netip.Addr) (netip.Addr, string, bool) {
	if !ip.Is6() || ip.Is4In6() {
		return netip.Addr{}, "", false
	}
	b := ip.As16()
	switch {
	case nat64WellKnown.Contains(ip) || nat64Local.Contains(ip):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), "NAT64", true
	case sixToFour.Contains(ip):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), "6to4", true
	case teredo.Contains(ip):
		// The client's address, inverted.
		return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}), "Teredo", true
	case ipv4Compatible.Contains(ip) && !ip.IsLoopback() && !ip.IsUnspecified():
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), "IPv4-compatible IPv6", true
	}
	return netip.Addr{}, "", false
}

func (p *AddressPolicy) isLocal(ip netip.Addr) bool {
	list := net.InterfaceAddrs
	if p.localAddrs != nil {
		list = p.localAddrs
	}
	addrs, err := list()
	if err != nil {
		return true // cannot tell: treat it as the hub's own
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if local, ok := netip.AddrFromSlice(n.IP); ok && local.Unmap() == ip {
				return true
			}
		}
	}
	return false
}

// Control is a net.Dialer Control function that applies the policy to every
// connection before it is made.
func (p *AddressPolicy) Control(_, address string, _ syscall.RawConn) error {
	addr, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dialling %q: %w", address, err)
	}
	return p.Check(addr)
}

// Transport is an HTTP transport that applies the policy to every connection. It
// uses no proxy, so that the policy sees the address actually dialled.
func (p *AddressPolicy) Transport() *http.Transport {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: p.Control}
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: time.Minute,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
	}
}

// Endpoints resolves host:port URLs' hosts (the hub's own API URLs) into addresses for
// Own; a name that does not resolve is left out.
func Endpoints(hostPorts ...string) []netip.AddrPort {
	var out []netip.AddrPort
	for _, hp := range hostPorts {
		host, portStr, err := net.SplitHostPort(hp)
		if err != nil {
			continue
		}
		port, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil {
			continue
		}
		if a, err := netip.ParseAddr(host); err == nil {
			out = append(out, netip.AddrPortFrom(a.Unmap(), uint16(port)))
			continue
		}
		ips, err := net.LookupIP(host)
		if err != nil {
			continue
		}
		for _, ip := range ips {
			if a, ok := netip.AddrFromSlice(ip); ok {
				out = append(out, netip.AddrPortFrom(a.Unmap(), uint16(port)))
			}
		}
	}
	return out
}
