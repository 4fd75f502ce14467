package email

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"strconv"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/credwatch/credwatch/internal/notify"
)

// TLSMode is how the connection to the relay is encrypted.
type TLSMode string

const (
	// StartTLS connects in plain text and upgrades with STARTTLS, refusing servers that do not offer
	// it (usually port 587). It is the default.
	StartTLS TLSMode = "StartTLS"
	// ImplicitTLS speaks TLS from the first byte (SMTPS, usually port 465).
	ImplicitTLS TLSMode = "ImplicitTLS"
	// NoTLS never encrypts: only for a relay on the same host or pod network (usually port 25).
	NoTLS TLSMode = "NoTLS"
)

// Options configure a Channel.
type Options struct {
	// Host is the relay's host name or IP address, without a port; certificates are checked against it.
	Host string
	// Port defaults to the usual port of the TLS mode: 587, 465 or 25.
	Port int
	// TLS defaults to StartTLS.
	TLS TLSMode
	// Username and Password turn on SMTP AUTH (PLAIN, else LOGIN, else what the server offers).
	Username, Password string
	// From is the sender, "alerts@example.com" or "credwatch <alerts@example.com>".
	From string
	// To are the recipients; at least one, unless RecipientsLater.
	To []string
	// RecipientsLater allows no To: every message then goes through SendTo, which names its own.
	RecipientsLater bool
	// RootCAs verify the relay's certificate; nil means the system roots.
	RootCAs *x509.CertPool
	// Timeout bounds connecting and each SMTP command; 0 means go-mail's default of 15 seconds.
	Timeout time.Duration
	// Dialer connects to the relay; nil means a plain one. A watch's relay gets one that refuses
	// what the operator's destination policy does.
	Dialer *net.Dialer
}

// Channel sends alerts as email. It is safe for concurrent use: every Send opens its own connection.
type Channel struct {
	opts Options
	from *mail.Address
	to   []string
	tls  *tls.Config
}

var _ notify.Channel = (*Channel)(nil)

// New checks opts and returns a Channel. Addresses are parsed here so that a typo shows up when
// the watch is configured, not when the first alert is due.
func New(opts Options) (*Channel, error) {
	if opts.TLS == "" {
		opts.TLS = StartTLS
	}
	defaultPort := map[TLSMode]int{StartTLS: 587, ImplicitTLS: 465, NoTLS: 25}[opts.TLS]
	if defaultPort == 0 {
		return nil, fmt.Errorf("email: unknown TLS mode %q: use %s, %s or %s", opts.TLS, StartTLS, ImplicitTLS, NoTLS)
	}
	if opts.Port == 0 {
		opts.Port = defaultPort
	}
	if err := checkHost(opts.Host); err != nil {
		return nil, err
	}
	if opts.Port < 1 || opts.Port > 65535 {
		return nil, fmt.Errorf("email: port %d is out of range", opts.Port)
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("email: timeout %s is negative", opts.Timeout)
	}
	if opts.Password != "" && opts.Username == "" {
		return nil, errors.New("email: a password is set but no username")
	}
	if opts.Username != "" && opts.Password == "" {
		return nil, errors.New("email: a username is set but no password")
	}
	if opts.Username != "" && opts.TLS == NoTLS {
		return nil, fmt.Errorf("email: TLS mode %s would send the password unencrypted: use %s or %s", NoTLS, StartTLS, ImplicitTLS)
	}
	from, err := mail.ParseAddress(opts.From)
	if err != nil {
		return nil, fmt.Errorf("email: invalid from address %q: %w", opts.From, err)
	}
	if len(opts.To) == 0 && !opts.RecipientsLater {
		return nil, errors.New("email: no recipients")
	}
	to := make([]string, 0, len(opts.To))
	for _, s := range opts.To {
		addr, err := mail.ParseAddress(s)
		if err != nil {
			return nil, fmt.Errorf("email: invalid to address %q: %w", s, err)
		}
		to = append(to, addr.String())
	}
	return &Channel{
		opts: opts,
		from: from,
		to:   to,
		tls:  &tls.Config{ServerName: opts.Host, RootCAs: opts.RootCAs, MinVersion: tls.VersionTLS12},
	}, nil
}

func parseAddress(s string) (string, error) {
	addr, err := mail.ParseAddress(s)
	if err != nil {
		return "", err
	}
	return addr.String(), nil
}

func checkHost(host string) error {
	if host == "" {
		return errors.New("email: no SMTP host")
	}
	if strings.ContainsAny(host, "/ \t") {
		return fmt.Errorf("email: SMTP host %q is not a host name", host)
	}
	if _, _, err := net.SplitHostPort(host); err == nil {
		return fmt.Errorf("email: SMTP host %q includes a port: set the port on its own", host)
	}
	return nil
}

// Name implements notify.Channel.
func (c *Channel) Name() string { return notify.ChannelEmail }

