package identity

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/targettest"
)

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func ready(status metav1.ConditionStatus, generation int64) v1alpha1.IdentityStatus {
	return v1alpha1.IdentityStatus{ObservedGeneration: generation, Conditions: []metav1.Condition{
		{Type: v1alpha1.ConditionReady, Status: status, Reason: "R", Message: "the secret expired"}}}
}

func TestGrant(t *testing.T) {
	team := &v1alpha1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "mine", Generation: 1}, Status: ready(metav1.ConditionTrue, 1)}
	stale := &v1alpha1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "stale", Generation: 2}, Status: ready(metav1.ConditionTrue, 1)}
	broken := &v1alpha1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "broken", Generation: 1}, Status: ready(metav1.ConditionFalse, 1)}
	shared := &v1alpha1.ClusterAzureIdentity{ObjectMeta: metav1.ObjectMeta{Name: "shared", Generation: 1}, Status: ready(metav1.ConditionTrue, 1)}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", Labels: map[string]string{"tier": "prod"}}}
	c := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(team, stale, broken, shared, ns).Build()

	watch := func(ref *v1alpha1.IdentityRef) *v1alpha1.CredentialWatch {
		return &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "w"}, Spec: v1alpha1.CredentialWatchSpec{IdentityRef: ref}}
	}
	migrating := watch(nil)
	migrating.Spec.AzureCredentialRef = &corev1.LocalObjectReference{Name: "old"}
	for _, tc := range []struct {
		name     string
		def      string
		obj      *v1alpha1.CredentialWatch
		reason   string // empty: granted
		pending  bool
		identity string
		labels   map[string]string
	}{
		{name: "old azureCredentialRef", obj: migrating, reason: v1alpha1.ReasonIdentityMigrationNeeded},
		{name: "none and no default", obj: watch(nil), reason: v1alpha1.ReasonNoIdentity},
		{name: "default missing", def: "gone", obj: watch(nil), reason: v1alpha1.ReasonIdentityNotFound},
		{name: "named missing", obj: watch(&v1alpha1.IdentityRef{Name: "gone"}), reason: v1alpha1.ReasonIdentityNotFound},
		{name: "not signed in yet", obj: watch(&v1alpha1.IdentityRef{Name: "stale"}), reason: v1alpha1.ReasonIdentityNotReady, pending: true},
		{name: "fails to sign in", obj: watch(&v1alpha1.IdentityRef{Name: "broken"}), reason: v1alpha1.ReasonIdentityNotReady},
		{name: "own namespace's", obj: watch(&v1alpha1.IdentityRef{Name: "mine"}), identity: "AzureIdentity team/mine"},
		{name: "default, with the namespace's labels", def: "shared", obj: watch(nil), identity: "ClusterAzureIdentity shared", labels: ns.Labels},
		{name: "a watch's own choice is not replaced by the default", def: "shared", obj: watch(&v1alpha1.IdentityRef{Name: "gone"}), reason: v1alpha1.ReasonIdentityNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Finder{Client: c, Default: tc.def}.Grant(context.Background(), tc.obj)
			if tc.reason != "" {
				var e *Error
				if !errors.As(err, &e) || e.Reason() != tc.reason || e.Pending != tc.pending || target.ReasonFor(err) != tc.reason {
					t.Fatalf("Grant = %v; want an Error with reason %s, pending %v", err, tc.reason, tc.pending)
				}
				return
			}
			if err != nil || g.Identity.String() != tc.identity || g.Namespace.Name != "team" || fmt.Sprint(g.Namespace.Labels) != fmt.Sprint(tc.labels) {
				t.Fatalf("Grant = %+v, %v; want %s for namespace team with labels %v", g, err, tc.identity, tc.labels)
			}
		})
	}
}

func TestGrantAPIServerFailureIsNotTheWatchs(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme(t)).Build()
	failing := failingReader{c}
	_, err := Finder{Client: failing}.Grant(context.Background(), &v1alpha1.CredentialWatch{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "w"}, Spec: v1alpha1.CredentialWatchSpec{IdentityRef: &v1alpha1.IdentityRef{Name: "mine"}}})
	var ke *target.KubernetesError
	if !errors.As(err, &ke) {
		t.Fatalf("Grant = %v; want a KubernetesError, which controller-runtime retries", err)
	}
}

