package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func watch(ns, name string, left ...time.Duration) *v1alpha1.CredentialWatch {
	w := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{ServicePrincipal: &v1alpha1.ServicePrincipalTarget{ClientID: "app-" + name}}}}
	for i, l := range left {
		w.Status.Credentials = append(w.Status.Credentials, v1alpha1.Credential{KeyID: name + "-k" + string(rune('0'+i)),
			Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceApplication, EndTime: metav1.NewTime(now.Add(l)), State: v1alpha1.StateValid})
	}
	return w
}

func TestStatusListsCredentialsSoonestFirst(t *testing.T) {
	s := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(s)
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		watch("a", "later", 90*24*time.Hour), watch("b", "soon", 3*24*time.Hour, 400*24*time.Hour), watch("a", "empty"),
	).Build()
	var out bytes.Buffer
	if err := status(context.Background(), c, "", &out, now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "NAMESPACE") {
		t.Fatalf("status =\n%s", out.String())
	}
	order := []string{"soon-k0", "later-k0", "soon-k1", "empty"}
	for i, want := range order {
		if !strings.Contains(lines[i+1], want) {
			t.Errorf("row %d = %q, want %s there (soonest expiry first, watches without credentials last)", i+1, lines[i+1], want)
		}
	}
	if !strings.Contains(lines[1], " 3d ") {
		t.Errorf("row %q does not say 3d left", lines[1])
	}
}

func TestStatusNamesTheApplicationOfEachScannedCredential(t *testing.T) {
	s := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(s)
	scan := watch("a", "tenant", 3*24*time.Hour)
	scan.Spec.Target = v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: "t"}}
	scan.Status.Credentials[0].AppID = "0a1b2c3d-0000-4000-8000-000000000001"
	var out bytes.Buffer
	if err := status(context.Background(), fake.NewClientBuilder().WithScheme(s).WithObjects(scan).Build(), "", &out, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "0a1b2c3d-0000-4000-8000-000000000001") {
		t.Errorf("status of a tenant scan does not name the credential's application:\n%s", out.String())
	}
}

func TestStatusPutsDriftingIssuersFirst(t *testing.T) {
	s := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(s)
	issuer := func(name string, drift metav1.ConditionStatus, reason string) *v1alpha1.CredentialWatch {
		w := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name},
			Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{ServiceAccountIssuer: &v1alpha1.ServiceAccountIssuerTarget{}}}}
		w.Status.ServiceAccountIssuer = &v1alpha1.ServiceAccountIssuerStatus{
			Endpoints: []v1alpha1.IssuerEndpoint{{Endpoint: "https://10.0.0.4:6443"}, {Endpoint: "https://10.0.0.5:6443"}},
			Keys:      []v1alpha1.ServedKey{{KeyID: "k1"}, {KeyID: "k2"}},
		}
		w.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionSigningKeyDrift, Status: drift, Reason: reason}}
		return w
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		watch("a", "soon", 3*24*time.Hour), issuer("calm", metav1.ConditionFalse, v1alpha1.ReasonKeysAgree),
		issuer("drifting", metav1.ConditionTrue, v1alpha1.ReasonSigningKeyNotShared),
	).Build()
	var out bytes.Buffer
	if err := status(context.Background(), c, "", &out, now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("status =\n%s", out.String())
	}
	for i, want := range []string{"drifting", "soon", "calm"} {
		if !strings.Contains(lines[i+1], want) {
			t.Errorf("row %d = %q, want %s there", i+1, lines[i+1], want)
		}
	}
	for _, want := range []string{"k1,k2", "2 API servers", v1alpha1.ReasonSigningKeyNotShared} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("row %q does not say %s", lines[1], want)
		}
	}
}

func TestRotateNeedsRotationEnabled(t *testing.T) {
	s := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(s)
	enabled := watch("a", "on")
	enabled.Spec.Rotation = &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "x"}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(watch("a", "off"), enabled).Build()
	ctx := context.Background()
	if err := request(ctx, c, types.NamespacedName{Namespace: "a", Name: "off"}, v1alpha1.RotateAnnotation, now, rotationEnabled); err == nil || !strings.Contains(err.Error(), "rotation enabled") {
		t.Errorf("rotating a watch without rotation: %v", err)
	}
	if err := request(ctx, c, types.NamespacedName{Namespace: "a", Name: "on"}, v1alpha1.RotateAnnotation, now, rotationEnabled); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.CredentialWatch
	_ = c.Get(ctx, types.NamespacedName{Namespace: "a", Name: "on"}, &got)
	if got.Annotations[v1alpha1.RotateAnnotation] != "2026-12-02T12:00:00Z" {
		t.Errorf("annotations = %v", got.Annotations)
	}
}

func TestAbortNeedsARotationInProgress(t *testing.T) {
	s := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(s)
	busy := watch("a", "busy")
	busy.Status.Rotation = &v1alpha1.RotationStatus{Step: v1alpha1.StepSecretStored}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(watch("a", "idle"), busy).Build()
	ctx := context.Background()
	if err := request(ctx, c, types.NamespacedName{Namespace: "a", Name: "idle"}, v1alpha1.AbortRotationAnnotation, now, rotating); err == nil || !strings.Contains(err.Error(), "no rotation in progress") {
		t.Errorf("aborting a watch with no rotation: %v", err)
	}
	if err := request(ctx, c, types.NamespacedName{Namespace: "a", Name: "busy"}, v1alpha1.AbortRotationAnnotation, now, rotating); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.CredentialWatch
	_ = c.Get(ctx, types.NamespacedName{Namespace: "a", Name: "busy"}, &got)
	if got.Annotations[v1alpha1.AbortRotationAnnotation] != "2026-12-02T12:00:00Z" {
		t.Errorf("annotations = %v", got.Annotations)
	}
}
