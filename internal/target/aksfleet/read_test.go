package aksfleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/azure/azurefake"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/targettest"
)

// tenantOf is a tenant of subscriptions s1, s2 and s3 whose clusters are listed from clusters,
// or fail with the error in fail; each service principal's credentials are read from Graph,
// counted in reads.
func tenantOf(clusters map[string][]aks.ListedCluster, fail map[string]error, reads *atomic.Int32) *azurefake.Azure {
	fleet := &azurefake.Fleet{
		SubscriptionsFunc: func(context.Context) ([]aks.Subscription, error) {
			return []aks.Subscription{{ID: "S1"}, {ID: "s2"}, {ID: "s3"}}, nil
		},
		ClustersFunc: func(_ context.Context, sub string, _ []string) ([]aks.ListedCluster, error) {
			return clusters[sub], fail[sub]
		},
	}
	end := now.Add(20 * day)
	return &azurefake.Azure{
		FleetFunc: func(azure.Identity, string) (aks.FleetClient, error) { return fleet, nil },
		ApplicationFunc: func(_ azure.Identity, app graph.AppRef) (graph.AppClient, error) {
			return &azurefake.App{ReadCredentialsFunc: func(context.Context) (graph.Snapshot, error) {
				reads.Add(1)
				return graph.Snapshot{AppID: app.AppID, Credentials: []graph.Credential{{KeyID: "k-" + app.AppID, Type: graph.Password, End: end}}}, nil
			}}, nil
		},
	}
}

func listed(sub, rg, name, clientID string, tags map[string]string) aks.ListedCluster {
	return aks.ListedCluster{ID: clusterID(sub, rg, name), Ref: aks.ClusterRef{SubscriptionID: sub, ResourceGroup: rg, Name: name}, Tags: tags,
		Cluster: aks.Cluster{ClientID: clientID}}
}

