package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/saissuer"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/test/controlplane"
)

// The failure upgrades hit: two API servers that sign with different keys and do not serve each
// other's. The watch flags it within one check, alerts once, and clears on the next check once
// both use the same key. A rotation done right (the new key served by all before one signs with
// it) never alarms.
func TestSigningKeyDriftBetweenAPIServers(t *testing.T) {
	needsAPIServer(t)
	cp := controlplane.Start(t)
	cp.StartB("k2", "k2")

	h := newHarness(t)
	h.create("", func(spec *v1alpha1.CredentialWatchSpec) {
		spec.Target.ServiceAccountIssuer = &v1alpha1.ServiceAccountIssuerTarget{Endpoints: []string{cp.EndpointA(), cp.EndpointB()}}
		spec.CheckInterval = "10m"
	})
	rc := newReceiver(t, nil)
	h.withWebhook(rc)
	// The second API server is not in the kubernetes Service of this test's control plane: the
	// admin names it, as --issuer-endpoints does.
	h.r.Issuer = &saissuer.Prober{Config: cp.Config, Namespace: controlplane.CanaryNamespace, Allowed: []string{cp.EndpointA(), cp.EndpointB()}}

	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	assertCondition(t, w, v1alpha1.ConditionSigningKeyDrift, metav1.ConditionTrue, v1alpha1.ReasonSigningKeyNotShared)
	msg := target.Condition(w, v1alpha1.ConditionSigningKeyDrift).Message
	for _, want := range []string{cp.EndpointA() + " signs with key", "which " + cp.EndpointB() + " does not serve", "rejected by"} {
		if !strings.Contains(msg, want) {
			t.Errorf("drift message %q does not say %q", msg, want)
		}
	}
	st := w.Status.ServiceAccountIssuer
	if st == nil || st.Issuer != cp.Issuer || len(st.Endpoints) != 2 || st.Endpoints[0].SigningKeyID == st.Endpoints[1].SigningKeyID ||
		st.Endpoints[1].Problem == "" {
		t.Fatalf("status.serviceAccountIssuer = %+v", st)
	}
	if n := countKind(rc, alertkind.SigningKeyDrift); n != 1 {
		t.Errorf("%d SigningKeyDrift alerts, want 1", n)
	}
	if n := countEvents(h.takeEvents(), v1alpha1.ReasonSigningKeyNotShared); n != 1 {
		t.Errorf("%d SigningKeyNotShared events, want 1", n)
	}

	// The second server restarted to sign with the first one's key, and to verify both. Tokens it
	// signed with k2 are still valid for an hour, and the first server rejects them: not over yet.
	cp.StartB("k1", "k1", "k2")
	h.step(10 * time.Minute)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionSigningKeyDrift, metav1.ConditionTrue, v1alpha1.ReasonSignedTokensStillRejected)
	msg = target.Condition(w, v1alpha1.ConditionSigningKeyDrift).Message
	if !strings.Contains(msg, "tokens signed with key") || !strings.Contains(msg, "are rejected by "+cp.EndpointA()+" until") {
		t.Errorf("aftermath message %q does not name the key, the server rejecting it and when it clears", msg)
	}
	if next := w.Status.NextCheckTime; next == nil || next.Sub(h.clock.Now()) > time.Hour {
		t.Errorf("next check at %v, want it when the aftermath ends, within the hour", next)
	}
	if n := countKind(rc, alertkind.SigningKeyDrift); n != 2 {
		t.Errorf("%d SigningKeyDrift alerts, want 2: the drift, then its aftermath", n)
	}
	h.step(time.Hour)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionSigningKeyDrift, metav1.ConditionFalse, v1alpha1.ReasonKeysAgree)

	// Healthy: the second server restarted with the first one's key only.
	cp.StartB("k1", "k1")
	h.step(7 * time.Hour)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionSigningKeyDrift, metav1.ConditionFalse, v1alpha1.ReasonKeysAgree)
	if n := countKind(rc, alertkind.SigningKeysAgree); n != 1 {
		t.Errorf("%d SigningKeysAgree alerts, want 1", n)
	}

	// A rotation done right: k2 is added for verification on every server, one at a time, and only
	// then does one of them sign with it.
	for _, step := range []struct {
		what  string
		apply func()
	}{
		{"k2 served by the first server only", func() { cp.RestartA("k1", "k1", "k2") }},
		{"k2 served by both", func() { cp.StartB("k1", "k1", "k2") }},
		{"the second server signs with k2", func() { cp.StartB("k2", "k1", "k2") }},
	} {
		step.apply()
		h.step(7 * time.Hour)
		w, _ = h.reconcile()
		assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
		if c := target.Condition(w, v1alpha1.ConditionSigningKeyDrift); c.Status != metav1.ConditionFalse {
			t.Errorf("%s: SigningKeyDrift %s/%s: %s", step.what, c.Status, c.Reason, c.Message)
		}
	}
	// The drift, then its aftermath: news each, the second saying when it ends.
	if n := countKind(rc, alertkind.SigningKeyDrift); n != 2 {
		t.Errorf("%d SigningKeyDrift alerts after the rotation, want still 2", n)
	}

	// Retiring k1 ten minutes after the first server last signed with it is too early: tokens it
	// signed are valid for an hour. An hour on, its absence is right.
	cp.RestartA("k2", "k2")
	cp.StartB("k2", "k2")
	h.step(10 * time.Minute)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionSigningKeyDrift, metav1.ConditionTrue, v1alpha1.ReasonKeyRemovedEarly)
	h.step(time.Hour)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionSigningKeyDrift, metav1.ConditionFalse, v1alpha1.ReasonKeysAgree)

	// A new issuer URL on both servers: no drift, but federated credentials must follow.
	cp.Issuer = "https://issuer.example.com/cluster-1"
	cp.RestartA("k2", "k2")
	cp.StartB("k2", "k2")
	h.takeEvents()
	h.step(10 * time.Minute)
	w, _ = h.reconcile()
	if st := w.Status.ServiceAccountIssuer; st == nil || st.Issuer != cp.Issuer || st.PreviousIssuer == "" || st.IssuerChangeTime == nil {
		t.Errorf("status.serviceAccountIssuer = %+v, want the new issuer and the old", st)
	}
	assertCondition(t, w, v1alpha1.ConditionSigningKeyDrift, metav1.ConditionFalse, v1alpha1.ReasonKeysAgree)
	if n := countEvents(h.takeEvents(), "IssuerChanged"); n != 1 {
		t.Errorf("%d IssuerChanged events, want 1", n)
	}
	if n := countKind(rc, alertkind.IssuerChanged); n != 1 {
		t.Errorf("%d IssuerChanged alerts, want 1", n)
	}

	// The canary tokens are credentials: none is kept, logged or told.
	status, _ := json.Marshal(h.get())
	for where, text := range map[string]string{"status": string(status), "events": strings.Join(h.all, "\n"), "logs": h.logs.String()} {
		if strings.Contains(text, "eyJhbGci") {
			t.Errorf("%s contain a token", where)
		}
	}
}

