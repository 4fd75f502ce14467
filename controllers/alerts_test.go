package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/azure/clients"
	"github.com/credwatch/credwatch/internal/notify/channels"
	"github.com/credwatch/credwatch/internal/notify/webhook"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/tenantscan"
	"github.com/credwatch/credwatch/test/fakegraph"
	"github.com/credwatch/credwatch/test/mailpit"
)

// receiver is a webhook endpoint that checks every delivery's signature and keeps what arrived.
type receiver struct {
	t   *testing.T
	key []byte
	srv *httptest.Server

	mu         sync.Mutex
	got        []webhook.Payload
	failNext   int    // answer this many deliveries with 503
	onDelivery func() // called for each delivery accepted, before answering
}

func newReceiver(t *testing.T, key []byte) *receiver {
	rc := &receiver{t: t, key: key}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if rc.key == nil {
			if r.Header.Get(webhook.HeaderSignature) != "" {
				t.Errorf("a delivery without a signing key is signed")
			}
		} else if err := webhook.Verify(body, r.Header.Get(webhook.HeaderTimestamp), r.Header.Get(webhook.HeaderSignature), rc.key); err != nil {
			t.Errorf("delivery with a bad signature: %v", err)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var p webhook.Payload
		if err := json.Unmarshal(body, &p); err != nil {
			t.Errorf("delivery is not a payload: %v", err)
		}
		if p.ID != r.Header.Get(webhook.HeaderDelivery) {
			t.Errorf("payload id %q, delivery header %q", p.ID, r.Header.Get(webhook.HeaderDelivery))
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if rc.failNext > 0 {
			rc.failNext--
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		rc.got = append(rc.got, p)
		if rc.onDelivery != nil {
			rc.onDelivery()
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// received lists what arrived as "kind step-or-title", in order.
func (rc *receiver) received() []webhook.Payload {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]webhook.Payload(nil), rc.got...)
}

func (rc *receiver) failNextDeliveries(n int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.failNext = n
}

// withWebhook makes a Secret for the receiver in the watch's namespace and points the watch at it.
func (h *harness) withWebhook(rc *receiver) {
	h.t.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "alert-hook", Namespace: h.key.Namespace},
		Data:       map[string][]byte{"url": []byte(rc.srv.URL + "/hooks/T0K3N-in-the-path"), "key": rc.key},
	}
	if err := k8s.Create(context.Background(), secret); err != nil {
		h.t.Fatal(err)
	}
	w := h.get()
	w.Spec.Alerts = &v1alpha1.Alerts{Webhook: &v1alpha1.WebhookAlerts{URLSecretRef: v1alpha1.SecretKeyRef{Name: "alert-hook", Key: "url"}}}
	if rc.key != nil {
		w.Spec.Alerts.Webhook.SigningKeySecretRef = &v1alpha1.SecretKeyRef{Name: "alert-hook", Key: "key"}
	}
	if err := k8s.Update(context.Background(), w); err != nil {
		h.t.Fatal(err)
	}
}

// restart replaces the reconciler with a new one, as a restarted or newly elected operator:
// nothing carries over but what is stored in the API server.
func (h *harness) restart() {
	old := h.r
	h.r = &CredentialWatchReconciler{
		Client: k8s, SecretReader: k8s, DefaultIdentity: old.DefaultIdentity, ClusterID: old.ClusterID, Recorder: h.recorder, Clock: h.clock, Rand: old.Rand,
		Azure: clients.New(identities, graphAPI, nil), Channels: &channels.Builder{Secrets: k8s, Destinations: localPeers}, CheckTimeout: old.CheckTimeout, Scans: tenantscan.NewStore(), Digests: tenantscan.NewDigestStore(), DigestPace: old.DigestPace,
		Ledger: old.Ledger, Paces: old.Paces,
	}
}

// scripted is something that happens to the world at a moment of the story.
type scripted struct {
	at time.Duration // after the story starts
	do func()
}

// run drives the watch like controller-runtime would, reconciling whenever it asked to come back,
// for the given span of fake time, with the scripted happenings at their moments.
func (h *harness) run(span time.Duration, script []scripted) (reconciles int) {
	h.t.Helper()
	start := h.clock.Now()
	for h.clock.Now().Before(start.Add(span)) {
		for len(script) > 0 && !h.clock.Now().Before(start.Add(script[0].at)) {
			script[0].do()
			script = script[1:]
		}
		_, res := h.reconcile()
		reconciles++
		wait := min(res.RequeueAfter, start.Add(span).Sub(h.clock.Now()))
		if len(script) > 0 {
			wait = min(wait, start.Add(script[0].at).Sub(h.clock.Now()))
		}
		if res.RequeueAfter <= 0 {
			h.t.Fatalf("reconcile asked to come back after %v", res.RequeueAfter)
		}
		h.step(max(wait, time.Second))
	}
	return reconciles
}

func TestAlertScheduleOverFortyDays(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	t0 := h.clock.Now()
	s := seed(t, t0, 35*day+time.Hour, 400*day, 200*day)
	h.create(s.appID, nil)
	rc := newReceiver(t, []byte("hm4c-k3y-0f-32-bytes-or-more-0123"))
	h.withWebhook(rc)

	reconciles := h.run(40*day, []scripted{
		// Graph is down for three hours on day 10: one alert after the hour allowed, one on recovery.
		{at: 10 * day, do: func() { fake.SetUnreachable(true) }},
		{at: 10*day + 3*time.Hour, do: func() { fake.SetUnreachable(false) }},
		// The operator restarts between steps, and again a minute after the 7d reminder went out.
		{at: 20 * day, do: h.restart},
		{at: 28*day + time.Hour + time.Minute, do: h.restart},
		// Someone deletes the expired secret on day 38.
		{at: 38 * day, do: func() {
			app, _ := fake.Application(tenantID, s.appID)
			app.Passwords = nil
			fake.PutApplication(tenantID, app)
		}},
	})

	var got []string
	ids := map[string]bool{}
	for _, p := range rc.received() {
		line := string(p.Kind)
		if p.Credential != nil {
			line += " " + p.Credential.KeyID[:8]
		}
		line += " at day " + fmt.Sprintf("%.2f", p.At.Sub(t0).Hours()/24)
		got = append(got, line)
		if ids[p.ID] {
			t.Errorf("alert %s delivered twice", p.ID)
		}
		ids[p.ID] = true
	}
	k := s.appSecretKey[:8]
	want := []string{
		"Reminder " + k + " at day 5.04",
		"CheckFailing at day 10.04",
		"CheckRecovered at day 10.13",
		"Reminder " + k + " at day 21.04",
		"Reminder " + k + " at day 28.04",
		"Reminder " + k + " at day 32.04",
		"Reminder " + k + " at day 34.04",
		"Expired " + k + " at day 35.04",
		"Expired " + k + " at day 36.04",
		"Expired " + k + " at day 37.04",
		"Expired " + k + " at day 38.04",
		// The deletion at day 38 is seen at the next check: since the outage, checks fall at x.13.
		"Resolved " + k + " at day 38.13",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("alerts received:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	t.Logf("%d reconciles over 40 days", reconciles)

	w := h.get()
	assertCondition(t, w, v1alpha1.ConditionAlertsDelivered, metav1.ConditionTrue, v1alpha1.ReasonDelivered)
	if w.Status.Alerts != nil && len(w.Status.Alerts.Sent) != 0 {
		t.Errorf("ledger after resolution = %+v, want empty", w.Status.Alerts.Sent)
	}
	assertNoSecrets(t, h, "T0K3N-in-the-path", "hm4c-k3y")
}

func TestFailedDeliveryIsRetriedWithBackoffAndNeverLost(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 10*day+30*time.Minute, 400*day, 200*day)
	h.create(s.appID, nil)
	rc := newReceiver(t, []byte("k3y-0123456789abcdef0123456789abc"))
	h.withWebhook(rc)
	rc.failNextDeliveries(2)

	w, res := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionAlertsDelivered, metav1.ConditionFalse, v1alpha1.ReasonDeliveryFailed)
	if res.RequeueAfter != time.Minute {
		t.Errorf("retry after %v, want 1m", res.RequeueAfter)
	}
	msg := target.Condition(w, v1alpha1.ConditionAlertsDelivered).Message
	if !strings.Contains(msg, "webhook-") || !strings.Contains(msg, "503") || strings.Contains(msg, "T0K3N") {
		t.Errorf("condition message %q: want the channel and the status, never the URL", msg)
	}
	// The check itself is unaffected by a channel that fails.
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	events := h.takeEvents()
	if n := countPrefix(events, "Warning AlertDeliveryFailed"); n != 1 {
		t.Errorf("AlertDeliveryFailed events = %d, want 1: %q", n, events)
	}

	// Before the retry is due nothing is tried; then the backoff doubles.
	h.step(30 * time.Second)
	w, _ = h.reconcile()
	if f := w.Status.Alerts.Failing; len(f) != 1 || f[0].Failures != 1 {
		t.Errorf("a reconcile during the backoff tried again: %+v", f)
	}
	h.step(30 * time.Second)
	w, res = h.reconcile()
	if f := w.Status.Alerts.Failing; len(f) != 1 || f[0].Failures != 2 || res.RequeueAfter != 2*time.Minute {
		t.Errorf("after the second failure: %+v, retry after %v; want 2 failures, 2m", f, res.RequeueAfter)
	}
	if n := countPrefix(h.takeEvents(), "Warning AlertDeliveryFailed"); n != 0 {
		t.Errorf("a second failure raised %d more events, want none", n)
	}

	h.step(res.RequeueAfter)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionAlertsDelivered, metav1.ConditionTrue, v1alpha1.ReasonDelivered)
	if got := rc.received(); len(got) != 1 || got[0].Kind != "Reminder" {
		t.Fatalf("received %+v, want the 14d reminder once", got)
	}
	if w.Status.Alerts == nil || len(w.Status.Alerts.Failing) != 0 || len(w.Status.Alerts.Sent) != 1 || w.Status.Alerts.Sent[0].Step != "14d" {
		t.Errorf("ledger = %+v, want the 14d step sent and no failure", w.Status.Alerts)
	}
	h.step(time.Minute)
	h.reconcile()
	if n := len(rc.received()); n != 1 {
		t.Errorf("%d deliveries after a further reconcile, want still 1", n)
	}
}

