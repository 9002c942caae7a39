// Package clientip names the client behind a request for per-client limits:
// the key under which a stranger's new queue places are counted.
//
// The key is the peer's address, or, when the peer is a trusted proxy, the
// first address in X-Forwarded-For that is not a trusted proxy, read from the
// right: each proxy appends the address it received the request from, so the
// right-most untrusted entry is the last one written by a machine the
// operator trusts and cannot be forged by the client (the left-most entry is
// whatever the client sent). IPv4 addresses are keyed whole; IPv6 addresses
// by their /64, since one subscriber commonly holds a whole /64.
//
// Limits: clients behind one carrier-grade NAT share a key; size per-client
// limits for that (thousands of users behind one address on mobile
// networks).
package clientip

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Trusted is a set of proxy networks whose X-Forwarded-For is believed.
type Trusted []netip.Prefix

// ParseTrusted parses a comma-separated list of CIDRs or addresses.
func ParseTrusted(s string) (Trusted, error) {
	var t Trusted
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q: want a CIDR such as 10.0.0.0/8 or an address", f)
			}
			f = netip.PrefixFrom(a, a.BitLen()).String()
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: want a CIDR such as 10.0.0.0/8 or an address", f)
		}
		t = append(t, p.Masked())
	}
	return t, nil
}

// Contains reports whether a is the address of a trusted proxy.
func (t Trusted) Contains(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Key returns the client key of r: "ip:<addr>" or "ip:<prefix>/64".
func (t Trusted) Key(r *http.Request) string {
	return key(t.Addr(r))
}

// KeyAddr returns the client key of the address a, as Key does for a
// request from a (a peer's connection, before any request is read).
func KeyAddr(a netip.Addr) string {
	return key(a.Unmap())
}

// Addr returns the client address of r (see the package comment). An
// unparsable peer address yields the zero Addr, which keys as "ip:unknown".
func (t Trusted) Addr(r *http.Request) netip.Addr {
	peer := parseHostPort(r.RemoteAddr)
	if !peer.IsValid() || !t.Contains(peer) {
		return peer
	}
	client := peer
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		fields := strings.Split(hops[i], ",")
		for j := len(fields) - 1; j >= 0; j-- {
			a, err := netip.ParseAddr(strings.TrimSpace(fields[j]))
			if err != nil {
				// A hop that is not an address ends what can be believed;
				// the last believable hop is the client.
				return client
			}
			client = a.Unmap()
			if !t.Contains(client) {
				return client
			}
		}
	}
	return client
}

func parseHostPort(s string) netip.Addr {
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		host = s
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

func key(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "ip:unknown"
	case a.Is4():
		return "ip:" + a.String()
	default:
		p, _ := a.WithZone("").Prefix(64)
		return "ip:" + p.String()
	}
}
