package egress

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"syscall"
	"time"
)

// Dialer returns a dialer that refuses, with a *RefusedError, to connect where the policy does
// not permit. Each address a name resolves to is judged as the connection to it is made.
func (p Policy) Dialer() *net.Dialer { return p.dialer(false) }

// PlainDialer returns a dialer for protocols in the clear, such as SMTP without TLS: besides what
// Dialer refuses, it refuses every address the policy does not allowlist, as plain http is.
func (p Policy) PlainDialer() *net.Dialer { return p.dialer(true) }

// dialer judges, in Control, the resolved address it is about to connect to; when plain is set,
// as a destination of plain http.
func (p Policy) dialer(plain bool) *net.Dialer {
	return &net.Dialer{
		Timeout:   30 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return &RefusedError{}
			}
			return p.check(ap.Addr(), plain)
		},
	}
}

// HTTPClient returns the client for webhooks a watch names. It refuses what the policy does,
// and plain http to any address that is not allowlisted: the URL and the alert are the
// receiver's secrets. It follows no redirect, since where a redirect points is chosen by whoever
// answers, and a 3xx is the answer. Through the proxy the environment names (HTTPS_PROXY,
// NO_PROXY), the target's name is resolved and judged before the request goes to the proxy, and
// the proxy is asked to tunnel to the address judged, not the name, which it would resolve
// again: a name whose answer changes between the two would otherwise lead the proxy inside.
// Plain http, which a proxy cannot be asked for an address, is not proxied: it is refused.
func (p Policy) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout:       timeout,
		Transport:     p.transport(http.ProxyFromEnvironment, net.DefaultResolver),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// resolver is the part of net.Resolver the proxied path uses; tests give names of their own.
type resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// transport sends each request the way its destination is judged: straight to the target over
// a dialer that judges each address, or to the proxy, pinned to the address judged.
type transport struct {
	policy   Policy
	proxy    func(*http.Request) (*url.URL, error)
	resolver resolver
	// https and http connect to targets.
	https, http *http.Transport
	// tls is what proxied https trusts (nil: the system's roots).
	tls *tls.Config

	mu sync.Mutex
	// proxied reach https targets through the proxy, by server name: with the address in the
	// URL, the name the certificate must show is the transport's to know.
	proxied map[string]*http.Transport
}

// maxProxied bounds the proxied transports kept, one per server name a watch named.
const maxProxied = 64

// proxyKey holds, in a pinned request's context, the proxy its original request was given.
type proxyKey struct{}

func (p Policy) transport(proxy func(*http.Request) (*url.URL, error), r resolver) *transport {
	t := &transport{policy: p, proxy: proxy, resolver: r, https: newTransport(), http: newTransport(), proxied: map[string]*http.Transport{}}
	t.https.DialContext = p.dialer(false).DialContext
	t.http.DialContext = p.dialer(true).DialContext
	return t
}

func newTransport() *http.Transport {
	return &http.Transport{
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          10,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// RoundTrip implements http.RoundTripper.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	plain := req.URL.Scheme != "https"
	proxyURL, err := t.proxy(req)
	if err == nil && proxyURL == nil {
		if plain {
			return t.http.RoundTrip(req)
		}
		return t.https.RoundTrip(req)
	}
	if err == nil && plain {
		// A proxy takes plain http's target from the Host header, which must keep the name, and
		// would resolve it again: only a tunnel can be pinned.
		err = &RefusedError{plain: true, proxied: true}
	}
	var addr netip.Addr
	if err == nil {
		addr, err = t.judgeName(req.Context(), req.URL.Hostname(), plain)
	}
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, even when it sends nothing
		}
		return nil, err
	}
	pinned := req.Clone(context.WithValue(req.Context(), proxyKey{}, proxyURL))
	port := req.URL.Port()
	if port == "" {
		port = "443"
	}
	pinned.URL.Host = net.JoinHostPort(addr.String(), port)
	if pinned.Host == "" {
		pinned.Host = req.URL.Host
	}
	return t.proxiedFor(req.URL.Hostname()).RoundTrip(pinned)
}

// proxiedFor is the proxied transport for server name. Its proxy is the one
// in the request's context, put there once the target was judged; a request without one is
// refused rather than sent anywhere.
func (t *transport) proxiedFor(name string) *http.Transport {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tr, ok := t.proxied[name]; ok {
		return tr
	}
	if len(t.proxied) >= maxProxied {
		for n, tr := range t.proxied {
			tr.CloseIdleConnections()
			delete(t.proxied, n)
		}
	}
	tr := newTransport()
	tr.Proxy = func(req *http.Request) (*url.URL, error) {
		if u, _ := req.Context().Value(proxyKey{}).(*url.URL); u != nil {
			return u, nil
		}
		return nil, &RefusedError{}
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.tls != nil {
		cfg = t.tls.Clone()
	}
	cfg.ServerName = name
	tr.TLSClientConfig = cfg
	t.proxied[name] = tr
	return tr
}

// judgeName resolves host and refuses it if any of its addresses is refused: another answer
// could give any of them. It returns the first, to which the proxy is sent.
func (t *transport) judgeName(ctx context.Context, host string, plain bool) (netip.Addr, error) {
	addrs, err := t.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.Addr{}, err
	}
	if len(addrs) == 0 {
		return netip.Addr{}, &RefusedError{}
	}
	for _, a := range addrs {
		if err := t.policy.check(a, plain); err != nil {
			return netip.Addr{}, err
		}
	}
	return addrs[0].WithZone("").Unmap(), nil
}