func TestUnitReadListsWhatTheIdentityCoversAndReadsEachServicePrincipalOnce(t *testing.T) {
	var reads atomic.Int32
	az := tenantOf(map[string][]aks.ListedCluster{
		"s1": {
			listed("s1", "rg", "a", "APP-1", map[string]string{"env": "prod"}),
			listed("s1", "rg", "b", "app-1", map[string]string{"env": "prod"}), // the same service principal
			listed("s1", "RG", "A", "app-1", map[string]string{"env": "prod"}), // a again, as another page spelled it
			listed("s1", "rg", "mi", "", map[string]string{"env": "prod"}),
			listed("s1", "rg", "dev", "app-2", map[string]string{"env": "dev"}),        // not tagged as the fleet asks
			listed("s9", "rg", "elsewhere", "app-3", map[string]string{"env": "prod"}), // not this subscription's
		},
	}, map[string]error{"s2": &azerr.Error{Kind: azerr.KindForbidden, Status: http.StatusForbidden, Err: errors.New("AuthorizationFailed")}}, &reads)
	f := Fleet{Azure: az}
	// s3 is the tenant's too, but the identity does not cover it: it is not the fleet's.
	found, err := f.Read(context.Background(), fleetKey, grantOf("s1", "s2"), azure.Operator("t"), &v1alpha1.AKSFleetTarget{TenantID: "t", Tags: map[string]string{"env": "prod"}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range found.Clusters {
		ids = append(ids, ClusterName(c.ID)+"="+c.AppID+"/"+strconv.Itoa(len(c.Credentials)))
	}
	if want := []string{"a=app-1/1", "b=app-1/1", "mi=/0"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("clusters %q, want %q", ids, want)
	}
	if reads.Load() != 1 {
		t.Errorf("read the shared service principal %d times, want once", reads.Load())
	}
	if found.Subscriptions != 2 || len(found.Unread) != 1 || found.Unread[0].SubscriptionID != "s2" || found.Unread[0].Reason != "Forbidden" {
		t.Errorf("subscriptions %d, unread %+v: want s1 read and s2 Forbidden", found.Subscriptions, found.Unread)
	}
	if !reflect.DeepEqual(found.Complete, map[string]bool{"s1": true}) {
		t.Errorf("complete %v, want s1 alone", found.Complete)
	}
}

func TestUnitReadOfAResourceGroupScopeIsCompleteOnlyThere(t *testing.T) {
	var reads atomic.Int32
	az := tenantOf(map[string][]aks.ListedCluster{"s1": {listed("s1", "RG-A", "a", "app-1", nil), listed("s1", "rg-b", "b", "app-2", nil)}}, nil, &reads)
	found, err := Fleet{Azure: az}.Read(context.Background(), fleetKey, grantOf("s1/rg-a"), azure.Operator("t"), &v1alpha1.AKSFleetTarget{TenantID: "t", Subscriptions: []string{"s1"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(found.Clusters) != 1 || ClusterName(found.Clusters[0].ID) != "a" || !reflect.DeepEqual(found.Complete, map[string]bool{"s1/rg-a": true}) {
		t.Errorf("found %+v: want cluster a alone, listed whole in s1/rg-a only", found)
	}
}

func TestUnitReadHoldsAtMostItsClustersAndThenProvesNothingGone(t *testing.T) {
	var reads atomic.Int32
	az := tenantOf(map[string][]aks.ListedCluster{"s1": {listed("s1", "rg", "a", "", nil), listed("s1", "rg", "b", "", nil), listed("s1", "rg", "c", "", nil)}}, nil, &reads)
	found, err := Fleet{Azure: az, MaxClusters: 2}.Read(context.Background(), fleetKey, grantOf("s1"), azure.Operator("t"), &v1alpha1.AKSFleetTarget{TenantID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if len(found.Clusters) != 2 || found.Uncounted != 1 || found.Complete != nil {
		t.Errorf("found %+v: want two clusters, one uncounted, and no subscription complete", found)
	}
}

func TestUnitReadFailsOnlyWhenNoSubscriptionCouldBeRead(t *testing.T) {
	var reads atomic.Int32
	down := &azerr.Error{Kind: azerr.KindUnavailable, Status: http.StatusServiceUnavailable, Err: errors.New("down")}
	az := tenantOf(nil, map[string]error{"s1": down, "s2": down}, &reads)
	_, err := Fleet{Azure: az}.Read(context.Background(), fleetKey, grantOf("s1", "s2"), azure.Operator("t"), &v1alpha1.AKSFleetTarget{TenantID: "t"})
	if got := target.ReasonFor(err); got != v1alpha1.ReasonResourceManagerUnreachable {
		t.Errorf("reason %q (%v), want %s", got, err, v1alpha1.ReasonResourceManagerUnreachable)
	}
	// A subscription the watch names that the identity does not cover is refused, not dropped.
	_, err = Fleet{Azure: az}.Read(context.Background(), fleetKey, grantOf("s1"), azure.Operator("t"), &v1alpha1.AKSFleetTarget{TenantID: "t", Subscriptions: []string{"s3"}})
	if got := target.ReasonFor(err); got != v1alpha1.ReasonIdentityNotAllowed {
		t.Errorf("reason %q (%v), want %s", got, err, v1alpha1.ReasonIdentityNotAllowed)
	}
}

func TestUnitANamespaceRunsAtMostThreeFleets(t *testing.T) {
	created := metav1.NewTime(now)
	fleet := func(name string, age time.Duration) *v1alpha1.CredentialWatch {
		return &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(now.Add(-age))},
			Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{AKSFleet: &v1alpha1.AKSFleetTarget{TenantID: "t"}}}}
	}
	ws := &watches{items: map[string]*v1alpha1.CredentialWatch{}}
	for _, w := range []*v1alpha1.CredentialWatch{fleet("a", 3*day), fleet("b", 2*day), fleet("c", day)} {
		ws.items["team/"+w.Name] = w
	}
	f := Fleet{Watches: ws}
	newest := fleet("d", 0)
	newest.CreationTimestamp = created
	err := f.Allowed(context.Background(), newest)
	if target.ReasonFor(err) != v1alpha1.ReasonTooManyFleets || !strings.Contains(err.Error(), "runs 3 aksFleet watches already (a, b, c)") {
		t.Errorf("the fourth fleet: %v, want it refused naming the three older ones", err)
	}
	if err := f.Allowed(context.Background(), ws.items["team/b"]); err != nil {
		t.Errorf("the second fleet: %v, want it allowed", err)
	}
}

func TestUnitTagsAndReasons(t *testing.T) {
	for _, tc := range []struct {
		tags, wanted map[string]string
		want         bool
	}{
		{nil, nil, true},
		{map[string]string{"env": "prod"}, map[string]string{"env": "prod"}, true},
		{map[string]string{"env": "dev"}, map[string]string{"env": "prod"}, false},
		{map[string]string{"aks": "x"}, map[string]string{"aks": ""}, true},
		{nil, map[string]string{"aks": ""}, false},
		{map[string]string{"env": "prod"}, map[string]string{"env": "prod", "team": ""}, false},
	} {
		if got := tagged(tc.tags, tc.wanted); got != tc.want {
			t.Errorf("tagged(%v, %v) = %v, want %v", tc.tags, tc.wanted, got, tc.want)
		}
	}
	for err, want := range map[error]string{
		&access.Refusal{Identity: "x", Rule: "y"}:                      v1alpha1.ReasonIdentityNotAllowed,
		&azerr.Error{Kind: azerr.KindForbidden, Status: 403}:           "Forbidden",
		&azerr.Error{Kind: azerr.KindNotFound, Status: 404}:            "NotFound",
		&azerr.Error{Kind: azerr.KindThrottled, Status: 429}:           v1alpha1.ReasonThrottled,
		&azerr.Error{Kind: azerr.KindUnavailable, Status: 503}:         "Unavailable",
		&azerr.Error{Kind: azerr.KindUnauthenticated, Status: 401}:     v1alpha1.ReasonAuthenticationFailed,
		fmt.Errorf("listing: %w", &azerr.Error{Kind: azerr.KindOther}): "Error",
	} {
		if got := unreadReason(err); got != want {
			t.Errorf("unreadReason(%v) = %q, want %q", err, got, want)
		}
	}
}

// A fleet holds at most its limit of clusters, says how many more it found, and tells it once.

var fleetKey = types.NamespacedName{Namespace: "team", Name: "fleet"}

// A fleet reads each service principal as a check of its own, waits for a check the planner
// answers later, and asks the next time with what it took: an identity that may list its tenant
// may then be answered from Graph's changes since.
func TestUnitReadAsksWithWhatTheLastCheckTook(t *testing.T) {
	var reads atomic.Int32
	az := tenantOf(map[string][]aks.ListedCluster{"s1": {listed("s1", "rg", "a", "app-1", nil)}}, nil, &reads)
	var asks []graph.Ask
	pending := true
	az.ApplicationFunc = func(_ azure.Identity, app graph.AppRef) (graph.AppClient, error) {
		return &azurefake.App{CheckFunc: func(_ context.Context, ask graph.Ask) (graph.Snapshot, error) {
			asks = append(asks, ask)
			if pending {
				pending = false
				go ask.Wake()
				return graph.Snapshot{}, graph.ErrPending
			}
			return graph.Snapshot{AppID: app.AppID, ReadAt: now, Credentials: []graph.Credential{{KeyID: "k1", Type: graph.Password, End: now.Add(day)}}}, nil
		}}, nil
	}
	store := NewStore()
	f := Fleet{Azure: az, Store: store}
	found, err := f.Read(context.Background(), fleetKey, grantOf("s1"), azure.Operator("t"), &v1alpha1.AKSFleetTarget{TenantID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if len(asks) != 2 || asks[0].Known != nil || asks[0].Asker != "aksFleet:team/fleet/app-1" || len(found.Clusters[0].Credentials) != 1 {
		t.Fatalf("first check: asks %+v, clusters %+v; want a pending check, then its answer", asks, found.Clusters)
	}
	store.Put(fleetKey, found)
	asks = nil
	if _, err := f.Read(context.Background(), fleetKey, grantOf("s1"), azure.Operator("t"), &v1alpha1.AKSFleetTarget{TenantID: "t"}); err != nil {
		t.Fatal(err)
	}
	if len(asks) != 1 || asks[0].Known == nil || asks[0].Known.Credentials[0].KeyID != "k1" || !asks[0].KnownAt.Equal(now) {
		t.Errorf("the next check asked %+v; want it to say what the last took", asks)
	}
}

// A service principal whose credentials cannot be read, such as one whose application the
// identity may not read, puts its clusters' reason in status, is counted, and is named with why
// in the Ready message and, when it starts and when it ends, in an event.
func TestUnitAServicePrincipalThatCannotBeReadIsCountedAndNamed(t *testing.T) {
	var reads atomic.Int32
	az := tenantOf(map[string][]aks.ListedCluster{"s1": {listed("s1", "rg", "a", "app-1", nil), listed("s1", "rg", "b", "app-2", nil)}}, nil, &reads)
	readable := az.ApplicationFunc
	refused := fmt.Errorf("reading application app-2: %w", &azerr.Error{Kind: azerr.KindForbidden, Status: http.StatusForbidden, Code: "Authorization_RequestDenied",
		Needs: "Application.Read.All (or Application.ReadWrite.OwnedBy as an owner of the application)"})
	az.ApplicationFunc = func(id azure.Identity, app graph.AppRef) (graph.AppClient, error) {
		if app.AppID == "app-2" {
			return &azurefake.App{ReadCredentialsFunc: func(context.Context) (graph.Snapshot, error) { return graph.Snapshot{}, refused }}, nil
		}
		return readable(id, app)
	}
	ev := &targettest.Events{}
	f := Fleet{Azure: az, Events: ev, Store: NewStore()}
	found, err := f.Read(context.Background(), fleetKey, grantOf("s1"), azure.Operator("t"), &v1alpha1.AKSFleetTarget{TenantID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if found.UnreadApps != 1 || !strings.HasPrefix(found.UnreadApp, "app-2: reading application app-2: access denied") || found.Clusters[1].Reason != v1alpha1.ReasonAccessDenied {
		t.Fatalf("unread %d %q, cluster b's reason %q", found.UnreadApps, found.UnreadApp, found.Clusters[1].Reason)
	}
	obj := fleetWatch()
	f.Record(obj, found, target.TenantSignIns{}, now)
	if msg := target.Condition(obj, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "the credentials of 1 service principals could not be read, such as app-2: ") ||
		!strings.Contains(msg, "the identity needs Application.Read.All") || obj.Status.Fleet.UnreadServicePrincipals != 1 {
		t.Errorf("Ready %q, unread %d", msg, obj.Status.Fleet.UnreadServicePrincipals)
	}
	if got := ev.Take(); len(got) != 1 || !strings.HasPrefix(got[0], "Warning ServicePrincipalsUnread The credentials of 1 service principals") {
		t.Errorf("events %q", got)
	}
	f.Record(obj, found, target.TenantSignIns{}, now)
	assertEvents(t, ev.Take())
	found.UnreadApps, found.UnreadApp = 0, ""
	f.Record(obj, found, target.TenantSignIns{}, now)
	assertEvents(t, ev.Take(), "Normal ServicePrincipalsRead The credentials of every service principal of the fleet's clusters could be read again")
}