func TestMisconfiguredChannelIsAClearConditionAndLosesNothing(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 10*day, 400*day, 200*day)
	h.create(s.appID, func(spec *v1alpha1.CredentialWatchSpec) {
		spec.Alerts = &v1alpha1.Alerts{Webhook: &v1alpha1.WebhookAlerts{URLSecretRef: v1alpha1.SecretKeyRef{Name: "alert-hook", Key: "url"}}}
	})
	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionAlertsDelivered, metav1.ConditionFalse, v1alpha1.ReasonChannelMisconfigured)
	if msg := target.Condition(w, v1alpha1.ConditionAlertsDelivered).Message; !strings.Contains(msg, "webhook.urlSecretRef: Secret "+h.key.Namespace+"/alert-hook does not exist") {
		t.Errorf("message %q does not say which Secret is missing", msg)
	}
	if n := countPrefix(h.takeEvents(), "Warning AlertChannelMisconfigured"); n != 1 {
		t.Errorf("AlertChannelMisconfigured events = %d, want 1", n)
	}

	// Once the Secret exists, the reminder that fell due meanwhile goes out.
	rc := newReceiver(t, nil)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "alert-hook", Namespace: h.key.Namespace},
		Data:       map[string][]byte{"url": []byte(rc.srv.URL)},
	}
	if err := k8s.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	h.step(5 * time.Minute)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionAlertsDelivered, metav1.ConditionTrue, v1alpha1.ReasonDelivered)
	if got := rc.received(); len(got) != 1 || got[0].Kind != "Reminder" {
		t.Errorf("received %+v, want the reminder that fell due while the Secret was missing", got)
	}
}

