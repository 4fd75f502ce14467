// Package azurefake holds func-field fakes of the Azure clients, for unit tests of what uses
// them: each method calls its field, or, when the field is nil, fails the way a client that was
// never expected to be called should.
package azurefake

import (
	"context"
	"errors"
	"time"

	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/keyvault"
)

// ErrUnexpected is what a method whose field is nil returns.
var ErrUnexpected = errors.New("azurefake: unexpected call")

// Azure hands out clients bound to an identity and a target, as internal/azure/clients does.
type Azure struct {
	ApplicationFunc func(id azure.Identity, app graph.AppRef) (graph.AppClient, error)
	TenantFunc      func(id azure.Identity) (graph.TenantClient, error)
	ClusterFunc     func(id azure.Identity, c aks.ClusterRef) (aks.ClusterClient, error)
	FleetFunc       func(id azure.Identity, tenantID string) (aks.FleetClient, error)
	// KeyVaultsFunc gives the Key Vaults an identity writes to; nil gives none.
	KeyVaultsFunc func(id azure.Identity) (*keyvault.Vaults, error)
	SignInFunc    func(ctx context.Context, id azure.Identity) error
	// WithdrawFunc sees the watches withdrawn; nil ignores them, as there is nothing to forget.
	WithdrawFunc func(asker string)
}

// Application calls ApplicationFunc.
func (a *Azure) Application(id azure.Identity, app graph.AppRef) (graph.AppClient, error) {
	if a.ApplicationFunc == nil {
		return nil, ErrUnexpected
	}
	return a.ApplicationFunc(id, app)
}

// Tenant calls TenantFunc.
func (a *Azure) Tenant(id azure.Identity) (graph.TenantClient, error) {
	if a.TenantFunc == nil {
		return nil, ErrUnexpected
	}
	return a.TenantFunc(id)
}

// Cluster calls ClusterFunc.
func (a *Azure) Cluster(id azure.Identity, c aks.ClusterRef) (aks.ClusterClient, error) {
	if a.ClusterFunc == nil {
		return nil, ErrUnexpected
	}
	return a.ClusterFunc(id, c)
}

// Fleet calls FleetFunc.
func (a *Azure) Fleet(id azure.Identity, tenantID string) (aks.FleetClient, error) {
	if a.FleetFunc == nil {
		return nil, ErrUnexpected
	}
	return a.FleetFunc(id, tenantID)
}

// KeyVaults calls KeyVaultsFunc, or gives none.
func (a *Azure) KeyVaults(id azure.Identity) (*keyvault.Vaults, error) {
	if a.KeyVaultsFunc == nil {
		return nil, nil
	}
	return a.KeyVaultsFunc(id)
}

// SignIn calls SignInFunc.
func (a *Azure) SignIn(ctx context.Context, id azure.Identity) error {
	if a.SignInFunc == nil {
		return ErrUnexpected
	}
	return a.SignInFunc(ctx, id)
}

// Withdraw calls WithdrawFunc, if set.
func (a *Azure) Withdraw(asker string) {
	if a.WithdrawFunc != nil {
		a.WithdrawFunc(asker)
	}
}

// App is one application.
type App struct {
	ReadCredentialsFunc func(ctx context.Context) (graph.Snapshot, error)
	// CheckFunc answers checks; without it a check is answered at once by ReadCredentialsFunc.
	CheckFunc           func(ctx context.Context, ask graph.Ask) (graph.Snapshot, error)
	ReadOwnerEmailsFunc func(ctx context.Context) ([]string, error)
	VerifiedDomainsFunc func(ctx context.Context) ([]string, error)
	ReadSignInsFunc     func(ctx context.Context) ([]graph.KeyUse, error)
	ReadAuditsFunc      func(ctx context.Context, objectID string, since time.Time) ([]graph.Audit, error)
	AddPasswordFunc     func(ctx context.Context, displayName string, end time.Time) (graph.NewSecret, error)
	RemovePasswordFunc  func(ctx context.Context, keyID string) error
}

var _ graph.AppClient = &App{}

// ReadCredentials calls ReadCredentialsFunc.
func (a *App) ReadCredentials(ctx context.Context) (graph.Snapshot, error) {
	if a.ReadCredentialsFunc == nil {
		return graph.Snapshot{}, ErrUnexpected
	}
	return a.ReadCredentialsFunc(ctx)
}

// Check calls CheckFunc, or ReadCredentialsFunc when it is nil.
func (a *App) Check(ctx context.Context, ask graph.Ask) (graph.Snapshot, error) {
	if a.CheckFunc == nil {
		return a.ReadCredentials(ctx)
	}
	return a.CheckFunc(ctx, ask)
}

// VerifiedDomains calls VerifiedDomainsFunc.
func (a *App) VerifiedDomains(ctx context.Context) ([]string, error) {
	if a.VerifiedDomainsFunc == nil {
		return nil, ErrUnexpected
	}
	return a.VerifiedDomainsFunc(ctx)
}

