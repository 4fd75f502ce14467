package planner

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"k8s.io/utils/clock"

	"github.com/credwatch/credwatch/internal/graph"
)

// Client is all of Graph the operator calls: msgraph's client.
type Client interface {
	Reader
	ReadOwnerEmails(ctx context.Context, cred azcore.TokenCredential, applicationID string) ([]string, error)
	VerifiedDomains(ctx context.Context, cred azcore.TokenCredential) ([]string, error)
	ReadSignIns(ctx context.Context, cred azcore.TokenCredential, appID string) ([]graph.KeyUse, error)
	ReadTenantSignIns(ctx context.Context, cred azcore.TokenCredential, visit func(graph.KeyUse)) error
	ReadCredentialAudits(ctx context.Context, cred azcore.TokenCredential, objectID string, since time.Time) ([]graph.Audit, error)
	ReadOwnersBatch(ctx context.Context, cred azcore.TokenCredential, applicationIDs []string) []graph.OwnersRead
	AddPassword(ctx context.Context, cred azcore.TokenCredential, applicationID, displayName string, end time.Time) (graph.NewSecret, error)
	RemovePassword(ctx context.Context, cred azcore.TokenCredential, applicationID, keyID string) error
}

// Graph is a Client whose credential reads are planned, for every identity: the read path of the
// operator and of its tests.
type Graph struct {
	Client
	plan *Planner
}

// NewGraph plans the credential reads of c, sending each identity's batch window after its first
// read at the latest.
func NewGraph(c Client, clk clock.Clock, window time.Duration) *Graph {
	return &Graph{Client: c, plan: New(c, clk, window)}
}

// ReadCredentials reads appID's credentials in the next batch cred sends, and waits for them.
func (g *Graph) ReadCredentials(ctx context.Context, cred azcore.TokenCredential, appID string) (graph.Snapshot, error) {
	return g.plan.ReadCredentials(ctx, cred, appID)
}

// Check is Planner.Check.
func (g *Graph) Check(ctx context.Context, cred azcore.TokenCredential, appID string, ask graph.Ask) (graph.Snapshot, error) {
	return g.plan.Check(ctx, cred, appID, ask)
}

// Withdraw is Planner.Withdraw.
func (g *Graph) Withdraw(asker string) {
	g.plan.Withdraw(asker)
}

// ScanTenant lists the tenant. A listing of all of it also answers the checks of the same
// identity waiting for their turn, and counts the tenant for the choice between lists and a
// listing.
func (g *Graph) ScanTenant(ctx context.Context, cred azcore.TokenCredential, filter string, visit func(graph.Object)) error {
	if filter != "" {
		return g.Client.ScanTenant(ctx, cred, filter, visit)
	}
	return g.plan.Scan(ctx, cred, visit)
}

// AddPassword adds a secret, and drops the answers that predate it.
func (g *Graph) AddPassword(ctx context.Context, cred azcore.TokenCredential, applicationID, displayName string, end time.Time) (graph.NewSecret, error) {
	defer g.plan.Forget(applicationID)
	return g.Client.AddPassword(ctx, cred, applicationID, displayName, end)
}

// RemovePassword removes a secret, and drops the answers that predate it.
func (g *Graph) RemovePassword(ctx context.Context, cred azcore.TokenCredential, applicationID, keyID string) error {
	defer g.plan.Forget(applicationID)
	return g.Client.RemovePassword(ctx, cred, applicationID, keyID)
}

// UseDelta is Planner.UseDelta.
func (g *Graph) UseDelta(o DeltaOptions) error {
	return g.plan.UseDelta(o)
}
