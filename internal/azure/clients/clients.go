// Package clients hands out Azure clients each bound to one identity and one target: an
// application, a tenant, a managed cluster. The controllers ask for what a watch may touch and get
// a client that can touch nothing else; credentials, and the SDK types that carry them, stay
// below this line.
package clients

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/keyvault"
)

// Identities makes the token credentials of identities, and verifies new secrets.
type Identities interface {
	Credential(id azure.Identity) (azcore.TokenCredential, error)
	SignIn(ctx context.Context, id azure.Identity) error
}

// Graph is Microsoft Graph for any identity: msgraph's client behind the read planner.
type Graph interface {
	ReadCredentials(ctx context.Context, cred azcore.TokenCredential, appID string) (graph.Snapshot, error)
	Check(ctx context.Context, cred azcore.TokenCredential, appID string, ask graph.Ask) (graph.Snapshot, error)
	// Withdraw forgets what the checks of asker asked for: they will not come for it.
	Withdraw(asker string)
	ScanTenant(ctx context.Context, cred azcore.TokenCredential, filter string, visit func(graph.Object)) error
	ReadOwnerEmails(ctx context.Context, cred azcore.TokenCredential, applicationID string) ([]string, error)
	VerifiedDomains(ctx context.Context, cred azcore.TokenCredential) ([]string, error)
	ReadSignIns(ctx context.Context, cred azcore.TokenCredential, appID string) ([]graph.KeyUse, error)
	ReadTenantSignIns(ctx context.Context, cred azcore.TokenCredential, visit func(graph.KeyUse)) error
	ReadCredentialAudits(ctx context.Context, cred azcore.TokenCredential, objectID string, since time.Time) ([]graph.Audit, error)
	ReadOwnersBatch(ctx context.Context, cred azcore.TokenCredential, applicationIDs []string) []graph.OwnersRead
	AddPassword(ctx context.Context, cred azcore.TokenCredential, applicationID, displayName string, end time.Time) (graph.NewSecret, error)
	RemovePassword(ctx context.Context, cred azcore.TokenCredential, applicationID, keyID string) error
}

// Clusters is Resource Manager's managed clusters for any identity.
type Clusters interface {
	ReadCluster(ctx context.Context, cred azcore.TokenCredential, ref aks.ClusterRef) (aks.Cluster, error)
	StartReset(ctx context.Context, cred azcore.TokenCredential, ref aks.ClusterRef, sp aks.ServicePrincipal) (string, bool, error)
	PollReset(ctx context.Context, cred azcore.TokenCredential, ref aks.ClusterRef, token string) (bool, error)
	ListSubscriptions(ctx context.Context, cred azcore.TokenCredential, tenantID string) ([]aks.Subscription, error)
	ListClusters(ctx context.Context, cred azcore.TokenCredential, subscriptionID string, resourceGroups []string) ([]aks.ListedCluster, error)
}

// Clients binds identities to targets.
type Clients struct {
	identities Identities
	graph      Graph
	clusters   Clusters
	// vaults carries Key Vault's requests; nil for the SDK's own (tests give its fake).
	vaults policy.Transporter
}

// WithKeyVaultTransport sends Key Vault's requests through t, and returns c.
func (c *Clients) WithKeyVaultTransport(t policy.Transporter) *Clients {
	c.vaults = t
	return c
}

// KeyVaults are the Key Vaults, as id writes to them.
func (c *Clients) KeyVaults(id azure.Identity) (*keyvault.Vaults, error) {
	cred, err := c.identities.Credential(id)
	if err != nil {
		return nil, err
	}
	return keyvault.New(cred, c.vaults), nil
}

// New returns Clients that sign in through identities and talk to graph and clusters.
func New(identities Identities, graph Graph, clusters Clusters) *Clients {
	return &Clients{identities: identities, graph: graph, clusters: clusters}
}

// Application is app in id's tenant, as id sees it.
func (c *Clients) Application(id azure.Identity, app graph.AppRef) (graph.AppClient, error) {
	cred, err := c.identities.Credential(id)
	if err != nil {
		return nil, err
	}
	return application{graph: c.graph, cred: cred, ref: app}, nil
}

// Withdraw forgets what asker's checks asked Graph for, under any identity: its watch is gone.
func (c *Clients) Withdraw(asker string) {
	c.graph.Withdraw(asker)
}

// Tenant is id's tenant, as id sees it.
func (c *Clients) Tenant(id azure.Identity) (graph.TenantClient, error) {
	cred, err := c.identities.Credential(id)
	if err != nil {
		return nil, err
	}
	return tenant{graph: c.graph, cred: cred}, nil
}

// Cluster is the managed cluster ref, as id sees it.
func (c *Clients) Cluster(id azure.Identity, ref aks.ClusterRef) (aks.ClusterClient, error) {
	cred, err := c.identities.Credential(id)
	if err != nil {
		return nil, err
	}
	return cluster{clusters: c.clusters, cred: cred, ref: ref}, nil
}

// Fleet is the managed clusters of tenantID's subscriptions, as id sees them.
func (c *Clients) Fleet(id azure.Identity, tenantID string) (aks.FleetClient, error) {
	cred, err := c.identities.Credential(id)
	if err != nil {
		return nil, err
	}
	return fleet{clusters: c.clusters, cred: cred, tenantID: tenantID}, nil
}

