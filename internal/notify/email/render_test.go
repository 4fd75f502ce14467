package email

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/notifytest"
)

var at = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

func reminder() notify.Alert {
	return notify.Alert{
		ID: notify.AlertID("uid", "Application/k1", "7d"), Kind: alertkind.Reminder, Severity: notify.SeverityCritical,
		Namespace: "platform", Name: "aks-prod", Cluster: "aks-prod-weu", DisplayName: "aks-prod-sp",
		AppID: "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c", TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47",
		Credential: &notify.Credential{KeyID: "k1", Type: "Password", Source: "Application", DisplayName: "rbac", Hint: "aPp", End: at.Add(6 * 24 * time.Hour)},
		Fix:        "az ad app credential reset --id 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c --append",
		At:         at,
	}
}

// hostile has markup wherever Azure lets an app's owner write text, and a line break that would
// start a header if the subject were not encoded.
func hostile() notify.Alert {
	a := reminder()
	a.ID = notify.AlertID("uid", "Application/k2", "7d")
	a.DisplayName = `<script>alert("sp")</script> & "partners"` + "\nBcc: attacker@evil.example"
	a.Credential.DisplayName = `<img src=x onerror=alert(1)>`
	a.Credential.Hint = `'><b>`
	a.Fix = `Ask the owner of <a href="https://evil.example">this app</a> to renew it`
	return a
}

func goldenAlerts() map[string]notify.Alert {
	expired := reminder()
	expired.Kind, expired.Severity = alertkind.Expired, notify.SeverityCritical
	expired.Credential.Type, expired.Credential.DisplayName = "Certificate", "CN=aks-prod"
	expired.Credential.End = at.Add(-3 * 24 * time.Hour)

	failing := notify.Alert{
		ID: notify.AlertID("uid", "check", "failing"), Kind: alertkind.CheckFailing, Severity: notify.SeverityWarning,
		Namespace: "platform", Name: "aks-prod", AppID: "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c",
		Problem: "Graph answered 403 Forbidden: the operator's identity lacks Application.Read.All",
		Fix:     "Grant the operator's managed identity the Microsoft Graph permission Application.Read.All",
		At:      at,
	}
	nodeLocal := notify.Alert{
		ID: notify.AlertID("uid", "pull/myacr.azurecr.io", "NodeLocal"), Kind: alertkind.PullsRefused, Severity: notify.SeverityWarning,
		Namespace: "platform", Name: "aks-prod", DisplayName: "aks-prod-sp", AppID: "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c",
		Pulls:   &notify.Pulls{Registry: "myacr.azurecr.io", Scope: "NodeLocal", Nodes: []string{"aks-pool1-3"}, Failing: 1, Pulling: 4},
		Problem: "myacr.azurecr.io refuses image pulls for want of credentials on 1 node only (aks-pool1-3), while 4 other nodes pull from it",
		Fix:     "Restart kubelet on aks-pool1-3, or reimage the node.",
		At:      at,
	}
	return map[string]notify.Alert{
		"reminder":            reminder(),
		"expired-certificate": expired,
		"check-failing":       failing,
		"hostile":             hostile(),
		"pulls-node-local":    nodeLocal,
	}
}

func TestRenderGolden(t *testing.T) {
	for name, a := range goldenAlerts() {
		t.Run(name, func(t *testing.T) {
			html, err := renderHTML(a)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".txt", notify.Text(a))
			golden(t, name+".html", html)
		})
	}
	// The text of composed alerts is compose's golden; the HTML is this channel's.
	for name, a := range notifytest.Composed() {
		t.Run(name, func(t *testing.T) {
			html, err := renderHTML(a)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".html", html)
		})
	}
}

func TestHTMLEscapesTheAlert(t *testing.T) {
	html, err := renderHTML(hostile())
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{"<script", "<img", "<b>", "<a href", `"partners"`} {
		if strings.Contains(html, raw) {
			t.Errorf("HTML contains %q unescaped", raw)
		}
	}
	for _, escaped := range []string{"&lt;script&gt;", "&lt;img src=x onerror=alert(1)&gt;", "&lt;a href=&#34;https://evil.example&#34;&gt;"} {
		if !strings.Contains(html, escaped) {
			t.Errorf("HTML lacks %q", escaped)
		}
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if notifytest.Updating() {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the rendering (run go test -update if the change is meant):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
