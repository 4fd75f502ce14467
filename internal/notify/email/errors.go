package email

import (
	"crypto/tls"
	"errors"
	"net/textproto"
	"strings"

	gomail "github.com/wneessen/go-mail"
	"github.com/wneessen/go-mail/smtp"
)

// permanent tells whether sending again cannot help until someone changes the configuration.
// The server's reply code decides when there is one; otherwise only failures that are about the
// setup (certificates, missing STARTTLS or AUTH) are permanent, and everything on the way there
// (refused, reset, timed out) is worth retrying.
func permanent(err error) bool {
	if code := replyCode(err); code != 0 {
		return code >= 500
	}
	var verify *tls.CertificateVerificationError
	var record tls.RecordHeaderError // TLS spoken to a plain-text port
	if errors.As(err, &verify) || errors.As(err, &record) {
		return true
	}
	for _, target := range []error{smtp.ErrUnencrypted, smtp.ErrWrongHostname,
		gomail.ErrPlainAuthNotSupported, gomail.ErrLoginAuthNotSupported, gomail.ErrNoSupportedAuthDiscovered} {
		if errors.Is(err, target) {
			return true
		}
	}
	// go-mail returns these as plain strings, with no error value to match.
	msg := err.Error()
	return strings.Contains(msg, "does not support STARTTLS") || strings.Contains(msg, "does not support SMTP AUTH")
}

// replyCode is the SMTP reply code in err's chain, 0 if the server never answered with one.
// go-mail's SendError does not unwrap to the textproto.Error it holds, so it is asked first.
func replyCode(err error) int {
	var send *gomail.SendError
	if errors.As(err, &send) && send.ErrorCode() != 0 {
		return send.ErrorCode()
	}
	var reply *textproto.Error
	if errors.As(err, &reply) {
		return reply.Code
	}
	return 0
}
