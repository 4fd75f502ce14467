package akscluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/targettest"
)

// cluster is a managed cluster in Resource Manager; the methods a test leaves nil are not
// expected to be called.
type cluster struct {
	aks.ClusterClient
	ReadFunc func() (aks.Cluster, error)
}

func (c cluster) Read(context.Context) (aks.Cluster, error) { return c.ReadFunc() }

type app struct {
	graph.AppClient
	CheckFunc func() (graph.Snapshot, error)
}

func (a app) Check(context.Context, graph.Ask) (graph.Snapshot, error) { return a.CheckFunc() }

// fakeAzure counts the reads of the cluster.
type fakeAzure struct {
	cluster func() (aks.Cluster, error)
	app     func() (graph.Snapshot, error)
	reads   *int
}

func (f fakeAzure) Cluster(azure.Identity, aks.ClusterRef) (aks.ClusterClient, error) {
	return cluster{ReadFunc: func() (aks.Cluster, error) { *f.reads++; return f.cluster() }}, nil
}

func (f fakeAzure) Application(azure.Identity, graph.AppRef) (graph.AppClient, error) {
	return app{CheckFunc: f.app}, nil
}

var (
	ref   = aks.ClusterRef{SubscriptionID: "s", ResourceGroup: "rg", Name: "c"}
	watch = types.NamespacedName{Namespace: "team", Name: "w"}
	now   = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	id    = azure.Identity{TenantID: "t", ClientID: "reader"}
)

func grant(apps ...string) access.Grant {
	return access.Grant{Namespace: access.Namespace{Name: "team"}, Identity: access.Identity{Kind: v1alpha1.KindAzureIdentity, Namespace: "team", Name: "id",
		Spec: v1alpha1.IdentitySpec{Allow: v1alpha1.IdentityAllow{Tenants: []string{"t"}, Applications: apps,
			Subscriptions: []v1alpha1.SubscriptionScope{{SubscriptionID: "s"}}}}}}
}

func TestRead(t *testing.T) {
	spCluster := func() (aks.Cluster, error) {
		return aks.Cluster{ClientID: "sp-app", ProvisioningState: "Succeeded"}, nil
	}
	snap := func() (graph.Snapshot, error) { return graph.Snapshot{AppID: "sp-app", DisplayName: "aks-sp"}, nil }
	for _, tc := range []struct {
		name        string
		cluster     func() (aks.Cluster, error)
		grant       access.Grant
		wantReason  string // of the failure; empty for none
		wantManaged bool
		wantCluster bool
	}{
		{name: "service principal", cluster: spCluster, grant: grant(v1alpha1.AllApplications), wantCluster: true},
		{name: "managed identity", cluster: func() (aks.Cluster, error) { return aks.Cluster{}, nil }, grant: grant(), wantManaged: true, wantCluster: true},
		// The cluster was read, and is noted, though its service principal may not be.
		{name: "service principal not allowed", cluster: spCluster, grant: grant("other"), wantReason: v1alpha1.ReasonIdentityNotAllowed, wantCluster: true},
		{name: "cluster gone", cluster: func() (aks.Cluster, error) {
			return aks.Cluster{}, &azerr.Error{Kind: azerr.KindNotFound, Err: errors.New("404")}
		},
			grant: grant(), wantReason: v1alpha1.ReasonClusterNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads := 0
			k := Kind{Azure: fakeAzure{cluster: tc.cluster, app: snap, reads: &reads}, Events: &targettest.Events{}}
			f, err := k.Read(context.Background(), watch, tc.grant, id, "t", ref, graph.Ask{}, now)
			if tc.wantReason != "" {
				if err == nil || target.ReasonFor(err) != tc.wantReason {
					t.Fatalf("Read = %v; want a failure with reason %s", err, tc.wantReason)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if f.Managed != tc.wantManaged || (f.Cluster != nil) != tc.wantCluster || (err == nil && !f.Managed && f.SP.Snap.DisplayName != "aks-sp") {
				t.Fatalf("found %+v; want managed %v, cluster %v", f, tc.wantManaged, tc.wantCluster)
			}
		})
	}
}

// A check told to wait for Graph holds the cluster it read; the check its answer wakes reads it
// once, and only as the same identity, not long after.
func TestHeldClusterIsReadOnce(t *testing.T) {
	reads := 0
	k := Kind{Azure: fakeAzure{cluster: func() (aks.Cluster, error) { return aks.Cluster{ClientID: "sp-app"}, nil },
		app: func() (graph.Snapshot, error) { return graph.Snapshot{}, graph.ErrPending }, reads: &reads}, Held: &Held{}, HeldFor: 20 * time.Minute}
	f, err := k.Read(context.Background(), watch, grant(v1alpha1.AllApplications), id, "t", ref, graph.Ask{}, now)
	if !errors.Is(err, graph.ErrPending) {
		t.Fatalf("Read = %v; want ErrPending", err)
	}
	k.Hold(watch, f, ref, id, now)
	k.Read(context.Background(), watch, grant(v1alpha1.AllApplications), id, "t", ref, graph.Ask{}, now.Add(time.Minute))
	if reads != 1 {
		t.Fatalf("the cluster was read %d times; want once, then held", reads)
	}
	k.Hold(watch, f, ref, id, now)
	other := azure.Identity{TenantID: "t", ClientID: "another"}
	k.Read(context.Background(), watch, grant(v1alpha1.AllApplications), other, "t", ref, graph.Ask{}, now.Add(time.Minute))
	k.Hold(watch, f, ref, id, now)
	k.Read(context.Background(), watch, grant(v1alpha1.AllApplications), id, "t", ref, graph.Ask{}, now.Add(20*time.Minute))
	if reads != 3 {
		t.Fatalf("the cluster was read %d times; want it read again by another identity, and once the hold expired", reads)
	}
}

func TestNoteTellsAChangedIdentity(t *testing.T) {
	events := &targettest.Events{}
	k := Kind{Events: events}
	obj := &v1alpha1.CredentialWatch{}
	k.Note(obj, Found{Cluster: &aks.Cluster{ClientID: "one"}})
	k.Note(obj, Found{Cluster: &aks.Cluster{ClientID: "one"}})
	if got := events.Take(); len(got) != 0 {
		t.Fatalf("events %q; want none for a cluster first seen, or unchanged", got)
	}
	k.Note(obj, Found{Cluster: &aks.Cluster{}})
	got := events.Take()
	if len(got) != 1 || got[0] != "Normal ServicePrincipalChanged The AKS cluster now signs in with a managed identity (it was service principal one)" {
		t.Fatalf("events %q", got)
	}
	if obj.Status.AKSCluster.Identity != v1alpha1.IdentityManagedIdentity {
		t.Fatalf("status %+v", obj.Status.AKSCluster)
	}
}

func TestRecordManagedIdentity(t *testing.T) {
	obj := &v1alpha1.CredentialWatch{Status: v1alpha1.CredentialWatchStatus{ServicePrincipal: &v1alpha1.ServicePrincipalStatus{AppID: "old"},
		Credentials: []v1alpha1.Credential{{KeyID: "k"}}}}
	Kind{}.Record(context.Background(), obj, Found{Cluster: &aks.Cluster{}, Managed: true}, now)
	c := target.Condition(obj, v1alpha1.ConditionReady)
	if obj.Status.ServicePrincipal != nil || obj.Status.Credentials != nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonManagedIdentity ||
		!strings.Contains(c.Message, "no secret to expire") {
		t.Fatalf("status %+v, Ready %+v", obj.Status, c)
	}
}
