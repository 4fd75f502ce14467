package aksfleet

import (
	"strings"
	"testing"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

func TestWatchFateOf(t *testing.T) {
	const (
		subA = "a1c2e3f4-0000-4000-8000-00000000000a"
		subB = "b1c2e3f4-0000-4000-8000-00000000000b"
	)
	id := func(sub, name string) string {
		return "/subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/" + name
	}
	found := []Cluster{
		{ID: id(subA, "on-sp"), SubscriptionID: subA, AppID: "app"},
		{ID: id(subA, "on-mi"), SubscriptionID: subA},
		{ID: id(subB, "on-mi-b"), SubscriptionID: subB},
	}
	onlyA := map[string]bool{subA: true, subB + "/rg-listed": true}
	for _, tc := range []struct {
		name    string
		cluster string
		want    WatchFate
	}{
		{"on a service principal", id(subA, "on-sp"), KeepWatch},
		{"on a service principal, the ID in another case", strings.ToUpper(id(subA, "on-sp")), KeepWatch},
		{"gone from a subscription listed whole", id(subA, "gone"), DeleteGone},
		{"gone, the subscription in upper case", id(strings.ToUpper(subA), "gone"), DeleteGone},
		{"on a managed identity, listed whole", id(subA, "on-mi"), DeleteManagedIdentity},
		{"on a managed identity, its listing failed part way", id(subB, "on-mi-b"), KeepWatch},
		{"missing from a subscription not listed whole", id(subB, "gone"), KeepWatch},
		{"an annotation that names no subscription", "aks-prod", KeepWatch},
		{"gone from a resource group listed whole", "/subscriptions/" + subB + "/resourceGroups/RG-Listed/providers/Microsoft.ContainerService/managedClusters/x", DeleteGone},
		{"missing from a resource group the identity no longer lists", "/subscriptions/" + subB + "/resourceGroups/rg-other/providers/Microsoft.ContainerService/managedClusters/x", KeepWatch},
		{"no annotation", "", KeepWatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := WatchFateOf(tc.cluster, found, onlyA); got != tc.want {
				t.Errorf("WatchFateOf(%q) = %d, want %d", tc.cluster, got, tc.want)
			}
		})
	}
}

func TestWatchNameAndSpec(t *testing.T) {
	id := "/subscriptions/a1c2e3f4-0000-4000-8000-00000000000a/resourceGroups/RG_Prod/providers/Microsoft.ContainerService/managedClusters/AKS_Prod"
	name := WatchName("fleet", id)
	if name != WatchName("fleet", strings.ToLower(id)) || len(name) != len("fleet-")+10 || strings.Trim(name[6:], "0123456789abcdef") != "" {
		t.Fatalf("name %q: want fleet- and 10 hex digits, the same whatever the ID's case", name)
	}
	if WatchName("fleet", strings.Replace(id, "RG_Prod", "rg-other", 1)) == name {
		t.Error("two clusters of one name in two resource groups share a watch name")
	}
	fleet := v1alpha1.CredentialWatchSpec{
		Target:        v1alpha1.Target{AKSFleet: &v1alpha1.AKSFleetTarget{TenantID: "t"}},
		IdentityRef:   &v1alpha1.IdentityRef{Kind: v1alpha1.KindAzureIdentity, Name: "reader"},
		CheckInterval: "1h",
		Thresholds:    v1alpha1.Thresholds{Warning: "30d", Critical: "7d"},
	}
	c := Cluster{ID: id, SubscriptionID: "a1c2e3f4-0000-4000-8000-00000000000a", ResourceGroup: "RG_Prod", AppID: "app"}
	spec := WatchSpec(fleet, c)
	if at := spec.Target.AKSCluster; at == nil || at.Name != "AKS_Prod" || at.ResourceGroup != "RG_Prod" || at.TenantID != "t" ||
		spec.IdentityRef.Name != "reader" || spec.CheckInterval != "1h" || spec.Thresholds.Warning != "30d" || spec.Rotation != nil ||
		spec.Alerts == nil || spec.Alerts.UseDefaultChannels == nil || *spec.Alerts.UseDefaultChannels {
		t.Errorf("without a template: %+v", spec)
	}
	fleet.Target.AKSFleet.CreateWatches = &v1alpha1.FleetWatchTemplate{
		Thresholds: &v1alpha1.Thresholds{Warning: "60d", Critical: "14d"},
		Rotation: &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: "aks-sp"},
			Publish: []v1alpha1.PublishSink{{KeyVault: &v1alpha1.KeyVaultSink{VaultURL: "https://kv.vault.azure.net/", SecretName: "aks-sp"}}}},
	}
	spec = WatchSpec(fleet, c)
	if spec.Thresholds.Warning != "60d" || spec.Rotation == nil || spec.Rotation.SecretRef.Name != "aks-sp-"+name[6:] || spec.Rotation.Publish != nil {
		t.Errorf("with a template: %+v", spec)
	}
	if fleet.Target.AKSFleet.CreateWatches.Rotation.SecretRef.Name != "aks-sp" || spec.IdentityRef == fleet.IdentityRef {
		t.Error("the fleet's spec was changed, or shared with the watch's")
	}
}
