package target

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// eventCheckRecovered: checks of a watch work again.
const eventCheckRecovered = "CheckRecovered"

// CheckFailed records that a check of obj, which reads checked, failed with err: one failure
// more, the next check at next, Ready False with the reason and why, and an event when the
// check starts failing or fails for another reason, once per kind of failure: retries would
// differ only in ports and times, which the recorder cannot fold into one event. A service
// principal or cluster that is gone takes its credentials with it. before is Ready as it was.
// It returns the reason.
func CheckFailed(obj *v1alpha1.CredentialWatch, before metav1.Condition, events Events, checked string, err error, next, now time.Time) string {
	obj.Status.ConsecutiveFailures++
	at := metav1.NewTime(next)
	obj.Status.NextCheckTime = &at
	reason := ReasonFor(err)
	SetCondition(obj, v1alpha1.ConditionReady, metav1.ConditionFalse, reason, fmt.Sprintf("%v; retrying at %s", err, next.UTC().Format(time.RFC3339)), now)
	if before.Status != metav1.ConditionFalse || before.Reason != reason {
		events.Eventf(obj, corev1.EventTypeWarning, reason, "Checking %s failed: %v", checked, err)
	}
	if reason == v1alpha1.ReasonServicePrincipalNotFound || reason == v1alpha1.ReasonClusterNotFound {
		ForgetCredentials(obj)
	}
	return reason
}

// CheckSucceeded records that a check of obj, which reads checked, succeeded: the check's time,
// the next at next, and an event when checks work again after failing.
func CheckSucceeded(obj *v1alpha1.CredentialWatch, before metav1.Condition, events Events, checked string, next, now time.Time) {
	obj.Status.ConsecutiveFailures = 0
	last, at := metav1.NewTime(now), metav1.NewTime(next)
	obj.Status.LastCheckTime, obj.Status.NextCheckTime = &last, &at
	if before.Status == metav1.ConditionFalse {
		events.Eventf(obj, corev1.EventTypeNormal, eventCheckRecovered, "Reading %s works again", checked)
	}
}