type failingReader struct{ client.Reader }

func (failingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("connection refused")
}

func TestSignInsIdentity(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "sp"}, Data: map[string][]byte{"clientSecret": []byte("s3cret")}}
	empty := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "empty"}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "wi",
		Annotations: map[string]string{v1alpha1.IdentityConsentAnnotation: "team/reader, team/id"}}}
	other := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "other",
		Annotations: map[string]string{v1alpha1.IdentityConsentAnnotation: "team/id2,id"}}}
	// Azure Workload Identity's annotation, on every ServiceAccount it serves: no consent.
	legacy := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "legacy",
		Annotations: map[string]string{legacyConsent: "client"}}}
	s := SignIns{Secrets: fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(secret, empty, sa, other, legacy).Build()}

	withSecret := func(name string) access.Identity {
		return access.Identity{Kind: v1alpha1.KindAzureIdentity, Namespace: "team", Name: "id", Spec: v1alpha1.IdentitySpec{
			ClientSecret: &v1alpha1.ClientSecretSignIn{ClientID: "app", SecretRef: v1alpha1.SecretKeyRef{Name: name, Key: "clientSecret"}}}}
	}
	withSA := func(name string) access.Identity {
		return access.Identity{Kind: v1alpha1.KindAzureIdentity, Namespace: "team", Name: "id", Spec: v1alpha1.IdentitySpec{
			WorkloadIdentity: &v1alpha1.WorkloadIdentitySignIn{ClientID: "client", ServiceAccountRef: v1alpha1.LocalRef{Name: name}}}}
	}
	asOperator := access.Identity{Kind: v1alpha1.KindAzureIdentity, Namespace: "team", Name: "id", Spec: v1alpha1.IdentitySpec{Operator: &v1alpha1.OperatorSignIn{}}}
	for _, tc := range []struct {
		name   string
		id     access.Identity
		reason string // of the failure as the identity's own Ready condition gives it; empty: signs in
	}{
		{"client secret", withSecret("sp"), ""},
		{"secret missing", withSecret("gone"), v1alpha1.ReasonCredentialSecretInvalid},
		{"secret without the key", withSecret("empty"), v1alpha1.ReasonCredentialSecretInvalid},
		{"workload identity the ServiceAccount consents to, among others", withSA("wi"), ""},
		{"ServiceAccount consenting to other identities", withSA("other"), v1alpha1.ReasonServiceAccountTokenFailed},
		{"ServiceAccount with only the workload-identity webhook's annotation", withSA("legacy"), v1alpha1.ReasonServiceAccountTokenFailed},
		{"ServiceAccount missing", withSA("gone"), v1alpha1.ReasonServiceAccountTokenFailed},
		{"a namespace's identity as the operator", asOperator, v1alpha1.ReasonAuthenticationFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Identity(context.Background(), tc.id, "tenant")
			if tc.reason == "" {
				if err != nil || got.TenantID != "tenant" {
					t.Fatalf("Identity = %v, %v; want one signing in to tenant", got, err)
				}
				return
			}
			if err == nil || SignInReason(err) != tc.reason {
				t.Fatalf("Identity = %v; want a failure with reason %s, got %s", err, tc.reason, SignInReason(err))
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("the failure %q quotes the secret", err)
			}
		})
	}
}

// A ServiceAccount that consented the earlier way is told how to consent now.
func TestConsentRefusalSaysWhatToWrite(t *testing.T) {
	legacy := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "wi", Annotations: map[string]string{legacyConsent: "client"}}}
	s := SignIns{Secrets: fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(legacy).Build()}
	id := access.Identity{Kind: v1alpha1.KindAzureIdentity, Namespace: "team", Name: "reader", Spec: v1alpha1.IdentitySpec{
		WorkloadIdentity: &v1alpha1.WorkloadIdentitySignIn{ClientID: "client", ServiceAccountRef: v1alpha1.LocalRef{Name: "wi"}}}}
	_, err := s.Identity(context.Background(), id, "tenant")
	if err == nil || !strings.Contains(err.Error(), "credwatch.dev/identity=team/reader") || !strings.Contains(err.Error(), legacyConsent+" no longer consents") {
		t.Fatalf("Identity = %v; want the annotation to write and why the old one is refused", err)
	}
}

