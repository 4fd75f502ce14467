package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/azure/clients"
	"github.com/credwatch/credwatch/internal/target/tenantscan"
	"github.com/credwatch/credwatch/test/fakegraph"
)

// deltaScanTenant is the tenant TestTenantScanReadsGraphsChanges scans.
const deltaScanTenant = "7b1e4c2a-9d3f-4a5b-8c6d-0e2f4a6b8c1d"

// A tenant scan under delta reads lists its tenant once; each scan after reads only the rounds
// of changes, whatever the tenant's size: a secret added out of band and an application deleted
// show in its status and counts, with the addition counted. A restarted operator, whose tenant
// is in memory only, lists it once again.
func TestTenantScanReadsGraphsChanges(t *testing.T) {
	needsAPIServer(t)
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deltaNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	fake.AddClient(deltaScanTenant, operatorClientID, operatorSecret)
	h := newHarness(t)
	ahead := &atomic.Int64{}
	h.r.Azure = clients.New(identities, deltaGraph(t, ahead), nil)
	end := h.clock.Now().Add(200 * day)
	var appIDs []string
	for i := range 30 {
		appID := uuid.NewString()
		appIDs = append(appIDs, appID)
		fake.PutApplication(deltaScanTenant, fakegraph.Object{AppID: appID, DisplayName: fmt.Sprintf("app-%02d", i),
			Passwords: []fakegraph.PasswordCredential{{DisplayName: "ci", SecretText: "aBc~" + uuid.NewString(), Start: h.clock.Now().Add(-day), End: end}}})
		fake.PutServicePrincipal(deltaScanTenant, fakegraph.Object{AppID: appID, DisplayName: fmt.Sprintf("app-%02d", i)})
	}
	h.create("", func(s *v1alpha1.CredentialWatchSpec) {
		s.CheckInterval = "1h"
		s.Target.TenantScan = &v1alpha1.TenantScanTarget{TenantID: deltaScanTenant}
	})
	// scan reconciles an hour on, and counts the lists and the delta requests it sent.
	scan := func(why string) (w *v1alpha1.CredentialWatch, lists, deltas int) {
		t.Helper()
		h.step(time.Hour)
		ahead.Add(int64(time.Hour))
		fake.ResetRequests()
		w, _ = h.reconcile()
		for _, r := range fake.Requests() {
			if strings.HasSuffix(r.Path, "/delta") {
				deltas++
			} else {
				lists++
			}
		}
		if ts := w.Status.TenantScan; ts == nil {
			t.Fatalf("%s: no tenant scan status: %+v", why, w.Status.Conditions)
		}
		return w, lists, deltas
	}

	w, lists, deltas := scan("the first scan")
	if lists != 2 || deltas != 2 || w.Status.TenantScan.Applications != 30 || w.Status.TenantScan.Credentials != 30 {
		t.Fatalf("the first scan: %d lists, %d delta requests, %+v; want both lists and the links to go on from", lists, deltas, *w.Status.TenantScan)
	}
	if _, lists, deltas = scan("a quiet tenant"); lists != 0 || deltas != 2 {
		t.Errorf("a quiet tenant: %d lists and %d delta requests; want a round of two requests", lists, deltas)
	}

	app, _ := fake.Application(deltaScanTenant, appIDs[3])
	added := uuid.NewString()
	app.Passwords = append(app.Passwords, fakegraph.PasswordCredential{KeyID: added, DisplayName: "added by hand", SecretText: "xYz~" + uuid.NewString(), Start: h.clock.Now(), End: end})
	fake.PutApplication(deltaScanTenant, app)
	fake.DeleteApplication(deltaScanTenant, appIDs[7])
	w, lists, deltas = scan("a secret added and an application deleted")
	if ts := w.Status.TenantScan; lists != 0 || deltas != 2 || ts.Applications != 29 || ts.ServicePrincipals != 30 || ts.Credentials != 30 {
		t.Errorf("after a change: %d lists, %d delta requests, %+v; want the round alone to show it", lists, deltas, *ts)
	}
	if ts := w.Status.TenantScan; ts.Added != 1 || len(ts.RecentlyAdded) != 1 || ts.RecentlyAdded[0].KeyID != added {
		t.Errorf("the secret added out of band was not counted: %+v", *ts)
	}
	// The deleted application's service principal lingers here (Entra removes it a moment after).
	assertEvents(t, h.takeEvents(), "Warning CredentialAdded", "Warning ApplicationsUnreadable 1 applications")

	// A restart: the tenant and the scan's store are gone with the process.
	h.r.Azure = clients.New(identities, deltaGraph(t, ahead), nil)
	h.r.Scans = tenantscan.NewStore()
	if _, lists, _ = scan("after a restart"); lists != 2 {
		t.Errorf("after a restart: %d lists, want the tenant listed once", lists)
	}
	if w, lists, _ = scan("the scan after a restart"); lists != 0 || w.Status.TenantScan.Credentials != 30 {
		t.Errorf("the scan after a restart: %d lists, %d credentials", lists, w.Status.TenantScan.Credentials)
	}
}

