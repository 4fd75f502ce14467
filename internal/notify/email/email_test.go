package email

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/mail"
	"net/textproto"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/wneessen/go-mail/smtp"
)

func TestNew(t *testing.T) {
	valid := func(edit func(*Options)) Options {
		o := Options{Host: "smtp.example.com", From: "credwatch <alerts@example.com>", To: []string{"ops@example.com"}}
		if edit != nil {
			edit(&o)
		}
		return o
	}
	tests := map[string]struct {
		opts     Options
		wantErr  string
		wantPort int
	}{
		"defaults to STARTTLS on 587":  {opts: valid(nil), wantPort: 587},
		"implicit TLS defaults to 465": {opts: valid(func(o *Options) { o.TLS = ImplicitTLS }), wantPort: 465},
		"no TLS defaults to 25":        {opts: valid(func(o *Options) { o.TLS = NoTLS }), wantPort: 25},
		"explicit port wins":           {opts: valid(func(o *Options) { o.Port = 2525 }), wantPort: 2525},
		"auth over STARTTLS":           {opts: valid(func(o *Options) { o.Username, o.Password = "u", "p" }), wantPort: 587},
		"unknown TLS mode":             {opts: valid(func(o *Options) { o.TLS = "SSL" }), wantErr: `unknown TLS mode "SSL"`},
		"no host":                      {opts: valid(func(o *Options) { o.Host = "" }), wantErr: "no SMTP host"},
		"host with port":               {opts: valid(func(o *Options) { o.Host = "smtp.example.com:587" }), wantErr: "includes a port"},
		"host as URL":                  {opts: valid(func(o *Options) { o.Host = "smtp://smtp.example.com" }), wantErr: "is not a host name"},
		"port out of range":            {opts: valid(func(o *Options) { o.Port = 70000 }), wantErr: "out of range"},
		"negative timeout":             {opts: valid(func(o *Options) { o.Timeout = -1 }), wantErr: "negative"},
		"bad from":                     {opts: valid(func(o *Options) { o.From = "credwatch" }), wantErr: `invalid from address "credwatch"`},
		"no recipients":                {opts: valid(func(o *Options) { o.To = nil }), wantErr: "no recipients"},
		"bad recipient": {
			opts:    valid(func(o *Options) { o.To = []string{"ops@example.com", "platform team"} }),
			wantErr: `invalid to address "platform team"`,
		},
		"password without username": {opts: valid(func(o *Options) { o.Password = "p" }), wantErr: "no username"},
		"username without password": {opts: valid(func(o *Options) { o.Username = "u" }), wantErr: "no password"},
		"password in clear": {
			opts:    valid(func(o *Options) { o.TLS, o.Username, o.Password = NoTLS, "u", "p" }),
			wantErr: "would send the password unencrypted",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := New(tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New() error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New() error = %v", err)
			}
			if c.opts.Port != tc.wantPort {
				t.Errorf("port = %d, want %d", c.opts.Port, tc.wantPort)
			}
			if c.Name() != "email" {
				t.Errorf("Name() = %q", c.Name())
			}
		})
	}
}

func TestMessageHeaders(t *testing.T) {
	c, err := New(Options{Host: "smtp.example.com", From: "credwatch <alerts@example.com>", To: []string{"ops@example.com", "Platform <platform@example.com>"}})
	if err != nil {
		t.Fatal(err)
	}
	a := hostile()
	rendered, err := AlertMail(a)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.message(c.to, rendered)
	if err != nil {
		t.Fatal(err)
	}
	var raw bytes.Buffer
	if _, err := m.WriteTo(&raw); err != nil {
		t.Fatal(err)
	}
	parsed, err := mail.ReadMessage(&raw)
	if err != nil {
		t.Fatal(err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(parsed.Header.Get("Subject"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Subject":                  a.Title(),
		"From":                     `"credwatch" <alerts@example.com>`,
		"To":                       `<ops@example.com>, "Platform" <platform@example.com>`,
		"Message-Id":               "<credwatch." + a.ID + "@example.com>",
		HeaderAlertID:              a.ID,
		"X-Auto-Response-Suppress": "All",
	}
	got := map[string]string{"Subject": subject}
	for h := range want {
		if h != "Subject" {
			got[h] = parsed.Header.Get(h)
		}
	}
	for h := range want {
		if got[h] != want[h] {
			t.Errorf("%s = %q, want %q", h, got[h], want[h])
		}
	}
	if bcc := parsed.Header.Get("Bcc"); bcc != "" {
		t.Errorf("a display name with a line break added a header: Bcc: %s", bcc)
	}
	if ct := parsed.Header.Get("Content-Type"); !strings.HasPrefix(ct, "multipart/alternative") {
		t.Errorf("Content-Type = %q, want multipart/alternative", ct)
	}
}

func TestMessageID(t *testing.T) {
	tests := map[string]struct {
		alertID, from string
		want          *regexp.Regexp
	}{
		"an ID fit for a header is kept": {alertID: "0123abcd", from: "alerts@example.com", want: regexp.MustCompile(`^credwatch\.0123abcd@example\.com$`)},
		"any other ID is hashed":         {alertID: "a b>c@d", from: "alerts@example.com", want: regexp.MustCompile(`^credwatch\.[0-9a-f]{32}@example\.com$`)},
		"a sender without a domain":      {alertID: "x", from: "alerts@", want: regexp.MustCompile(`^credwatch\.x@credwatch\.invalid$`)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := messageID(tc.alertID, tc.from)
			if !tc.want.MatchString(got) {
				t.Errorf("messageID() = %q, want a match of %s", got, tc.want)
			}
			if again := messageID(tc.alertID, tc.from); again != got {
				t.Errorf("messageID() is not stable: %q, then %q", got, again)
			}
		})
	}
}

func TestPermanent(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &net.OpError{Err: syscall.ECONNREFUSED}}
	tests := map[string]struct {
		err  error
		want bool
	}{
		"bad credentials (535)":         {err: fmt.Errorf("SMTP AUTH failed: %w", &textproto.Error{Code: 535, Msg: "5.7.8 Authentication credentials invalid"}), want: true},
		"authentication required (530)": {err: &textproto.Error{Code: 530, Msg: "5.7.0 Authentication required"}, want: true},
		"temporary auth failure (454)":  {err: &textproto.Error{Code: 454, Msg: "4.7.0 Temporary authentication failure"}, want: false},
		"greylisted (451)":              {err: &textproto.Error{Code: 451, Msg: "4.7.1 Try again later"}, want: false},
		"connection refused":            {err: fmt.Errorf("dial failed: %w", refused), want: false},
		"timeout":                       {err: context.DeadlineExceeded, want: false},
		"connection dropped":            {err: io.ErrUnexpectedEOF, want: false},
		"untrusted certificate":         {err: &tls.CertificateVerificationError{Err: errors.New("x509: certificate signed by unknown authority")}, want: true},
		"TLS to a plain-text port":      {err: tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, want: true},
		"no STARTTLS":                   {err: errors.New(`STARTTLS mode set to: "TLSMandatory", but target host does not support STARTTLS`), want: true},
		"no AUTH":                       {err: errors.New("server does not support SMTP AUTH"), want: true},
		"PLAIN refused in clear":        {err: fmt.Errorf("SMTP AUTH failed: %w", smtp.ErrUnencrypted), want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := permanent(tc.err); got != tc.want {
				t.Errorf("permanent(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
