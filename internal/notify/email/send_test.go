package email

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/credwatch/credwatch/internal/egress"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/test/mailpit"
)

const (
	user     = "credwatch"
	password = "Zq8-s3cret-Pa55"
)

// options points at a mailpit; edit changes what a case is about.
func options(m *mailpit.Server, mode TLSMode, roots *x509.CertPool, edit func(*Options)) Options {
	o := Options{
		Host: "127.0.0.1", Port: m.SMTPPort, TLS: mode, RootCAs: roots,
		From: "credwatch <alerts@example.com>", To: []string{"ops@example.com", "Platform Team <platform@example.com>"},
		Timeout: 5 * time.Second,
	}
	if edit != nil {
		edit(&o)
	}
	return o
}

func send(t *testing.T, o Options, a notify.Alert) error {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Send(ctx, a)
}

// wantDelivered checks the one message mailpit has against what the channel renders. That AUTH
// worked shows only in the delivery: the servers with a password file refuse mail without it, and
// mailpit 1.27 records the user of AUTH LOGIN but not of AUTH PLAIN, which go-mail uses here.
func wantDelivered(t *testing.T, m *mailpit.Server, a notify.Alert) {
	t.Helper()
	msgs := m.Messages(t)
	if len(msgs) != 1 {
		t.Fatalf("mailpit has %d messages, want 1", len(msgs))
	}
	got := msgs[0]
	html, err := renderHTML(a)
	if err != nil {
		t.Fatal(err)
	}
	var to []string
	for _, r := range got.To {
		to = append(to, r.Name+" <"+r.Address+">")
	}
	checks := []struct{ what, got, want string }{
		{"subject", got.Subject, a.Title()},
		{"from", got.From.Name + " <" + got.From.Address + ">", "credwatch <alerts@example.com>"},
		{"to", strings.Join(to, ", "), " <ops@example.com>, Platform Team <platform@example.com>"},
		{"Message-ID", got.MessageID, "credwatch." + a.ID + "@example.com"},
		{"text part", normalize(got.Text), normalize(notify.Text(a))},
		{"HTML part", normalize(got.HTML), normalize(html)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
	if h := m.Headers(t, got.ID)[HeaderAlertID]; len(h) != 1 || h[0] != a.ID {
		t.Errorf("%s = %q, want [%q]", HeaderAlertID, h, a.ID)
	}
}

// normalize undoes what SMTP does to line endings.
func normalize(s string) string {
	return strings.TrimRight(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
}

// wantFailed checks that err is a DeliveryError of the right kind that does not give the password
// away, and that nothing was delivered.
func wantFailed(t *testing.T, m *mailpit.Server, err error, wantPermanent bool, wantText string) {
	t.Helper()
	t.Logf("Send() error: %v", err)
	var de *notify.DeliveryError
	if !errors.As(err, &de) {
		t.Fatalf("Send() error = %v (%T), want a *notify.DeliveryError", err, err)
	}
	if de.Permanent != wantPermanent {
		t.Errorf("Permanent = %v, want %v, for %v", de.Permanent, wantPermanent, err)
	}
	if !strings.Contains(err.Error(), wantText) {
		t.Errorf("Send() error = %q, want it to mention %q", err, wantText)
	}
	if strings.Contains(err.Error(), password) {
		t.Errorf("Send() error gives the password away: %q", err)
	}
	if m != nil {
		if n := len(m.Messages(t)); n != 0 {
			t.Errorf("mailpit has %d messages, want none", n)
		}
	}
}

func TestSendStartTLSWithAuth(t *testing.T) {
	t.Parallel()
	tlsArgs, roots := mailpit.TLSFlags(t)

	t.Run("the right password delivers", func(t *testing.T) {
		m := mailpit.Start(t, append(append(tlsArgs, "--smtp-require-starttls"), mailpit.AuthFlags(t, user, password)...)...)
		a := reminder()
		if err := send(t, options(m, StartTLS, roots, func(o *Options) { o.Username, o.Password = user, password }), a); err != nil {
			t.Fatalf("Send() error = %v", err)
		}
		wantDelivered(t, m, a)
	})

	m := mailpit.Start(t, append(append(tlsArgs, "--smtp-require-starttls"), mailpit.AuthFlags(t, user, password)...)...)
	tests := map[string]struct {
		edit          func(*Options)
		wantPermanent bool
		wantText      string
	}{
		"a wrong password is permanent": {
			edit:          func(o *Options) { o.Username, o.Password = user, password+"x" },
			wantPermanent: true, wantText: "535",
		},
		"no credentials is permanent": {
			wantPermanent: true, wantText: "530",
		},
		"an untrusted certificate is permanent": {
			edit:          func(o *Options) { o.RootCAs, o.Username, o.Password = x509.NewCertPool(), user, password },
			wantPermanent: true, wantText: "certificate",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := send(t, options(m, StartTLS, roots, tc.edit), reminder())
			wantFailed(t, m, err, tc.wantPermanent, tc.wantText)
		})
	}
}

func TestSendImplicitTLS(t *testing.T) {
	t.Parallel()
	tlsArgs, roots := mailpit.TLSFlags(t)
	m := mailpit.Start(t, append(append(tlsArgs, "--smtp-require-tls"), mailpit.AuthFlags(t, user, password)...)...)
	a := reminder()
	if err := send(t, options(m, ImplicitTLS, roots, func(o *Options) { o.Username, o.Password = user, password }), a); err != nil {
		t.Fatalf("Send() error = %v", err)
	}
	wantDelivered(t, m, a)
}

func TestSendWithoutTLS(t *testing.T) {
	t.Parallel()

	t.Run("NoTLS delivers, with the HTML escaped", func(t *testing.T) {
		m := mailpit.Start(t)
		a := hostile()
		if err := send(t, options(m, NoTLS, nil, nil), a); err != nil {
			t.Fatalf("Send() error = %v", err)
		}
		wantDelivered(t, m, a)
		html := m.Messages(t)[0].HTML
		if strings.Contains(html, "<script") || !strings.Contains(html, "&lt;script&gt;") {
			t.Errorf("the HTML that arrived does not escape the display name:\n%s", html)
		}
	})

	m := mailpit.Start(t, "--smtp-allowed-recipients", `@example\.com$`)
	tests := map[string]struct {
		mode          TLSMode
		edit          func(*Options)
		wantPermanent bool
		wantText      string
	}{
		"StartTLS refuses a server without STARTTLS": {
			mode: StartTLS, edit: func(o *Options) { o.Username, o.Password = user, password },
			wantPermanent: true, wantText: "STARTTLS",
		},
		"ImplicitTLS against a plain-text server is permanent": {
			mode: ImplicitTLS, wantPermanent: true, wantText: "TLS",
		},
		"a rejected recipient is permanent": {
			mode: NoTLS, edit: func(o *Options) { o.To = append(o.To, "someone@elsewhere.test") },
			wantPermanent: true, wantText: "550",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := send(t, options(m, tc.mode, nil, tc.edit), reminder())
			wantFailed(t, m, err, tc.wantPermanent, tc.wantText)
		})
	}
}

func TestSendRetryable(t *testing.T) {
	t.Parallel()

	t.Run("a temporary rejection (451)", func(t *testing.T) {
		m := mailpit.Start(t, "--chaos-triggers", "Recipient:451:100")
		err := send(t, options(m, NoTLS, nil, nil), reminder())
		wantFailed(t, m, err, false, "451")
	})

	t.Run("a server that is down", func(t *testing.T) {
		down := &mailpit.Server{SMTPPort: mailpit.FreePort(t)}
		err := send(t, options(down, StartTLS, nil, func(o *Options) { o.Username, o.Password = user, password }), reminder())
		wantFailed(t, nil, err, false, "refused")
	})

	t.Run("a server that never greets", func(t *testing.T) {
		silent := fakeSMTP(t, func(net.Conn) {})
		err := send(t, options(silent, StartTLS, nil, func(o *Options) { o.Timeout = 300 * time.Millisecond }), reminder())
		wantFailed(t, nil, err, false, "timeout")
	})

	t.Run("a context that ends stops a stalled session", func(t *testing.T) {
		stalls := fakeSMTP(t, func(conn net.Conn) { _, _ = conn.Write([]byte("220 stalling ESMTP\r\n")) })
		c, err := New(options(stalls, StartTLS, nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		err = c.Send(ctx, reminder())
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("Send() returned after %s, want soon after the context ended", took)
		}
		wantFailed(t, nil, err, false, "context deadline exceeded")
	})

	t.Run("a cancelled context", func(t *testing.T) {
		m := mailpit.Start(t)
		c, err := New(options(m, NoTLS, nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		wantFailed(t, m, c.Send(ctx, reminder()), false, "context canceled")
	})
}

// TestSendClosesRefusedConnections: go-mail returns without closing the connection when STARTTLS
// is missing, so Send must, or every retry would leave one open until the garbage collector runs.
func TestSendClosesRefusedConnections(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{})
	noTLS := fakeSMTP(t, func(conn net.Conn) {
		r := bufio.NewReader(conn)
		_, _ = conn.Write([]byte("220 plain ESMTP\r\n"))
		if _, err := r.ReadString('\n'); err != nil {
			return
		}
		_, _ = conn.Write([]byte("250-plain\r\n250 8BITMIME\r\n"))
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, r); err == nil { // EOF: the client closed
			close(closed)
		}
	})
	err := send(t, options(noTLS, StartTLS, nil, nil), reminder())
	wantFailed(t, nil, err, true, "STARTTLS")
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Error("the connection is still open after Send returned")
	}
}

// fakeSMTP listens on 127.0.0.1 and hands each connection to serve, for the failures mailpit
// cannot act out: a server that hangs, a connection that must be closed.
func fakeSMTP(t *testing.T, serve func(net.Conn)) *mailpit.Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			go serve(conn)
		}
	}()
	return &mailpit.Server{SMTPPort: l.Addr().(*net.TCPAddr).Port}
}