func countKind(rc *receiver, kind alertkind.Kind) int {
	n := 0
	for _, p := range rc.received() {
		if p.Kind == kind {
			n++
		}
	}
	return n
}

// A check that cannot run says why, in the words of the issuer rather than of Graph, is retried,
// and says once when it works again. The suite's own API server stands in for the control plane.
func TestIssuerCheckFailuresAreRetried(t *testing.T) {
	needsAPIServer(t)
	self := "https://" + strings.TrimSuffix(strings.TrimPrefix(cfg.Host, "https://"), "/")
	h := newHarness(t)
	h.create("", func(spec *v1alpha1.CredentialWatchSpec) {
		spec.Target.ServiceAccountIssuer = &v1alpha1.ServiceAccountIssuerTarget{Endpoints: []string{self}}
	})
	// An operator run without issuer checks says so.
	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonIssuerNotChecked)
	if msg := target.Condition(w, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "--service-account-issuer=false") {
		t.Errorf("Ready message %q does not say how to turn the checks on", msg)
	}
	h.takeEvents()

	// The canary's namespace is the watch's, which has no canary ServiceAccount yet.
	h.r.Issuer = &saissuer.Prober{Config: cfg, Namespace: h.key.Namespace}
	h.clock.SetTime(w.Status.NextCheckTime.Time)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonCanaryUnavailable)
	if w.Status.NextCheckTime == nil || !w.Status.NextCheckTime.After(h.clock.Now()) {
		t.Fatalf("nextCheckTime = %v, want a retry after %v", w.Status.NextCheckTime, h.clock.Now())
	}
	events := h.takeEvents()
	if n := countEvents(events, v1alpha1.ReasonCanaryUnavailable); n != 1 || !strings.Contains(strings.Join(events, "\n"), "Checking the service-account issuer failed") {
		t.Errorf("events = %q, want one CanaryUnavailable about the service-account issuer", events)
	}
	if msg := target.Condition(w, v1alpha1.ConditionReady).Message; !strings.Contains(msg, `serviceaccounts "credwatch-canary" not found`) || strings.Contains(msg, `"kind"`) {
		t.Errorf("Ready message %q, want the API server's own words", msg)
	}

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: saissuer.CanaryServiceAccount, Namespace: h.key.Namespace}}
	if err := k8s.Create(context.Background(), sa); err != nil {
		t.Fatal(err)
	}
	h.clock.SetTime(w.Status.NextCheckTime.Time)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	assertCondition(t, w, v1alpha1.ConditionSigningKeyDrift, metav1.ConditionFalse, v1alpha1.ReasonKeysAgree)
	events = h.takeEvents()
	if n := countEvents(events, "CheckRecovered"); n != 1 || !strings.Contains(strings.Join(events, "\n"), "Reading the service-account issuer works again") {
		t.Errorf("events = %q, want one %s about the service-account issuer", events, "CheckRecovered")
	}

	// A named API server, which the admin allows, that does not answer.
	h.r.Issuer = &saissuer.Prober{Config: cfg, Namespace: h.key.Namespace, Allowed: []string{"https://127.0.0.1:1"}}
	w.Spec.Target.ServiceAccountIssuer.Endpoints = []string{self, "https://127.0.0.1:1"}
	if err := k8s.Update(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	h.clock.SetTime(w.Status.NextCheckTime.Time)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonEndpointUnreachable)
	if msg := target.Condition(w, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "https://127.0.0.1:1") {
		t.Errorf("Ready message %q does not name the unreachable API server", msg)
	}
}

