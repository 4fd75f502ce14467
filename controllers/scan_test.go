package controllers

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/google/uuid"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/tenantscan"
	"github.com/credwatch/credwatch/test/fakegraph"
)

// TestTenantScan watches a whole tenant of its own: 150 applications whose secrets end a day
// apart, from 80 days ago on, with the default thresholds of 30 and 7 days.
func TestTenantScan(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	t0 := h.clock.Now()
	// The suite's identity allows scanning scanTenant, a tenant the other tests leave alone.
	tenant := scanTenant
	fake.AddClient(tenant, operatorClientID, operatorSecret)
	for i := range 150 {
		fake.PutApplication(tenant, fakegraph.Object{DisplayName: fmt.Sprintf("app-%03d", i), Tags: []string{fmt.Sprintf("n%d", i%2)},
			Passwords: []fakegraph.PasswordCredential{{SecretText: fmt.Sprintf("s%02d~secret-text-of-app-%03d", i%100, i),
				Start: t0.Add(-300 * day), End: t0.Add(time.Duration(i-80)*day + time.Hour)}}})
	}
	// Renewed with --append: the old secret expired, a new one runs for a year.
	renewed := fakegraph.Object{DisplayName: "renewed", Passwords: []fakegraph.PasswordCredential{
		{SecretText: "old~secret", Start: t0.Add(-400 * day), End: t0.Add(-5 * day)},
		{SecretText: "new~secret", Start: t0.Add(-6 * day), End: t0.Add(360 * day)},
	}}
	fake.PutApplication(tenant, renewed)
	// Another tenant's application, seen here only as a service principal with a certificate.
	const vendorApp = "5c1d9e2f-3a4b-4c5d-8e6f-7a8b9c0d1e2f"
	fake.PutServicePrincipal(tenant, fakegraph.Object{AppID: vendorApp, DisplayName: "vendor-app",
		Keys: []fakegraph.KeyCredential{{Key: []byte("certificate"), Start: t0.Add(-30 * day), End: t0.Add(3 * day)}}})

	h.create("", func(s *v1alpha1.CredentialWatchSpec) {
		s.Target.TenantScan = &v1alpha1.TenantScanTarget{TenantID: tenant}
	})
	fake.ResetRequests()
	w, res := h.reconcile()

	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	if msg := target.Condition(w, v1alpha1.ConditionReady).Message; msg != "Scanned 151 applications and 1 service principals of the tenant: 153 credentials" {
		t.Errorf("Ready message %q", msg)
	}
	// Expired: apps 0-79 (80); Critical: 80-86 and the vendor's certificate (8); Warning: 87-109 (23).
	want := v1alpha1.TenantScanStatus{Applications: 151, ServicePrincipals: 1, Credentials: 153, Renewed: 1, Warning: 23, Critical: 8, Expired: 80}
	want.Unlisted = want.Warning + want.Critical + want.Expired - policy.MaxListed
	if got := *w.Status.TenantScan; !reflect.DeepEqual(got, want) {
		t.Errorf("tenantScan status %+v, want %+v", got, want)
	}
	if len(w.Status.Credentials) != policy.MaxListed {
		t.Fatalf("%d credentials listed, want %d", len(w.Status.Credentials), policy.MaxListed)
	}
	first := w.Status.Credentials[0]
	if app, _ := fake.Application(tenant, first.AppID); first.AppDisplayName != "app-080" || first.State != v1alpha1.StateCritical || first.AppObjectID != app.ID {
		t.Errorf("first listed %+v; want app-080's secret (application object %s), an hour from expiry, Critical", first, app.ID)
	}
	if w.Status.ServicePrincipal != nil || w.Status.State != v1alpha1.StateExpired {
		t.Errorf("status: servicePrincipal %v, state %s; want none and Expired", w.Status.ServicePrincipal, w.Status.State)
	}
	assertCondition(t, w, v1alpha1.ConditionExpired, metav1.ConditionTrue, v1alpha1.ReasonCredentialExpired)
	// The conditions count the whole tenant, not the hundred listed, and name the latest to expire.
	if msg := target.Condition(w, v1alpha1.ConditionExpired).Message; !strings.HasPrefix(msg, "80 of 152 credentials expired; the latest: secret") || !strings.Contains(msg, `"app-079"`) {
		t.Errorf("Expired message %q; want 80 of the 152 not renewed, the latest app-079's", msg)
	}
	if msg := target.Condition(w, v1alpha1.ConditionExpiring).Message; !strings.HasPrefix(msg, "31 credentials expire within 30d (8 within 7d); the first: secret") || !strings.Contains(msg, `"app-080"`) {
		t.Errorf("Expiring message %q; want 31 within 30d, 8 within 7d, the first app-080's", msg)
	}
	if got := len(fake.Requests()); got != 2 {
		t.Errorf("the scan took %d Graph requests, want 2: one list of applications, one of service principals", got)
	}
	events := h.takeEvents()
	if len(events) != target.MaxStateEvents+1 || !strings.Contains(events[target.MaxStateEvents], fmt.Sprintf("%d more credentials", policy.MaxListed-target.MaxStateEvents)) {
		t.Errorf("events %q; want %d about credentials and one counting the rest", events, target.MaxStateEvents)
	}
	if !strings.Contains(events[0], `of "app-080" (appId `) || !strings.Contains(events[0], "az ad app credential reset --id "+first.AppID) {
		t.Errorf("event %q should name the application and how to renew its secret", events[0])
	}

	// The next changes are an hour from now, when app-080's secret expires, app-087's turns
	// Critical and app-110's Warning; they are worked out from the scan held in memory, without
	// reading Graph again.
	if res.RequeueAfter > time.Hour {
		t.Errorf("requeue after %v, want at most an hour", res.RequeueAfter)
	}
	h.step(time.Hour)
	fake.ResetRequests()
	w, _ = h.reconcile()
	if ts := w.Status.TenantScan; ts.Expired != 81 || ts.Critical != 8 || ts.Warning != 23 || len(fake.Requests()) != 0 {
		t.Errorf("an hour on: %+v after %d Graph requests; want 81 expired, 8 critical, 23 warning, and no request", *ts, len(fake.Requests()))
	}
	assertEvents(t, h.takeEvents(), "Warning CredentialExpired", "Warning CredentialCritical", "Warning CredentialWarning")

	// Renewing the secrets of two expired applications lets older expired ones into the list:
	// they did not change state, so nothing is announced.
	for _, name := range []string{"app-079", "app-078"} {
		for _, c := range w.Status.Credentials {
			if c.AppDisplayName == name {
				fake.DeleteApplication(tenant, c.AppID)
			}
		}
	}
	w.Annotations = map[string]string{v1alpha1.CheckAnnotation: "now"}
	if err := k8s.Update(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	fake.ResetRequests()
	w, _ = h.reconcile()
	if len(fake.Requests()) != 2 || w.Status.TenantScan.Expired != 79 {
		t.Errorf("after two applications went: %d requests, %d expired; want a scan and 79", len(fake.Requests()), w.Status.TenantScan.Expired)
	}
	assertEvents(t, h.takeEvents())

	// A secret added to the vendor's service principal between two scans is counted and listed.
	sp, _ := fake.ServicePrincipal(tenant, vendorApp)
	vendor := uuid.NewString()
	sp.Passwords = append(sp.Passwords, fakegraph.PasswordCredential{KeyID: vendor, DisplayName: "keep-access", SecretText: "kEe~p", Start: h.clock.Now(), End: t0.Add(700 * day)})
	fake.PutServicePrincipal(tenant, sp)
	w.Annotations = map[string]string{v1alpha1.CheckAnnotation: "again"}
	if err := k8s.Update(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	h.step(policy.EarlyCheckGap)
	w, _ = h.reconcile()
	if ts := w.Status.TenantScan; ts.Added != 1 || len(ts.RecentlyAdded) != 1 || ts.RecentlyAdded[0].KeyID != vendor || ts.RecentlyAdded[0].AddedTime == nil {
		t.Errorf("after a secret was added: %+v", *ts)
	}
	assertEvents(t, h.takeEvents(), "Warning CredentialAdded")

	// A new process has no scan in memory: it scans again, a minute after the last scan at the
	// latest, however far the next check.
	fake.ResetRequests()
	h.r.Scans = tenantscan.NewStore()
	h.step(policy.EarlyCheckGap)
	w, _ = h.reconcile()
	if len(fake.Requests()) != 2 || len(w.Status.Credentials) != policy.MaxListed {
		t.Errorf("after a restart: %d requests and %d listed; want a scan of 2 requests", len(fake.Requests()), len(w.Status.Credentials))
	}

	// A filter narrows the scan to what it selects.
	w.Spec.Target.TenantScan.Filter = "tags/any(t:t eq 'n1') and startswith(displayName,'app-00')"
	if err := k8s.Update(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	h.step(policy.EarlyCheckGap)
	w, _ = h.reconcile()
	if ts := w.Status.TenantScan; ts.Applications != 5 || ts.ServicePrincipals != 0 || ts.Expired != 5 {
		t.Errorf("filtered scan %+v; want the five odd applications 001-009, all expired", *ts)
	}

	// A filter Graph refuses says so, and what to fix.
	w.Spec.Target.TenantScan.Filter = "notes eq 'x'"
	if err := k8s.Update(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	h.step(policy.EarlyCheckGap)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonFilterRejected)
	if msg := target.Condition(w, v1alpha1.ConditionReady).Message; !strings.Contains(msg, `"notes eq 'x'"`) || !strings.Contains(msg, "spec.target.tenantScan.filter") {
		t.Errorf("Ready message %q should quote the filter and name the field", msg)
	}

	// Deleting the watch lets go of its scan.
	if err := k8s.Delete(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	if _, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: h.key}); err != nil {
		t.Fatalf("reconcile of a deleted watch: %v", err)
	}
	if _, ok := h.r.Scans.Get(h.key); ok {
		t.Error("the scan of a deleted watch is still held")
	}
	for _, e := range h.all {
		if strings.Contains(e, "~secret") {
			t.Errorf("event leaks a secret: %q", e)
		}
	}
}

// lockedScanTenant is a tenant whose scan lists a service principal of the tenant's own
// application and not the application, which the identity may not read.
const lockedScanTenant = "3e9c7a51-2b4d-4f6e-9a8c-1d2e3f4a5b6c"

// A scan that lists the service principal of one of the tenant's applications and not the
// application counts it as unreadable, names it with the permission missing, and says so once;
// another tenant's application, seen only as its service principal, is not counted so. Once the
// identity may read it, the count goes.
func TestATenantScanCountsTheApplicationsItMayNotRead(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	t0 := h.clock.Now()
	fake.AddClient(lockedScanTenant, operatorClientID, operatorSecret)
	secret := func(text string) []fakegraph.PasswordCredential {
		return []fakegraph.PasswordCredential{{SecretText: text, Start: t0.Add(-day), End: t0.Add(300 * day)}}
	}
	apps := []string{uuid.NewString(), uuid.NewString()}
	for i, name := range []string{"open", "locked"} {
		fake.PutApplication(lockedScanTenant, fakegraph.Object{AppID: apps[i], DisplayName: name, Passwords: secret(name + "~app-secret-text")})
		fake.PutServicePrincipal(lockedScanTenant, fakegraph.Object{AppID: apps[i], DisplayName: name})
	}
	fake.PutServicePrincipal(lockedScanTenant, fakegraph.Object{DisplayName: "vendor-app"})
	fake.HideApplication(operatorClientID, apps[1], true)
	h.create("", func(s *v1alpha1.CredentialWatchSpec) {
		s.Target.TenantScan = &v1alpha1.TenantScanTarget{TenantID: lockedScanTenant}
	})

	w, _ := h.reconcile()
	want := "Scanned 1 applications and 3 service principals of the tenant: 1 credentials; 1 applications registered in the tenant could not be read, such as appId " +
		apps[1] + ": their service principals were listed and they were not, so their credentials are not counted: the identity needs Application.Read.All, unless they were deleted a moment ago"
	if msg := target.Condition(w, v1alpha1.ConditionReady).Message; msg != want || w.Status.TenantScan.UnreadableApplications != 1 {
		t.Errorf("Ready %q, unreadable %d; want %q", msg, w.Status.TenantScan.UnreadableApplications, want)
	}
	if events := h.takeEvents(); countPrefix(events, "Warning ApplicationsUnreadable 1 applications") != 1 {
		t.Errorf("events %q, want one ApplicationsUnreadable", events)
	}

	fake.HideApplication(operatorClientID, apps[1], false)
	h.step(7 * time.Hour)
	w, _ = h.reconcile()
	if msg := target.Condition(w, v1alpha1.ConditionReady).Message; msg != "Scanned 2 applications and 3 service principals of the tenant: 2 credentials" ||
		w.Status.TenantScan.UnreadableApplications != 0 {
		t.Errorf("once readable: Ready %q, unreadable %d", msg, w.Status.TenantScan.UnreadableApplications)
	}
	assertNoSecrets(t, h)
}
