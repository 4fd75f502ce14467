package aksfleet

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/targettest"
)

func fleetWatch() *v1alpha1.CredentialWatch {
	return &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "fleet", UID: "fleet-uid", Generation: 1},
		Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{AKSFleet: &v1alpha1.AKSFleetTarget{TenantID: "t"}}}}
}

func TestUnitRecordSaysWhatWasSearchedAndTellsUnreadSubscriptionsOnce(t *testing.T) {
	ev := &targettest.Events{}
	f := Fleet{Events: ev, Store: NewStore()}
	obj := fleetWatch()
	found := Found{Subscriptions: 2, Clusters: []Cluster{{ID: clusterID("s1", "rg", "a")}}, Uncounted: 4,
		Unread: []v1alpha1.UnreadSubscription{{SubscriptionID: "s2", Reason: "Forbidden", Message: "AuthorizationFailed"}}}
	f.Record(obj, found, target.TenantSignIns{}, now)
	ready := target.Condition(obj, v1alpha1.ConditionReady)
	if want := "Searched 2 subscriptions: 1 clusters, and 4 more beyond the 1 a fleet holds (narrow it with subscriptions, resourceGroups or tags); " +
		"1 subscriptions could not be read (status.fleet.unread)"; ready.Message != want || ready.Reason != v1alpha1.ReasonChecked {
		t.Errorf("Ready %s %q, want Checked %q", ready.Reason, ready.Message, want)
	}
	assertEvents(t, ev.Take(),
		"Warning FleetTruncated The fleet holds 1 clusters: 4 more were found and are in no count or metric; narrow it with subscriptions, resourceGroups or tags, or split it",
		"Warning SubscriptionsUnread 1 subscriptions could not be read, such as s2: AuthorizationFailed")
	if _, ok := f.Store.Get(target.KeyOf(obj)); !ok {
		t.Error("the store does not hold what was found")
	}
	f.Record(obj, found, target.TenantSignIns{}, now)
	assertEvents(t, ev.Take())
	found.Unread, found.Uncounted = nil, 0
	f.Record(obj, found, target.TenantSignIns{}, now)
	assertEvents(t, ev.Take(), "Normal SubscriptionsRead Every subscription of the fleet could be read again")
}

func TestUnitEvaluateShowsWhatTheIdentityAllowsAndTellsWhatWorsened(t *testing.T) {
	ev := &targettest.Events{}
	f := Fleet{Events: ev, Store: NewStore()}
	obj := fleetWatch()
	pw := v1alpha1.CredentialTypePassword
	a, b := clusterID("s1", "rg", "a"), clusterID("s2", "rg", "b")
	f.Store.Put(target.KeyOf(obj), Found{Subscriptions: 2, Clusters: []Cluster{
		{ID: a, SubscriptionID: "s1", ResourceGroup: "rg", AppID: "app-a", Credentials: []v1alpha1.Credential{credential("app-a", "k", pw, -300*day, 8*day)}},
		{ID: b, SubscriptionID: "s2", ResourceGroup: "rg", AppID: "app-b", Credentials: []v1alpha1.Credential{credential("app-b", "k", pw, -300*day, 2*day)}},
	}})

	// The identity covers s1 alone now: b is neither shown nor counted.
	n, next := f.Evaluate(obj, nil, grantOf("s1"), std, now)
	if n == nil || len(n.Shown.Clusters) != 1 || len(n.Found.Clusters) != 2 || obj.Status.Fleet.Clusters != 1 || obj.Status.State != v1alpha1.StateWarning {
		t.Fatalf("evaluated %+v, status %+v: want a alone shown, in Warning", n, obj.Status.Fleet)
	}
	if want := now.Add(day); !next.Equal(want) {
		t.Errorf("next transition %v, want %v, when a turns Critical", next, want)
	}
	expiring := target.Condition(obj, v1alpha1.ConditionExpiring)
	if want := "1 clusters' service principals have a credential ending within 30d; first " + a + " (appId app-a) at 2026-12-10T12:00:00Z"; expiring.Message != want {
		t.Errorf("Expiring %q, want %q", expiring.Message, want)
	}
	assertEvents(t, ev.Take()) // a first evaluation in this process, of a status that listed nothing

	// A day and a second later, a is Critical: told once.
	later := now.Add(day + 1)
	f.Evaluate(obj, obj.Status.Fleet, grantOf("s1"), std, later)
	got := ev.Take()
	if len(got) != 1 || !strings.HasPrefix(got[0], "Warning CredentialCritical AKS cluster "+a+" signs in with service principal app-a, whose first credential expires in 6d") {
		t.Errorf("events %q, want one CredentialCritical for a", got)
	}
	if c := target.Condition(obj, v1alpha1.ConditionExpiring); c.Reason != v1alpha1.ReasonWithinCritical {
		t.Errorf("Expiring %s, want %s", c.Reason, v1alpha1.ReasonWithinCritical)
	}
	f.Evaluate(obj, obj.Status.Fleet, grantOf("s1"), std, later)
	assertEvents(t, ev.Take())
}

func TestUnitEvaluateOfAFleetThisProcessHasNotCheckedKeepsItsStatus(t *testing.T) {
	f := Fleet{Events: &targettest.Events{}, Store: NewStore()}
	obj := fleetWatch()
	obj.Status.Fleet = &v1alpha1.FleetStatus{Clusters: 7}
	if n, next := f.Evaluate(obj, obj.Status.Fleet, grantOf("s1"), std, now); n != nil || !next.IsZero() || obj.Status.Fleet.Clusters != 7 {
		t.Errorf("evaluated %+v, next %v, status %+v: want nothing done", n, next, obj.Status.Fleet)
	}
}

func assertEvents(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("events %q, want %q", got, want)
		return
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d: %q, want %q", i, got[i], want[i])
		}
	}
}
