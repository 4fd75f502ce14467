package identity

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
)

// SignInInterval is how often an identity proves it still signs in: often enough that a secret
// that expired or a federation that was removed shows before the watches' next checks, rarely
// enough to cost Entra ID nothing.
const SignInInterval = time.Hour

// Event reasons of an identity.
const (
	eventSignInFailed    = "SignInFailed"
	eventSignInRecovered = "SignInRecovered"
)

// SignedIn records in st, the status of the identity object obj (id, at generation), how signing
// in went (err), with the next sign-in's time, backed off after failures; and tells by event
// when signing in starts failing, fails for another reason, or works again. It returns how long
// until the next sign-in.
func SignedIn(obj runtime.Object, st *v1alpha1.IdentityStatus, id access.Identity, generation int64, err error, events target.Events, now time.Time) time.Duration {
	var prev metav1.Condition
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c != nil {
		prev = *c
	}
	set := func(status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: status, Reason: reason,
			Message: message, ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)})
	}
	var wait time.Duration
	if err != nil {
		st.ConsecutiveFailures++
		wait = policy.RetryAfterFailure(st.ConsecutiveFailures, azerr.RetryAfterOf(err), SignInInterval)
		reason := SignInReason(err)
		set(metav1.ConditionFalse, reason, fmt.Sprintf("%v; signing in again at %s", err, now.Add(wait).UTC().Format(time.RFC3339)))
		if prev.Status != metav1.ConditionFalse || prev.Reason != reason {
			events.Eventf(obj, corev1.EventTypeWarning, eventSignInFailed, "Signing in as %s failed: %v", id, err)
		}
	} else {
		st.ConsecutiveFailures = 0
		wait = SignInInterval
		last := metav1.NewTime(now)
		st.LastSignInTime = &last
		set(metav1.ConditionTrue, v1alpha1.ReasonSignedIn, "Entra ID issued a token to "+id.String())
		if prev.Status == metav1.ConditionFalse {
			events.Eventf(obj, corev1.EventTypeNormal, eventSignInRecovered, "Signing in as %s works again", id)
		}
	}
	next := metav1.NewTime(now.Add(wait))
	st.NextSignInTime = &next
	return wait
}