// A relay a watch names is dialled through the destination policy: refused inside, by address
// or by a name that resolves there, before a connection is made and with nothing said of where
// the name led; let through where the policy allows it.
func TestSendThroughTheDestinationPolicy(t *testing.T) {
	t.Parallel()
	const refused = "refused by the operator's destination policy"
	loopback := egress.Policy{Allow: egress.Prefixes{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	for name, tc := range map[string]struct {
		policy egress.Policy
		host   string
		tls    TLSMode
	}{
		"127.0.0.1":                           {host: "127.0.0.1", tls: NoTLS},
		"a name that resolves to loopback":    {host: "localhost", tls: StartTLS},
		"ImplicitTLS, dialled by tls.Dialer":  {host: "127.0.0.1", tls: ImplicitTLS},
		"loopback, denied though allowed too": {host: "127.0.0.1", tls: NoTLS, policy: egress.Policy{Allow: loopback.Allow, Deny: loopback.Allow[:1]}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var conns atomic.Int32
			relay := fakeSMTP(t, func(net.Conn) { conns.Add(1) })
			err := send(t, options(relay, tc.tls, nil, func(o *Options) { o.Host, o.Dialer = tc.host, tc.policy.Dialer() }), reminder())
			wantFailed(t, nil, err, true, refused)
			if err.Error() != refused {
				t.Errorf("Send() = %q, want %q and nothing of where it led", err, refused)
			}
			if n := conns.Load(); n != 0 {
				t.Errorf("the relay saw %d connections, want none", n)
			}
		})
	}

	t.Run("loopback, allowlisted", func(t *testing.T) {
		t.Parallel()
		m := mailpit.Start(t)
		a := reminder()
		if err := send(t, options(m, NoTLS, nil, func(o *Options) { o.Host, o.Dialer = "localhost", loopback.Dialer() }), a); err != nil {
			t.Fatalf("Send() = %v", err)
		}
		wantDelivered(t, m, a)
	})
}
