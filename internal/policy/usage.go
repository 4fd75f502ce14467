package policy

import (
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// DefaultActiveWithin is how recent a sign-in makes a credential in use, when the spec says not.
const DefaultActiveWithin = 7 * 24 * time.Hour

// MarkInUse sets InUse on each credential that signed in within within of now, and returns when
// the clock alone next changes that (zero: never).
func MarkInUse(creds []v1alpha1.Credential, within time.Duration, now time.Time) time.Time {
	var next time.Time
	for i := range creds {
		c := &creds[i]
		c.InUse = false
		if c.LastSignIn == nil {
			continue
		}
		until := c.LastSignIn.Add(within)
		if c.InUse = now.Before(until); c.InUse {
			next = Earliest(next, until)
		}
	}
	return next
}
