package tenantscan

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/notify/notifytest"
	"github.com/credwatch/credwatch/internal/policy"
)

func TestDigest(t *testing.T) {
	now := notifytest.At
	day := 24 * time.Hour
	w := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "tenant", UID: "uid-1"},
		Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47"}}}}
	cred := func(app, key string, src v1alpha1.CredentialSource, typ v1alpha1.CredentialType, end time.Duration, state v1alpha1.CredentialState) v1alpha1.Credential {
		return v1alpha1.Credential{AppID: app, KeyID: key, Source: src, Type: typ, EndTime: metav1.NewTime(now.Add(end)), State: state}
	}
	apps := []DigestApp{
		{AppID: "app-b", DisplayName: "billing", Credentials: []v1alpha1.Credential{cred("app-b", "k2", v1alpha1.SourceServicePrincipal, v1alpha1.CredentialTypePassword, 3*day, v1alpha1.StateCritical)}},
		{AppID: "app-a", DisplayName: "accounts", Credentials: []v1alpha1.Credential{
			cred("app-a", "k1", v1alpha1.SourceApplication, v1alpha1.CredentialTypeCertificate, 20*day, v1alpha1.StateWarning),
			cred("app-a", "k0", v1alpha1.SourceApplication, v1alpha1.CredentialTypePassword, -day, v1alpha1.StateExpired)},
			Findings: []policy.Finding{{Kind: v1alpha1.FindingManySecrets, LiveSecrets: 3, Credential: v1alpha1.Credential{AppID: "app-a", AppDisplayName: "accounts"}},
				{Kind: v1alpha1.FindingNeverUsed, Credential: cred("app-a", "k1", v1alpha1.SourceApplication, v1alpha1.CredentialTypeCertificate, 20*day, v1alpha1.StateWarning)}}},
	}
	period := Period{Start: now, Schedule: v1alpha1.DigestSchedule{Weekday: "Friday", Time: "17:30", TimeZone: "Europe/Berlin"}, OptOutTag: "no-digest"}
	d := Digest(w, "alice@contoso.example", apps, period, policy.Hygiene{MaxLifetime: 730 * day, MaxLiveSecrets: 2})
	var order []string
	for _, l := range d.Lines {
		order = append(order, l.KeyID+"/"+l.State)
	}
	if strings.Join(order, " ") != "k0/Expired k2/Critical k1/Warning" {
		t.Errorf("lines %v, want soonest end first across applications", order)
	}
	if c := d.Lines[1].Command; c != "az ad sp credential reset --id app-b --append" {
		t.Errorf("a service principal's secret is renewed with %q", c)
	}
	if c := d.Lines[2].Command; c != "az ad app credential reset --id app-a --append --create-cert" {
		t.Errorf("a certificate is renewed with %q", c)
	}
	if len(d.Findings) != 1 || !strings.Contains(d.Findings[0].Message, "holds 3 client secrets") {
		t.Errorf("findings %+v", d.Findings)
	}
	if len(d.Unused) != 1 || d.Unused[0].Kind != string(v1alpha1.FindingNeverUsed) || !strings.Contains(d.Unused[0].Message, "--key-id k1") {
		t.Errorf("credentials nothing uses %+v; want the one that never signed in, under its own heading", d.Unused)
	}
	if d.Lines[0].Use != "" {
		t.Errorf("a scan that does not read sign-ins says %q of a credential's use", d.Lines[0].Use)
	}
	// A scan that reads sign-ins says of each credential whether it is in use.
	reading := w.DeepCopy()
	reading.Spec.Usage = &v1alpha1.Usage{SignIns: true}
	reading.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionSignInsRead, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSignInsRead}}
	signedIn := metav1.NewTime(now.Add(-time.Hour))
	reading.Status.SignInsReadTime = &signedIn
	apps[0].Credentials[0].LastSignIn, apps[0].Credentials[0].InUse = &signedIn, true
	uses := map[string]string{}
	for _, l := range Digest(reading, "alice@contoso.example", apps, period, policy.Hygiene{MaxLifetime: 730 * day, MaxLiveSecrets: 2}).Lines {
		uses[l.KeyID] = l.Use
	}
	if uses["k2"] != "in use, last signed in at 2026-12-02T08:00:00Z" || uses["k0"] != "not in use, never signed in" {
		t.Errorf("uses %q; want k2 in use and k0 never signed in", uses)
	}
	if !strings.Contains(d.Why, "every Friday at 17:30 Europe/Berlin") || !strings.Contains(d.Why, "tagged no-digest") || !strings.Contains(d.Why, "platform/tenant") {
		t.Errorf("why: %s", d.Why)
	}
	again := Digest(w, "alice@contoso.example", apps, period, policy.Hygiene{MaxLifetime: 730 * day, MaxLiveSecrets: 2})
	other := Digest(w, "bob@contoso.example", apps, period, policy.Hygiene{MaxLifetime: 730 * day, MaxLiveSecrets: 2})
	if d.ID != again.ID || d.ID == other.ID {
		t.Errorf("IDs %s, %s, %s: want one per recipient and period", d.ID, again.ID, other.ID)
	}
	if fb := Digest(w, Fallback, apps, period, policy.Hygiene{}); !strings.Contains(fb.Why, "no owner of these applications") {
		t.Errorf("the fallback's why: %s", fb.Why)
	}

	var many []DigestApp
	for i := range MaxDigestEntries + 10 {
		many = append(many, DigestApp{AppID: "app", Credentials: []v1alpha1.Credential{cred("app", string(rune('a'+i%26)), v1alpha1.SourceApplication, v1alpha1.CredentialTypePassword, day, v1alpha1.StateCritical)}})
	}
	if big := Digest(w, "x@contoso.example", many, period, policy.Hygiene{}); len(big.Lines) != MaxDigestEntries || big.Omitted != 10 {
		t.Errorf("%d lines, %d omitted; want %d and 10", len(big.Lines), big.Omitted, MaxDigestEntries)
	}
}
