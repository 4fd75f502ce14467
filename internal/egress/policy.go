package egress

import (
	"fmt"
	"net/netip"
	"strings"
)

// refused are the ranges a watch's destinations may not be in unless the operator allows them.
var refused = mustPrefixes(
	"0.0.0.0/8",        // "this network": 0.0.0.0 reaches the operator's own host
	"10.0.0.0/8",       // private (RFC 1918)
	"100.64.0.0/10",    // shared (RFC 6598): carrier-grade NAT, and some clusters' pods
	"127.0.0.0/8",      // loopback: the operator's own pod
	"168.63.129.16/32", // Azure's host endpoint (WireServer), which every Azure VM reaches
	"169.254.0.0/16",   // link-local: the instance metadata service at 169.254.169.254
	"172.16.0.0/12",    // private (RFC 1918)
	"192.0.0.0/24",     // IETF protocol assignments (RFC 6890): DS-Lite and NAT64 discovery, not hosts
	"192.88.99.0/24",   // 6to4 relay anycast (RFC 7526): a relay to IPv6 destinations unjudged
	"198.18.0.0/15",    // benchmarking (RFC 2544): lab networks, often inside
	"192.168.0.0/16",   // private (RFC 1918)
	"224.0.0.0/4",      // multicast
	"240.0.0.0/4",      // reserved, and the broadcast address 255.255.255.255
	"::/96",            // unspecified (::), loopback (::1) and the IPv4-compatible addresses
	"64:ff9b:1::/48",   // local-use NAT64 (RFC 8215): where the IPv4 address sits is the network's choice
	"2002::/16",        // 6to4 (RFC 3056): the relay leads to the IPv4 address inside, private ones too
	"2001::/32",        // Teredo (RFC 4380): the same, through a Teredo relay
	"::ffff:0:0:0/96",  // IPv4-translated (RFC 2765, SIIT): a translator leads to the IPv4 address
	"fc00::/7",         // unique-local
	"fe80::/10",        // link-local
	"ff00::/8",         // multicast
)

// nat64 is the well-known NAT64 prefix (RFC 6052): its addresses lead, through the cluster's
// NAT64 gateway, to the IPv4 address in their last four bytes, which is the one to judge.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// Policy decides which addresses the destinations a watch names may be connected to. The zero
// Policy refuses the built-in ranges (loopback, link-local, private, shared, unique-local,
// multicast, Azure's host endpoint) and permits the rest.
type Policy struct {
	// Allow lets ranges through that a built-in range refuses: a relay or receiver the operator's
	// admin runs inside, or loopback for tests. Plain http may reach these ranges only.
	Allow Prefixes
	// Deny refuses more ranges, such as the cluster's Service and Pod CIDRs, which need not be
	// private. It wins over Allow, so that a broad allowance can keep holes in it.
	Deny Prefixes
}

// Permits reports whether a connection to a may be made.
func (p Policy) Permits(a netip.Addr) bool {
	a = canonical(a)
	switch {
	case !a.IsValid() || p.Deny.contain(a):
		return false
	case p.Allow.contain(a):
		return true
	}
	return !refused.contain(a)
}

// Allowlisted reports whether a is in a range of Allow and not of Deny: the addresses that plain
// http may reach, as a sidecar or an in-cluster receiver the admin vouches for.
func (p Policy) Allowlisted(a netip.Addr) bool {
	a = canonical(a)
	return a.IsValid() && !p.Deny.contain(a) && p.Allow.contain(a)
}

// check returns a *RefusedError when a may not be reached, over plain http when plain is set.
func (p Policy) check(a netip.Addr, plain bool) error {
	switch {
	case !p.Permits(a):
		return &RefusedError{}
	case plain && !p.Allowlisted(a):
		return &RefusedError{plain: true}
	}
	return nil
}

// canonical is the address a connection to a reaches: without a zone, which would keep it out of
// every prefix, as IPv4 when it is an IPv4-mapped IPv6 address, and as the IPv4 address behind
// a NAT64 one.
func canonical(a netip.Addr) netip.Addr {
	a = a.WithZone("").Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		return netip.AddrFrom4([4]byte(b[12:]))
	}
	return a
}

// RefusedError is a connection the destination policy refused. It says no more than that: the
// address a name resolved to, and whether anything answered there, is what a port scan through
// the watch's conditions would want to learn.
type RefusedError struct {
	// plain: the address may be reached, but encrypted only; proxied: through the proxy.
	plain, proxied bool
}

func (e *RefusedError) Error() string {
	if e.proxied {
		return "plain http through a proxy refused by the operator's destination policy: use https, or list the host in NO_PROXY"
	}
	if e.plain {
		return "unencrypted connection refused by the operator's destination policy: use https, or TLS for SMTP"
	}
	return "refused by the operator's destination policy"
}

// Prefixes is a list of address ranges. As a flag.Value it takes comma-separated CIDRs, or
// addresses, each its own range, and may be given more than once.
type Prefixes []netip.Prefix

// String implements flag.Value.
func (ps *Prefixes) String() string {
	if ps == nil {
		return ""
	}
	s := make([]string, len(*ps))
	for i, p := range *ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// Set implements flag.Value.
func (ps *Prefixes) Set(value string) error {
	for _, field := range strings.Split(value, ",") {
		if field = strings.TrimSpace(field); field == "" {
			continue
		}
		p, err := parsePrefix(field)
		if err != nil {
			return err
		}
		*ps = append(*ps, p)
	}
	return nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	var p netip.Prefix
	var err error
	if strings.Contains(s, "/") {
		p, err = netip.ParsePrefix(s)
	} else {
		var a netip.Addr
		a, err = netip.ParseAddr(s)
		p = netip.PrefixFrom(a.WithZone(""), a.BitLen())
	}
	if err != nil {
		return p, fmt.Errorf("%q is neither a CIDR nor an address", s)
	}
	// Addresses are judged in their IPv4 form; an IPv4-mapped range must be too, to match them.
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

func (ps Prefixes) contain(a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func mustPrefixes(s ...string) Prefixes {
	ps := make(Prefixes, len(s))
	for i, v := range s {
		ps[i] = netip.MustParsePrefix(v)
	}
	return ps
}