func TestDefaultChannelsAndOptingOut(t *testing.T) {
	needsAPIServer(t)
	rc := newReceiver(t, nil)
	operatorNS := newNamespace(t)
	if err := k8s.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "default-hook", Namespace: operatorNS},
		Data:       map[string][]byte{"url": []byte(rc.srv.URL)},
	}); err != nil {
		t.Fatal(err)
	}
	defaults := &channels.Builder{Secrets: k8s, DefaultsNamespace: operatorNS, Defaults: &v1alpha1.Alerts{
		Webhook: &v1alpha1.WebhookAlerts{URLSecretRef: v1alpha1.SecretKeyRef{Name: "default-hook", Key: "url"}},
	}}
	no := false
	for name, tc := range map[string]struct {
		alerts    *v1alpha1.Alerts
		wantSent  int
		wantReady string
	}{
		"a watch naming no channel uses the defaults": {alerts: nil, wantSent: 1, wantReady: v1alpha1.ReasonDelivered},
		"a watch can opt out":                         {alerts: &v1alpha1.Alerts{UseDefaultChannels: &no}, wantSent: 0, wantReady: v1alpha1.ReasonNoChannels},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.r.Channels = defaults
			s := seed(t, h.clock.Now(), 10*day, 400*day, 200*day)
			h.create(s.appID, func(spec *v1alpha1.CredentialWatchSpec) { spec.Alerts = tc.alerts })
			before := len(rc.received())
			w, _ := h.reconcile()
			assertCondition(t, w, v1alpha1.ConditionAlertsDelivered, metav1.ConditionTrue, tc.wantReady)
			if got := len(rc.received()) - before; got != tc.wantSent {
				t.Errorf("default channel got %d alerts, want %d", got, tc.wantSent)
			}
		})
	}
}

