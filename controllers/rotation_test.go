package controllers

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/azure/clients"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/rotation"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/test/fakegraph"
)

// oldCredwatchSecret adds to the application a secret an earlier rotation of the watch made,
// which the next one may retire, and one another watch made, which it must not; it returns their
// keyIds.
func (h *harness) oldCredwatchSecrets(appID string, now time.Time) (ours, theirs string) {
	h.t.Helper()
	app, _ := fake.Application(tenantID, appID)
	ours, theirs = uuid.NewString(), uuid.NewString()
	var cluster string
	if c := h.get().Spec.Target.AKSCluster; c != nil {
		cluster = c.SubscriptionID + "/" + c.ResourceGroup + "/" + c.Name
	}
	for key, name := range map[string]string{
		ours:   policy.SecretPrefix(h.r.ClusterID, h.key.Namespace, h.key.Name, cluster) + "20251201T000000Z",
		theirs: "credwatch-deadbeef-20251201T000000Z",
	} {
		app.Passwords = append(app.Passwords, fakegraph.PasswordCredential{KeyID: key, DisplayName: name,
			SecretText: "oLd~" + strings.ReplaceAll(uuid.NewString(), "-", ""), Start: now.Add(-355 * day), End: now.Add(10 * day)})
	}
	fake.PutApplication(tenantID, app)
	return ours, theirs
}

// withCluster puts AKS cluster rg-prod/aks-prod, signing in as appID, behind the harness's Azure.
func (h *harness) withCluster(appID string) *armClusters {
	arm := newARMClusters()
	arm.put("rg-prod", "aks-prod", appID)
	h.r.Azure = clients.New(identities, graphAPI, arm.reader())
	return arm
}

// aksRotationSpec watches AKS cluster rg-prod/aks-prod and rotates its secret, resetting it in a
// four-hour window opening daily at opens.
func aksRotationSpec(opens time.Time) func(*v1alpha1.CredentialWatchSpec) {
	return func(spec *v1alpha1.CredentialWatchSpec) {
		spec.Target = v1alpha1.Target{AKSCluster: &v1alpha1.AKSClusterTarget{
			TenantID: tenantID, SubscriptionID: "8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918", ResourceGroup: "rg-prod", Name: "aks-prod"}}
		rotationSpec(func(r *v1alpha1.Rotation) {
			r.MaintenanceWindow = &v1alpha1.MaintenanceWindow{Start: opens.Format("15:04"), Duration: "4h", TimeZone: "UTC"}
		})(spec)
	}
}

func rotationSpec(edit func(*v1alpha1.Rotation)) func(*v1alpha1.CredentialWatchSpec) {
	return func(spec *v1alpha1.CredentialWatchSpec) {
		spec.Rotation = &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "sp-credentials"}}
		if edit != nil {
			edit(spec.Rotation)
		}
	}
}

// credwatchSecrets lists the application's secrets the watch's rotations made, by keyId: named
// after the cluster, the watch and its AKS cluster rg-prod/aks-prod, if any, or, as earlier
// rotations named them, after its UID.
func (h *harness) credwatchSecrets(appID string) map[string]fakegraph.PasswordCredential {
	app, _ := fake.Application(tenantID, appID)
	prefixes := []string{policy.SecretPrefix(h.r.ClusterID, h.key.Namespace, h.key.Name, ""),
		policy.SecretPrefix(h.r.ClusterID, h.key.Namespace, h.key.Name, "8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918/rg-prod/aks-prod")}
	var w v1alpha1.CredentialWatch
	if err := k8s.Get(context.Background(), h.key, &w); err == nil {
		prefixes = append(prefixes, policy.WatchPrefix(string(w.UID)))
	}
	out := map[string]fakegraph.PasswordCredential{}
	for _, p := range app.Passwords {
		if slices.ContainsFunc(prefixes, func(prefix string) bool { return strings.HasPrefix(p.DisplayName, prefix) }) {
			out[p.KeyID] = p
		}
	}
	return out
}

// inGraph reports whether the application has the secret keyID.
func inGraph(appID, keyID string) bool {
	app, _ := fake.Application(tenantID, appID)
	return slices.ContainsFunc(app.Passwords, func(p fakegraph.PasswordCredential) bool { return p.KeyID == keyID })
}

func (h *harness) targetSecret() (*corev1.Secret, error) {
	var s corev1.Secret
	err := k8s.Get(context.Background(), types.NamespacedName{Namespace: h.key.Namespace, Name: "sp-credentials"}, &s)
	return &s, err
}

// keptSecret is the Secret that holds keyID, the staging Secret or the target; nil if neither.
func (h *harness) keptSecret(keyID string) *corev1.Secret {
	for _, name := range []string{rotation.StagingName(h.key.Name), "sp-credentials"} {
		var s corev1.Secret
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: h.key.Namespace, Name: name}, &s); err == nil && string(s.Data["keyID"]) == keyID {
			return &s
		}
	}
	return nil
}

