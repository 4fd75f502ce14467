package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

func TestUnitIdentityChanged(t *testing.T) {
	ready := func(status metav1.ConditionStatus, reason string, generation int64) *v1alpha1.ClusterAzureIdentity {
		id := &v1alpha1.ClusterAzureIdentity{ObjectMeta: metav1.ObjectMeta{Name: "ops", Generation: generation}}
		id.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, ObservedGeneration: generation}}
		return id
	}
	signedIn := ready(metav1.ConditionTrue, v1alpha1.ReasonSignedIn, 1)
	t.Run("create", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			initial bool
			want    bool
		}{
			// The watches' own listing queues them all when the operator starts.
			{"listed at start", true, false},
			// Watches waiting for an identity of that name go on at once.
			{"created while running", false, true},
		} {
			if got := identityChanged.Create(event.CreateEvent{Object: signedIn, IsInInitialList: tc.initial}); got != tc.want {
				t.Errorf("%s: Create = %v, want %v", tc.name, got, tc.want)
			}
		}
	})
	t.Run("update", func(t *testing.T) {
		respec := signedIn.DeepCopy()
		respec.Generation = 2
		for _, tc := range []struct {
			name string
			new  *v1alpha1.ClusterAzureIdentity
			want bool
		}{
			{"nothing that matters", ready(metav1.ConditionTrue, v1alpha1.ReasonSignedIn, 1), false},
			{"spec", respec, true},
			{"sign-in fails", ready(metav1.ConditionFalse, "SignInFailed", 1), true},
		} {
			if got := identityChanged.Update(event.UpdateEvent{ObjectOld: signedIn, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("%s: Update = %v, want %v", tc.name, got, tc.want)
			}
		}
	})
	if !identityChanged.Delete(event.DeleteEvent{Object: signedIn}) {
		t.Error("Delete: the watches of a deleted identity must learn it is gone")
	}
}
