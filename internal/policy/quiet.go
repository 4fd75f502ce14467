package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// RetireMargin is how long after a rotation's new secret was put in use the sign-in report must
// have been read for it to show an old secret quiet: Microsoft refreshes the report hours behind
// the sign-ins themselves, and a day covers that with room.
const RetireMargin = 24 * time.Hour

// SignInEvidence is what the last read of the sign-in report says of an application's secrets.
type SignInEvidence struct {
	// ReadTime is when the report was read; zero when the last read failed, or none was made.
	ReadTime time.Time
	// Last is each secret the report listed, by keyId: its last sign-in, zero for none. A secret
	// absent from it was not in the report when it was read.
	Last map[string]time.Time
}

// Quiet is what sign-ins say of retiring a rotation's old secrets.
type Quiet struct {
	// Retire: a report read RetireMargin after the move shows none of them signing in since.
	Retire bool
	// Busy are the old secrets that signed in after the move, the latest first.
	Busy []v1alpha1.KeySignIn
	// Held: waiting for them outlasted the retire wait.
	Held bool
	// Next is when to look again, unless Retire.
	Next time.Time
	// Message says what retiring waits for, unless Retire.
	Message string
}

// OldSecretsQuiet decides whether the old secrets old may be retired at now, the rotation's new
// secret having been put in use at moved: only once the report, read RetireMargin after the
// move, lists each of them and shows none signing in since, or, for one that did, none for
// u.ActiveWithin, and never less than RetireMargin, the report's lag (what was still using it
// moved later). Waiting past u.RetireWait after the move
// holds the rotation: something never moved to the new secret, and a person must find it.
func OldSecretsQuiet(old []string, e SignInEvidence, moved, now time.Time, u Usage) Quiet {
	var busy []v1alpha1.KeySignIn
	var unlisted []string
	for _, k := range old {
		last, listed := e.Last[k]
		switch {
		case !listed:
			unlisted = append(unlisted, k)
		case last.After(moved) && e.ReadTime.Before(last.Add(u.RetireQuiet())):
			busy = append(busy, v1alpha1.KeySignIn{KeyID: k, LastSignIn: metav1.NewTime(last)})
		}
	}
	wait := u.RetireWait
	slices.SortFunc(busy, func(a, b v1alpha1.KeySignIn) int { return b.LastSignIn.Compare(a.LastSignIn.Time) })
	readBy := moved.Add(RetireMargin)
	if len(busy) == 0 && len(unlisted) == 0 && !e.ReadTime.Before(readBy) {
		return Quiet{Retire: true}
	}
	q := Quiet{Busy: busy, Held: !now.Before(moved.Add(wait)), Next: now.Add(time.Hour)}
	switch {
	case len(busy) > 0:
		q.Message = fmt.Sprintf("%s after the new secret was put in use at %s; each goes once it has not signed in for %s",
			SignedIn(busy), moved.UTC().Format(time.RFC3339), HumanDuration(u.RetireQuiet()))
	case e.ReadTime.Before(readBy):
		q.Message = "Waiting for the sign-in report, read after " + readBy.UTC().Format(time.RFC3339) + ", to show the old secrets quiet"
		if e.ReadTime.IsZero() {
			q.Message += " (the last read failed: see the SignInsRead condition)"
		}
		q.Next = Latest(q.Next, readBy)
	default:
		q.Message = fmt.Sprintf("Waiting for the sign-in report to list old secret %s", strings.Join(unlisted, ", "))
	}
	if q.Held {
		q.Message += fmt.Sprintf("; held since %s (usage.retireWait %s): nothing is retired until they stop",
			moved.Add(wait).UTC().Format(time.RFC3339), HumanDuration(wait))
	} else {
		q.Next = Earliest(q.Next, moved.Add(wait))
	}
	return q
}

// SignedIn says which secrets still sign in, and when they last did.
func SignedIn(busy []v1alpha1.KeySignIn) string {
	parts := make([]string, 0, len(busy))
	for _, b := range busy {
		parts = append(parts, fmt.Sprintf("%s (last sign-in %s)", b.KeyID, b.LastSignIn.UTC().Format(time.RFC3339)))
	}
	noun := "Old secret " + parts[0] + " still signs in"
	if len(parts) > 1 {
		noun = "Old secrets " + strings.Join(parts, ", ") + " still sign in"
	}
	return noun
}
