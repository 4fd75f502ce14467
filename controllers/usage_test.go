package controllers

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/test/fakegraph"
)

// The seed's cluster rotated with its sign-ins read: the reset moves the cluster onto the new
// secret, whose first sign-in is recorded, but a pipeline keeps signing in with the old one. It
// outlives the grace period, the rotation holds at retireWait and says so once, and it is
// retired only once it has been quiet for activeWithin on a report read since.
func TestARotationRetiresOnlyWhatNothingUses(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	fake.SetSignInClock(h.clock)
	fake.SetSignInLag(3 * time.Hour)
	t.Cleanup(func() { fake.SetSignInClock(nil); fake.SetSignInLag(0) })
	t0 := h.clock.Now()
	s := seed(t, t0, 20*day, 400*day, 200*day)
	arm := h.withCluster(s.appID)
	windowOpens := t0.Truncate(time.Minute).Add(12 * time.Hour)
	h.create("", func(spec *v1alpha1.CredentialWatchSpec) {
		aksRotationSpec(windowOpens)(spec)
		spec.CheckInterval = "1h"
		spec.Rotation.GracePeriod = "2d"
		spec.Usage = &v1alpha1.Usage{SignIns: true, ActiveWithin: "1d", RetireWait: "4d"}
	})
	old, _ := h.oldCredwatchSecrets(s.appID, t0)
	h.moveByHand(arm, s.appID, old)
	rc := newReceiver(t, nil)
	h.withWebhook(rc)

	// Every three hours the cluster signs in with the secret it holds, and until day 6 a pipeline
	// nobody moved signs in with the old one.
	pipelineStops := 6 * day
	var script []scripted
	for at := time.Duration(0); at < 9*day; at += 3 * time.Hour {
		script = append(script, scripted{at: at, do: func() {
			now := h.clock.Now()
			if key := h.clusterKey(arm, s.appID); key != "" {
				fake.SignIn(tenantID, key, now)
			}
			if now.Sub(t0) < pipelineStops {
				fake.SignIn(tenantID, old, now)
			}
		}})
	}
	expect := func(at time.Duration, check func(w *v1alpha1.CredentialWatch)) {
		i, _ := slices.BinarySearchFunc(script, at, func(s scripted, at time.Duration) int { return int(s.at - at) })
		script = slices.Insert(script, i, scripted{at: at, do: func() { check(h.get()) }})
	}
	expect(3*day, func(w *v1alpha1.CredentialWatch) {
		// The grace period is over: the old secret stays, as the pipeline still uses it.
		r := w.Status.Rotation
		if r == nil || r.Step != v1alpha1.StepRetiring || !inGraph(s.appID, old) || len(r.OldSecretsInUse) != 1 || r.OldSecretsInUse[0].KeyID != old {
			t.Fatalf("day 3: rotation %+v; want it retiring, waiting for %s", r, old)
		}
		if r.NewSecretSignIn == nil || r.NewSecretSignIn.Before(r.StepTime) {
			t.Errorf("day 3: the new secret's first sign-in after the move is %v (moved at %v); want the cluster's", r.NewSecretSignIn, r.StepTime)
		}
		assertCondition(t, w, v1alpha1.ConditionRotating, metav1.ConditionTrue, string(v1alpha1.StepRetiring))
	})
	expect(5*day, func(w *v1alpha1.CredentialWatch) {
		assertCondition(t, w, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonRotationOldSecretInUse)
		if c := target.Condition(w, v1alpha1.ConditionRotating); !strings.Contains(c.Message, old) || !inGraph(s.appID, old) {
			t.Errorf("day 5: Rotating says %q; want the old secret %s named and kept", c.Message, old)
		}
	})
	expect(6*day+18*time.Hour, func(*v1alpha1.CredentialWatch) {
		if !inGraph(s.appID, old) {
			t.Errorf("the old secret was retired less than activeWithin (1d) after its last sign-in")
		}
	})
	h.run(9*day, script)

	w := h.get()
	if w.Status.Rotation != nil || w.Status.LastRotation == nil || inGraph(s.appID, old) {
		t.Fatalf("after 9 days: rotation %+v, last %+v, old secret in Graph %v; want it retired and the rotation done",
			w.Status.Rotation, w.Status.LastRotation, inGraph(s.appID, old))
	}
	if w.Status.LastRotation.NewSecretSignIn == nil {
		t.Errorf("the completed rotation does not keep the new secret's first sign-in")
	}
	var held []string
	for _, p := range rc.received() {
		if p.Kind == alertkind.RotationHeld {
			held = append(held, p.Text)
		}
	}
	if len(held) != 1 || !strings.Contains(held[0], old) {
		t.Errorf("held alerts %q; want one, naming %s", held, old)
	}
	reasons := map[string]int{}
	for _, e := range h.all {
		reasons[strings.Fields(e)[1]]++
	}
	for _, reason := range []string{"NewSecretSignedIn", "RotationOldSecretInUse", "Rotated"} {
		if reasons[reason] != 1 {
			t.Errorf("events %v; want one %s", reasons, reason)
		}
	}
}

// clusterKey is the keyId of the application's secret the cluster holds, empty when none.
func (h *harness) clusterKey(arm *armClusters, appID string) string {
	app, _ := fake.Application(tenantID, appID)
	arm.mu.Lock()
	onCluster := arm.secret["rg-prod/aks-prod"]
	arm.mu.Unlock()
	for _, p := range app.Passwords {
		if onCluster != "" && p.SecretText == onCluster {
			return p.KeyID
		}
	}
	return ""
}

// A tenant scan that asks for sign-ins reads the tenant's whole report with its scan: the old
// credentials nothing signed in with are findings, counted and listed; the one in use is not.
func TestATenantScanCountsWhatNothingUses(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	t0 := h.clock.Now()
	fake.AddClient(usageTenant, operatorClientID, operatorSecret)
	fake.SetSignInClock(h.clock)
	t.Cleanup(func() { fake.SetSignInClock(nil) })
	secret := func(key string) fakegraph.PasswordCredential {
		return fakegraph.PasswordCredential{KeyID: key, SecretText: "uSe~" + strings.ReplaceAll(uuid.NewString(), "-", ""),
			Start: t0.Add(-200 * day), End: t0.Add(165 * day)}
	}
	used, idle, stale := uuid.NewString(), uuid.NewString(), uuid.NewString()
	for name, key := range map[string]string{"used": used, "idle": idle, "stale": stale} {
		app := fakegraph.Object{AppID: uuid.NewString(), DisplayName: name, Passwords: []fakegraph.PasswordCredential{secret(key)}}
		fake.PutApplication(usageTenant, app)
		fake.PutServicePrincipal(usageTenant, fakegraph.Object{AppID: app.AppID, DisplayName: name})
	}
	fake.SignIn(usageTenant, used, t0.Add(-time.Hour))
	fake.SignIn(usageTenant, stale, t0.Add(-120*day))
	h.create("", func(s *v1alpha1.CredentialWatchSpec) {
		s.Target.TenantScan = &v1alpha1.TenantScanTarget{TenantID: usageTenant}
		s.Usage = &v1alpha1.Usage{SignIns: true}
	})
	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionSignInsRead, metav1.ConditionTrue, v1alpha1.ReasonSignInsRead)
	f := w.Status.Findings
	if f == nil || f.NeverUsed != 1 || f.Unused != 1 {
		t.Fatalf("findings %+v; want the secret never used and the one unused for 120 days", f)
	}
	for _, item := range f.Items {
		if item.KeyID == used {
			t.Errorf("the secret in use is a finding: %s", item.Message)
		}
	}
}