func TestRotationOfAServicePrincipal(t *testing.T) {
	needsAPIServer(t)
	fake.SetPropagationDelay(300 * time.Millisecond)
	t.Cleanup(func() { fake.SetPropagationDelay(0) })
	h := newHarness(t)
	t0 := h.clock.Now()
	s := seed(t, t0, 20*day, 400*day, 200*day)
	h.create(s.appID, rotationSpec(nil))
	old, theirs := h.oldCredwatchSecrets(s.appID, t0)
	rc := newReceiver(t, nil)
	h.withWebhook(rc)

	h.run(8*day, nil)

	// The channels hear that rotation takes care of it, and that it did, once.
	var rotated, reminders int
	for _, p := range rc.received() {
		switch p.Kind {
		case "Rotated":
			rotated++
		case "Reminder":
			reminders++
			// A secret renewed by hand (rbac, newer than the watch's old ones) is also named, with
			// when the rotation comes: whatever uses the old one may not have moved.
			renewedByHand := strings.HasPrefix(p.Fix, "A newer secret \"rbac\"") && strings.Contains(p.Fix, "credwatch rotates the application's secret")
			if !strings.HasPrefix(p.Fix, "Nothing: credwatch rotates the application's secret") && !renewedByHand {
				t.Errorf("reminder fix %q does not say credwatch rotates it", p.Fix)
			}
		}
	}
	if rotated != 1 || reminders == 0 {
		t.Errorf("received %d Rotated and %d reminders, want 1 and some", rotated, reminders)
	}

	w := h.get()
	last := w.Status.LastRotation
	if last == nil || w.Status.Rotation != nil {
		t.Fatalf("rotation %+v, last %+v: want one completed", w.Status.Rotation, last)
	}
	assertCondition(t, w, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonIdle)
	ours := h.credwatchSecrets(s.appID)
	created, ok := ours[last.KeyID]
	if !ok || len(ours) != 1 {
		t.Fatalf("the watch's secrets in Graph: %v; want only the new one, %s", ours, last.KeyID)
	}
	if _, kept := ours[old]; kept {
		t.Error("the old secret the watch made was not retired")
	}
	app, _ := fake.Application(tenantID, s.appID)
	var keys []string
	for _, p := range app.Passwords {
		keys = append(keys, p.KeyID)
	}
	if len(app.Passwords) != 3 || !strings.Contains(strings.Join(keys, ","), theirs) {
		t.Errorf("the application has secrets %q, want the new one, %q which credwatch did not make, and another watch's %s", keys, "rbac", theirs)
	}
	if d := created.End.Sub(t0); d < 364*day || d > 366*day {
		t.Errorf("the new secret ends %v after the rotation, want a year", d)
	}

	secret, err := h.targetSecret()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"tenantID": tenantID, "clientID": s.appID, "clientSecret": created.SecretText, "keyID": last.KeyID}
	for k, v := range want {
		if string(secret.Data[k]) != v {
			t.Errorf("Secret key %s = %q, want %q", k, secret.Data[k], v)
		}
	}
	if _, err := time.Parse(time.RFC3339, string(secret.Data["expiry"])); err != nil {
		t.Errorf("Secret key expiry %q: %v", secret.Data["expiry"], err)
	}
	if n := countPrefix(h.all, "Normal RotationStarted"); n != 1 {
		t.Errorf("%d RotationStarted events, want 1", n)
	}
	if n := countPrefix(h.all, "Normal Rotated"); n != 1 {
		t.Errorf("%d Rotated events, want 1", n)
	}
	// The secret credwatch added is its own: nothing tells of it as added by someone else.
	if n := countPrefix(h.all, "Warning CredentialAdded"); n != 0 {
		t.Errorf("%d CredentialAdded events about the rotation's own secret", n)
	}
	for _, p := range rc.received() {
		if p.Kind == "CredentialAdded" {
			t.Errorf("the channels were told the rotation's own secret was added by someone else: %+v", p)
		}
	}
	// The new secret is read in at once.
	listed := false
	for _, c := range w.Status.Credentials {
		listed = listed || c.KeyID == last.KeyID
	}
	if !listed {
		t.Errorf("status does not list the new secret: %+v", w.Status.Credentials)
	}
	assertNoSecrets(t, h)
}

func TestDryRunWritesNothing(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 20*day, 400*day, 200*day)
	h.create(s.appID, rotationSpec(func(r *v1alpha1.Rotation) { r.Mode = v1alpha1.RotationDryRun }))
	fake.ResetRequests()
	h.run(2*day, nil)

	w := h.get()
	assertCondition(t, w, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonDryRun)
	if msg := target.Condition(w, v1alpha1.ConditionRotating).Message; !strings.Contains(msg, "it would add a secret named") || !strings.Contains(msg, "write it to Secret "+h.key.Namespace+"/sp-credentials") {
		t.Errorf("plan = %q", msg)
	}
	for _, r := range fake.Requests() {
		if r.Method != "GET" && !r.IsBatch() {
			t.Errorf("DryRun sent %s %s", r.Method, r.Path)
		}
	}
	if _, err := h.targetSecret(); !apierrors.IsNotFound(err) {
		t.Errorf("DryRun wrote the target Secret: %v", err)
	}
	if n := countPrefix(h.all, "Normal RotationPlanned"); n != 1 {
		t.Errorf("%d RotationPlanned events, want 1", n)
	}
}

