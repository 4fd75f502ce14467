package policy

import (
	"fmt"
	"slices"
	"strings"
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

// InUseSummary names the credentials marked in use, for a printer column: the first eight
// characters of each keyId, the latest to sign in first, at most three and a count of the rest.
func InUseSummary(creds []v1alpha1.Credential) string {
	var used []v1alpha1.Credential
	for _, c := range creds {
		if c.InUse && c.LastSignIn != nil {
			used = append(used, c)
		}
	}
	slices.SortStableFunc(used, func(a, b v1alpha1.Credential) int { return b.LastSignIn.Compare(a.LastSignIn.Time) })
	var names []string
	for i, c := range used {
		if i == 3 {
			names = append(names, fmt.Sprintf("+%d", len(used)-3))
			break
		}
		names = append(names, c.KeyID[:min(8, len(c.KeyID))])
	}
	return strings.Join(names, ",")
}
