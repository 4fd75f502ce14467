package egress

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// listener is a local HTTP server that counts the connections made to it, so a test can tell
// that a refused request never reached it, not even to open a connection.
type listener struct {
	*httptest.Server
	conns, requests atomic.Int32
}

func listen(t *testing.T, tls bool, h http.HandlerFunc) *listener {
	t.Helper()
	l := &listener{}
	l.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.requests.Add(1)
		h(w, r)
	}))
	l.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			l.conns.Add(1)
		}
	}
	if tls {
		l.StartTLS()
	} else {
		l.Start()
	}
	t.Cleanup(l.Close)
	return l
}

func accepted(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) }

// client is p's HTTPClient, without a proxy whatever the environment says, trusting the test
// server's certificate.
func client(p Policy, tlsServer *httptest.Server) *http.Client {
	tr := p.transport(func(*http.Request) (*url.URL, error) { return nil, nil }, net.DefaultResolver)
	if tlsServer != nil {
		tr.https.TLSClientConfig = tlsServer.Client().Transport.(*http.Transport).TLSClientConfig
	}
	c := p.HTTPClient(5 * time.Second)
	c.Transport = tr
	return c
}

// post returns the status of the answer to a POST to rawURL.
func post(c *http.Client, rawURL string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, strings.NewReader(`{"alert":1}`))
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

func TestDirectRequests(t *testing.T) {
	loopback := Policy{Allow: prefixes(t, "127.0.0.0/8,::1")}
	tests := map[string]struct {
		policy     Policy
		tls        bool
		host       string // in place of the listener's 127.0.0.1
		wantStatus int    // 0: refused, and the listener sees no connection
	}{
		"loopback, by address":             {},
		"loopback, over https":             {tls: true},
		"a name that resolves to loopback": {host: "localhost"},
		"loopback, allowlisted":            {policy: loopback, wantStatus: http.StatusAccepted},
		"a name for loopback, allowlisted": {policy: loopback, host: "localhost", wantStatus: http.StatusAccepted},
		"loopback allowlisted, over https": {policy: loopback, tls: true, wantStatus: http.StatusAccepted},
		"allowlisted, and denied":          {policy: Policy{Allow: loopback.Allow, Deny: prefixes(t, "127.0.0.1")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := listen(t, tc.tls, accepted)
			u := l.URL + "/hooks/T0K3N"
			if tc.host != "" {
				u = strings.Replace(u, "127.0.0.1", tc.host, 1)
			}
			var tlsServer *httptest.Server
			if tc.tls {
				tlsServer = l.Server
			}
			status, err := post(client(tc.policy, tlsServer), u)
			if tc.wantStatus != 0 {
				if err != nil || status != tc.wantStatus {
					t.Fatalf("POST = %d, %v; want %d", status, err, tc.wantStatus)
				}
				return
			}
			var refused *RefusedError
			if !errors.As(err, &refused) {
				t.Errorf("POST = %d, %v; want a *RefusedError", status, err)
			}
			if n := l.conns.Load(); n != 0 {
				t.Errorf("the listener saw %d connections, want none", n)
			}
		})
	}
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	target := listen(t, false, accepted)
	first := listen(t, false, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/elsewhere", http.StatusTemporaryRedirect)
	})
	status, err := post(client(Policy{Allow: prefixes(t, "127.0.0.0/8")}, nil), first.URL)
	if err != nil || status != http.StatusTemporaryRedirect {
		t.Errorf("POST = %d, %v; want the 307 itself", status, err)
	}
	if n := target.conns.Load(); n != 0 {
		t.Errorf("the redirect's target saw %d connections, want none", n)
	}
}

// names resolves the test's host names, as DNS would.
type names map[string][]netip.Addr

