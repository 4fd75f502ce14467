package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/notify/channels"
	"github.com/credwatch/credwatch/internal/notify/webhook"
)

// receiver is a webhook endpoint that checks every delivery's signature and keeps what arrived.
type receiver struct {
	t   *testing.T
	key []byte
	srv *httptest.Server

	mu       sync.Mutex
	got      []webhook.Payload
	failNext int // answer this many deliveries with 503
}

func newReceiver(t *testing.T, key []byte) *receiver {
	rc := &receiver{t: t, key: key}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify(body, r.Header.Get(webhook.HeaderTimestamp), r.Header.Get(webhook.HeaderSignature), rc.key); err != nil {
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
	w.Spec.Alerts = &v1alpha1.Alerts{Webhook: &v1alpha1.WebhookAlerts{
		URLSecretRef:        v1alpha1.SecretKeyRef{Name: "alert-hook", Key: "url"},
		SigningKeySecretRef: &v1alpha1.SecretKeyRef{Name: "alert-hook", Key: "key"},
	}}
	if err := k8s.Update(context.Background(), w); err != nil {
		h.t.Fatal(err)
	}
}

// restart replaces the reconciler with a new one, as a restarted or newly elected operator:
// nothing carries over but what is stored in the API server.
func (h *harness) restart() {
	old := h.r
	h.r = &CredentialWatchReconciler{
		Client: k8s, SecretReader: k8s, Recorder: h.recorder, Clock: h.clock, Rand: old.Rand,
		Identities: identities, Graph: graphAPI, Channels: &channels.Builder{Secrets: k8s}, CheckTimeout: old.CheckTimeout,
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
		wait := res.RequeueAfter
		if len(script) > 0 {
			wait = min(wait, start.Add(script[0].at).Sub(h.clock.Now()))
		}
		if wait <= 0 {
			h.t.Fatalf("reconcile asked to come back after %v", res.RequeueAfter)
		}
		h.step(wait)
	}
	return reconciles
}

func TestAlertScheduleOverFortyDays(t *testing.T) {
	h := newHarness(t)
	t0 := h.clock.Now()
	s := seed(t, t0, 35*day+time.Hour, 400*day, 200*day)
	h.create(s.appID, nil)
	rc := newReceiver(t, []byte("hm4c-k3y"))
	h.withWebhook(rc)

	reconciles := h.run(40*day, []scripted{
		// Graph is down for three hours on day 10: one alert after the hour allowed, one on recovery.
		{at: 10 * day, do: func() { fake.SetUnreachable(true) }},
		{at: 10*day + 3*time.Hour, do: func() { fake.SetUnreachable(false) }},
		// The operator restarts between steps, and again a minute after the 7d reminder went out.
		{at: 20 * day, do: h.restart},
		{at: 28*day + time.Hour + time.Minute, do: h.restart},
		// Someone renews the secret on day 38 and deletes the expired one.
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