func TestManualRotationRequest(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 200*day, 400*day, 200*day)
	h.create(s.appID, rotationSpec(nil))
	h.run(time.Hour, nil)
	if w := h.get(); w.Status.Rotation != nil || w.Status.LastRotation != nil {
		t.Fatal("a rotation started with 200 days left")
	}
	w := h.get()
	w.Annotations = map[string]string{v1alpha1.RotateAnnotation: "2026-12-02T10:00:00Z"}
	if err := k8s.Update(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	h.run(8*day, nil)
	w = h.get()
	if w.Status.LastRotation == nil || w.Status.LastRotation.Request != "2026-12-02T10:00:00Z" {
		t.Fatalf("last rotation %+v, want one answering the request", w.Status.LastRotation)
	}
	// Answered: the same value asks for nothing more.
	h.run(2*day, nil)
	if n := countPrefix(h.all, "Normal RotationStarted"); n != 1 {
		t.Errorf("%d rotations started, want 1", n)
	}
}

// TestRotationOfAnAKSClusterSurvivesDyingAnywhere rotates an AKS cluster's secret while the
// operator dies after every number of writes in turn, and checks after every reconcile that the
// new secret can always be had, the cluster never runs on a deleted secret, and at most one
// spare secret ever exists.
func TestRotationOfAnAKSClusterSurvivesDyingAnywhere(t *testing.T) {
	needsAPIServer(t)
	fake.SetPropagationDelay(100 * time.Millisecond)
	t.Cleanup(func() { fake.SetPropagationDelay(0) })
	h := newHarness(t)
	t0 := h.clock.Now() // any day: the window below is daily
	s := seed(t, t0, 20*day, 400*day, 200*day)
	arm := h.withCluster(s.appID)
	// The clock starts at the wall time, so the daily window is placed relative to it: a fixed
	// "02:00" would already be open when the suite runs between 02:00 and 06:00 UTC.
	windowOpens := t0.Truncate(time.Minute).Add(12 * time.Hour)
	h.create("", aksRotationSpec(windowOpens))
	old, _ := h.oldCredwatchSecrets(s.appID, t0)

	var budget atomic.Int32
	// unrecorded counts the processes that reset the cluster and died before writing down the
	// operation: each may make one more reset necessary, and only those may.
	crashes, unrecorded := 0, 0
	for round := 0; round < 2000; round++ {
		if w := h.get(); w.Status.LastRotation != nil && w.Status.Rotation == nil {
			break
		}
		// Die after 0, 1, 2, 3 writes in turn, and now and then not at all.
		// A new process every round, dying after 0, 1, 2, ... writes, and now and then living on.
		var dead atomic.Bool
		budget.Store(int32(round % 6))
		if round%6 == 5 {
			budget.Store(1000)
		}
		h.restart()
		m := mortal{dead: &dead, budget: &budget}
		h.r.Client = crashingClient{Client: k8s, mortal: m}
		h.r.Azure = clients.New(identities, dyingGraph{Graph: graphAPI, mortal: m}, dyingClusters{Clusters: arm.reader(), mortal: m})
		resetsBefore := arm.resets
		_, err := reconcileFully(ctrl.LoggerInto(context.Background(), h.logs.logger()), t, h.r, h.key)
		h.drainEvents()
		if dead.Load() {
			crashes++
			if arm.resets > resetsBefore {
				unrecorded++
			}
		} else if err != nil && !apierrors.IsConflict(err) {
			t.Fatalf("round %d: %v", round, err)
		}
		checkRotationInvariants(t, h, s.appID, old, arm)
		if arm.resets > 0 && h.clock.Now().Before(windowOpens) {
			t.Fatalf("the cluster was reset at %v, before the maintenance window opened at %v", h.clock.Now(), windowOpens)
		}
		h.step(time.Minute)
		if round%50 == 49 {
			h.step(6 * time.Hour)
		}
	}
	w := h.get()
	if w.Status.LastRotation == nil {
		t.Fatalf("no rotation completed after %d crashes; rotation %+v", crashes, w.Status.Rotation)
	}
	t.Logf("rotation completed through %d crashes and %d cluster resets (%d by processes that died before recording one)", crashes, arm.resets, unrecorded)
	if arm.resets > 1+unrecorded {
		t.Errorf("%d cluster resets, each of which restarts nodes; want one, and one more for each of the %d processes that died before recording theirs", arm.resets, unrecorded)
	}
	secret, _ := h.targetSecret()
	if arm.secret["rg-prod/aks-prod"] != string(secret.Data["clientSecret"]) {
		t.Error("the cluster does not run on the secret in the target Secret")
	}
	ours := h.credwatchSecrets(s.appID)
	if _, ok := ours[w.Status.LastRotation.KeyID]; !ok || len(ours) != 1 {
		t.Errorf("credwatch's secrets after the rotation: %d, want only the new one", len(ours))
	}
	assertNoSecrets(t, h)
}