// Send delivers a to every recipient in one message. Its errors are *notify.DeliveryError without
// the password; a 5xx reply, a certificate that does not verify or a server lacking STARTTLS or
// AUTH are Permanent. One rejected recipient fails the whole message, as go-mail sends nothing
// unless the server accepts every RCPT.
func (c *Channel) Send(ctx context.Context, a notify.Alert) error {
	if len(c.to) == 0 {
		return &notify.DeliveryError{Permanent: true, Err: errors.New("email: no recipients")}
	}
	mail, err := AlertMail(a)
	if err != nil {
		return &notify.DeliveryError{Permanent: true, Err: fmt.Errorf("building the email: %w", err)}
	}
	return c.send(ctx, c.to, mail)
}

// SendTo delivers mail to the recipients to, instead of the channel's own, with Send's errors:
// owner digests go to each owner alone through one relay. An address that does not parse is a
// permanent failure.
func (c *Channel) SendTo(ctx context.Context, to []string, mail Mail) error {
	addrs := make([]string, 0, len(to))
	for _, s := range to {
		addr, err := parseAddress(s)
		if err != nil {
			// The address is an owner's, and this error may reach events: it is not quoted.
			return &notify.DeliveryError{Permanent: true, Err: errors.New("a recipient's address does not parse")}
		}
		addrs = append(addrs, addr)
	}
	return c.send(ctx, addrs, mail)
}

func (c *Channel) send(ctx context.Context, to []string, mail Mail) error {
	msg, err := c.message(to, mail)
	if err != nil {
		return &notify.DeliveryError{Permanent: true, Err: fmt.Errorf("building the email: %w", err)}
	}
	if err := c.deliver(ctx, msg); err != nil {
		if refused := notify.Refused(err); refused != nil {
			return refused
		}
		addr := net.JoinHostPort(c.opts.Host, strconv.Itoa(c.opts.Port))
		return &notify.DeliveryError{
			Permanent: ctx.Err() == nil && permanent(err),
			Err:       notify.Redact(fmt.Errorf("sending email through %s: %w", addr, err), c.opts.Password),
		}
	}
	return nil
}

// clientOptions are go-mail's options for the channel's relay, dialling with dial.
func (c *Channel) clientOptions(tlsConfig *tls.Config, dial gomail.DialContextFunc) []gomail.Option {
	opts := []gomail.Option{
		gomail.WithPort(c.opts.Port),
		gomail.WithTLSConfig(tlsConfig),
		gomail.WithDialContextFunc(dial),
	}
	switch c.opts.TLS {
	case StartTLS:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	case ImplicitTLS:
		// Tells go-mail the connection is already encrypted, so it does not try STARTTLS.
		opts = append(opts, gomail.WithSSL())
	case NoTLS:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	}
	if c.opts.Timeout > 0 {
		opts = append(opts, gomail.WithTimeout(c.opts.Timeout))
	}
	if c.opts.Username != "" {
		// PLAIN and LOGIN over TLS work everywhere (Microsoft 365 offers only LOGIN); go-mail's
		// autodiscovery would pick CRAM-MD5 first, which servers keeping hashed passwords advertise
		// but cannot check.
		opts = append(opts,
			gomail.WithOpportunisticSMTPAuth(gomail.SMTPAuthPlain, gomail.SMTPAuthLogin),
			gomail.WithUsername(c.opts.Username),
			gomail.WithPassword(c.opts.Password))
	}
	return opts
}

// deliver dials with its own function rather than go-mail's because go-mail leaves the connection
// open when the greeting, STARTTLS or AUTH fails, and only watches ctx while connecting: holding
// the connection lets Send close it in both cases.
func (c *Channel) deliver(ctx context.Context, msg *gomail.Msg) error {
	tlsConfig := c.tls.Clone()
	var conn net.Conn
	stop := func() bool { return false }
	dial := func(dialCtx context.Context, network, addr string) (net.Conn, error) {
		var err error
		d := c.opts.Dialer
		if d == nil {
			d = &net.Dialer{}
		}
		if c.opts.TLS == ImplicitTLS {
			// A custom dial function replaces go-mail's TLS dialer too, so ImplicitTLS handshakes here.
			conn, err = (&tls.Dialer{NetDialer: d, Config: tlsConfig}).DialContext(dialCtx, network, addr)
		} else {
			conn, err = d.DialContext(dialCtx, network, addr)
		}
		if err != nil {
			return nil, err
		}
		closing := conn
		stop = context.AfterFunc(ctx, func() { _ = closing.Close() })
		return conn, nil
	}

	opts := c.clientOptions(tlsConfig, dial)
	client, err := gomail.NewClient(c.opts.Host, opts...)
	if err != nil {
		return err
	}
	err = client.DialAndSendWithContext(ctx, msg)
	stop()
	if conn != nil {
		_ = conn.Close() // already closed after QUIT; not after a failed greeting, STARTTLS or AUTH
	}
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return err
}
