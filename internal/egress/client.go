package egress

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"net/url"
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
// NO_PROXY), the target's name is resolved and judged before the request goes to the proxy,
// which connects wherever it is asked.
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
// a dialer that judges each address, or to the proxy once the target's name has been judged.
type transport struct {
	policy   Policy
	proxy    func(*http.Request) (*url.URL, error)
	resolver resolver
	// https and http connect to targets; proxied to proxies only.
	https, http, proxied *http.Transport
}

func (p Policy) transport(proxy func(*http.Request) (*url.URL, error), r resolver) *transport {
	t := &transport{policy: p, proxy: proxy, resolver: r, https: newTransport(), http: newTransport(), proxied: newTransport()}
	t.https.DialContext = p.dialer(false).DialContext
	t.http.DialContext = p.dialer(true).DialContext
	t.proxied.Proxy = func(req *http.Request) (*url.URL, error) {
		u, err := proxy(req)
		if u == nil && err == nil {
			// It would dial the target with no judge in the way.
			return nil, &RefusedError{}
		}
		return u, err
	}
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
	if err == nil {
		err = t.judgeName(req.Context(), req.URL.Hostname(), plain)
	}
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, even when it sends nothing
		}
		return nil, err
	}
	return t.proxied.RoundTrip(req)
}

// judgeName resolves host and refuses it if any of its addresses is refused: the proxy may
// connect to any of them.
func (t *transport) judgeName(ctx context.Context, host string, plain bool) error {
	addrs, err := t.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return err
	}
	if len(addrs) == 0 {
		return &RefusedError{}
	}
	for _, a := range addrs {
		if err := t.policy.check(a, plain); err != nil {
			return err
		}
	}
	return nil
}
