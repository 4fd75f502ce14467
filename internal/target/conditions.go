package target

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// SetCondition sets the watch's condition of type condType, as of its generation; its transition
// time moves only when its status does.
func SetCondition(obj *v1alpha1.CredentialWatch, condType string, status metav1.ConditionStatus, reason, message string, now time.Time) {
	meta.SetStatusCondition(&obj.Status.Conditions, metav1.Condition{
		Type:               condType,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: obj.Generation,
		LastTransitionTime: metav1.NewTime(now),
	})
}

// Condition is a copy of the watch's condition of type t, empty when it has none. A copy, because
// SetCondition rewrites conditions in place: a pointer kept across it would read the new one.
func Condition(obj *v1alpha1.CredentialWatch, t string) metav1.Condition {
	if c := meta.FindStatusCondition(obj.Status.Conditions, t); c != nil {
		return *c
	}
	return metav1.Condition{}
}