func (n names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	if addrs, ok := n[host]; ok {
		return addrs, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// Through a proxy the target is judged by name before the proxy hears of it. The proxy here is
// a local listener: were a refused target let through, the request would reach it, not the
// address it names.
func TestProxiedRequests(t *testing.T) {
	resolve := names{
		"metadata.test":   {netip.MustParseAddr("169.254.169.254")},
		"split.test":      {netip.MustParseAddr("20.50.2.1"), netip.MustParseAddr("10.0.0.7")},
		"hooks.test":      {netip.MustParseAddr("20.50.2.1"), netip.MustParseAddr("2603:1030::1")},
		"relay.corp.test": {netip.MustParseAddr("10.20.0.5")},
	}
	relays := Policy{Allow: prefixes(t, "10.20.0.0/16")}
	tests := map[string]struct {
		policy      Policy
		url         string
		wantReached bool
		wantErr     string
	}{
		"the metadata address":                 {url: "http://169.254.169.254/metadata/instance", wantErr: "refused"},
		"a name for the metadata address":      {url: "https://metadata.test/hook", wantErr: "refused"},
		"a name with one address inside":       {url: "https://split.test/hook", wantErr: "refused"},
		"Azure's host endpoint":                {url: "https://168.63.129.16/", wantErr: "refused"},
		"a public name, https":                 {url: "https://hooks.test/hook", wantReached: true},
		"a public name, plain http":            {url: "http://hooks.test/hook", wantErr: "use https"},
		"an allowlisted relay, plain http":     {policy: relays, url: "http://relay.corp.test/hook", wantErr: "list the host in NO_PROXY"},
		"a name that does not resolve":         {url: "https://nowhere.test/hook", wantErr: "no such host"},
		"a denied name, whatever else is said": {policy: Policy{Allow: relays.Allow, Deny: prefixes(t, "10.20.0.5")}, url: "http://relay.corp.test/", wantErr: "refused"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			proxy := listen(t, false, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) })
			proxyURL, _ := url.Parse(proxy.URL)
			c := &http.Client{Timeout: 5 * time.Second, Transport: tc.policy.transport(http.ProxyURL(proxyURL), resolve)}
			_, err := post(c, tc.url)
			if reached := proxy.requests.Load() > 0; reached != tc.wantReached {
				t.Errorf("the proxy was asked %d times, want reached %v (error %v)", proxy.requests.Load(), tc.wantReached, err)
			}
			if tc.wantErr == "" {
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("POST = %v, want an error saying %q", err, tc.wantErr)
			}
			if n := proxy.conns.Load(); n != 0 {
				t.Errorf("the proxy saw %d connections, want none", n)
			}
		})
	}
}

// The proxied transport is only for requests the judge has seen: one sent to it without the
// proxy the judge put in its context is refused, and the target is never dialled.
func TestProxiedTransportNeverDialsTheTarget(t *testing.T) {
	target := listen(t, false, accepted)
	tr := Policy{Allow: prefixes(t, "127.0.0.0/8")}.transport(http.ProxyURL(&url.URL{Scheme: "http", Host: "127.0.0.1:1"}), names{})
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, target.URL, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.proxied.RoundTrip(req)
	if err == nil {
		_ = resp.Body.Close()
	}
	var refused *RefusedError
	if !errors.As(err, &refused) || target.conns.Load() != 0 {
		t.Errorf("RoundTrip = %v with %d connections to the target, want refused with none", err, target.conns.Load())
	}
}

