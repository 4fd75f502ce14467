package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestDemo runs `make demo` once and checks that a person would see what it promises:
// every watch Ready in kubectl, the expiring secret's events, and its alerts in mail and Slack.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo against envtest and mailpit: skipped under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out, true); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	shown := out.String()
	for _, want := range []string{
		"aks-prod-sp        True", "Critical", "legacy-batch       True", "Expired", "signing-service    True", "aks-prod-cluster   True", "tenant-aks-apps    True", "aks-fleet          True",
		"CredentialCritical", "CredentialExpired",
		"to platform-team@example.com: Secret of payments-api expires in 5 days",
		"#platform-alerts: Secret of legacy-batch expired 3 days ago",
		`credwatch_graph_requests_total{code="200"}`,
		`credwatch_aks_cluster_info{client_id="",cluster="/subscriptions/8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918/resourceGroups/rg-prod/providers/Microsoft.ContainerService/managedClusters/aks-prod",identity="ManagedIdentity",name="aks-fleet"`,
	} {
		if !strings.Contains(shown, want) {
			t.Errorf("the demo does not show %q:\n%s", want, shown)
		}
	}
	for _, secret := range []string{"demo~operator-secret", "pAy~demo", "lEg~demo", "xoxb-demo-token"} {
		if strings.Contains(shown, secret) {
			t.Errorf("the demo shows a secret (%s...)", secret[:4])
		}
	}
}
