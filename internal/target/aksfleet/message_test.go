package aksfleet

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/notify"
)

func TestMessage(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	w := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "fleet", UID: "u"},
		Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{AKSFleet: &v1alpha1.AKSFleetTarget{TenantID: "t"}}}}
	soon, later := metav1.NewTime(now.Add(-2*24*time.Hour)), metav1.NewTime(now.Add(300*24*time.Hour))
	c := Cluster{ID: "/subscriptions/s/resourceGroups/rg(prod)/providers/Microsoft.ContainerService/managedClusters/aks-1",
		SubscriptionID: "s", ResourceGroup: "rg(prod)", AppID: "app",
		Credentials: []v1alpha1.Credential{
			{KeyID: "k-later", Type: v1alpha1.CredentialTypePassword, EndTime: later, AppDisplayName: "aks-1-sp"},
			{KeyID: "k-soon", Type: v1alpha1.CredentialTypePassword, EndTime: soon, AppDisplayName: "aks-1-sp"},
		}}
	note := "Expired 1"
	a := Message(w, Alert{Channel: "slack", Kind: StateWorsened, Note: &note,
		Cluster: ClusterView{Cluster: &c, Earliest: &soon, State: v1alpha1.StateExpired}}, now)
	if a.Kind != alertkind.Expired || a.Severity != notify.SeverityCritical || a.Credential == nil || a.Credential.KeyID != "k-soon" ||
		a.Cluster != c.ID || a.DisplayName != "aks-1-sp" || a.GoodNews() {
		t.Errorf("expired: %+v", a)
	}
	if !strings.Contains(a.Fix, "az aks update --subscription s --resource-group 'rg(prod)' --name 'aks-1' --enable-managed-identity") || !strings.Contains(a.Fix, "--node-image-only") {
		t.Errorf("fix %q: want the move to a managed identity, names quoted for the shell, and its caveat", a.Fix)
	}
	mi := Message(w, Alert{Channel: "slack", Kind: MovedToManagedIdentity, Cluster: ClusterView{Cluster: &c}}, now)
	if mi.Kind != alertkind.ManagedIdentity || !mi.GoodNews() || !strings.Contains(mi.Title(), "aks-1 signs in with a managed identity") ||
		!strings.Contains(mi.Fix, "--node-image-only") || mi.ID == a.ID {
		t.Errorf("managed identity: %+v, title %q", mi, mi.Title())
	}
}
