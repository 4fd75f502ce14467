// Package notifytest holds what every channel's tests share: one alert of each kind people see
// most, and golden files for renderings.
package notifytest

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/notify"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current rendering")

// At is when the alerts are raised.
var At = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

// Alerts are a reminder, an expiry, a resolution, a check failure and image pulls refused across
// the cluster, the same in every channel's tests.
func Alerts() map[string]notify.Alert {
	reminder := notify.Alert{
		ID: notify.AlertID("uid", "Application/k1", "7d"), Kind: alertkind.Reminder, Severity: notify.SeverityWarning,
		Namespace: "platform", Name: "aks-prod", Cluster: "aks-prod-weu", DisplayName: "aks-prod-sp",
		AppID: "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c", TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47",
		Credential: &notify.Credential{KeyID: "k1", Type: "Password", Source: "Application", DisplayName: "rbac", Hint: "aPp", End: At.Add(6 * 24 * time.Hour)},
		Fix:        "az ad app credential reset --id 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c --append",
		At:         At,
	}
	expired := reminder
	expired.ID, expired.Kind, expired.Severity = notify.AlertID("uid", "Application/k1", "expired"), alertkind.Expired, notify.SeverityCritical
	expired.Credential = &notify.Credential{KeyID: "k1", Type: "Password", Source: "Application", DisplayName: "rbac", Hint: "aPp", End: At.Add(-3 * 24 * time.Hour)}
	resolved := reminder
	resolved.ID, resolved.Kind, resolved.Severity, resolved.Fix = notify.AlertID("uid", "Application/k1", "resolved"), alertkind.Resolved, notify.SeverityInfo, ""
	return map[string]notify.Alert{
		"reminder": reminder,
		"expired":  expired,
		"resolved": resolved,
		"check-failing": {
			ID: notify.AlertID("uid", "check", "failing"), Kind: alertkind.CheckFailing, Severity: notify.SeverityWarning,
			Namespace: "platform", Name: "aks-prod", AppID: "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c", TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47",
			Problem: "access denied (HTTP 403, Authorization_RequestDenied)",
			Fix:     "Grant the operator's identity the Application.Read.All permission on Microsoft Graph, with admin consent.",
			At:      At,
		},
		"pulls-refused": {
			ID: notify.AlertID("uid", "pull/myacr.azurecr.io", "ClusterWide"), Kind: alertkind.PullsRefused, Severity: notify.SeverityCritical,
			Namespace: "platform", Name: "aks-prod", Cluster: "rg-prod/aks-prod-weu", DisplayName: "aks-prod-sp",
			AppID: "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c", TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47",
			Pulls: &notify.Pulls{Registry: "myacr.azurecr.io", Scope: "ClusterWide", Nodes: []string{"aks-pool1-0", "aks-pool1-1", "aks-pool1-2"}, Failing: 3},
			Problem: "myacr.azurecr.io refuses image pulls for want of credentials on 3 nodes (aks-pool1-0, aks-pool1-1, aks-pool1-2): the cluster's credential. " +
				"The client secret \"rbac\" of the service principal expired 2h ago: this is why.",
			Fix: "az ad app credential reset --id 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c --append, then az aks update-credentials --resource-group rg-prod --name aks-prod-weu " +
				"--reset-service-principal --service-principal 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c --client-secret <the new secret>",
			At: At,
		},
	}
}

// Golden compares got with testdata/name.golden, or rewrites the file under -update.
func Golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the rendering (run go test -update if the change is meant):\ngot:\n%s", path, got)
	}
}

// Updating reports whether the tests run with -update, for golden files of other names.
func Updating() bool { return *update }
