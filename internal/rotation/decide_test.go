package rotation

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/policy"
)

func TestUnitWhyNotStart(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	checked := metav1.NewTime(now.Add(-time.Hour))
	ready := []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue}}
	secret := func(left time.Duration) []v1alpha1.Credential {
		return []v1alpha1.Credential{{KeyID: "k", Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceApplication, EndTime: metav1.NewTime(now.Add(left))}}
	}
	watch := func(edit func(*v1alpha1.CredentialWatch)) *v1alpha1.CredentialWatch {
		w := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Generation: 2, Annotations: map[string]string{}}}
		w.Status.LastCheckTime, w.Status.Conditions, w.Status.Credentials = &checked, ready, secret(10*day)
		edit(w)
		return w
	}
	pin := Pin{TenantID: "t", AppID: testApp, ApplicationObjectID: "obj"}
	for _, tc := range []struct {
		name       string
		watch      *v1alpha1.CredentialWatch
		pin        Pin
		spec       v1alpha1.Rotation
		wantReason string
		wantText   string
		wantNext   time.Time
	}{
		{name: "never checked", watch: watch(func(w *v1alpha1.CredentialWatch) { w.Status.LastCheckTime = nil }), pin: pin,
			wantReason: v1alpha1.ReasonIdle, wantText: "No rotation due"},
		{name: "not due yet", watch: watch(func(w *v1alpha1.CredentialWatch) { w.Status.Credentials = secret(40 * day) }), pin: pin,
			wantReason: v1alpha1.ReasonIdle, wantText: "Next rotation due at 2026-12-15T12:00:00Z", wantNext: now.Add(10 * day)},
		{name: "due", watch: watch(func(*v1alpha1.CredentialWatch) {}), pin: pin},
		{name: "asked for, though not due", watch: watch(func(w *v1alpha1.CredentialWatch) {
			w.Status.Credentials, w.Annotations[v1alpha1.RotateAnnotation] = secret(40*day), "now"
		}), pin: pin},
		{name: "aborted at this generation", watch: watch(func(w *v1alpha1.CredentialWatch) {
			w.Status.LastAbort = &v1alpha1.LastAbort{Generation: 2, Reason: "asked", Time: checked}
		}), pin: pin, wantReason: v1alpha1.ReasonRotationAborted, wantText: "none starts by itself until the spec changes"},
		{name: "aborted, and asked for again", watch: watch(func(w *v1alpha1.CredentialWatch) {
			w.Status.LastAbort = &v1alpha1.LastAbort{Generation: 2, Reason: "asked", Time: checked, Request: "first"}
			w.Annotations[v1alpha1.RotateAnnotation] = "second"
		}), pin: pin},
		{name: "the last check failed", watch: watch(func(w *v1alpha1.CredentialWatch) { w.Status.Conditions = nil }), pin: pin,
			wantReason: v1alpha1.ReasonRotationBlocked, wantText: "the last check failed"},
		{name: "a managed identity", watch: watch(func(w *v1alpha1.CredentialWatch) {
			w.Status.AKSCluster = &v1alpha1.AKSClusterStatus{Identity: v1alpha1.IdentityManagedIdentity}
		}), pin: pin, wantReason: v1alpha1.ReasonRotationBlocked, wantText: "managed identity"},
		{name: "no application object in this tenant", watch: watch(func(*v1alpha1.CredentialWatch) {}), pin: Pin{TenantID: "t", AppID: testApp},
			wantReason: v1alpha1.ReasonRotationBlocked, wantText: "no application object"},
		{name: "the last rotation not read back", watch: watch(func(w *v1alpha1.CredentialWatch) {
			w.Status.LastRotation = &v1alpha1.LastRotation{Time: metav1.NewTime(now)}
		}), pin: pin, wantReason: v1alpha1.ReasonRotationBlocked, wantText: "not read back"},
		{name: "a window that does not parse", watch: watch(func(*v1alpha1.CredentialWatch) {}), pin: pin,
			spec:       v1alpha1.Rotation{MaintenanceWindow: &v1alpha1.MaintenanceWindow{Start: "02:00", Duration: "2h", TimeZone: "Mars/Olympus_Mons"}},
			wantReason: v1alpha1.ReasonRotationBlocked, wantText: "A rotation is due, but spec.rotation."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := WhyNotStart(tc.watch, tc.pin, tc.spec, 30*day, now)
			switch {
			case tc.wantReason == "" && h != nil:
				t.Errorf("held: %+v, want the rotation to start", h)
			case tc.wantReason != "" && (h == nil || h.Reason != tc.wantReason || !strings.Contains(h.Message, tc.wantText) || !h.Next.Equal(tc.wantNext)):
				t.Errorf("held %+v, want %s %q, next %v", h, tc.wantReason, tc.wantText, tc.wantNext)
			}
		})
	}
}