func checkRotationInvariants(t *testing.T, h *harness, appID, old string, arm *armClusters) {
	t.Helper()
	ours := h.credwatchSecrets(appID)
	delete(ours, old)
	if len(ours) > 1 {
		t.Fatalf("%d new secrets exist at once, want at most one", len(ours))
	}
	app, _ := fake.Application(tenantID, appID)
	arm.mu.Lock()
	onCluster := arm.secret["rg-prod/aks-prod"]
	arm.mu.Unlock()
	if onCluster != "" {
		found := false
		for _, p := range app.Passwords {
			found = found || p.SecretText == onCluster
		}
		if !found {
			t.Fatal("the cluster runs on a secret that no longer exists")
		}
	}
	for key := range ours {
		if h.keptSecret(key) != nil {
			continue
		}
		// Only in the moment between addPassword and writing the Secret: the next reconcile
		// must remove it before adding another.
		if w := h.get(); w.Status.Rotation == nil || w.Status.Rotation.Step != v1alpha1.StepStarted {
			t.Fatalf("new secret %s is neither kept in a Secret nor pending removal (step %v)", key, w.Status.Rotation)
		}
	}
}

// Resets that report failure: the old secret stays until one succeeds, and after three the
// rotation holds until a person confirms the last operation.
func TestAKSResetsThatReportFailure(t *testing.T) {
	needsAPIServer(t)
	for _, outcome := range []string{"fails-after-applying", "leaves-failed", "stuck"} {
		t.Run(outcome, func(t *testing.T) {
			h := newHarness(t)
			s := seed(t, h.clock.Now(), 20*day, 400*day, 200*day)
			arm := h.withCluster(s.appID)
			arm.resetOutcome = outcome
			h.create("", func(spec *v1alpha1.CredentialWatchSpec) {
				spec.Target = v1alpha1.Target{AKSCluster: &v1alpha1.AKSClusterTarget{
					TenantID: tenantID, SubscriptionID: "8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918", ResourceGroup: "rg-prod", Name: "aks-prod"}}
				rotationSpec(nil)(spec)
			})
			h.run(10*time.Minute, nil)
			w := h.get()
			switch outcome {
			case "fails-after-applying":
				// The cluster reads Succeeded each time, yet nodes may hold the old secret: reset
				// again, three times, then hold the old secret and ask.
				st := w.Status.Rotation
				if st == nil || st.Step != v1alpha1.StepSecretVerified || st.FailedResets != 3 || arm.resets != 3 || st.ResetOperation == "" {
					t.Fatalf("rotation %+v after %d resets: want it held after three failed operations", st, arm.resets)
				}
				wantCondition(t, w, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonResetNeedsConfirmation)
				h.run(2*day, nil)
				if arm.resets != 3 || h.get().Status.Rotation.Step != v1alpha1.StepSecretVerified {
					t.Fatalf("%d resets: a held rotation resets no more and retires nothing", arm.resets)
				}
				w = h.get()
				w.Annotations = map[string]string{v1alpha1.ConfirmResetAnnotation: st.ResetOperation}
				if err := k8s.Update(context.Background(), w); err != nil {
					t.Fatal(err)
				}
				h.run(time.Minute, nil)
				if st := h.get().Status.Rotation; st == nil || st.Step != v1alpha1.StepRetiring || arm.resets != 3 {
					t.Errorf("rotation %+v after %d resets: want the confirmed rotation retiring", st, arm.resets)
				}
			case "stuck":
				h.run(4*time.Hour, nil)
				st := h.get().Status.Rotation
				if st == nil || st.Step != v1alpha1.StepClusterUpdating || st.Failures != 1 || !strings.Contains(st.Message, "has been Updating for 4h since the reset began") {
					t.Errorf("rotation %+v: want a reset running for hours counted as a failure, which alerts", st)
				}
				if n := countPrefix(h.all, "Warning RotationClusterFailed The AKS cluster has been Updating"); n != 1 {
					t.Errorf("%d events about the stuck cluster, want 1", n)
				}
			case "leaves-failed":
				st := w.Status.Rotation
				if st == nil || st.Step != v1alpha1.StepSecretVerified || st.Failures != 1 || !strings.Contains(st.Message, "-g rg-prod -n aks-prod --reset-service-principal") {
					t.Fatalf("rotation %+v: want one failure at the cluster with the command that recovers it", st)
				}
				if st.NextAttemptTime == nil || st.NextAttemptTime.Sub(h.clock.Now()) < 45*time.Minute {
					t.Errorf("next attempt at %v, want about an hour on", st.NextAttemptTime)
				}
				if n := countPrefix(h.all, "Warning RotationClusterFailed"); n != 1 {
					t.Errorf("%d RotationClusterFailed events, want 1", n)
				}
				// The cluster is mended; the next attempt completes.
				arm.mu.Lock()
				arm.resetOutcome, arm.state["rg-prod/aks-prod"] = "", "Succeeded"
				arm.mu.Unlock()
				h.run(2*time.Hour, nil)
				if st := h.get().Status.Rotation; st == nil || st.Step != v1alpha1.StepRetiring || arm.resets != 2 {
					t.Errorf("rotation %+v after %d resets: want it past the cluster after a second", st, arm.resets)
				}
			}
		})
	}
}