type observed saissuer.Observation

func (o observed) Probe(context.Context, []string) (saissuer.Observation, error) {
	return saissuer.Observation(o), nil
}

// More keys than the status holds, and several rejections: the status is still admitted, and says
// the same on every check.
func TestIssuerStatusIsBoundedAndStable(t *testing.T) {
	needsAPIServer(t)
	var kids []string
	for i := range 20 {
		kids = append(kids, fmt.Sprintf("k%02d", i))
	}
	rejected := map[string]string{}
	for _, ep := range []string{"https://c", "https://a", "https://d", "https://b"} {
		rejected[ep] = "invalid bearer token"
	}
	obs := observed{Endpoints: []saissuer.Endpoint{{URL: "https://e", Issuer: "https://issuer", KeyIDs: kids, SigningKeyID: "k00", Rejected: rejected}}}

	h := newHarness(t)
	h.create("", func(spec *v1alpha1.CredentialWatchSpec) {
		spec.Target.ServiceAccountIssuer = &v1alpha1.ServiceAccountIssuerTarget{Endpoints: []string{"https://e"}}
	})
	h.r.Issuer = obs
	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	ep := w.Status.ServiceAccountIssuer.Endpoints[0]
	if len(ep.KeyIDs) != 16 { // the CRD's bound
		t.Errorf("%d key IDs in status, want 16", len(ep.KeyIDs))
	}
	want := "rejected by https://a: invalid bearer token; rejected by https://b: invalid bearer token; rejected by https://c: invalid bearer token; rejected by https://d: invalid bearer token"
	if ep.Problem != want {
		t.Errorf("problem = %q, want %q", ep.Problem, want)
	}
	h.clock.SetTime(w.Status.NextCheckTime.Time)
	again, _ := h.reconcile()
	if !equality.Semantic.DeepEqual(again.Status.ServiceAccountIssuer.Endpoints, w.Status.ServiceAccountIssuer.Endpoints) {
		t.Errorf("the endpoints' status changed with nothing new:\n%+v\n%+v", w.Status.ServiceAccountIssuer.Endpoints, again.Status.ServiceAccountIssuer.Endpoints)
	}
}

// A drift that changes kind is told again; the same drift found again is not.
func TestIssuerDriftOfANewKindIsTold(t *testing.T) {
	needsAPIServer(t)
	ep := func(url, issuer, kid string) saissuer.Endpoint {
		return saissuer.Endpoint{URL: url, Issuer: issuer, KeyIDs: []string{kid}, SigningKeyID: kid}
	}
	notShared := observed{Endpoints: []saissuer.Endpoint{ep("https://a", "https://issuer", "k1"), ep("https://b", "https://issuer", "k2")}}
	issuersDiffer := observed{Endpoints: []saissuer.Endpoint{ep("https://a", "https://issuer", "k1"), ep("https://b", "https://other", "k1")}}

	h := newHarness(t)
	h.create("", func(spec *v1alpha1.CredentialWatchSpec) {
		spec.Target.ServiceAccountIssuer = &v1alpha1.ServiceAccountIssuerTarget{Endpoints: []string{"https://a", "https://b"}}
	})
	for i, step := range []struct {
		obs    observed
		reason string
		events int
	}{
		{notShared, v1alpha1.ReasonSigningKeyNotShared, 1},
		{notShared, v1alpha1.ReasonSigningKeyNotShared, 0},
		{issuersDiffer, v1alpha1.ReasonIssuersDiffer, 1},
	} {
		h.r.Issuer = step.obs
		w, _ := h.reconcile()
		assertCondition(t, w, v1alpha1.ConditionSigningKeyDrift, metav1.ConditionTrue, step.reason)
		if n := countEvents(h.takeEvents(), step.reason); n != step.events {
			t.Errorf("check %d: %d %s events, want %d", i+1, n, step.reason, step.events)
		}
		h.clock.SetTime(w.Status.NextCheckTime.Time)
	}
}
