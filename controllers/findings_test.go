package controllers

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"k8s.io/utils/ptr"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/test/fakegraph"
)

// TestTenantScanFindings scans a tenant holding one application of each finding, one of none,
// and a SAML single-sign-on application whose service principal carries what SAML needs.
func TestTenantScanFindings(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	t0 := h.clock.Now()
	tenant := hygieneTenant
	fake.AddClient(tenant, operatorClientID, operatorSecret)
	never := time.Date(2299, time.December, 31, 0, 0, 0, 0, time.UTC)
	pw := func(start, end time.Time) fakegraph.PasswordCredential {
		return fakegraph.PasswordCredential{SecretText: "hYg~" + strings.ReplaceAll(uuid.NewString(), "-", ""), Start: start, End: end}
	}
	cert := func(start, end time.Time) fakegraph.KeyCredential {
		return fakegraph.KeyCredential{Key: []byte("certificate"), Type: "AsymmetricX509Cert", Usage: "Verify", Start: start, End: end}
	}
	year := 365 * day
	fake.PutApplication(tenant, fakegraph.Object{DisplayName: "clean", Passwords: []fakegraph.PasswordCredential{pw(t0.Add(-day), t0.Add(year))}})
	fake.PutApplication(tenant, fakegraph.Object{DisplayName: "long-lived", Passwords: []fakegraph.PasswordCredential{pw(t0.Add(-10*day), t0.Add(3*year))}})
	fake.PutApplication(tenant, fakegraph.Object{DisplayName: "expired-long-ago", Passwords: []fakegraph.PasswordCredential{pw(t0.Add(-6*year), t0.Add(-day))}})
	fake.PutApplication(tenant, fakegraph.Object{DisplayName: "never", Keys: []fakegraph.KeyCredential{cert(t0.Add(-day), never)}})
	fake.PutApplication(tenant, fakegraph.Object{DisplayName: "many", Passwords: []fakegraph.PasswordCredential{
		pw(t0.Add(-day), t0.Add(year)), pw(t0.Add(-day), t0.Add(year)), pw(t0.Add(-day), t0.Add(200*day))}})
	reset := fakegraph.Object{AppID: uuid.NewString(), DisplayName: "reset-by-az"}
	fake.PutApplication(tenant, reset)
	reset.Passwords = []fakegraph.PasswordCredential{pw(t0.Add(-day), t0.Add(year))}
	fake.PutServicePrincipal(tenant, reset)
	fake.PutApplication(tenant, fakegraph.Object{DisplayName: "later", Passwords: []fakegraph.PasswordCredential{pw(t0.Add(2*day), t0.Add(year))}})
	fake.PutApplication(tenant, fakegraph.Object{DisplayName: "backwards", Keys: []fakegraph.KeyCredential{cert(t0.Add(5*day), t0.Add(4*day))}})
	saml := fakegraph.Object{AppID: uuid.NewString(), DisplayName: "saml-sso"}
	fake.PutApplication(tenant, saml)
	saml.PreferredSingleSignOnMode = "saml"
	saml.Passwords = []fakegraph.PasswordCredential{pw(t0.Add(-day), t0.Add(3*year))}
	saml.Keys = []fakegraph.KeyCredential{cert(t0.Add(-day), t0.Add(3*year))}
	fake.PutServicePrincipal(tenant, saml)

	h.create("", func(s *v1alpha1.CredentialWatchSpec) {
		s.Target.TenantScan = &v1alpha1.TenantScanTarget{TenantID: tenant}
		s.CheckInterval = "7d"
	})
	w, res := h.reconcile()
	want := v1alpha1.FindingsStatus{StartAfterEnd: 1, NeverExpires: 1, ServicePrincipalSecret: 1, ManySecrets: 1, LongLived: 1, NotYetValid: 1}
	f := w.Status.Findings
	if f == nil {
		t.Fatal("no findings")
	}
	got := *f
	got.Items = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("findings %+v, want %+v", got, want)
	}
	var listed []string
	for _, it := range f.Items {
		listed = append(listed, string(it.Kind)+"/"+it.AppDisplayName)
		if !strings.Contains(it.Message, it.AppID) || strings.Contains(it.Message, "hYg~") {
			t.Errorf("finding %q should name its appId and no secret", it.Message)
		}
	}
	wantListed := "StartAfterEnd/backwards NeverExpires/never ServicePrincipalSecret/reset-by-az ManySecrets/many LongLived/long-lived NotYetValid/later"
	if strings.Join(listed, " ") != wantListed {
		t.Errorf("listed %v, want %s", listed, wantListed)
	}

	// "later" starts in two days: its finding goes then, from the scan held in memory.
	if res.RequeueAfter > 2*day {
		t.Errorf("requeue after %v, want at most two days", res.RequeueAfter)
	}
	h.step(2*day + time.Second)
	fake.ResetRequests()
	w, _ = h.reconcile()
	if f := w.Status.Findings; f == nil || f.NotYetValid != 0 || f.LongLived != 1 || len(fake.Requests()) != 0 {
		t.Errorf("two days on: %+v after %d Graph requests; want NotYetValid gone, the rest kept, no request", f, len(fake.Requests()))
	}

	// A policy of its own: secrets of up to four years, five of them.
	w.Spec.Hygiene = &v1alpha1.Hygiene{MaxLifetime: "1460d", MaxLiveSecrets: ptr.To[int32](5)}
	if err := k8s.Update(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	w, _ = h.reconcile()
	if f := w.Status.Findings; f == nil || f.LongLived != 0 || f.ManySecrets != 0 || f.NeverExpires != 1 {
		t.Errorf("under a laxer policy: %+v; want only what no lifetime excuses", f)
	}
}