// SignIn reports whether Entra ID accepts id now, with a fresh sign-in.
func (c *Clients) SignIn(ctx context.Context, id azure.Identity) error {
	return c.identities.SignIn(ctx, id)
}

// errWrongObject: the object ID to write is not the application of the appId the client is bound to.
var errWrongObject = errors.New("the application object does not match the appId")

// errNoObjectID: Graph writes an application by its object ID, which only a read finds.
var errNoObjectID = errors.New("the application's object ID is not known: this tenant holds no application object for the appId")

type application struct {
	graph Graph
	cred  azcore.TokenCredential
	ref   graph.AppRef
}

func (a application) ReadCredentials(ctx context.Context) (graph.Snapshot, error) {
	return a.graph.ReadCredentials(ctx, a.cred, a.ref.AppID)
}

func (a application) Check(ctx context.Context, ask graph.Ask) (graph.Snapshot, error) {
	return a.graph.Check(ctx, a.cred, a.ref.AppID, ask)
}

func (a application) ReadOwnerEmails(ctx context.Context) ([]string, error) {
	if a.ref.ObjectID == "" {
		return nil, errNoObjectID
	}
	return a.graph.ReadOwnerEmails(ctx, a.cred, a.ref.ObjectID)
}

func (a application) VerifiedDomains(ctx context.Context) ([]string, error) {
	return a.graph.VerifiedDomains(ctx, a.cred)
}

func (a application) ReadSignIns(ctx context.Context) ([]graph.KeyUse, error) {
	return a.graph.ReadSignIns(ctx, a.cred, a.ref.AppID)
}

func (a application) ReadCredentialAudits(ctx context.Context, objectID string, since time.Time) ([]graph.Audit, error) {
	return a.graph.ReadCredentialAudits(ctx, a.cred, objectID, since)
}

func (a application) AddPassword(ctx context.Context, displayName string, end time.Time) (graph.NewSecret, error) {
	if err := a.writable(ctx); err != nil {
		return graph.NewSecret{}, fmt.Errorf("adding a secret to %s: %w", a.ref.AppID, err)
	}
	return a.graph.AddPassword(ctx, a.cred, a.ref.ObjectID, displayName, end)
}

func (a application) RemovePassword(ctx context.Context, keyID string) error {
	if err := a.writable(ctx); err != nil {
		return fmt.Errorf("removing secret %s of %s: %w", keyID, a.ref.AppID, err)
	}
	return a.graph.RemovePassword(ctx, a.cred, a.ref.ObjectID, keyID)
}

// writable checks, before a write, that the object ID is the application of the appId: what was
// allowed is the appId, the object ID comes from status, and a write to another application's
// object would reach what no identity allowed.
func (a application) writable(ctx context.Context) error {
	if a.ref.ObjectID == "" {
		return errNoObjectID
	}
	snap, err := a.graph.ReadCredentials(ctx, a.cred, a.ref.AppID)
	if err != nil {
		return err
	}
	if !strings.EqualFold(snap.ApplicationObjectID, a.ref.ObjectID) {
		return fmt.Errorf("%w: object %s is not the application of appId %s (that is %q), and is not written", errWrongObject, a.ref.ObjectID, a.ref.AppID, snap.ApplicationObjectID)
	}
	return nil
}

type tenant struct {
	graph Graph
	cred  azcore.TokenCredential
}

func (t tenant) Scan(ctx context.Context, filter string, visit func(graph.Object)) error {
	return t.graph.ScanTenant(ctx, t.cred, filter, visit)
}

func (t tenant) ReadSignIns(ctx context.Context, visit func(graph.KeyUse)) error {
	return t.graph.ReadTenantSignIns(ctx, t.cred, visit)
}

func (t tenant) ReadOwners(ctx context.Context, applicationIDs []string) []graph.OwnersRead {
	out := make([]graph.OwnersRead, 0, len(applicationIDs))
	for start := 0; start < len(applicationIDs); start += graph.MaxBatchOwners {
		ids := applicationIDs[start:min(start+graph.MaxBatchOwners, len(applicationIDs))]
		if err := ctx.Err(); err != nil {
			for range ids {
				out = append(out, graph.OwnersRead{Err: err})
			}
			continue
		}
		out = append(out, t.graph.ReadOwnersBatch(ctx, t.cred, ids)...)
	}
	return out
}

type cluster struct {
	clusters Clusters
	cred     azcore.TokenCredential
	ref      aks.ClusterRef
}

func (c cluster) Read(ctx context.Context) (aks.Cluster, error) {
	return c.clusters.ReadCluster(ctx, c.cred, c.ref)
}

func (c cluster) StartReset(ctx context.Context, sp aks.ServicePrincipal) (string, bool, error) {
	return c.clusters.StartReset(ctx, c.cred, c.ref, sp)
}

func (c cluster) PollReset(ctx context.Context, token string) (bool, error) {
	return c.clusters.PollReset(ctx, c.cred, c.ref, token)
}

type fleet struct {
	clusters Clusters
	cred     azcore.TokenCredential
	tenantID string
}

func (f fleet) Subscriptions(ctx context.Context) ([]aks.Subscription, error) {
	return f.clusters.ListSubscriptions(ctx, f.cred, f.tenantID)
}

func (f fleet) Clusters(ctx context.Context, subscriptionID string, resourceGroups []string) ([]aks.ListedCluster, error) {
	return f.clusters.ListClusters(ctx, f.cred, subscriptionID, resourceGroups)
}