func TestSignInReasonOfAzure(t *testing.T) {
	if got := SignInReason(&azure.TokenError{Err: errors.New("no token file")}); got != v1alpha1.ReasonServiceAccountTokenFailed {
		t.Errorf("SignInReason(TokenError) = %s", got)
	}
	if got := SignInReason(errors.New("AADSTS7000215: invalid client secret")); got != v1alpha1.ReasonAuthenticationFailed {
		t.Errorf("SignInReason(refusal) = %s", got)
	}
}

// Failing to sign in backs off and is told once per reason; signing in again is told too.
func TestSignedIn(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	obj := &v1alpha1.AzureIdentity{}
	id := access.Of(&v1alpha1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "sp"}})
	events := &targettest.Events{}
	st := &v1alpha1.IdentityStatus{}
	refused := &SecretError{msg: "Secret team/sp has no key clientSecret"}

	first := SignedIn(obj, st, id, 1, refused, events, now)
	second := SignedIn(obj, st, id, 1, refused, events, now.Add(first))
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	if c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonCredentialSecretInvalid || !strings.Contains(c.Message, "signing in again at") ||
		second <= first || st.ConsecutiveFailures != 2 {
		t.Fatalf("Ready %+v after waits %s, %s and %d failures; want the reason, and a longer wait", c, first, second, st.ConsecutiveFailures)
	}
	if got := events.Take(); len(got) != 1 || !strings.HasPrefix(got[0], "Warning SignInFailed Signing in as AzureIdentity team/sp failed") {
		t.Fatalf("events %q; want the failure told once", got)
	}
	if wait := SignedIn(obj, st, id, 1, nil, events, now.Add(time.Hour)); wait != SignInInterval || st.ConsecutiveFailures != 0 || !st.NextSignInTime.Time.Equal(now.Add(2*time.Hour)) {
		t.Fatalf("after signing in: wait %s, status %+v", wait, st)
	}
	if got := events.Take(); len(got) != 1 || !strings.HasPrefix(got[0], "Normal SignInRecovered") {
		t.Fatalf("events %q; want the recovery told", got)
	}
}

// An identity's change concerns each watch that acts with it: as its identityRef (or the
// default), as the identity its rotation started with, or as a Key Vault sink's identityRef.
// Any kind but a cluster identity is the namespace's, as Grant reads it.
func TestRefsOf(t *testing.T) {
	sink := func(kind string) v1alpha1.PublishSink {
		return v1alpha1.PublishSink{KeyVault: &v1alpha1.KeyVaultSink{IdentityRef: &v1alpha1.IdentityRef{Kind: kind, Name: "kv-writer"}}}
	}
	obj := &v1alpha1.CredentialWatch{
		Spec: v1alpha1.CredentialWatchSpec{IdentityRef: &v1alpha1.IdentityRef{Name: "now"},
			Rotation: &v1alpha1.Rotation{Publish: []v1alpha1.PublishSink{{GitHubActions: &v1alpha1.GitHubActionsSink{}}, sink(""), sink(v1alpha1.KindClusterAzureIdentity)}}},
		Status: v1alpha1.CredentialWatchStatus{Rotation: &v1alpha1.RotationStatus{Identity: &v1alpha1.IdentityRef{Kind: v1alpha1.KindAzureIdentity, Name: "then"}}},
	}
	got := fmt.Sprint(Finder{Default: "fallback"}.RefsOf(obj))
	if want := "[{AzureIdentity now} {AzureIdentity then} {AzureIdentity kv-writer} {ClusterAzureIdentity kv-writer}]"; got != want {
		t.Errorf("RefsOf = %s, want %s", got, want)
	}
	if got := fmt.Sprint(Finder{Default: "fallback"}.RefsOf(&v1alpha1.CredentialWatch{})); got != "[{ClusterAzureIdentity fallback}]" {
		t.Errorf("RefsOf a watch naming nothing = %s, want the default", got)
	}
}
