package rotation

import (
	"context"
	"time"

	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/keyvault"
	"github.com/credwatch/credwatch/internal/secret"
)

// Azure is what a rotation reaches in Azure, as any identity (package clients).
type Azure interface {
	Application(id azure.Identity, app graph.AppRef) (graph.AppClient, error)
	Cluster(id azure.Identity, ref aks.ClusterRef) (aks.ClusterClient, error)
	KeyVaults(id azure.Identity) (*keyvault.Vaults, error)
	SignIn(ctx context.Context, id azure.Identity) error
}

// ClientsOf are what a rotation of pin changes in Azure, as id: the application, the cluster it
// moves onto the new secret, the Key Vaults it publishes to, and Entra's answer to the new
// secret's own sign-in.
func ClientsOf(az Azure, id azure.Identity, pin Pin) (Clients, error) {
	app, err := az.Application(id, graph.AppRef{AppID: pin.AppID, ObjectID: pin.ApplicationObjectID})
	if err != nil {
		return Clients{}, err
	}
	c := Clients{App: AppSecrets(app), SignIn: func(ctx context.Context, text secret.Text) error {
		return az.SignIn(ctx, azure.Identity{TenantID: pin.TenantID, ClientID: pin.AppID, Secret: text})
	}}
	if pin.Cluster != nil {
		cluster, err := az.Cluster(id, ClusterRef(pin.Cluster))
		if err != nil {
			return Clients{}, err
		}
		c.Cluster = ClusterReset(cluster)
	}
	vaults, err := VaultsOf(az, id)
	c.Vaults = vaults
	return c, err
}

// VaultsOf are the Key Vaults as id writes to them; nil when the operator reaches none.
func VaultsOf(az Azure, id azure.Identity) (KeyVaults, error) {
	vaults, err := az.KeyVaults(id)
	if err != nil || vaults == nil { // never a nil pointer in the interface
		return nil, err
	}
	return vaults, nil
}

// AppSecrets is app's client secrets, as Graph holds them, for a rotation.
func AppSecrets(app graph.AppClient) Application { return appSecrets{app} }

type appSecrets struct{ app graph.AppClient }

func (a appSecrets) Secrets(ctx context.Context) ([]Secret, error) {
	snap, err := a.app.ReadCredentials(ctx)
	if err != nil {
		return nil, err
	}
	var out []Secret
	for _, c := range snap.Credentials {
		if c.Source == graph.Application && c.Type == graph.Password {
			out = append(out, Secret{KeyID: c.KeyID, DisplayName: c.DisplayName, Hint: c.Hint, End: c.End})
		}
	}
	return out, nil
}

func (a appSecrets) Add(ctx context.Context, displayName string, end time.Time) (NewSecret, error) {
	s, err := a.app.AddPassword(ctx, displayName, end)
	if err != nil {
		return NewSecret{}, err
	}
	return NewSecret{KeyID: s.KeyID, Text: secret.New(s.Text), End: s.End}, nil
}

func (a appSecrets) Remove(ctx context.Context, keyID string) error {
	return a.app.RemovePassword(ctx, keyID)
}

// ClusterReset is the pinned AKS cluster c, as Resource Manager holds it, for a rotation.
func ClusterReset(c aks.ClusterClient) Cluster { return clusterReset{c} }

type clusterReset struct{ c aks.ClusterClient }

func (c clusterReset) Read(ctx context.Context) (ClusterState, error) {
	got, err := c.c.Read(ctx)
	return ClusterState{ClientID: got.ClientID, ProvisioningState: got.ProvisioningState, PowerState: got.PowerState}, err
}

func (c clusterReset) StartReset(ctx context.Context, clientID string, text secret.Text) (Operation, bool, error) {
	token, done, err := c.c.StartReset(ctx, aks.ServicePrincipal{ClientID: clientID, Secret: text})
	return Operation{Token: token, ID: aks.OperationID(token)}, done, err
}

func (c clusterReset) PollReset(ctx context.Context, token string) (bool, error) {
	return c.c.PollReset(ctx, token)
}