func TestDryRunPausesARotationInProgress(t *testing.T) {
	needsAPIServer(t)
	fake.SetPropagationDelay(time.Hour) // the new secret is never accepted during this test
	t.Cleanup(func() { fake.SetPropagationDelay(0) })
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 20*day, 400*day, 200*day)
	h.create(s.appID, rotationSpec(nil))
	h.run(time.Minute, nil)
	if st := h.get().Status.Rotation; st == nil || st.Step != v1alpha1.StepSecretStored {
		t.Fatalf("rotation %+v, want it waiting for Entra at SecretStored", st)
	}

	w := h.get()
	w.Spec.Rotation.Mode = v1alpha1.RotationDryRun
	if err := k8s.Update(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	fake.ResetRequests()
	h.run(time.Hour, nil)
	for _, r := range fake.Requests() {
		if r.Method != "GET" && !r.IsBatch() {
			t.Errorf("DryRun sent %s %s to Graph", r.Method, r.Path)
		}
	}
	if n := len(fake.TokenRequests()); n != 0 {
		t.Errorf("DryRun still tried the new secret %d times", n)
	}
	w = h.get()
	assertCondition(t, w, v1alpha1.ConditionRotating, metav1.ConditionFalse, string(v1alpha1.StepSecretStored))
	if w.Status.Rotation == nil || w.Status.Rotation.Step != v1alpha1.StepSecretStored {
		t.Errorf("rotation %+v, want it kept where it was", w.Status.Rotation)
	}
}

// TestRotationWritesOnlyItsOwnSecret: a rotation never writes a Secret credwatch did not create
// for the watch, and adds nothing to Graph it could not store; a Secret an earlier version wrote
// for the watch is adopted, and keys others keep in it stay.
func TestRotationWritesOnlyItsOwnSecret(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	t0 := h.clock.Now()
	s := seed(t, t0, 20*day, 400*day, 200*day)
	h.create(s.appID, rotationSpec(nil))
	ctx := context.Background()
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.key.Namespace, Name: "sp-credentials"},
		Data: map[string][]byte{"password": []byte("the database's")}}
	if err := k8s.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	before := len(h.credwatchSecrets(s.appID))

	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonRotationBlocked)
	if msg := target.Condition(w, v1alpha1.ConditionRotating).Message; !strings.Contains(msg, "credwatch did not create it for this watch") ||
		!strings.Contains(msg, "kubectl annotate secret -n "+h.key.Namespace+" sp-credentials credwatch.dev/watch=") {
		t.Errorf("Rotating says %q, want why, and how to adopt the Secret on purpose", msg)
	}
	if w.Status.Rotation != nil || len(h.credwatchSecrets(s.appID)) != before {
		t.Errorf("rotation %+v started, or a secret was added to Graph, for a Secret it may not write", w.Status.Rotation)
	}
	got, _ := h.targetSecret()
	if len(got.Data) != 1 || string(got.Data["password"]) != "the database's" {
		t.Errorf("someone else's Secret was written: %v", got.Data)
	}

	// As an earlier version left it: marked managed-by credwatch, holding a secret of this watch.
	got.Labels = map[string]string{"app.kubernetes.io/managed-by": "credwatch"}
	got.Annotations = map[string]string{"credwatch.dev/secret-name": policy.WatchPrefix(string(w.UID)) + "20251201T000000Z"}
	if err := k8s.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	h.run(time.Hour, nil)
	got, _ = h.targetSecret()
	w = h.get()
	if w.Status.Rotation == nil && w.Status.LastRotation == nil {
		t.Fatalf("no rotation after the Secret was adopted: %+v", target.Condition(w, v1alpha1.ConditionRotating))
	}
	if len(got.Data["clientSecret"]) == 0 || string(got.Data["password"]) != "the database's" || got.Annotations["credwatch.dev/watch"] != h.key.Name {
		t.Errorf("the adopted Secret: keys %v, annotations %v; want the new secret merged in beside password, and the watch named", slices.Sorted(maps.Keys(got.Data)), got.Annotations)
	}
	assertNoSecrets(t, h)
}

