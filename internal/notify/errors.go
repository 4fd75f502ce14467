package notify

import (
	"errors"
	"strings"
	"time"

	"github.com/credwatch/credwatch/internal/egress"
)

// DeliveryError is a failed Send. Its message never holds a token, password or webhook URL:
// channels build it with Redact, because it ends up in conditions, events and logs.
type DeliveryError struct {
	// Permanent is true when sending again cannot help until someone changes configuration
	// (a revoked token, an unknown channel, a rejected recipient).
	Permanent bool
	// RetryAfter is the wait the peer asked for (Slack's rate limit, a 429's Retry-After).
	RetryAfter time.Duration
	Err        error
}

func (e *DeliveryError) Error() string { return e.Err.Error() }
func (e *DeliveryError) Unwrap() error { return e.Err }

// RetryAfterOf returns the wait a peer asked for somewhere in err's chain, 0 if none.
func RetryAfterOf(err error) time.Duration {
	var de *DeliveryError
	if errors.As(err, &de) {
		return de.RetryAfter
	}
	return 0
}

// Refused returns the DeliveryError of a send that the destination policy refused, nil when err
// is no refusal. It holds the refusal alone: the words around it in err (net/http's "dial tcp
// 10.0.0.7:443", go-mail's relay address) would say where the destination's name led.
func Refused(err error) *DeliveryError {
	var refused *egress.RefusedError
	if !errors.As(err, &refused) {
		return nil
	}
	return &DeliveryError{Permanent: true, Err: refused}
}

// Redact returns err with every non-empty secret in its message replaced, for errors whose text
// comes from libraries that quote URLs or requests (net/http's url.Error quotes the webhook URL,
// and the URL is the credential).
func Redact(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
			changed = true
		}
	}
	if !changed {
		return err
	}
	return &redacted{msg: msg, err: err}
}

// redacted keeps the chain for errors.Is/As while showing the cleaned message.
type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }
