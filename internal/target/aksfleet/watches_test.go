package aksfleet

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/target/targettest"
)

func creatingFleet() *v1alpha1.CredentialWatch {
	obj := fleetWatch()
	obj.Spec.Target.AKSFleet.CreateWatches = &v1alpha1.FleetWatchTemplate{}
	obj.Status.Fleet = &v1alpha1.FleetStatus{}
	return obj
}

func onSP(names ...string) *Now {
	var clusters []Cluster
	for _, n := range names {
		clusters = append(clusters, Cluster{ID: clusterID("s1", "rg", n), SubscriptionID: "s1", ResourceGroup: "rg", AppID: "app-" + n})
	}
	found := Found{Subscriptions: 1, Clusters: clusters, Complete: map[string]bool{"s1": true}}
	return &Now{Found: found, Shown: found}
}

func TestUnitSyncWatchesCreatesOnePerClusterAndLeavesAnothersNameAlone(t *testing.T) {
	ev := &targettest.Events{}
	ws := &watches{items: map[string]*v1alpha1.CredentialWatch{}}
	obj := creatingFleet()
	// Someone's own watch holds the name the fleet would give cluster c's.
	taken := WatchName(obj.Name, clusterID("s1", "rg", "c"))
	ws.items["team/"+taken] = &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: taken}}
	f := Fleet{Events: ev, Watches: ws}

	next, err := f.SyncWatches(context.Background(), obj, onSP("a", "b", "c"), 0, now)
	if err != nil || !next.IsZero() {
		t.Fatalf("sync: next %v, %v", next, err)
	}
	if obj.Status.Fleet.Watches != 2 || obj.Status.Fleet.Unwatched != 1 {
		t.Errorf("status %+v: want two watches and one cluster unwatched", obj.Status.Fleet)
	}
	a := ws.items["team/"+WatchName(obj.Name, clusterID("s1", "rg", "a"))]
	if a == nil || metav1.GetControllerOf(a).UID != obj.UID || a.Spec.Target.AKSCluster.Name != "a" || a.Labels[labelFleet] != string(obj.UID) {
		t.Fatalf("watch of a: %+v, want one the fleet controls, of cluster a", a)
	}
	assertEvents(t, ev.Take(), "Normal FleetWatchesCreated Created 2 aksCluster watches, such as "+a.Name,
		"Warning FleetWatchNameTaken 1 clusters have no watch of the fleet's because a watch it did not create holds the name, such as "+taken+
			": delete or rename that watch, and the fleet creates its own")

	// Again, nothing changed: no write, no event.
	if _, err := f.SyncWatches(context.Background(), obj, onSP("a", "b", "c"), obj.Status.Fleet.Unwatched, now); err != nil {
		t.Fatal(err)
	}
	assertEvents(t, ev.Take())

	// b is gone from a subscription listed whole, a moved to a managed identity.
	moved := onSP("c")
	moved.Found.Clusters = append(moved.Found.Clusters, Cluster{ID: clusterID("s1", "rg", "a"), SubscriptionID: "s1", ResourceGroup: "rg"})
	if _, err := f.SyncWatches(context.Background(), obj, moved, obj.Status.Fleet.Unwatched, now); err != nil {
		t.Fatal(err)
	}
	if obj.Status.Fleet.Watches != 0 || len(ws.items) != 1 {
		t.Errorf("status %+v, %d watches left: want only the other's", obj.Status.Fleet, len(ws.items))
	}
	if got := ev.Take(); len(got) != 1 || got[0][:len("Normal FleetWatchesDeleted Deleted 2 aksCluster watches")] != "Normal FleetWatchesDeleted Deleted 2 aksCluster watches" {
		t.Errorf("events %q, want one FleetWatchesDeleted of two", got)
	}
}

func TestUnitSyncWatchesIsBoundedAndAQuotaHoldsUpTheRest(t *testing.T) {
	ev := &targettest.Events{}
	ws := &watches{items: map[string]*v1alpha1.CredentialWatch{}}
	obj := creatingFleet()
	f := Fleet{Events: ev, Watches: ws, WatchLimit: 2}
	if _, err := f.SyncWatches(context.Background(), obj, onSP("a", "b", "c", "d"), 0, now); err != nil {
		t.Fatal(err)
	}
	if len(ws.items) != 2 || obj.Status.Fleet.Unwatched != 2 {
		t.Errorf("%d watches, %d unwatched: want the limit of 2, and 2 unwatched", len(ws.items), obj.Status.Fleet.Unwatched)
	}
	assertEvents(t, ev.Take()[1:], "Warning FleetWatchesCapped 2 clusters on a service principal have no watch: a fleet creates at most 2; "+
		"narrow it with subscriptions, resourceGroups or tags, or split it")

	ws = &watches{items: map[string]*v1alpha1.CredentialWatch{}, CreateFunc: func(*v1alpha1.CredentialWatch) error {
		return apierrors.NewForbidden(watchResource, "x", errAny("exceeded quota"))
	}}
	f.Watches, f.WatchLimit = ws, 0
	obj = creatingFleet()
	if _, err := f.SyncWatches(context.Background(), obj, onSP("a", "b", "c"), 0, now); err != nil {
		t.Fatal(err)
	}
	if got := ev.Take(); len(got) != 1 || obj.Status.Fleet.Unwatched != 3 {
		t.Errorf("events %q, %d unwatched: want one FleetWatchRefused and the other two waiting", got, obj.Status.Fleet.Unwatched)
	}
}

type errAny string

func (e errAny) Error() string { return string(e) }
