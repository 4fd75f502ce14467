package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// DefaultRetireWait is how long a rotation waits for old secrets to stop signing in before it
// holds, when the spec says not.
const DefaultRetireWait = 7 * 24 * time.Hour

// Usage is spec.usage, parsed; the zero value reads no sign-ins.
type Usage struct {
	// SignIns is spec.usage.signIns.
	SignIns                               bool
	ActiveWithin, UnusedAfter, RetireWait time.Duration
}

// On reports whether the watch reads its credentials' sign-ins.
func (u Usage) On() bool { return u.SignIns }

// RetireQuiet is how long an old secret that signed in after a rotation's move must then not
// sign in before it is retired: activeWithin, and never less than the report's lag.
func (u Usage) RetireQuiet() time.Duration { return max(u.ActiveWithin, RetireMargin) }

// UsageOf parses spec.usage; an error names the field that does not parse.
func UsageOf(u *v1alpha1.Usage) (Usage, error) {
	if u == nil || !u.SignIns {
		return Usage{}, nil
	}
	out := Usage{SignIns: true, ActiveWithin: DefaultActiveWithin, UnusedAfter: DefaultUnusedAfter, RetireWait: DefaultRetireWait}
	for _, f := range []struct {
		name string
		d    v1alpha1.Duration
		to   *time.Duration
	}{{"activeWithin", u.ActiveWithin, &out.ActiveWithin}, {"unusedAfter", u.UnusedAfter, &out.UnusedAfter}, {"retireWait", u.RetireWait, &out.RetireWait}} {
		if f.d == "" {
			continue
		}
		d, err := f.d.Parse()
		if err != nil {
			return Usage{}, fmt.Errorf("usage.%s: %w", f.name, err)
		}
		*f.to = d
	}
	return out, nil
}

// WatchSignInsKnown reports whether w reads its credentials' sign-ins and what its status lists of
// them is evidence at now (SignInsKnown).
func WatchSignInsKnown(w *v1alpha1.CredentialWatch, now time.Time) bool {
	u := w.Spec.Usage
	return u != nil && u.SignIns && SignInsKnown(w.Status.SignInsReadTime, meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionSignInsRead), now)
}

// SignInsKnown reports whether the sign-ins status lists are evidence of use at now: read
// (readTime), and read well lately, as cond, the SignInsRead condition, says. A read that failed
// keeps what the last one found, which stays evidence for RetireMargin after the failures began:
// past that, what was in use may have moved, and a credential whose last sign-in ages out must
// not look unused for want of a read. A refusal for good (the report unavailable here, the
// identity refusing it) is no evidence at all.
func SignInsKnown(readTime *metav1.Time, cond *metav1.Condition, now time.Time) bool {
	switch {
	case readTime == nil || cond == nil:
		return false
	case cond.Status == metav1.ConditionTrue:
		return true
	case cond.Reason == v1alpha1.ReasonSignInsUnavailable || cond.Reason == v1alpha1.ReasonIdentityNotAllowed:
		return false
	}
	return now.Sub(cond.LastTransitionTime.Time) < RetireMargin
}
