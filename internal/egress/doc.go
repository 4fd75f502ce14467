// Package egress keeps the alert destinations a CredentialWatch names from reaching inside: the
// operator's own pod (loopback), the node and the cloud's metadata service (link-local,
// 169.254.169.254, Azure's host endpoint 168.63.129.16), private and shared ranges, and the
// cluster's Service and Pod ranges the operator is told of. Anyone who may create a watch could
// otherwise name a webhook or an SMTP host there and read what answered in its conditions.
//
// The address is judged as the connection is made, after DNS (net.Dialer.Control), so a name
// that resolves inside is refused as surely as an address, with no window for DNS to answer
// differently between a check and the connection.
//
// It is written here on net/netip rather than taken from code.dny.dev/ssrf, which does the dial
// check well but only as a Control function: the proxied path and the https-unless-allowlisted
// rule need to ask the same question outside a dial, an allowlisted IPv4 range must cover its
// IPv4-mapped IPv6 form, and webhooks and SMTP relays listen on any port, where that library
// allows 80 and 443 unless told otherwise. The ranges are few, and each is tested.
package egress