// TestRotationThatCannotStoreItsSecretAddsNothing: a Secret the API server will not let the
// rotation write (here an immutable one) is found by a dry run before a secret is added in Graph,
// and the rotation says it is blocked, waiting an hour, rather than adding and removing a secret
// every few minutes.
func TestRotationThatCannotStoreItsSecretAddsNothing(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 20*day, 400*day, 200*day)
	h.create(s.appID, rotationSpec(nil))
	immutable := true
	frozen := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.key.Namespace, Name: "sp-credentials",
		Labels: map[string]string{policy.LabelManagedBy: policy.ManagedByCredwatch}, Annotations: map[string]string{policy.AnnotationWatch: h.key.Name}},
		Immutable: &immutable, Data: map[string][]byte{"clientSecret": []byte("old")}}
	if err := k8s.Create(context.Background(), frozen); err != nil {
		t.Fatal(err)
	}
	fake.ResetRequests()
	h.run(2*time.Hour, nil)

	for _, r := range fake.Requests() {
		if r.Method != "GET" && !r.IsBatch() {
			t.Errorf("Graph was asked to %s %s", r.Method, r.Path)
		}
	}
	w := h.get()
	assertCondition(t, w, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonRotationBlocked)
	st := w.Status.Rotation
	if st == nil || st.Step != v1alpha1.StepStarted || st.Failures > 2 || !strings.Contains(st.Message, "immutable") {
		t.Errorf("status.rotation = %+v, want it blocked at Started, tried at most twice in two hours, saying why", st)
	}
}

// A rotation aborted before its reset leaves nothing behind: its new secret leaves Graph, its
// staging Secret goes, the target is untouched, and no rotation starts by itself again. Once a
// reset began, turning rotation off does not abort it: the cluster may use the new secret.
func TestAbortingARotation(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	t0 := h.clock.Now()
	s := seed(t, t0, 20*day, 400*day, 200*day)
	arm := h.withCluster(s.appID)
	arm.resetOutcome = "stuck"
	windowOpens := t0.Truncate(time.Minute).Add(12 * time.Hour)
	h.create("", aksRotationSpec(windowOpens))

	h.run(10*time.Minute, nil)
	st := h.get().Status.Rotation
	if st == nil || st.Step != v1alpha1.StepSecretVerified || h.keptSecret(st.KeyID) == nil {
		t.Fatalf("rotation %+v: want the new secret staged and verified, waiting for the window", st)
	}
	if target, err := h.targetSecret(); err == nil && string(target.Data["keyID"]) == st.KeyID {
		t.Fatal("the target Secret holds a secret the cluster does not use yet")
	}
	annotateWatch(t, h, v1alpha1.AbortRotationAnnotation, "first")
	h.run(time.Minute, nil)
	w := h.get()
	if w.Status.Rotation != nil || w.Status.LastAbort == nil || h.keptSecret(st.KeyID) != nil {
		t.Fatalf("rotation %+v, last abort %+v: want it withdrawn, its staged copy deleted", w.Status.Rotation, w.Status.LastAbort)
	}
	if _, left := h.credwatchSecrets(s.appID)[st.KeyID]; left {
		t.Error("the aborted rotation's secret is still in Graph")
	}
	assertCondition(t, w, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonRotationAborted)
	h.run(windowOpens.Add(30*time.Minute).Sub(h.clock.Now()), nil) // well into the window
	if w := h.get(); w.Status.Rotation != nil || arm.resets != 0 {
		t.Fatalf("rotation %+v after %d resets: an aborted rotation does not start again by itself", w.Status.Rotation, arm.resets)
	}

	annotateWatch(t, h, v1alpha1.RotateAnnotation, "again")
	h.run(10*time.Minute, nil) // the window is open: the reset begins, and hangs
	st = h.get().Status.Rotation
	if st == nil || st.Step != v1alpha1.StepClusterUpdating || arm.resets != 1 {
		t.Fatalf("rotation %+v after %d resets: want the asked-for rotation resetting the cluster", st, arm.resets)
	}
	w = h.get()
	w.Spec.Rotation.Enabled = false
	if err := k8s.Update(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	h.run(10*time.Minute, nil)
	if got := h.get().Status.Rotation; got == nil || got.KeyID != st.KeyID {
		t.Fatalf("rotation %+v: turning rotation off during a reset must not withdraw the secret the cluster may use", got)
	}
	if _, left := h.credwatchSecrets(s.appID)[st.KeyID]; !left {
		t.Error("the secret the cluster was reset onto left Graph")
	}
	if n := countPrefix(h.all, "Warning RotationAbortRefused"); n != 1 {
		t.Errorf("%d RotationAbortRefused events, want 1", n)
	}
}

// untilGone reconciles a deleted watch, stepping the clock as it asks, until it is gone; at most
// span of fake time.
func (h *harness) untilGone(span time.Duration) {
	h.t.Helper()
	end := h.clock.Now().Add(span)
	for h.clock.Now().Before(end) {
		ctx := ctrl.LoggerInto(context.Background(), h.logs.logger())
		res, err := reconcileFully(ctx, h.t, h.r, h.key)
		h.drainEvents()
		if err != nil {
			h.t.Fatalf("reconcile: %v", err)
		}
		if err := k8s.Get(context.Background(), h.key, &v1alpha1.CredentialWatch{}); apierrors.IsNotFound(err) {
			return
		}
		h.step(max(res.RequeueAfter, time.Second))
	}
	h.t.Fatalf("the deleted watch is still there after %v: %+v", span, h.get().Status.Rotation)
}

// Deleting a watch mid-rotation: before any reset the rotation is rolled back; with a reset in
// flight the watch waits for its outcome, an hour at most, then lets go, handing the secret the
// cluster may use to the target Secret and listing the old secrets it did not retire.
func TestDeletingAWatchMidRotation(t *testing.T) {
	needsAPIServer(t)
	for _, tc := range []struct {
		name        string
		windowOpen  bool
		wantStep    v1alpha1.RotationStep
		wantRemoved bool
	}{
		{name: "before the reset", wantStep: v1alpha1.StepSecretVerified, wantRemoved: true},
		{name: "during a reset that hangs", windowOpen: true, wantStep: v1alpha1.StepClusterUpdating},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			t0 := h.clock.Now()
			s := seed(t, t0, 20*day, 400*day, 200*day)
			arm := h.withCluster(s.appID)
			arm.resetOutcome = "stuck"
			opens := t0.Add(12 * time.Hour)
			if tc.windowOpen {
				opens = t0.Add(-time.Hour)
			}
			h.create("", aksRotationSpec(opens))
			old, _ := h.oldCredwatchSecrets(s.appID, t0)
			h.run(10*time.Minute, nil)
			w := h.get()
			st := w.Status.Rotation
			if st == nil || st.Step != tc.wantStep || !slices.Contains(w.Finalizers, rotationFinalizer) {
				t.Fatalf("rotation %+v, finalizers %v: want it at %s, holding the watch", st, w.Finalizers, tc.wantStep)
			}
			if err := k8s.Delete(context.Background(), w); err != nil {
				t.Fatal(err)
			}
			h.untilGone(2 * time.Hour)

			if listed := inGraph(s.appID, st.KeyID); listed == tc.wantRemoved {
				t.Errorf("the new secret in Graph: %v, want %v", listed, !tc.wantRemoved)
			}
			target, err := h.targetSecret()
			published := err == nil && string(target.Data["keyID"]) == st.KeyID
			if published == tc.wantRemoved {
				t.Errorf("the new secret in the target Secret: %v, want %v", published, !tc.wantRemoved)
			}
			if !inGraph(s.appID, old) {
				t.Error("the old secret was retired though the rotation never finished")
			}
			if !tc.wantRemoved {
				released := ""
				for _, e := range h.all {
					if strings.HasPrefix(e, "Warning RotationReleased") {
						released = e
					}
				}
				if !strings.Contains(released, "old secrets not retired: "+old) || !strings.Contains(released, "after 1h0m0s") {
					t.Errorf("RotationReleased event %q, want the old secret listed and the hour it waited", released)
				}
			}
		})
	}
}

