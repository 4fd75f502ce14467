package aksfleet

import (
	"fmt"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/compose"
)

// Message words what a fleet w tells a channel of one of its clusters, as of now.
func Message(w *v1alpha1.CredentialWatch, p Alert, now time.Time) notify.Alert {
	c := p.Cluster
	a := notify.Alert{
		ID:        notify.AlertID(string(w.UID), AlertSubject(p), ""),
		Severity:  notify.SeverityInfo,
		Namespace: w.Namespace,
		Name:      w.Name,
		Cluster:   c.ID,
		AppID:     c.AppID,
		TenantID:  w.Spec.Target.TenantID(),
		At:        now,
	}
	// Quoted for the shell: a resource group's name may hold parentheses, and neither name a quote.
	// The subscription too: a fleet spans several, and a cluster's name may repeat in another.
	group := "--subscription " + c.SubscriptionID + " --resource-group '" + c.ResourceGroup + "'"
	name := "'" + ClusterName(c.ID) + "'"
	if p.Kind == MovedToManagedIdentity {
		a.Kind = alertkind.ManagedIdentity
		a.Fix = fmt.Sprintf("Nothing, once every node pool was upgraded (az aks nodepool upgrade %s --cluster-name %s --name <pool> --node-image-only): "+
			"until then kubelets still sign in with the service principal, so keep its secret valid; then remove the secret.", group, name)
		return a
	}
	a.Kind, a.Severity = alertkind.Reminder, compose.SeverityOf(c.State)
	if c.State == v1alpha1.StateExpired {
		a.Kind = alertkind.Expired
	}
	for _, cred := range c.Credentials {
		if a.DisplayName == "" {
			a.DisplayName = cred.AppDisplayName
		}
		if c.Earliest != nil && cred.EndTime.Equal(c.Earliest) && a.Credential == nil {
			a.Credential = &notify.Credential{KeyID: cred.KeyID, Type: string(cred.Type), Source: string(cred.Source),
				DisplayName: cred.DisplayName, Hint: cred.Hint, End: cred.EndTime.Time}
		}
	}
	a.Fix = fmt.Sprintf("Move the cluster to a managed identity, which ends this for good: az aks update %s --name %s --enable-managed-identity "+
		"(one way; kubelets move only as each node pool is upgraded with az aks nodepool upgrade --node-image-only, so keep the secret valid until then; "+
		"attach registries again with az aks update --attach-acr, and grant the identity the roles the service principal had). "+
		"Or renew the secret and move the cluster onto it: az aks update-credentials %s --name %s --reset-service-principal "+
		"--service-principal %s --client-secret \"$(az ad app credential reset --id %s --append --query password -o tsv)\"; "+
		"or let the fleet create a watch per cluster that rotates it (spec.target.aksFleet.createWatches.rotation).",
		group, name, group, name, c.AppID, c.AppID)
	return a
}