func countPrefix(events []string, prefix string) int {
	n := 0
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// The owners' mail goes to the members among them, in the tenant's verified domains: not to a
// guest someone added as an owner, nor to an outside address.
func TestEmailReachesTheApplicationsOwners(t *testing.T) {
	needsAPIServer(t)
	m := mailpit.Start(t)
	h := newHarness(t)
	fake.SetVerifiedDomains(tenantID, "contoso.onmicrosoft.com", "example.com")
	t.Cleanup(func() { fake.SetVerifiedDomains(tenantID) })
	s := seed(t, h.clock.Now(), 6*day+time.Hour, 400*day, 200*day)
	app, _ := fake.Application(tenantID, s.appID)
	app.Owners = []fakegraph.Owner{
		{ID: "5d6e7f80-1a2b-4c3d-9e4f-5a6b7c8d9e0f", DisplayName: "Ada", Mail: "ada@example.com"},
		{ID: "6e7f8091-2b3c-4d4e-8f50-6b7c8d9e0f1a", DisplayName: "deploy-bot", ServicePrincipal: true},
		{ID: "7f8091a2-3c4d-4e5f-9061-7c8d9e0f1a2b", DisplayName: "Mallory", Mail: "mallory@evil.example",
			UserPrincipalName: "mallory_evil.example#EXT#@contoso.onmicrosoft.com", Guest: true},
		{ID: "8091a2b3-4d5e-4f60-8172-8d9e0f1a2b3c", DisplayName: "Eve", UserPrincipalName: "eve_evil.example#EXT#@contoso.onmicrosoft.com"},
		// A guest whose mail an admin of its home tenant set to an address in a verified domain.
		{ID: "91a2b3c4-5e6f-4071-9283-9e0f1a2b3c4d", DisplayName: "Trent", Mail: "trent@example.com", Guest: true},
	}
	fake.PutApplication(tenantID, app)
	h.create(s.appID, func(spec *v1alpha1.CredentialWatchSpec) {
		spec.Alerts = &v1alpha1.Alerts{Email: &v1alpha1.EmailAlerts{
			To: []string{"platform@example.com"}, NotifyOwners: true,
			SMTP: v1alpha1.SMTPServer{Host: "127.0.0.1", Port: int32(m.SMTPPort), TLS: v1alpha1.SMTPNoTLS, From: "credwatch@example.com"},
		}}
	})

	w, _ := h.reconcile()
	if got := w.Status.ServicePrincipal.OwnerEmails; strings.Join(got, ",") != "ada@example.com" {
		t.Errorf("ownerEmails = %v, want Ada's, and neither the service principal's nor the guests'", got)
	}
	assertCondition(t, w, v1alpha1.ConditionAlertsDelivered, metav1.ConditionTrue, v1alpha1.ReasonDelivered)
	msgs := m.Messages(t)
	if len(msgs) != 1 {
		t.Fatalf("mailpit has %d messages, want 1", len(msgs))
	}
	var to []string
	for _, a := range msgs[0].To {
		to = append(to, a.Address)
	}
	if strings.Join(to, ",") != "platform@example.com,ada@example.com" || msgs[0].Subject != "Secret of aks-prod-sp expires in 6 days" {
		t.Errorf("mail to %v, subject %q", to, msgs[0].Subject)
	}
	if !strings.Contains(msgs[0].Text, "az ad app credential reset --id "+s.appID+" --append") {
		t.Errorf("mail text does not say how to renew:\n%s", msgs[0].Text)
	}
}

// staleReader answers Gets of CredentialWatches with a copy taken earlier, as a lagging informer
// cache or a deposed leader would.
type staleReader struct {
	client.Client
	stale *v1alpha1.CredentialWatch
}

func (s staleReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if w, ok := obj.(*v1alpha1.CredentialWatch); ok {
		s.stale.DeepCopyInto(w)
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

func TestAReconcileFromAStaleCopySendsNothing(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 10*day+30*time.Minute, 400*day, 200*day)
	h.create(s.appID, nil)
	rc := newReceiver(t, nil)
	h.withWebhook(rc)
	h.restart() // the webhook edit bumped the generation; start from a checked, unalerted watch
	w, _ := h.reconcile()
	if n := len(rc.received()); n != 1 {
		t.Fatalf("received %d alerts, want the 14d reminder", n)
	}

	// The same reconcile again, from the watch as it was before the reminder was recorded.
	stale := w.DeepCopy()
	stale.Status.Alerts = nil
	stale.ResourceVersion = "1"
	h.r.Client = staleReader{Client: k8s, stale: stale}
	_, err := h.r.Reconcile(ctrl.LoggerInto(context.Background(), h.logs.logger()), ctrl.Request{NamespacedName: h.key})
	if !apierrors.IsConflict(err) {
		t.Errorf("reconcile from a stale copy: %v, want a conflict claiming the alert", err)
	}
	if n := len(rc.received()); n != 1 {
		t.Errorf("received %d alerts, want still 1: the stale reconcile sent the reminder again", n)
	}
}

// A secret renewed by hand (az ad app credential reset --append) is still announced until it goes:
// nothing says what used it moved to the new one. Each reminder names the newer secret; the new
// one, far from expiry, is told once as added by something other than credwatch, and is quiet
// after.
func TestRenewedWithAppendKeepsBeingAnnounced(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	t0 := h.clock.Now()
	s := seed(t, t0, 5*day+time.Hour, 400*day, 200*day)
	h.create(s.appID, nil)
	rc := newReceiver(t, nil)
	h.withWebhook(rc)
	h.run(day, nil)

	app, _ := fake.Application(tenantID, s.appID)
	const renewed = "0f1e2d3c-4b5a-4697-8877-665544332211"
	app.Passwords = append(app.Passwords, fakegraph.PasswordCredential{
		KeyID: renewed, DisplayName: "renewed", SecretText: "nEw~secret-text-0123456789abcdef",
		Start: h.clock.Now(), End: h.clock.Now().Add(365 * day),
	})
	fake.PutApplication(tenantID, app)
	before := len(rc.received())
	h.run(10*day, nil)

	got := rc.received()
	if len(got) < before+2 {
		t.Fatalf("received %d alerts after the renewal, want the old secret's further steps", len(got)-before)
	}
	added := 0
	for _, p := range got[before:] {
		if p.Kind == "CredentialAdded" && p.Credential != nil && p.Credential.KeyID == renewed {
			added++
			continue
		}
		if p.Kind == "Resolved" || p.Credential == nil || p.Credential.KeyID != s.appSecretKey {
			t.Errorf("received %s about %+v, want only the old secret's reminders and expiry", p.Kind, p.Credential)
			continue
		}
		if !strings.Contains(p.Fix, "A newer secret \"renewed\" (keyId "+renewed) || !strings.Contains(p.Fix, "make sure every consumer moved to it") {
			t.Errorf("%s fix %q does not name the newer secret and what to check", p.Kind, p.Fix)
		}
	}
	if added != 1 {
		t.Errorf("the renewed secret was told as added %d times, want once", added)
	}
}

func TestPointingAChannelElsewhereSendsTheCurrentStepThere(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 10*day+30*time.Minute, 400*day, 200*day)
	h.create(s.appID, nil)
	first, second := newReceiver(t, nil), newReceiver(t, nil)
	h.withWebhook(first)
	h.reconcile()

	if err := k8s.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "other-hook", Namespace: h.key.Namespace},
		Data:       map[string][]byte{"url": []byte(second.srv.URL)},
	}); err != nil {
		t.Fatal(err)
	}
	w := h.get()
	w.Spec.Alerts.Webhook = &v1alpha1.WebhookAlerts{URLSecretRef: v1alpha1.SecretKeyRef{Name: "other-hook", Key: "url"}}
	if err := k8s.Update(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	h.step(time.Minute)
	h.reconcile()
	if len(first.received()) != 1 || len(second.received()) != 1 {
		t.Errorf("first got %d, second %d; want the 14d reminder once at each", len(first.received()), len(second.received()))
	}
}

