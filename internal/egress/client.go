package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
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
// a dialer that judges each address, or through a tunnel the proxy opens to an address judged.
type transport struct {
	policy   Policy
	proxy    func(*http.Request) (*url.URL, error)
	resolver resolver
	// https and http connect to targets; proxied opens tunnels through the proxy (tunnel).
	https, http, proxied *http.Transport
	// proxyRoots are what an https proxy's certificate must chain to; nil: the system's.
	proxyRoots *x509.CertPool
	// tunnelTimeout bounds opening a tunnel (tests shorten it).
	tunnelTimeout time.Duration
}

// proxyKey holds, in the context of a request for the proxied transport, the proxy the
// environment gives it.
type proxyKey struct{}

func (p Policy) transport(proxy func(*http.Request) (*url.URL, error), r resolver) *transport {
	t := &transport{policy: p, proxy: proxy, resolver: r, https: newTransport(), http: newTransport(), proxied: newTransport(), tunnelTimeout: tunnelTimeout}
	t.https.DialContext = p.dialer(false).DialContext
	t.http.DialContext = p.dialer(true).DialContext
	// No Proxy: the tunnel is this transport's own, so that TLS to the target, on top of it,
	// checks the target's name, and TLS to an https proxy the proxy's.
	t.proxied.DialContext = t.tunnel
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
		// A proxy takes plain http's target by name, which it would resolve again: only a
		// tunnel can be held to an address.
		err = &RefusedError{plain: true, proxied: true}
	}
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, even when it sends nothing
		}
		return nil, err
	}
	return t.proxied.RoundTrip(req.WithContext(context.WithValue(req.Context(), proxyKey{}, proxyURL)))
}

// Bounds of a tunnel through the proxy, which a watch's author could otherwise stretch with a
// name of many unreachable addresses: the time to open one, all addresses tried, as the direct
// dialer's timeout bounds a dial; how many addresses are tried; how long the proxy's answer to
// CONNECT may be.
const (
	tunnelTimeout   = 30 * time.Second
	tunnelAddresses = 4
	maxTunnelAnswer = 16 << 10
)

// tunnel connects to address (name:port) through the proxy in ctx: it resolves and judges the
// name, then asks the proxy to CONNECT to each address judged in turn, never to the name, which
// the proxy would resolve again. A context without a proxy is refused, not dialled.
func (t *transport) tunnel(ctx context.Context, _, address string) (net.Conn, error) {
	proxyURL, _ := ctx.Value(proxyKey{}).(*url.URL)
	if proxyURL == nil {
		return nil, &RefusedError{}
	}
	// The Transport dials with its own context, without the request's deadline.
	ctx, cancel := context.WithTimeout(ctx, t.tunnelTimeout)
	defer cancel()
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, &RefusedError{}
	}
	addrs, err := t.judgeName(ctx, host, false)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, a := range addrs[:min(len(addrs), tunnelAddresses)] {
		// A third of the time each, so that an address the proxy cannot reach (IPv6 first on a
		// network without it) leaves time for the next.
		attempt, cancel := context.WithTimeout(ctx, t.tunnelTimeout/3)
		conn, err := t.connect(attempt, proxyURL, net.JoinHostPort(a.String(), port))
		cancel()
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// connect opens a tunnel to target (ip:port) through the proxy at proxyURL, over TLS to the
// proxy when its scheme is https, with its user and password as Basic credentials.
func (t *transport) connect(ctx context.Context, proxyURL *url.URL, target string) (net.Conn, error) {
	port := map[string]string{"http": "80", "https": "443"}[proxyURL.Scheme]
	if port == "" {
		return nil, fmt.Errorf("the proxy %s://… is not an http or https proxy, which watches' webhooks need", proxyURL.Scheme)
	}
	addr := proxyURL.Host
	if proxyURL.Port() == "" {
		addr = net.JoinHostPort(proxyURL.Hostname(), port)
	}
	d := net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connecting to the proxy: %w", err)
	}
	if proxyURL.Scheme == "https" {
		tc := tls.Client(conn, &tls.Config{ServerName: proxyURL.Hostname(), RootCAs: t.proxyRoots, MinVersion: tls.VersionTLS12})
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("connecting to the proxy: %w", err)
		}
		conn = tc
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: target}, Host: target, Header: http.Header{}}
	if u := proxyURL.User; u != nil {
		pw, _ := u.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pw)))
	}
	br := bufio.NewReader(io.LimitReader(conn, maxTunnelAnswer))
	// The body of a 200 to CONNECT, when Go makes one at all (an HTTP/1.0 proxy's answer, or one
	// with a length), is the tunnel: it is never read or closed.
	resp, err := func() (*http.Response, error) {
		if err := req.Write(conn); err != nil {
			return nil, err
		}
		return http.ReadResponse(br, req)
	}() //nolint:bodyclose // see above
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("asking the proxy for a tunnel: %w", err)
	}
	// A 2xx to CONNECT has no body, whatever its headers say (RFC 9110, 9.3.6): the body Go
	// makes of it is the tunnel, never read; bytes read past the answer would be lost to it.
	if resp.StatusCode != http.StatusOK || br.Buffered() > 0 {
		_ = conn.Close()
		// The status only: what the proxy says of the address is no one else's business.
		return nil, fmt.Errorf("the proxy refused a tunnel: %s", resp.Status)
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, nil
}

// judgeName resolves host and refuses it if any of its addresses is refused: another answer
// could give any of them. It returns them, for the proxy to be sent to.
func (t *transport) judgeName(ctx context.Context, host string, plain bool) ([]netip.Addr, error) {
	addrs, err := t.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, &RefusedError{}
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if err := t.policy.check(a, plain); err != nil {
			return nil, err
		}
		out = append(out, a.WithZone("").Unmap())
	}
	return out, nil
}
