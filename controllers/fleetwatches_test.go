package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/aksfleet"
)

// fleetChildren are the watches the fleet w controls, by the resource ID of their cluster.
func fleetChildren(t *testing.T, w *v1alpha1.CredentialWatch) map[string]v1alpha1.CredentialWatch {
	t.Helper()
	var list v1alpha1.CredentialWatchList
	if err := k8s.List(context.Background(), &list, client.InNamespace(w.Namespace)); err != nil {
		t.Fatal(err)
	}
	out := map[string]v1alpha1.CredentialWatch{}
	for _, c := range list.Items {
		if ref := metav1.GetControllerOf(&c); ref != nil && ref.UID == w.UID && c.DeletionTimestamp == nil {
			out[strings.ToLower(c.Annotations[aksfleet.AnnotationCluster])] = c
		}
	}
	return out
}

func clusterID(subName string) string {
	sub, name, _ := strings.Cut(subName, "/")
	return "/subscriptions/" + sub + "/resourcegroups/rg-" + name + "/providers/microsoft.containerservice/managedclusters/" + name
}

// TestAKSFleetCreatesWatches: a fleet of 25 clusters with createWatches gives one aksCluster watch
// per cluster on a service principal, named after a hash of its resource ID, owned by the fleet,
// with its identity and the template; leaves alone a watch of the name it did not create; keeps
// the watches to template edits; creates none twice after a restart; deletes the watch of a
// cluster gone or moved to a managed identity only after a complete listing of its
// subscription; and deletes them all when createWatches is unset.
func TestAKSFleetCreatesWatches(t *testing.T) {
	needsAPIServer(t)
	ctx := context.Background()
	h, arm := newFleetHarness(t)
	onSP, _ := arm.seed25(t, h.clock.Now())
	idName := fleetIdentity(t)
	h.createFleet(idName, v1alpha1.AKSFleetTarget{CreateWatches: &v1alpha1.FleetWatchTemplate{
		Thresholds: &v1alpha1.Thresholds{Warning: "45d", Critical: "10d"},
		Rotation:   &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "aks-sp"}},
	}})
	// Someone's watch already holds the name of the first cluster's.
	taken := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: h.key.Namespace, Name: aksfleet.WatchName(h.key.Name, clusterID(onSP[0]))},
		Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{ServicePrincipal: &v1alpha1.ServicePrincipalTarget{TenantID: tenantID, ClientID: "11111111-2222-4333-8444-555555555555"}}}}
	if err := k8s.Create(ctx, taken); err != nil {
		t.Fatal(err)
	}

	w, _ := h.reconcile()
	children := fleetChildren(t, w)
	if len(children) != 18 || w.Status.Fleet.Watches != 18 || w.Status.Fleet.Unwatched != 1 {
		t.Fatalf("%d watches, status says %d and %d unwatched; want 18 of the 19 clusters on a service principal, one name taken",
			len(children), w.Status.Fleet.Watches, w.Status.Fleet.Unwatched)
	}
	for _, subName := range onSP[1:] {
		id := clusterID(subName)
		c, ok := children[id]
		if !ok {
			t.Fatalf("no watch of %s", id)
		}
		sub, name, _ := strings.Cut(subName, "/")
		suffix := strings.TrimPrefix(c.Name, h.key.Name+"-")
		if c.Name != aksfleet.WatchName(h.key.Name, id) || len(suffix) != 10 {
			t.Errorf("watch %s of %s: want the fleet's name and 10 hex digits", c.Name, id)
		}
		at := c.Spec.Target.AKSCluster
		if at == nil || at.SubscriptionID != sub || at.ResourceGroup != "rg-"+name || at.Name != name || at.TenantID != tenantID ||
			c.Spec.IdentityRef == nil || c.Spec.IdentityRef.Name != idName || c.Spec.Thresholds.Warning != "45d" ||
			c.Spec.Rotation == nil || c.Spec.Rotation.SecretRef.Name != "aks-sp-"+suffix {
			t.Errorf("watch %s has spec %+v (target %+v): want the cluster, the fleet's identity and the template", c.Name, c.Spec, at)
		}
	}
	if got := h.get(); got.Name == "" {
		t.Fatal("the fleet is gone")
	}
	var still v1alpha1.CredentialWatch
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(taken), &still); err != nil || metav1.GetControllerOf(&still) != nil || still.Spec.Target.ServicePrincipal == nil {
		t.Errorf("the watch that held the name is %+v (%v): want it left as it was", still.ObjectMeta, err)
	}
	events := h.takeEvents()
	if countPrefix(events, "Normal FleetWatchesCreated Created 18 aksCluster watches") != 1 || countPrefix(events, "Warning FleetWatchNameTaken 1 clusters") != 1 {
		t.Errorf("events = %q, want one FleetWatchesCreated for 18 and one FleetWatchNameTaken", events)
	}

	// A watch the fleet created is a watch like any: its rotation asks the identity for Rotate,
	// which the fleet's identity does not allow.
	child := children[clusterID(onSP[1])]
	childKey := client.ObjectKeyFromObject(&child)
	if _, err := reconcileFully(ctx, t, h.r, childKey); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, childKey, &child); err != nil {
		t.Fatal(err)
	}
	assertCondition(t, &child, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	if c := target.Condition(&child, v1alpha1.ConditionRotating); !strings.Contains(c.Message, string(v1alpha1.OperationRotate)) {
		t.Errorf("the child's Rotating condition is %+v: want the identity's refusal of Rotate", c)
	}

	// The template changes: every watch follows, in one reconcile.
	w = h.get()
	w.Spec.Target.AKSFleet.CreateWatches.Thresholds.Warning = "60d"
	if err := k8s.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	h.step(time.Minute)
	w, _ = h.reconcile()
	for id, c := range fleetChildren(t, w) {
		if c.Spec.Thresholds.Warning != "60d" {
			t.Errorf("watch of %s has warning %s after the template changed, want 60d", id, c.Spec.Thresholds.Warning)
		}
	}
	h.takeEvents()

	// A restarted operator lists the fleet again and creates nothing twice; a watch deleted by
	// hand comes back.
	if err := k8s.Delete(ctx, &child); err != nil {
		t.Fatal(err)
	}
	h.r.Fleets = aksfleet.NewStore()
	h.step(time.Minute)
	w, _ = h.reconcile()
	if n := len(fleetChildren(t, w)); n != 18 {
		t.Errorf("%d watches after a restart, want 18", n)
	}
	if events := h.takeEvents(); countPrefix(events, "Normal FleetWatchesCreated Created 1 aksCluster watches") != 1 || countPrefix(events, "Warning FleetWatchNameTaken") != 0 {
		t.Errorf("events after a restart = %q, want the one deleted by hand created again, and nothing else", events)
	}

	// Subscription B fails to list while one of its clusters is deleted and another moves to a
	// managed identity: nothing is deleted until B is listed whole.
	var inB []string
	for _, subName := range onSP {
		if strings.HasPrefix(subName, fleetSubB+"/") {
			inB = append(inB, subName)
		}
	}
	gone, moved := inB[0], inB[1]
	arm.remove(fleetSubB, strings.SplitN(gone, "/", 2)[1])
	arm.setIdentity(fleetSubB, strings.SplitN(moved, "/", 2)[1], "msi")
	arm.mu.Lock()
	arm.unavailable[fleetSubB] = true
	arm.mu.Unlock()
	h.step(6*time.Hour + time.Minute)
	w, _ = h.reconcile()
	if kids := fleetChildren(t, w); len(kids) != 18 {
		t.Errorf("%d watches while subscription B cannot be listed, want all 18 kept", len(kids))
	}
	if len(w.Status.Fleet.Unread) != 2 {
		t.Errorf("unread = %+v, want B and the forbidden one", w.Status.Fleet.Unread)
	}
	arm.mu.Lock()
	arm.unavailable[fleetSubB] = false
	arm.mu.Unlock()
	h.step(6*time.Hour + time.Minute)
	w, _ = h.reconcile()
	kids := fleetChildren(t, w)
	if _, ok := kids[clusterID(gone)]; ok || len(kids) != 16 || w.Status.Fleet.Watches != 16 {
		t.Errorf("%d watches (status %d), gone cluster's still there: %v; want 16", len(kids), w.Status.Fleet.Watches, ok)
	}
	if _, ok := kids[clusterID(moved)]; ok {
		t.Errorf("the watch of %s, now on a managed identity, is still there", moved)
	}
	if events := h.takeEvents(); countPrefix(events, "Normal FleetWatchesDeleted Deleted 2 aksCluster watches") != 1 ||
		countPrefix(events, "Normal FleetWatchesDeleted Deleted 2 aksCluster watches, such as") != 1 || !strings.Contains(strings.Join(events, "\n"), "managed identity") {
		t.Errorf("events = %q, want one FleetWatchesDeleted for the two, saying one moved to a managed identity", events)
	}

	// createWatches unset: the fleet's watches go; the one it did not create stays.
	w = h.get()
	w.Spec.Target.AKSFleet.CreateWatches = nil
	if err := k8s.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	h.step(time.Minute)
	w, _ = h.reconcile()
	if kids := fleetChildren(t, w); len(kids) != 0 || w.Status.Fleet.Watches != 0 {
		t.Errorf("%d watches after createWatches was unset, want none", len(kids))
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(taken), &still); apierrors.IsNotFound(err) {
		t.Error("the watch the fleet did not create was deleted")
	}
}