// The proxy is asked for the addresses that were judged, in turn, never the name, which it would
// resolve again: CONNECT to an address, with the name kept for the target's certificate and the
// Host header, and the proxy's own name for its certificate when it speaks TLS. The target is
// reached through a real tunnel, and its certificate checked against the name. Plain http,
// which a proxy takes by name, is refused.
func TestProxiedRequestsArePinned(t *testing.T) {
	target := listen(t, true, func(w http.ResponseWriter, r *http.Request) {
		if host, _, _ := net.SplitHostPort(r.Host); host != "example.com" {
			w.WriteHeader(http.StatusMisdirectedRequest)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	port := target.Listener.Addr().(*net.TCPAddr).Port
	resolve := names{
		// Nothing listens on the first: the proxy fails it, and the second is asked for.
		"example.com":     {netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("127.0.0.1")},
		"relay.corp.test": {netip.MustParseAddr("10.20.0.5")},
	}
	for _, proxyTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "http proxy", true: "https proxy"}[proxyTLS], func(t *testing.T) {
			var asked []string
			var mu sync.Mutex
			proxy := listen(t, proxyTLS, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				asked = append(asked, r.Method+" "+r.RequestURI+" auth:"+r.Header.Get("Proxy-Authorization"))
				mu.Unlock()
				up, err := net.Dial("tcp", r.Host)
				if r.Method != http.MethodConnect || err != nil {
					w.WriteHeader(http.StatusBadGateway)
					return
				}
				down, _, err := w.(http.Hijacker).Hijack()
				if err != nil {
					_ = up.Close()
					return
				}
				_, _ = io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n")
				go func() { _, _ = io.Copy(up, down); _ = up.Close() }()
				go func() { _, _ = io.Copy(down, up); _ = down.Close() }()
			})
			proxyURL, _ := url.Parse(proxy.URL)
			proxyURL.User = url.UserPassword("credwatch", "pr0xy")
			tr := Policy{Allow: prefixes(t, "127.0.0.0/8,10.20.0.0/16")}.transport(http.ProxyURL(proxyURL), resolve)
			tr.proxied.TLSClientConfig = target.Client().Transport.(*http.Transport).TLSClientConfig
			if proxyTLS {
				tr.proxyRoots = proxy.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
			}
			c := &http.Client{Timeout: 5 * time.Second, Transport: tr}

			if status, err := post(c, fmt.Sprintf("https://example.com:%d/hook", port)); err != nil || status != http.StatusAccepted {
				t.Errorf("POST through the tunnel = %d, %v; want %d from the target, its certificate checked for example.com", status, err, http.StatusAccepted)
			}
			if _, err := post(c, "http://relay.corp.test/hook"); err == nil || !strings.Contains(err.Error(), "NO_PROXY") {
				t.Errorf("POST in plain http through the proxy = %v, want refused: the proxy would resolve the name again", err)
			}
			auth := "auth:Basic " + base64.StdEncoding.EncodeToString([]byte("credwatch:pr0xy"))
			want := []string{fmt.Sprintf("CONNECT 127.0.0.3:%d %s", port, auth), fmt.Sprintf("CONNECT 127.0.0.1:%d %s", port, auth)}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(asked, want) {
				t.Errorf("the proxy was asked %q, want %q", asked, want)
			}
		})
	}
}

// A tunnel is bounded, whatever the name and the proxy do: a proxy that never answers is given
// up on, its connection closed, and a name of many addresses costs a few attempts, not one each.
func TestTunnelsAreBounded(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Close() })
	closed := make(chan struct{})
	go func() {
		c, err := silent.Accept()
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, c) // never answers; returns once credwatch hangs up
		close(closed)
	}()
	tr := Policy{}.transport(http.ProxyURL(&url.URL{Scheme: "http", Host: silent.Addr().String()}), names{"hooks.test": {netip.MustParseAddr("20.50.2.1")}})
	tr.tunnelTimeout = 300 * time.Millisecond
	if _, err := post(&http.Client{Transport: tr}, "https://hooks.test/hook"); err == nil {
		t.Fatal("POST through a proxy that never answers succeeded")
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the connection to the silent proxy is still open")
	}

	many := names{"many.test": nil}
	for i := range 20 {
		many["many.test"] = append(many["many.test"], netip.AddrFrom4([4]byte{20, 50, 2, byte(i + 1)}))
	}
	var asked atomic.Int32
	proxy := listen(t, false, func(w http.ResponseWriter, _ *http.Request) {
		asked.Add(1)
		w.WriteHeader(http.StatusBadGateway)
	})
	proxyURL, _ := url.Parse(proxy.URL)
	c := &http.Client{Transport: Policy{}.transport(http.ProxyURL(proxyURL), many)}
	if _, err := post(c, "https://many.test/hook"); err == nil || asked.Load() != tunnelAddresses {
		t.Errorf("POST = %v after %d tunnels asked for, want a failure after %d", err, asked.Load(), tunnelAddresses)
	}
}
