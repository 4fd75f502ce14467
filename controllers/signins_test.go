package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/target"
)

// A watch that asks for its credentials' sign-ins reads them from Graph's beta report: the secret
// that signed in is in use, the others are not, and those never used are hygiene findings; a
// tenant that loses its licence says so on SignInsRead, keeps what it knew, and the watch is
// checked as before.
func TestSignInsShowWhichCredentialIsInUse(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 100*day, 100*day, 100*day)
	t.Cleanup(func() { fake.SetUnlicensed(tenantID, false) })
	fake.SignIn(tenantID, s.spSecretKey, time.Now().Add(-time.Hour))
	h.create(s.appID, func(spec *v1alpha1.CredentialWatchSpec) {
		spec.CheckInterval = "1h"
		spec.Usage = &v1alpha1.Usage{SignIns: true}
	})

	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionSignInsRead, metav1.ConditionTrue, v1alpha1.ReasonSignInsRead)
	inUse := map[string]bool{}
	for _, c := range w.Status.Credentials {
		inUse[c.KeyID] = c.InUse
		if (c.LastSignIn != nil) != (c.KeyID == s.spSecretKey) {
			t.Errorf("credential %s: last sign-in %v; want one for the service principal's secret only", c.KeyID, c.LastSignIn)
		}
	}
	if !inUse[s.spSecretKey] || inUse[s.appSecretKey] || inUse[s.certKey] || w.Status.InUse != s.spSecretKey[:8] {
		t.Fatalf("in use %v, shown as %q; want the service principal's secret only", inUse, w.Status.InUse)
	}
	// The application's secret and certificate, 300 days old, never signed in.
	if f := w.Status.Findings; f == nil || f.NeverUsed != 2 || f.Unused != 0 {
		t.Errorf("findings %+v; want the two credentials that never signed in", f)
	}

	fake.SetUnlicensed(tenantID, true)
	h.step(61 * time.Minute)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	assertCondition(t, w, v1alpha1.ConditionSignInsRead, metav1.ConditionFalse, v1alpha1.ReasonSignInsUnavailable)
	if c := target.Condition(w, v1alpha1.ConditionSignInsRead); !strings.Contains(c.Message, "P1 or P2") {
		t.Errorf("SignInsRead says %q; want the licence named", c.Message)
	}
	for _, c := range w.Status.Credentials {
		if c.KeyID == s.spSecretKey && (c.LastSignIn == nil || !c.InUse) {
			t.Errorf("what was known of %s is lost: %+v", c.KeyID, c)
		}
	}
	// Sign-ins not read any more: no credential is called unused on what may be old news.
	if f := w.Status.Findings; f != nil && f.NeverUsed != 0 {
		t.Errorf("findings %+v; want no NeverUsed while sign-ins are not read", f)
	}
}

// An AKS cluster's service principal shows which of its secrets is in use as any application's
// does; moved to another service principal, the watch reads that one's sign-ins afresh rather
// than showing the first one's.
func TestSignInsOfAnAKSClustersServicePrincipal(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 100*day, 100*day, 100*day)
	arm := h.withCluster(s.appID)
	fake.SignIn(tenantID, s.spSecretKey, time.Now().Add(-time.Hour))
	h.create("", func(spec *v1alpha1.CredentialWatchSpec) {
		spec.Target = v1alpha1.Target{AKSCluster: &v1alpha1.AKSClusterTarget{
			TenantID: tenantID, SubscriptionID: testSubscription, ResourceGroup: "rg-prod", Name: "aks-prod"}}
		spec.Usage = &v1alpha1.Usage{SignIns: true}
	})
	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionSignInsRead, metav1.ConditionTrue, v1alpha1.ReasonSignInsRead)
	if w.Status.InUse != s.spSecretKey[:8] {
		t.Fatalf("in use %q, want the service principal's secret %s", w.Status.InUse, s.spSecretKey)
	}

	other := seed(t, h.clock.Now(), 100*day, 100*day, 100*day)
	arm.put("rg-prod", "aks-prod", other.appID)
	h.step(6 * time.Hour)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionSignInsRead, metav1.ConditionTrue, v1alpha1.ReasonSignInsRead)
	for _, c := range w.Status.Credentials {
		if c.LastSignIn != nil || c.InUse {
			t.Errorf("after the move, credential %s shows a sign-in %v: the first service principal's", c.KeyID, c.LastSignIn)
		}
	}
	if w.Status.InUse != "" {
		t.Errorf("in use %q after the move, want none", w.Status.InUse)
	}
}

// An identity whose allow.operations lacks ReadSignIns is refused the report before anything is
// asked of Graph: SignInsRead says what to add, once by event, and the watch is checked as ever.
func TestSignInsOfAnIdentityWithoutReadSignIns(t *testing.T) {
	needsAPIServer(t)
	ctx := context.Background()
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 100*day, 100*day, 100*day)
	id := operatorIdentity()
	id.Name = "no-sign-ins"
	id.Spec.Allow.Operations = []v1alpha1.Operation{v1alpha1.OperationRotate}
	if err := createSignedIn(ctx, id); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, id) })
	h.create(s.appID, func(spec *v1alpha1.CredentialWatchSpec) {
		spec.IdentityRef = &v1alpha1.IdentityRef{Kind: v1alpha1.KindClusterAzureIdentity, Name: id.Name}
		spec.Usage = &v1alpha1.Usage{SignIns: true}
	})
	fake.ResetRequests()
	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	assertCondition(t, w, v1alpha1.ConditionSignInsRead, metav1.ConditionFalse, v1alpha1.ReasonIdentityNotAllowed)
	if c := target.Condition(w, v1alpha1.ConditionSignInsRead); !strings.Contains(c.Message, "ReadSignIns") {
		t.Errorf("SignInsRead says %q; want the operation to allow named", c.Message)
	}
	for _, r := range fake.Requests() {
		if strings.HasPrefix(r.Path, "/beta/") {
			t.Errorf("the report was asked (%s) for an identity that does not allow it", r.Path)
		}
	}
	h.step(2 * time.Hour)
	_, _ = h.reconcile()
	if n := strings.Count(strings.Join(h.all, "\n"), "SignInsUnread"); n != 1 {
		t.Errorf("%d SignInsUnread events; want the refusal told once", n)
	}
}