// A fleet's reads of the service principals its clusters sign in with are checks of its own:
// under an identity that may scan the tenant, from the fleet's third check on (the first read
// starts the rounds, the second reads what was read before they began) they are answered from
// Graph's changes, and a secret added to one of them shows in the fleet's status.
func TestAKSFleetReadsGraphsChanges(t *testing.T) {
	needsAPIServer(t)
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deltaNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	h, arm := newFleetHarness(t)
	ahead := &atomic.Int64{}
	h.r.Azure = clients.New(identities, deltaGraph(t, ahead), arm.reader())
	arm.seed25(t, h.clock.Now())
	id := &v1alpha1.ClusterAzureIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet-delta-reader"},
		Spec: v1alpha1.ClusterAzureIdentitySpec{
			IdentitySpec: v1alpha1.IdentitySpec{
				Operator: &v1alpha1.OperatorSignIn{},
				Allow: v1alpha1.IdentityAllow{
					Tenants: []string{tenantID}, Applications: []string{v1alpha1.AllApplications},
					Subscriptions: []v1alpha1.SubscriptionScope{{SubscriptionID: fleetSubA}, {SubscriptionID: fleetSubB}},
					Operations:    []v1alpha1.Operation{v1alpha1.OperationFleetScan, v1alpha1.OperationTenantScan},
				},
			},
			Conditions: []v1alpha1.NamespaceCondition{{NamespaceSelector: &metav1.LabelSelector{}}},
		},
	}
	if err := createSignedIn(ctx, id); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), id) })
	h.create("", func(spec *v1alpha1.CredentialWatchSpec) {
		spec.CheckInterval = "1h"
		spec.Target = v1alpha1.Target{AKSFleet: &v1alpha1.AKSFleetTarget{TenantID: tenantID, Subscriptions: []string{fleetSubA, fleetSubB}}}
		spec.IdentityRef = &v1alpha1.IdentityRef{Kind: v1alpha1.KindClusterAzureIdentity, Name: id.Name}
	})
	// check reconciles two hours on, and counts the applications read and the delta requests.
	check := func(why string) (w *v1alpha1.CredentialWatch, read, deltas int) {
		t.Helper()
		h.step(2 * time.Hour)
		ahead.Add(int64(2 * time.Hour))
		fake.ResetRequests()
		w, _ = h.reconcile()
		for _, r := range fake.Requests() {
			switch {
			case strings.HasSuffix(r.Path, "/delta"):
				deltas++
			case strings.Contains(r.Path, "$batch"), strings.Contains(r.Path, "(appId="):
				read++
			}
		}
		if w.Status.Fleet == nil || w.Status.Fleet.ServicePrincipal != 19 {
			t.Fatalf("%s: fleet status %+v, conditions %+v", why, w.Status.Fleet, w.Status.Conditions)
		}
		return w, read, deltas
	}
	check("the first check")
	check("the check that reads what was read before the rounds began")
	w, read, deltas := check("a quiet tenant")
	if read != 0 || deltas == 0 {
		t.Fatalf("a quiet tenant: %d reads and %d delta requests; want the service principals answered from a round", read, deltas)
	}
	expired := w.Status.Fleet.Expired

	// The secret of an expired cluster's service principal is reset: the old one goes, a new one
	// comes.
	c := w.Status.Fleet.Attention[0]
	if c.State != v1alpha1.StateExpired {
		t.Fatalf("the first cluster needing attention is %s, want Expired", c.State)
	}
	app, ok := fake.Application(tenantID, c.AppID)
	if !ok {
		t.Fatalf("no application %s", c.AppID)
	}
	app.Passwords = []fakegraph.PasswordCredential{{DisplayName: "reset", SecretText: "rEs~" + uuid.NewString(), Start: h.clock.Now(), End: h.clock.Now().Add(300 * day)}}
	fake.PutApplication(tenantID, app)
	w, read, _ = check("a secret reset")
	if read != 0 || w.Status.Fleet.Expired != expired-1 {
		t.Errorf("after a secret was reset: %d reads, %d expired (was %d); want the round to renew one cluster", read, w.Status.Fleet.Expired, expired)
	}
}
