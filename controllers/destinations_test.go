package controllers

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/egress"
	"github.com/credwatch/credwatch/internal/notify/channels"
)

// A watch that names a webhook inside (here the operator's own loopback) is told the operator
// refused it, and nothing of what is there; nothing reaches it. The reason holds while the
// channel waits for its next try, and an admin who allows the range lets it through.
func TestUnitARefusedDestinationIsSaidSoAndNoMore(t *testing.T) {
	var received atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		received.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "hook"},
		Data: map[string][]byte{"url": []byte(hook.URL + "/hooks/T0K3N")}}
	u := newUnit(t, nil, unitWatch(func(spec *v1alpha1.CredentialWatchSpec) {
		spec.Alerts = &v1alpha1.Alerts{Webhook: &v1alpha1.WebhookAlerts{URLSecretRef: v1alpha1.SecretKeyRef{Name: "hook", Key: "url"}}}
	}), secret)
	u.r.Azure = (&reads{}).azure(snapshot(u.clock.Now().Add(5*24*time.Hour + 12*time.Hour)))
	u.r.Channels = &channels.Builder{Secrets: u.c}

	w, _ := u.reconcile()
	wantCondition(t, w, v1alpha1.ConditionAlertsDelivered, metav1.ConditionFalse, v1alpha1.ReasonDestinationRefused)
	port := hook.URL[strings.LastIndex(hook.URL, ":")+1:]
	msg := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionAlertsDelivered).Message
	said := append([]string{msg}, u.events()...)
	for _, s := range said {
		if strings.Contains(s, "127.0.0.1") || strings.Contains(s, port) || strings.Contains(s, "T0K3N") {
			t.Errorf("%q tells where the webhook's name led", s)
		}
	}
	if !strings.Contains(msg, "refused by the operator's destination policy") {
		t.Errorf("AlertsDelivered says %q, want it to say the operator's policy refused the destination", msg)
	}

	u.clock.Step(10 * time.Minute) // within the channel's backoff: nothing is tried
	w, _ = u.reconcile()
	wantCondition(t, w, v1alpha1.ConditionAlertsDelivered, metav1.ConditionFalse, v1alpha1.ReasonDestinationRefused)
	if n := received.Load(); n != 0 {
		t.Errorf("the webhook received %d requests, want none", n)
	}

	u.r.Channels = &channels.Builder{Secrets: u.c, Destinations: egress.Policy{Allow: egress.Prefixes{netip.MustParsePrefix("127.0.0.0/8")}}}
	u.clock.Step(2 * time.Hour)
	w, _ = u.reconcile()
	wantCondition(t, w, v1alpha1.ConditionAlertsDelivered, metav1.ConditionTrue, v1alpha1.ReasonDelivered)
	if n := received.Load(); n != 1 {
		t.Errorf("the webhook received %d requests once allowed, want the reminder", n)
	}
}
