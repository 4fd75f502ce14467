package azerr

import (
	"errors"
	"fmt"
	"time"
)

// Kind sorts Azure failures by what the operator should do about them.
type Kind int

const (
	// KindOther is any failure not listed below.
	KindOther Kind = iota
	// KindNotFound: the object or resource does not exist.
	KindNotFound
	// KindForbidden: the identity lacks permission (403).
	KindForbidden
	// KindUnauthenticated: no token could be had, or the service rejected it (401).
	KindUnauthenticated
	// KindThrottled: the service answered 429; RetryAfter says when to come back.
	KindThrottled
	// KindUnavailable: no answer, or a 5xx: try again later.
	KindUnavailable
)

func (k Kind) String() string {
	switch k {
	case KindNotFound:
		return "not found"
	case KindForbidden:
		return "access denied"
	case KindUnauthenticated:
		return "authentication failed"
	case KindThrottled:
		return "throttled"
	case KindUnavailable:
		return "unavailable"
	default:
		return "error"
	}
}

// Error is a classified Azure failure. When the service answered, its message carries the status
// and the service's error code but never the response body: bodies can echo request data, and
// messages end up in events. When no answer came, it carries the transport's error, which says
// why (connection refused, timeout) and holds nothing but the URL.
type Error struct {
	Kind Kind
	// Status is the HTTP status, 0 when no response arrived.
	Status int
	// Code is the service's error code, such as Request_ResourceNotFound or AuthorizationFailed.
	Code string
	// RetryAfter is the wait the service asked for with a 429 or 503, 0 when it named none.
	RetryAfter time.Duration
	// Needs names what the identity lacks when the service refused it (KindForbidden): the
	// permission or role action the refused request requires, such as Application.Read.All. The
	// client that made the request sets it, as only it knows what it asked for.
	Needs string
	// Lacking is who lacks what Needs names, for people: "the identity" when empty; a client that
	// signs in otherwise (GitHub's token) names its own.
	Lacking string
	// Err is the underlying failure; its text is not part of Error's message.
	Err error
}

func (e *Error) Error() string {
	var msg string
	switch {
	case e.Status != 0 && e.Code != "":
		msg = fmt.Sprintf("%s (HTTP %d, %s)", e.Kind, e.Status, e.Code)
	case e.Status != 0:
		msg = fmt.Sprintf("%s (HTTP %d)", e.Kind, e.Status)
	case e.Err != nil:
		msg = fmt.Sprintf("%s: %v", e.Kind, e.Err)
	default:
		msg = e.Kind.String()
	}
	if e.Needs != "" {
		// The one place a refusal is worded: conditions, events and alerts all quote it.
		who := e.Lacking
		if who == "" {
			who = "the identity"
		}
		msg += "; " + who + " needs " + e.Needs
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Needing returns e naming needs as what the identity lacks, when e is a refusal (KindForbidden)
// that names nothing yet, and e itself otherwise; e is not changed. A client calls it where it
// classifies a request's failure, as only it knows what the request asked for.
func (e *Error) Needing(needs string) *Error {
	if e.Kind != KindForbidden || e.Needs != "" || needs == "" {
		return e
	}
	named := *e
	named.Needs = needs
	return &named
}

// KindOf returns the kind of the first *Error in err's chain, KindOther when there is none.
func KindOf(err error) Kind {
	var ge *Error
	if errors.As(err, &ge) {
		return ge.Kind
	}
	return KindOther
}

// RetryAfterOf returns the wait a service asked for somewhere in err's chain, 0 when it asked none.
func RetryAfterOf(err error) time.Duration {
	var ge *Error
	if errors.As(err, &ge) {
		return ge.RetryAfter
	}
	return 0
}