// A fleet creates at most its limit of watches, and says how many clusters have none, once.
func TestAKSFleetCreatesAtMostItsLimitOfWatches(t *testing.T) {
	needsAPIServer(t)
	h, arm := newFleetHarness(t)
	h.r.FleetWatches = 5
	arm.seed25(t, h.clock.Now())
	h.createFleet(fleetIdentity(t), v1alpha1.AKSFleetTarget{CreateWatches: &v1alpha1.FleetWatchTemplate{}})
	w, _ := h.reconcile()
	if n := len(fleetChildren(t, w)); n != 5 || w.Status.Fleet.Watches != 5 || w.Status.Fleet.Unwatched != 14 {
		t.Errorf("%d watches, status %d and %d unwatched; want 5, and 14 clusters without", n, w.Status.Fleet.Watches, w.Status.Fleet.Unwatched)
	}
	h.step(time.Minute)
	h.reconcile()
	if events := h.takeEvents(); countPrefix(events, "Warning FleetWatchesCapped 14 clusters on a service principal have no watch: a fleet creates at most 5") != 1 {
		t.Errorf("events = %q, want one FleetWatchesCapped", events)
	}
}

// A cluster whose watch the API server refuses (a resource group's name Azure takes and the
// CRD's rules do not) is reported, and holds up none of the others.
func TestAKSFleetWatchRefusedHoldsUpNoOther(t *testing.T) {
	needsAPIServer(t)
	h, arm := newFleetHarness(t)
	arm.seed25(t, h.clock.Now())
	odd := fleetCluster(fleetSubA, "aks-odd", seed(t, h.clock.Now(), 100*day, 300*day, 200*day).appID)
	odd.ID = to.Ptr("/subscriptions/" + fleetSubA + "/resourceGroups/rg-prüfung/providers/Microsoft.ContainerService/managedClusters/aks-odd")
	arm.mu.Lock()
	first := append([]*armcontainerservice.ManagedCluster{odd}, arm.clusters[fleetSubA]...)
	arm.mu.Unlock()
	arm.set(fleetSubA, first...)
	h.createFleet(fleetIdentity(t), v1alpha1.AKSFleetTarget{CreateWatches: &v1alpha1.FleetWatchTemplate{}})
	w, _ := h.reconcile()
	if n := len(fleetChildren(t, w)); n != 19 || w.Status.Fleet.Watches != 19 || w.Status.Fleet.Unwatched != 1 {
		t.Errorf("%d watches, status %d and %d unwatched; want the 19 others, and the refused one counted", n, w.Status.Fleet.Watches, w.Status.Fleet.Unwatched)
	}
	if events := h.takeEvents(); countPrefix(events, "Warning FleetWatchRefused The API server refused 1 of the fleet's watches") != 1 {
		t.Errorf("events = %q, want one FleetWatchRefused", events)
	}
}