// Someone who may edit Secrets in the namespace copies an old secret's text, which Entra still
// accepts, into the staging Secret under the new secret's keyId: a sign-in check would pass, and
// the cluster would be reset onto a secret the rotation then retires, with nobody holding the
// new one's text. The rotation blocks instead, saying the Secret was changed; put back, it
// completes, with the cluster on the new secret and the old one retired.
func TestAStagingSecretEditedToAnOldSecretStrandsNothing(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	t0 := h.clock.Now()
	s := seed(t, t0, 20*day, 400*day, 200*day)
	arm := h.withCluster(s.appID)
	h.create("", aksRotationSpec(t0.Truncate(time.Minute).Add(12*time.Hour)))
	old, _ := h.oldCredwatchSecrets(s.appID, t0)
	app, _ := fake.Application(tenantID, s.appID)
	var oldText string
	for _, p := range app.Passwords {
		if p.KeyID == old {
			oldText = p.SecretText
		}
	}

	h.run(6*time.Hour, nil) // the new secret is kept and verified, and waits for the window
	st := h.get().Status.Rotation
	if st == nil || st.Step != v1alpha1.StepSecretVerified || st.SecretDigest == "" {
		t.Fatalf("rotation %+v: want the new secret verified, its digest kept, before the window", st)
	}
	// The staging Secret is immutable: whoever changes it deletes it and creates it again, as the
	// watch's, which anyone who may write Secrets there can.
	edit := func(text string) []byte {
		ctx := context.Background()
		staged := h.keptSecret(st.KeyID)
		was := staged.Data["clientSecret"]
		forged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: staged.Name, Namespace: staged.Namespace, Labels: staged.Labels,
			Annotations: staged.Annotations, OwnerReferences: staged.OwnerReferences}, Data: maps.Clone(staged.Data)}
		forged.Data["clientSecret"] = []byte(text)
		if err := k8s.Delete(ctx, staged); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Create(ctx, forged); err != nil {
			t.Fatal(err)
		}
		return was
	}
	if staged := h.keptSecret(st.KeyID); staged.Immutable == nil || !*staged.Immutable {
		t.Fatal("the staging Secret is not immutable")
	}
	made := edit(oldText)

	h.run(12*time.Hour, nil) // the window opens and closes
	w := h.get()
	if arm.resets != 0 {
		t.Fatalf("the cluster was reset %d times with the edited Secret", arm.resets)
	}
	assertCondition(t, w, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonRotationBlocked)
	if c := target.Condition(w, v1alpha1.ConditionRotating); !strings.Contains(c.Message, "not the secret credwatch made") {
		t.Errorf("Rotating says %q; want it to say the Secret was changed", c.Message)
	}
	if _, ok := h.credwatchSecrets(s.appID)[old]; !ok {
		t.Fatal("the old secret was retired")
	}

	edit(string(made))
	h.run(10*day, nil)
	w = h.get()
	if w.Status.Rotation != nil || w.Status.LastRotation == nil {
		t.Fatalf("rotation %+v: want it completed once the Secret holds the new secret again", w.Status.Rotation)
	}
	if arm.secret["rg-prod/aks-prod"] != string(made) {
		t.Error("the cluster does not run on the secret the rotation made")
	}
	if _, ok := h.credwatchSecrets(s.appID)[old]; ok {
		t.Error("the old secret was not retired after the grace period")
	}
	assertNoSecrets(t, h, oldText)
}