func TestUnitTargetChange(t *testing.T) {
	c := &v1alpha1.RotationCluster{SubscriptionID: "S", ResourceGroup: "RG", Name: "aks"}
	same := &v1alpha1.RotationCluster{SubscriptionID: "s", ResourceGroup: "rg", Name: "AKS"}
	other := &v1alpha1.RotationCluster{SubscriptionID: "s", ResourceGroup: "rg", Name: "aks-2"}
	for _, tc := range []struct {
		name         string
		pinned, spec Pin
		want         string
	}{
		{"the same, in another case", Pin{TenantID: "T", AppID: "A", Cluster: c}, Pin{TenantID: "t", AppID: "a", Cluster: same}, ""},
		{"the spec's appId not known yet", Pin{TenantID: "t", AppID: "a"}, Pin{TenantID: "t"}, ""},
		{"another tenant", Pin{TenantID: "t"}, Pin{TenantID: "u"}, "it began in tenant t, and the spec now names tenant u"},
		{"another application", Pin{TenantID: "t", AppID: "a"}, Pin{TenantID: "t", AppID: "b"}, "it began for application a, and the target now signs in as b"},
		{"another cluster", Pin{TenantID: "t", Cluster: c}, Pin{TenantID: "t", Cluster: other}, "it began for AKS cluster RG/aks, which the spec no longer names"},
		{"no cluster any more", Pin{TenantID: "t", Cluster: c}, Pin{TenantID: "t"}, "it began for AKS cluster RG/aks, which the spec no longer names"},
		{"a cluster now", Pin{TenantID: "t"}, Pin{TenantID: "t", Cluster: other}, "it began for a service principal, and the spec now names AKS cluster rg/aks-2"},
	} {
		if got := TargetChange(tc.pinned, tc.spec); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestUnitPinOfARotationBegunBeforeTenantsWerePinned(t *testing.T) {
	spec := Pin{TenantID: "t", AppID: "a", Cluster: testCluster}
	if got := PinOf(v1alpha1.RotationStatus{AppID: "a"}, spec); got.TenantID != "t" || got.Cluster != testCluster {
		t.Errorf("pin %+v, want the spec's tenant and cluster", got)
	}
	pinned := &v1alpha1.RotationCluster{Name: "pinned"}
	if got := PinOf(v1alpha1.RotationStatus{TenantID: "u", AppID: "a", Cluster: pinned}, spec); got.TenantID != "u" || got.Cluster != pinned {
		t.Errorf("pin %+v, want what the rotation pinned", got)
	}
}

func TestUnitAbortAsked(t *testing.T) {
	on := &v1alpha1.Rotation{Enabled: true}
	w := &v1alpha1.CredentialWatch{Spec: v1alpha1.CredentialWatchSpec{Rotation: on}}
	if why, _ := AbortAsked(w, v1alpha1.RotationStatus{}); why != "" {
		t.Errorf("asked %q with nothing asking", why)
	}
	w.Annotations = map[string]string{v1alpha1.AbortRotationAnnotation: "x"}
	if why, value := AbortAsked(w, v1alpha1.RotationStatus{}); value != "x" || why != v1alpha1.AbortRotationAnnotation+"=x" {
		t.Errorf("asked %q %q, want the annotation", why, value)
	}
	if why, _ := AbortAsked(w, v1alpha1.RotationStatus{AbortRequest: "x"}); why != "" {
		t.Errorf("asked %q by an annotation the rotation has seen", why)
	}
	w.Spec.Rotation = nil
	if why, _ := AbortAsked(w, v1alpha1.RotationStatus{}); why != "rotation was turned off" {
		t.Errorf("asked %q, want rotation turned off", why)
	}
}

func TestUnitPausedAndReleased(t *testing.T) {
	refused := &access.Refusal{Identity: "AzureIdentity team/id", Rule: "allow.operations does not list Rotate"}
	if reason, msg := Paused(refused, nil); reason != v1alpha1.ReasonIdentityNotAllowed || !strings.HasPrefix(msg, "A rotation is due, but it does not start: AzureIdentity team/id") {
		t.Errorf("not started: %s %q", reason, msg)
	}
	if reason, msg := Paused(fmt.Errorf("writing: %w", ErrForeign), &v1alpha1.RotationStatus{Step: v1alpha1.StepSecretStored}); reason != v1alpha1.ReasonRotationBlocked ||
		!strings.HasPrefix(msg, "The rotation waits at step SecretStored: ") {
		t.Errorf("waiting: %s %q", reason, msg)
	}
	st := v1alpha1.RotationStatus{Step: v1alpha1.StepClusterUpdating, AppID: testApp}
	if got := released(st, "its reset ended", nil); got != "The watch is deleted and credwatch let go of its rotation at step ClusterUpdating (its reset ended)" {
		t.Errorf("released: %q", got)
	}
	if got := released(st, "x", []string{"old secrets not retired: k1"}); !strings.HasSuffix(got, "; old secrets not retired: k1. Remove a secret nothing uses with: az ad app credential delete --id "+testApp+" --key-id <keyId>") {
		t.Errorf("released with what was left: %q", got)
	}
}

func TestUnitPlan(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	w := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: "team"}}
	spec := v1alpha1.Rotation{SecretRef: v1alpha1.SecretName{Name: "sp"}, RemoveOld: v1alpha1.RemoveOldNever}
	rs := policy.RotationSettings{Validity: 365 * 24 * time.Hour, GracePeriod: 7 * 24 * time.Hour}
	got := Plan(w, Pin{ApplicationObjectID: "obj", Cluster: testCluster}, spec, rs, nil, now)
	want := "DryRun: a rotation is due; it would add a secret named " + policy.CredwatchPrefix + "<watch>-<time> valid for 365d to application obj; " +
		"write it to Secret team/sp; wait until Entra accepts it; reset the service principal of AKS cluster rg-prod/aks-prod at once, which restarts its nodes; keep every old secret"
	if got != want {
		t.Errorf("plan\n %q\nwant\n %q", got, want)
	}
}