// TestWatchFindings checks a watch of one application: the SAML exemption follows the service
// principal's single-sign-on mode, read at each check.
func TestWatchFindings(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	t0 := h.clock.Now()
	appID := uuid.NewString()
	sp := fakegraph.Object{AppID: appID, DisplayName: "saml-app", PreferredSingleSignOnMode: "saml",
		Passwords: []fakegraph.PasswordCredential{{SecretText: "sAm~" + strings.ReplaceAll(uuid.NewString(), "-", ""), Start: t0.Add(-day), End: t0.Add(3 * 365 * day)}}}
	fake.PutApplication(tenantID, fakegraph.Object{AppID: appID, DisplayName: "saml-app"})
	fake.PutServicePrincipal(tenantID, sp)
	h.create(appID, nil)
	w, _ := h.reconcile()
	if w.Status.ServicePrincipal.SingleSignOnMode != "saml" || w.Status.Findings != nil {
		t.Errorf("SAML service principal: mode %q, findings %+v; want saml and none", w.Status.ServicePrincipal.SingleSignOnMode, w.Status.Findings)
	}

	sp.PreferredSingleSignOnMode = ""
	fake.PutServicePrincipal(tenantID, sp)
	w.Annotations = map[string]string{v1alpha1.CheckAnnotation: "now"}
	if err := k8s.Update(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	h.step(policy.EarlyCheckGap)
	w, _ = h.reconcile()
	f := w.Status.Findings
	if f == nil || f.LongLived != 1 || f.ServicePrincipalSecret != 1 || len(f.Items) != 2 {
		t.Fatalf("no longer SAML: findings %+v; want the secret long-lived and on the service principal", f)
	}
	if m := f.Items[0].Message; !strings.Contains(m, `of "saml-app" (appId `+appID+`)`) || !strings.Contains(m, "az ad sp credential delete --id "+appID) {
		t.Errorf("message %q should name the application and how to remove the secret", m)
	}
	for _, e := range h.all {
		if strings.Contains(e, "sAm~") {
			t.Errorf("event leaks a secret: %q", e)
		}
	}
}