// Whoever may delete and create watches deletes one whose rotation reset the cluster, creates it
// again asking for a rotation, and again, every hour for most of a day. The application gets one
// new secret and the cluster one reset; each watch created again takes on the retirement its
// predecessor left, and the last finishes it when the first rotation's grace period ends.
func TestADeleteAndCreateLoopIsPaced(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	t0 := h.clock.Now()
	s := seed(t, t0, 20*day, 400*day, 200*day)
	arm := h.withCluster(s.appID)
	h.create("", aksRotationSpec(t0.Add(-time.Hour)))
	// A secret an earlier rotation of this watch made, which this one retires.
	app, _ := fake.Application(tenantID, s.appID)
	old := uuid.NewString()
	app.Passwords = append(app.Passwords, fakegraph.PasswordCredential{KeyID: old,
		DisplayName: policy.SecretPrefix(h.r.ClusterID, h.key.Namespace, h.key.Name, "8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918/rg-prod/aks-prod") + "20251201T000000Z",
		SecretText:  "oLd~" + strings.ReplaceAll(uuid.NewString(), "-", ""), Start: t0.Add(-355 * day), End: t0.Add(10 * day)})
	fake.PutApplication(tenantID, app)

	h.run(30*time.Minute, nil)
	first := h.get()
	st := first.Status.Rotation
	if st == nil || st.Step != v1alpha1.StepRetiring || arm.resets != 1 {
		t.Fatalf("rotation %+v after %d resets; want the cluster reset once and the old secret waiting for the grace period", st, arm.resets)
	}
	for i := range 20 {
		w := h.get()
		if err := k8s.Delete(context.Background(), w); err != nil {
			t.Fatal(err)
		}
		h.untilGone(time.Hour)
		again := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Name: h.key.Name, Namespace: h.key.Namespace,
			Annotations: map[string]string{v1alpha1.RotateAnnotation: strconv.Itoa(i)}}, Spec: first.Spec}
		if err := k8s.Create(context.Background(), again); err != nil {
			t.Fatal(err)
		}
		h.run(time.Hour, nil)
	}
	ours := h.credwatchSecrets(s.appID)
	if _, kept := ours[old]; arm.resets != 1 || len(ours) != 2 || !kept {
		t.Fatalf("after 20 deletions: %d resets, credwatch's secrets %d (the old one kept: %v); want one reset, the new secret and the old one",
			arm.resets, len(ours), kept)
	}
	if got := h.get().Status.Rotation; got == nil || got.KeyID != st.KeyID || got.Step != v1alpha1.StepRetiring {
		t.Fatalf("rotation %+v; want the first rotation's retirement taken on", got)
	}
	if n := countPrefix(h.all, "Normal RotationAdopted"); n != 20 {
		t.Errorf("%d RotationAdopted events, want 20", n)
	}

	h.run(7*day, nil)
	if inGraph(s.appID, old) {
		t.Error("the old secret outlived the first rotation's grace period")
	}
	if !inGraph(s.appID, st.KeyID) {
		t.Error("the secret the cluster was reset onto was removed")
	}
	// The last watch asked for a rotation, which may start once the first one's grace ended.
	if arm.resets > 2 {
		t.Errorf("%d resets in eight days of a loop; want at most two", arm.resets)
	}
	assertNoSecrets(t, h)
}
