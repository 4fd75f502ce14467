package controllers

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/credwatch/credwatch/test/fakegraph"
)

// Someone adds a secret to a watched application's service principal, where the portal's App
// registrations blade does not show it. The next check marks it, an event and the channels tell
// of it once, also across a restart of the operator, and its reminders go on as for any secret.
func TestACredentialAddedOutOfBandIsToldOnce(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	t0 := h.clock.Now()
	s := seed(t, t0, 200*day, 400*day, 300*day)
	h.create(s.appID, nil)
	rc := newReceiver(t, nil)
	h.withWebhook(rc)
	added := uuid.NewString()
	fake.SetAuditActor("mallory@contoso.example", "198.51.100.23")
	fake.SetDeltaClock(h.clock) // the audit log's times are the story's
	t.Cleanup(func() { fake.SetAuditActor("", ""); fake.SetDeltaClock(nil) })

	h.run(3*day, []scripted{
		{at: 5 * time.Hour, do: func() {
			sp, _ := fake.ServicePrincipal(tenantID, s.appID)
			sp.Passwords = append(sp.Passwords, fakegraph.PasswordCredential{KeyID: added, DisplayName: "keep-access",
				SecretText: "kEe~" + uuid.NewString(), Start: h.clock.Now(), End: h.clock.Now().Add(2 * 365 * day)})
			fake.PutServicePrincipal(tenantID, sp)
		}},
		{at: day + time.Hour, do: h.restart},
	})

	var told []string
	for _, p := range rc.received() {
		if p.Kind == "CredentialAdded" {
			told = append(told, p.Problem+" / "+p.Fix)
			if p.Credential == nil || p.Credential.KeyID != added || p.Severity != "warning" {
				t.Errorf("the alert's credential %+v, severity %s", p.Credential, p.Severity)
			}
		}
	}
	if len(told) != 1 || strings.Contains(told[0], "198.51.100.23") || !strings.Contains(told[0], `"keep-access"`) || !strings.Contains(told[0], "does not show in the portal's App registrations blade") ||
		!strings.Contains(told[0], "Added by: user mallory@contoso.example at ") ||
		!strings.Contains(told[0], "az ad sp credential delete --id "+s.appID+" --key-id "+added) {
		t.Fatalf("CredentialAdded alerts: %q", told)
	}
	if n := countPrefix(h.all, "Warning CredentialAdded"); n != 1 {
		t.Errorf("%d CredentialAdded events, want 1", n)
	}
	w := h.get()
	marked := 0
	for _, c := range w.Status.Credentials {
		if c.AddedTime != nil {
			marked++
			if c.KeyID != added || c.AddedTime.Time.Before(t0.Add(5*time.Hour)) {
				t.Errorf("marked %s at %v", c.KeyID, c.AddedTime)
			}
		}
	}
	if marked != 1 {
		t.Errorf("%d credentials marked added, want 1", marked)
	}
	assertNoSecrets(t, h)
}
