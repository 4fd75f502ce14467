package controllers

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
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

// TestUnitAnIdentityMapsToTheWatchesThatUseIt: a change to an identity reconciles the watches
// that name it, those that name none when it is the default, in the namespaces it serves, those
// whose rotation in progress started with it, and those with a Key Vault sink that writes as it.
func TestUnitAnIdentityMapsToTheWatchesThatUseIt(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	watch := func(ns, name string, ref *v1alpha1.IdentityRef) client.Object {
		return &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.CredentialWatchSpec{IdentityRef: ref}}
	}
	c := crfake.NewClientBuilder().WithScheme(s).WithObjects(
		watch("a", "own", &v1alpha1.IdentityRef{Name: "ops"}),
		watch("a", "own-kind-named", &v1alpha1.IdentityRef{Kind: v1alpha1.KindAzureIdentity, Name: "ops"}),
		watch("b", "own", &v1alpha1.IdentityRef{Name: "ops"}),
		watch("a", "other", &v1alpha1.IdentityRef{Name: "dev"}),
		watch("a", "cluster", &v1alpha1.IdentityRef{Kind: v1alpha1.KindClusterAzureIdentity, Name: "ops"}),
		watch("b", "default", nil),
		// Moved to another identity while a rotation that started with dev's goes on.
		func() client.Object {
			w := watch("a", "rotating", &v1alpha1.IdentityRef{Name: "ops2"}).(*v1alpha1.CredentialWatch)
			w.Status.Rotation = &v1alpha1.RotationStatus{Identity: &v1alpha1.IdentityRef{Kind: v1alpha1.KindClusterAzureIdentity, Name: "dev"}}
			return w
		}(),
		// Publishing to a Key Vault as the team's writer.
		func() client.Object {
			w := watch("a", "publishing", &v1alpha1.IdentityRef{Name: "dev"}).(*v1alpha1.CredentialWatch)
			w.Spec.Rotation = &v1alpha1.Rotation{Publish: []v1alpha1.PublishSink{{KeyVault: &v1alpha1.KeyVaultSink{IdentityRef: &v1alpha1.IdentityRef{Name: "kv-writer"}}}}}
			return w
		}(),
	).Build()
	r := &CredentialWatchReconciler{DefaultIdentity: testIdentity}
	for _, tc := range []struct {
		name     string
		kind     string
		identity client.Object
		want     []string
	}{
		{"an identity of a namespace", v1alpha1.KindAzureIdentity, &v1alpha1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "ops"}},
			[]string{"a/own", "a/own-kind-named"}},
		{"a cluster identity", v1alpha1.KindClusterAzureIdentity, &v1alpha1.ClusterAzureIdentity{ObjectMeta: metav1.ObjectMeta{Name: "ops"}},
			[]string{"a/cluster"}},
		{"the default identity", v1alpha1.KindClusterAzureIdentity, &v1alpha1.ClusterAzureIdentity{ObjectMeta: metav1.ObjectMeta{Name: testIdentity}},
			[]string{"b/default"}},
		{"the identity a rotation in progress started with", v1alpha1.KindClusterAzureIdentity, &v1alpha1.ClusterAzureIdentity{ObjectMeta: metav1.ObjectMeta{Name: "dev"}},
			[]string{"a/rotating"}},
		{"the identity a Key Vault sink writes as", v1alpha1.KindAzureIdentity, &v1alpha1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "kv-writer"}},
			[]string{"a/publishing"}},
		{"an identity no watch uses", v1alpha1.KindClusterAzureIdentity, &v1alpha1.ClusterAzureIdentity{ObjectMeta: metav1.ObjectMeta{Name: "qa"}},
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, req := range r.watchesOfIdentity(c, tc.kind)(context.Background(), tc.identity) {
				got = append(got, req.String())
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("reconciles %v, want %v", got, tc.want)
			}
		})
	}
}