// ReadSignIns calls ReadSignInsFunc.
func (a *App) ReadSignIns(ctx context.Context) ([]graph.KeyUse, error) {
	if a.ReadSignInsFunc == nil {
		return nil, ErrUnexpected
	}
	return a.ReadSignInsFunc(ctx)
}

// ReadCredentialAudits calls ReadAuditsFunc.
func (a *App) ReadCredentialAudits(ctx context.Context, objectID string, since time.Time) ([]graph.Audit, error) {
	if a.ReadAuditsFunc == nil {
		return nil, ErrUnexpected
	}
	return a.ReadAuditsFunc(ctx, objectID, since)
}

// ReadOwnerEmails calls ReadOwnerEmailsFunc.
func (a *App) ReadOwnerEmails(ctx context.Context) ([]string, error) {
	if a.ReadOwnerEmailsFunc == nil {
		return nil, ErrUnexpected
	}
	return a.ReadOwnerEmailsFunc(ctx)
}

// AddPassword calls AddPasswordFunc.
func (a *App) AddPassword(ctx context.Context, displayName string, end time.Time) (graph.NewSecret, error) {
	if a.AddPasswordFunc == nil {
		return graph.NewSecret{}, ErrUnexpected
	}
	return a.AddPasswordFunc(ctx, displayName, end)
}

// RemovePassword calls RemovePasswordFunc.
func (a *App) RemovePassword(ctx context.Context, keyID string) error {
	if a.RemovePasswordFunc == nil {
		return ErrUnexpected
	}
	return a.RemovePasswordFunc(ctx, keyID)
}

// Tenant is one tenant's applications.
type Tenant struct {
	ScanFunc        func(ctx context.Context, filter string, visit func(graph.Object)) error
	ReadOwnersFunc  func(ctx context.Context, applicationIDs []string) []graph.OwnersRead
	ReadSignInsFunc func(ctx context.Context, visit func(graph.KeyUse)) error
}

// ReadSignIns calls ReadSignInsFunc.
func (t *Tenant) ReadSignIns(ctx context.Context, visit func(graph.KeyUse)) error {
	if t.ReadSignInsFunc == nil {
		return ErrUnexpected
	}
	return t.ReadSignInsFunc(ctx, visit)
}

var _ graph.TenantClient = &Tenant{}

// Scan calls ScanFunc.
func (t *Tenant) Scan(ctx context.Context, filter string, visit func(graph.Object)) error {
	if t.ScanFunc == nil {
		return ErrUnexpected
	}
	return t.ScanFunc(ctx, filter, visit)
}

// ReadOwners calls ReadOwnersFunc; without one, every read fails with ErrUnexpected.
func (t *Tenant) ReadOwners(ctx context.Context, applicationIDs []string) []graph.OwnersRead {
	if t.ReadOwnersFunc == nil {
		out := make([]graph.OwnersRead, len(applicationIDs))
		for i := range out {
			out[i].Err = ErrUnexpected
		}
		return out
	}
	return t.ReadOwnersFunc(ctx, applicationIDs)
}

// Cluster is one managed cluster.
type Cluster struct {
	ReadFunc       func(ctx context.Context) (aks.Cluster, error)
	StartResetFunc func(ctx context.Context, sp aks.ServicePrincipal) (string, bool, error)
	PollResetFunc  func(ctx context.Context, token string) (bool, error)
}

var _ aks.ClusterClient = &Cluster{}

// Read calls ReadFunc.
func (c *Cluster) Read(ctx context.Context) (aks.Cluster, error) {
	if c.ReadFunc == nil {
		return aks.Cluster{}, ErrUnexpected
	}
	return c.ReadFunc(ctx)
}

// StartReset calls StartResetFunc.
func (c *Cluster) StartReset(ctx context.Context, sp aks.ServicePrincipal) (string, bool, error) {
	if c.StartResetFunc == nil {
		return "", false, ErrUnexpected
	}
	return c.StartResetFunc(ctx, sp)
}

// PollReset calls PollResetFunc.
func (c *Cluster) PollReset(ctx context.Context, token string) (bool, error) {
	if c.PollResetFunc == nil {
		return false, ErrUnexpected
	}
	return c.PollResetFunc(ctx, token)
}

// Fleet is the clusters of one tenant's subscriptions.
type Fleet struct {
	SubscriptionsFunc func(ctx context.Context) ([]aks.Subscription, error)
	ClustersFunc      func(ctx context.Context, subscriptionID string, resourceGroups []string) ([]aks.ListedCluster, error)
}

var _ aks.FleetClient = &Fleet{}

// Subscriptions calls SubscriptionsFunc.
func (f *Fleet) Subscriptions(ctx context.Context) ([]aks.Subscription, error) {
	if f.SubscriptionsFunc == nil {
		return nil, ErrUnexpected
	}
	return f.SubscriptionsFunc(ctx)
}

// Clusters calls ClustersFunc.
func (f *Fleet) Clusters(ctx context.Context, subscriptionID string, resourceGroups []string) ([]aks.ListedCluster, error) {
	if f.ClustersFunc == nil {
		return nil, ErrUnexpected
	}
	return f.ClustersFunc(ctx, subscriptionID, resourceGroups)
}
