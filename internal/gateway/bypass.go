package gateway

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"

	"usher/internal/clientip"
	"usher/internal/wire"
)

// BypassRule lets a request through a gated path without a place in line:
// a monitoring probe or a partner system. A rule matches the client's
// address (Prefix: the address Config.Trusted derives, so X-Forwarded-For
// counts only from a trusted proxy) or a secret the request carries in
// wire.BypassHeader. Never the User-Agent: anyone can send one.
type BypassRule struct {
	// Name is what metrics and the console call the rule: the prefix, or
	// the secret's name (never the secret).
	Name   string
	Prefix netip.Prefix // a prefix rule
	sum    [32]byte     // a secret rule: the secret's SHA-256
	passed atomic.Int64
}

// minBypassSecret is the shortest secret accepted: guessing one is out of
// reach at any request rate.
const minBypassSecret = 32

// ParseBypassCIDR reads a prefix rule: an address or a CIDR prefix.
func ParseBypassCIDR(s string) (*BypassRule, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		a, aerr := netip.ParseAddr(s)
		if aerr != nil {
			return nil, fmt.Errorf("bypass %q: want an address or a CIDR prefix, as in 10.1.0.0/16", s)
		}
		p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
	}
	p = p.Masked()
	return &BypassRule{Name: p.String(), Prefix: p}, nil
}

// LoadBypassSecrets reads secret rules from a file of lines "NAME SECRET"
// (blank lines and lines starting with # are skipped). A secret has at
// least 32 characters, printable ASCII without spaces; names are unique.
func LoadBypassSecrets(path string) ([]*BypassRule, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bypass secrets: %w", err)
	}
	defer f.Close()
	var rules []*BypassRule
	names := map[string]bool{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, secret, ok := strings.Cut(line, " ")
		secret = strings.TrimSpace(secret)
		switch {
		case !ok || name == "" || strings.ContainsAny(secret, " \t"):
			return nil, fmt.Errorf("bypass secrets %s:%d: want NAME SECRET", path, n)
		case len(secret) < minBypassSecret || strings.IndexFunc(secret, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0:
			return nil, fmt.Errorf("bypass secrets %s:%d: the secret of %q: want at least %d printable ASCII characters", path, n, name, minBypassSecret)
		case names[name]:
			return nil, fmt.Errorf("bypass secrets %s:%d: %q named twice", path, n, name)
		}
		names[name] = true
		rules = append(rules, &BypassRule{Name: name, sum: sha256.Sum256([]byte(secret))})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bypass secrets: %w", err)
	}
	return rules, nil
}

// Kind is "cidr" or "secret".
func (b *BypassRule) Kind() string {
	if b.Prefix.IsValid() {
		return "cidr"
	}
	return "secret"
}

// Passed counts the requests the rule let through since the start.
func (b *BypassRule) Passed() int64 { return b.passed.Load() }

// bypass returns the first rule of rules that lets r through. The header
// is compared with every secret in constant time, whatever matches.
func bypass(rules []*BypassRule, r *http.Request, trusted clientip.Trusted) *BypassRule {
	if len(rules) == 0 {
		return nil
	}
	var addr netip.Addr
	var sum [32]byte
	header := r.Header.Get(wire.BypassHeader)
	if header != "" {
		sum = sha256.Sum256([]byte(header))
	}
	var found *BypassRule
	for _, b := range rules {
		switch {
		case b.Prefix.IsValid():
			if !addr.IsValid() {
				addr = trusted.Addr(r)
			}
			if found == nil && b.Prefix.Contains(addr) {
				found = b
			}
		case header != "":
			if subtle.ConstantTimeCompare(sum[:], b.sum[:]) == 1 && found == nil {
				found = b
			}
		}
	}
	if found != nil {
		found.passed.Add(1)
	}
	return found
}

// BypassList lists rs's bypass rules with their counts, for the API and
// the console.
func (rs Rules) BypassList() []wire.BypassRule {
	out := make([]wire.BypassRule, len(rs.Bypass))
	for i, b := range rs.Bypass {
		out[i] = wire.BypassRule{Name: b.Name, Kind: b.Kind(), Passed: b.Passed()}
	}
	return out
}
