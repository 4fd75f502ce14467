package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/azure/clients"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/target/aksfleet"
)

// TestAKSFleetAlerts: a fleet of 25 clusters with a webhook channel tells it nothing of the
// clusters as first found (status and metrics do); then one message per cluster and step as the
// clock moves them, none again after a restart; one when a cluster moves to a managed identity;
// and, when the channel fails, each message once after its backoff. What the channel was told is
// kept in ConfigMaps the fleet owns.
func TestAKSFleetAlerts(t *testing.T) {
	needsAPIServer(t)
	ctx := context.Background()
	h, arm := newFleetHarness(t)
	onSP, byState := arm.seed25(t, h.clock.Now())
	h.createFleet(fleetIdentity(t), v1alpha1.AKSFleetTarget{})
	rc := newReceiver(t, []byte("a-fleet-signing-key-of-32-bytes-at-least"))
	h.withWebhook(rc)

	w, _ := h.reconcile()
	if got := rc.received(); len(got) != 0 {
		t.Fatalf("the first listing sent %d messages, want none: status and metrics show the clusters as found", len(got))
	}
	assertCondition(t, w, v1alpha1.ConditionAlertsDelivered, metav1.ConditionTrue, v1alpha1.ReasonDelivered)
	var cms corev1.ConfigMapList
	if err := k8s.List(ctx, &cms, client.InNamespace(w.Namespace)); err != nil {
		t.Fatal(err)
	}
	entries := 0
	for _, cm := range cms.Items {
		if ref := metav1.GetControllerOf(&cm); ref == nil || ref.UID != w.UID {
			t.Errorf("ConfigMap %s is not controlled by the fleet", cm.Name)
		}
		entries += len(cm.Data)
	}
	if entries != 19+1 {
		t.Errorf("the ledger holds %d entries, want the 19 clusters on a service principal and the channel's start", entries)
	}

	// 18 days on, the warnings turn critical and the critical expire: one message each.
	h.step(18 * day)
	for range 3 {
		h.reconcile()
		h.step(time.Minute)
	}
	seen := map[string]bool{}
	got := rc.received()
	if want := byState["Warning"] + byState["Critical"]; len(got) != want {
		t.Fatalf("%d messages, want %d: %+v", len(got), want, got)
	}
	for _, p := range got {
		if seen[p.ID] || seen[p.Cluster] || !strings.HasPrefix(p.Cluster, "/subscriptions/") || p.ServicePrincipal.AppID == "" ||
			(p.Kind != alertkind.Reminder && p.Kind != alertkind.Expired) || !strings.Contains(p.Fix, "--enable-managed-identity") {
			t.Errorf("message %+v: want one per cluster, naming it, its appId and the move to a managed identity", p)
		}
		seen[p.ID], seen[p.Cluster] = true, true
	}

	// A restarted operator lists the fleet again and tells nothing twice.
	h.restart()
	h.r.Fleets, h.r.CheckTimeout = aksfleet.NewStore(), time.Minute
	h.r.Azure = clients.New(identities, graphAPI, arm.reader())
	for range 2 {
		h.reconcile()
		h.step(time.Minute)
	}
	if n := len(rc.received()); n != len(got) {
		t.Errorf("%d messages after a restart, want %d: nothing again", n, len(got))
	}

	// A cluster the channel was told of moves to a managed identity: one message says so.
	sub, name, _ := strings.Cut(onSP[0], "/")
	arm.setIdentity(sub, name, "msi")
	h.step(6*time.Hour + time.Minute)
	h.reconcile()
	all := rc.received()
	if len(all) != len(got)+1 {
		t.Fatalf("%d messages after the move, want one more", len(all)-len(got))
	}
	if p := all[len(all)-1]; p.Kind != alertkind.ManagedIdentity || !strings.EqualFold(p.Cluster, clusterID(onSP[0])) ||
		!strings.Contains(p.Title, "managed identity") || !strings.Contains(p.Fix, "--node-image-only") {
		t.Errorf("message %+v: want the move to a managed identity, with the node pool upgrade it still needs", p)
	}

	// The channel fails once as the last clusters turn Warning, and those Critical since the
	// first step expire: each is told once, after the backoff, and nothing is lost meanwhile.
	rc.failNextDeliveries(1)
	before := len(rc.received())
	h.step(70 * day)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionAlertsDelivered, metav1.ConditionFalse, v1alpha1.ReasonDeliveryFailed)
	if n := len(rc.received()); n != before {
		t.Fatalf("%d messages went out past a failing channel, want none until its backoff", n-before)
	}
	for range 4 {
		h.step(time.Hour)
		w, _ = h.reconcile()
	}
	after := rc.received()[before:]
	warned, expired := 0, 0
	for _, p := range after {
		switch {
		case seen[p.ID] || seen[p.Cluster+string(p.Kind)]:
			t.Errorf("message %+v: told before", p)
		case p.Kind == alertkind.Reminder && p.Severity == notify.SeverityWarning:
			warned++
		case p.Kind == alertkind.Expired:
			expired++
		}
		seen[p.ID], seen[p.Cluster+string(p.Kind)] = true, true
	}
	if warned != byState["Valid"] || expired != byState["Warning"] || len(after) != warned+expired {
		t.Errorf("after the backoff: %d Warning and %d Expired of %d messages, want %d and %d", warned, expired, len(after), byState["Valid"], byState["Warning"])
	}
	assertCondition(t, w, v1alpha1.ConditionAlertsDelivered, metav1.ConditionTrue, v1alpha1.ReasonDelivered)
	for _, p := range rc.received() {
		if strings.Contains(p.Text, "T0K3N") || strings.Contains(p.Fix, "T0K3N") {
			t.Errorf("a message carries the webhook's token: %+v", p)
		}
	}
}
