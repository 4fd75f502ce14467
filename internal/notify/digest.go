package notify

import (
	"fmt"
	"time"
)

// Digest is what one owner is told about their applications in one period: every credential
// that needs attention and every hygiene finding, in one message. Everything in it from Azure
// (names, hints) is text: each renderer escapes it for its format.
type Digest struct {
	// ID is stable for the period and the recipient, so a retried message collapses.
	ID string
	// Tenant is the Entra ID tenant the applications are in.
	Tenant string
	// Period is when the period began.
	Period time.Time
	// Lines are the credentials, soonest end first.
	Lines []DigestLine
	// Findings are the hygiene findings, most serious first, but for those of Unused.
	Findings []DigestFinding
	// Unused are the findings of credentials nothing signs in with (NeverUsed, Unused), which
	// the owner can let expire or remove.
	Unused []DigestFinding
	// Omitted counts the lines and findings left out for length; the watch's status and metrics
	// hold them all.
	Omitted int
	// Why says why the recipient gets this, and how an application leaves it.
	Why string
	// Expired marks the message sent at once when credentials expire between digests: its
	// lines are those credentials.
	Expired bool
}

// DigestLine is one credential of a digest.
type DigestLine struct {
	Application, AppID string
	// Object is Application or ServicePrincipal; Type is Password or Certificate.
	Object, Type       string
	KeyID, Hint, State string
	DisplayName        string
	End                time.Time
	// Command renews or replaces it.
	Command string
	// Use is what sign-ins say of it ("in use, last signed in at …"), when the scan reads them.
	Use string
}

// DigestFinding is one hygiene finding of a digest.
type DigestFinding struct {
	Application, AppID, Kind, Message string
}

// Subject is the digest's subject line.
func (d Digest) Subject() string {
	if d.Expired {
		return "credwatch: " + plural(len(d.Lines), "credential of your applications expired", "credentials of your applications expired")
	}
	creds := plural(len(d.Lines), "credential of your applications needs", "credentials of your applications need") + " attention"
	n := len(d.Findings) + len(d.Unused)
	findings := plural(n, "hygiene finding", "hygiene findings")
	switch {
	case len(d.Lines) > 0 && n > 0:
		return "credwatch: " + creds + ", and " + findings
	case len(d.Lines) > 0:
		return "credwatch: " + creds
	default:
		return "credwatch: " + findings + " on your applications' credentials"
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