func TestAnOperatorThatDiesRightAfterSendingDoesNotSendAgain(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 10*day+30*time.Minute, 400*day, 200*day)
	h.create(s.appID, nil)
	rc := newReceiver(t, nil)
	h.withWebhook(rc)
	h.reconcile() // checked; the webhook edit is seen
	h.step(time.Minute)

	// A second channel's reminder, with one already recorded: the claim must be written even when
	// the ledger is not empty.
	var dead atomic.Bool
	rc.onDelivery = func() { dead.Store(true) }
	h.r.Client = crashingClient{Client: k8s, mortal: mortal{dead: &dead}}
	h.r.Channels = &channels.Builder{Secrets: k8s, Destinations: localPeers}
	w := h.get()
	w.Spec.Alerts.RemindBefore = []v1alpha1.Duration{"30d", "14d", "10d"}
	if err := k8s.Update(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	h.step(time.Hour) // 10d left: the 10d reminder falls due
	// The spec changed: a check, its answer, then the reminder.
	if _, err := reconcileFully(context.Background(), t, h.r, h.key); !errors.Is(err, errDied) {
		t.Fatalf("reconcile = %v, want it to die after sending", err)
	}
	if n := len(rc.received()); n != 2 {
		t.Fatalf("received %d, want the 14d and the 10d reminders", n)
	}

	h.restart()
	rc.onDelivery = nil
	h.step(time.Minute)
	h.reconcile()
	if n := len(rc.received()); n != 2 {
		t.Errorf("received %d after the restart, want still 2: the claim written before sending must stop a resend", n)
	}
}
