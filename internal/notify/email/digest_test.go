package email

import (
	"strings"
	"testing"
	"time"

	"github.com/credwatch/credwatch/internal/notify"
)

func digest() notify.Digest {
	day := 24 * time.Hour
	return notify.Digest{
		ID: "digest-5f2a9c1e7b3d4a60", Tenant: "72f988bf-86f1-41af-91ab-2d7cd011db47", Period: at,
		Lines: []notify.DigestLine{
			{Application: "payments-api", AppID: "7d1e5a3c-0b2f-4e6a-9c8d-1f2e3a4b5c6d", Object: "Application", Type: "Password",
				KeyID: "0f6c2b1e-3a4d-4e5f-8a9b-0c1d2e3f4a5b", Hint: "Q~x", DisplayName: "ci", State: "Expired", End: at.Add(-2 * day),
				Command: "az ad app credential reset --id 7d1e5a3c-0b2f-4e6a-9c8d-1f2e3a4b5c6d --append"},
			{Application: "payments-api", AppID: "7d1e5a3c-0b2f-4e6a-9c8d-1f2e3a4b5c6d", Object: "ServicePrincipal", Type: "Password",
				KeyID: "4b3c2d1e-5f6a-4b7c-8d9e-0f1a2b3c4d5e", Hint: "8Jk", State: "Critical", End: at.Add(5 * day), Use: "in use, last signed in at 2026-12-01T22:00:00Z",
				Command: "az ad sp credential reset --id 7d1e5a3c-0b2f-4e6a-9c8d-1f2e3a4b5c6d --append"},
			{Application: "reports", AppID: "2a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d", Object: "Application", Type: "Certificate",
				KeyID: "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b", DisplayName: "CN=reports", State: "Warning", End: at.Add(24 * day),
				Command: "az ad app credential reset --id 2a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d --append --create-cert"},
		},
		Findings: []notify.DigestFinding{{Application: `"payments-api" (appId 7d1e5a3c-0b2f-4e6a-9c8d-1f2e3a4b5c6d)`, AppID: "7d1e5a3c-0b2f-4e6a-9c8d-1f2e3a4b5c6d", Kind: "ServicePrincipalSecret",
			Message: `Secret (keyId 4b3c2d1e-5f6a-4b7c-8d9e-0f1a2b3c4d5e, on the ServicePrincipal object of "payments-api" (appId 7d1e5a3c-0b2f-4e6a-9c8d-1f2e3a4b5c6d)) is on the service principal, ` +
				`where the portal's app registration does not show it (az ad sp credential reset puts secrets there): if nothing signs in with it, remove it ` +
				`(az ad sp credential delete --id 7d1e5a3c-0b2f-4e6a-9c8d-1f2e3a4b5c6d --key-id 4b3c2d1e-5f6a-4b7c-8d9e-0f1a2b3c4d5e)`}},
		Unused: []notify.DigestFinding{{Application: `"reports" (appId 2a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d)`, AppID: "2a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d", Kind: "Unused",
			Message: `Certificate "CN=reports" (keyId 9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b, on the Application object of "reports" (appId 2a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d)) ` +
				`last signed in at 2026-06-01T08:00:00Z, longer ago than the 90 days the policy allows: if nothing needs it any more, let it expire or remove it ` +
				`(az ad app credential delete --id 2a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d --key-id 9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b --cert)`}},
		Why: "You get this because you own these applications in Entra ID tenant 72f988bf-86f1-41af-91ab-2d7cd011db47. It comes every Monday at 09:00 Europe/Berlin; " +
			"an application tagged credwatch-no-digest is left out. Sent by credwatch for CredentialWatch platform/tenant.",
	}
}

func TestDigestGolden(t *testing.T) {
	m, err := DigestMail(digest())
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "credwatch: 3 credentials of your applications need attention, and 2 hygiene findings" || m.ID != "digest-5f2a9c1e7b3d4a60" {
		t.Errorf("subject %q, ID %q", m.Subject, m.ID)
	}
	golden(t, "digest.txt", m.Text)
	golden(t, "digest.html", m.HTML)
}

func TestDigestEscapesWhatAzureHolds(t *testing.T) {
	d := digest()
	d.Lines[0].Application = `<script>alert("app")</script>`
	d.Lines[0].DisplayName = `<img src=x onerror=alert(1)>`
	d.Lines[0].Hint = `'><b>`
	d.Findings[0].Message = `<a href="https://evil.example">renew here</a>`
	d.Unused[0].Message = `<a href="https://evil.example">remove here</a>`
	m, err := DigestMail(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{"<script", "<img", "<b>", "<a href"} {
		if strings.Contains(m.HTML, raw) {
			t.Errorf("HTML contains %q unescaped", raw)
		}
	}
	if !strings.Contains(m.HTML, "&lt;script&gt;") || !strings.Contains(m.Text, `"<script>alert(\"app\")</script>" (appId`) {
		t.Error("the names should be in both parts, escaped in the HTML and quoted in the text")
	}
}
