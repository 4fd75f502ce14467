package clients

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"

	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/secret"
)

// identities gives each client its own fake credential (the operator's under ""), and remembers
// who asked.
type identities struct {
	creds map[string]azcore.TokenCredential
	asked []azure.Identity
	err   error
}

func (i *identities) Credential(id azure.Identity) (azcore.TokenCredential, error) {
	i.asked = append(i.asked, id)
	return i.creds[id.ClientID], i.err
}

func (i *identities) SignIn(_ context.Context, id azure.Identity) error {
	i.asked = append(i.asked, id)
	return i.err
}

// calls records what the bound clients passed on, and the credential of each call.
type calls struct {
	creds []azcore.TokenCredential
	args  []string
}

type fakeGraph struct{ *calls }

func (g fakeGraph) note(cred azcore.TokenCredential, args ...string) {
	g.creds, g.args = append(g.creds, cred), append(g.args, args...)
}

func (g fakeGraph) ReadCredentials(_ context.Context, cred azcore.TokenCredential, appID string) (graph.Snapshot, error) {
	g.note(cred, "read", appID)
	return graph.Snapshot{AppID: appID, ApplicationObjectID: strings.Replace(appID, "app-", "obj-", 1)}, nil
}

func (g fakeGraph) Check(_ context.Context, cred azcore.TokenCredential, appID string, ask graph.Ask) (graph.Snapshot, error) {
	g.note(cred, "check", appID, ask.Asker)
	return graph.Snapshot{}, graph.ErrPending
}

func (g fakeGraph) Withdraw(asker string) {
	g.note(nil, "withdraw", asker)
}

func (g fakeGraph) ScanTenant(_ context.Context, cred azcore.TokenCredential, filter string, _ func(graph.Object)) error {
	g.note(cred, "scan", filter)
	return nil
}

func (g fakeGraph) ReadOwnerEmails(_ context.Context, cred azcore.TokenCredential, applicationID string) ([]string, error) {
	g.note(cred, "owners", applicationID)
	return nil, nil
}

func (g fakeGraph) VerifiedDomains(_ context.Context, cred azcore.TokenCredential) ([]string, error) {
	g.note(cred, "domains")
	return nil, nil
}

func (g fakeGraph) ReadSignIns(_ context.Context, cred azcore.TokenCredential, appID string) ([]graph.KeyUse, error) {
	g.note(cred, "sign-ins", appID)
	return nil, nil
}

func (g fakeGraph) ReadCredentialAudits(_ context.Context, cred azcore.TokenCredential, objectID string, _ time.Time) ([]graph.Audit, error) {
	g.note(cred, "audits", objectID)
	return nil, nil
}

func (g fakeGraph) ReadTenantSignIns(_ context.Context, cred azcore.TokenCredential, _ func(graph.KeyUse)) error {
	g.note(cred, "tenant sign-ins")
	return nil
}

func (g fakeGraph) ReadOwnersBatch(_ context.Context, cred azcore.TokenCredential, applicationIDs []string) []graph.OwnersRead {
	g.note(cred, append([]string{"owners of"}, applicationIDs...)...)
	return make([]graph.OwnersRead, len(applicationIDs))
}

func (g fakeGraph) AddPassword(_ context.Context, cred azcore.TokenCredential, applicationID, displayName string, _ time.Time) (graph.NewSecret, error) {
	g.note(cred, "add", applicationID, displayName)
	return graph.NewSecret{}, nil
}

func (g fakeGraph) RemovePassword(_ context.Context, cred azcore.TokenCredential, applicationID, keyID string) error {
	g.note(cred, "remove", applicationID, keyID)
	return nil
}

type fakeClusters struct{ *calls }

func (c fakeClusters) ReadCluster(_ context.Context, cred azcore.TokenCredential, ref aks.ClusterRef) (aks.Cluster, error) {
	c.creds, c.args = append(c.creds, cred), append(c.args, "read", ref.SubscriptionID, ref.ResourceGroup, ref.Name)
	return aks.Cluster{}, nil
}

func (c fakeClusters) StartReset(_ context.Context, cred azcore.TokenCredential, ref aks.ClusterRef, sp aks.ServicePrincipal) (string, bool, error) {
	c.creds, c.args = append(c.creds, cred), append(c.args, "reset", ref.Name, sp.ClientID)
	return "", true, nil
}

func (c fakeClusters) PollReset(_ context.Context, cred azcore.TokenCredential, ref aks.ClusterRef, token string) (bool, error) {
	c.creds, c.args = append(c.creds, cred), append(c.args, "poll", ref.Name, token)
	return true, nil
}

func (c fakeClusters) ListSubscriptions(_ context.Context, cred azcore.TokenCredential, tenantID string) ([]aks.Subscription, error) {
	c.creds, c.args = append(c.creds, cred), append(c.args, "subscriptions", tenantID)
	return nil, nil
}

func (c fakeClusters) ListClusters(_ context.Context, cred azcore.TokenCredential, subscriptionID string, resourceGroups []string) ([]aks.ListedCluster, error) {
	c.creds, c.args = append(c.creds, cred), append(append(c.args, "list", subscriptionID), resourceGroups...)
	return nil, nil
}

// Each client passes on the target it was bound to, with the credential of the identity it was
// bound to, and nothing a caller could swap.
func TestClientsAreBoundToTheirIdentityAndTarget(t *testing.T) {
	reader, operator := &azfake.TokenCredential{}, &azfake.TokenCredential{}
	ids := &identities{creds: map[string]azcore.TokenCredential{"reader": reader, "": operator}}
	g, cl := &calls{}, &calls{}
	c := New(ids, fakeGraph{g}, fakeClusters{cl})
	ctx := context.Background()
	watchID := azure.ClientSecret("t1", "reader", "s")

	app, err := c.Application(watchID, graph.AppRef{AppID: "app-1", ObjectID: "obj-1"})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = app.ReadCredentials(ctx)
	_, _ = app.Check(ctx, graph.Ask{Asker: "team-a/payments", Wake: func() {}})
	_, _ = app.ReadOwnerEmails(ctx)
	_, _ = app.VerifiedDomains(ctx)
	_, _ = app.ReadSignIns(ctx)
	_, _ = app.ReadCredentialAudits(ctx, "sp-obj-1", time.Time{})
	_, _ = app.AddPassword(ctx, "credwatch-x", time.Time{})
	_ = app.RemovePassword(ctx, "key-1")
	tenant, _ := c.Tenant(azure.Operator("t1"))
	_ = tenant.Scan(ctx, "tags/any(t:t eq 'aks')", func(graph.Object) {})
	_ = tenant.ReadSignIns(ctx, func(graph.KeyUse) {})
	var apps []string
	for i := range 21 {
		apps = append(apps, fmt.Sprintf("obj-%d", i))
	}
	if got := tenant.ReadOwners(ctx, apps); len(got) != 21 {
		t.Errorf("%d owner reads for 21 applications", len(got))
	}
	want := []string{"read", "app-1", "check", "app-1", "team-a/payments", "owners", "obj-1", "domains", "sign-ins", "app-1", "audits", "sp-obj-1", "read", "app-1", "add", "obj-1", "credwatch-x", "read", "app-1", "remove", "obj-1", "key-1",
		"scan", "tags/any(t:t eq 'aks')", "tenant sign-ins", "owners of"}
	want = append(append(append(want, apps[:20]...), "owners of"), apps[20]) // in batches of 20
	if !slices.Equal(g.args, want) {
		t.Errorf("Graph was called with %q, want %q: reads by appId, writes by object ID once it is read to be the appId's", g.args, want)
	}
	if want := []azcore.TokenCredential{reader, reader, reader, reader, reader, reader, reader, reader, reader, reader, operator, operator, operator, operator}; !slices.Equal(g.creds, want) {
		t.Errorf("Graph was called with the credentials %v, want the reader's ten times, then the operator's four", g.creds)
	}

	ref := aks.ClusterRef{SubscriptionID: "sub", ResourceGroup: "rg", Name: "prod"}
	cluster, _ := c.Cluster(watchID, ref)
	_, _ = cluster.Read(ctx)
	_, _, _ = cluster.StartReset(ctx, aks.ServicePrincipal{ClientID: "app-1", Secret: secret.New("new")})
	_, _ = cluster.PollReset(ctx, "token-1")
	fleet, _ := c.Fleet(watchID, "t1")
	_, _ = fleet.Subscriptions(ctx)
	_, _ = fleet.Clusters(ctx, "sub", []string{"rg"})
	if want := []string{"read", "sub", "rg", "prod", "reset", "prod", "app-1", "poll", "prod", "token-1", "subscriptions", "t1", "list", "sub", "rg"}; !slices.Equal(cl.args, want) {
		t.Errorf("Resource Manager was called with %q, want %q", cl.args, want)
	}
	if want := []azcore.TokenCredential{reader, reader, reader, reader, reader}; !slices.Equal(cl.creds, want) {
		t.Errorf("Resource Manager was called with the credentials %v, want the reader's", cl.creds)
	}
	var asked []string
	for _, id := range ids.asked {
		asked = append(asked, id.String()+" with "+id.Secret.Reveal())
	}
	if want := []string{"client reader in tenant t1 with s", "the operator's identity in tenant t1 with ", "client reader in tenant t1 with s", "client reader in tenant t1 with s"}; !slices.Equal(asked, want) {
		t.Errorf("credentials were made for %q, want %q", asked, want)
	}
}

// Graph writes an application by object ID: a client bound to an appId alone refuses to write
// rather than write to an empty address.
func TestWritesNeedTheObjectID(t *testing.T) {
	g := &calls{}
	app, _ := New(&identities{}, fakeGraph{g}, nil).Application(azure.Operator("t1"), graph.AppRef{AppID: "app-1"})
	ctx := context.Background()
	if _, err := app.AddPassword(ctx, "n", time.Time{}); !errors.Is(err, errNoObjectID) {
		t.Errorf("AddPassword = %v, want errNoObjectID", err)
	}
	if err := app.RemovePassword(ctx, "k"); !errors.Is(err, errNoObjectID) {
		t.Errorf("RemovePassword = %v, want errNoObjectID", err)
	}
	if _, err := app.ReadOwnerEmails(ctx); !errors.Is(err, errNoObjectID) {
		t.Errorf("ReadOwnerEmails = %v, want errNoObjectID", err)
	}
	if len(g.args) != 0 {
		t.Errorf("Graph was called: %q", g.args)
	}
}

// The object ID a write goes to comes from status; one that is not the application of the appId
// the client is bound to is not written.
func TestWritesGoOnlyToTheAppIDsApplication(t *testing.T) {
	g := &calls{}
	app, _ := New(&identities{}, fakeGraph{g}, nil).Application(azure.Operator("t1"), graph.AppRef{AppID: "app-1", ObjectID: "obj-2"})
	ctx := context.Background()
	if _, err := app.AddPassword(ctx, "n", time.Time{}); !errors.Is(err, errWrongObject) {
		t.Errorf("AddPassword = %v, want errWrongObject", err)
	}
	if err := app.RemovePassword(ctx, "k"); !errors.Is(err, errWrongObject) {
		t.Errorf("RemovePassword = %v, want errWrongObject", err)
	}
	if want := []string{"read", "app-1", "read", "app-1"}; !slices.Equal(g.args, want) {
		t.Errorf("Graph was called with %q, want reads only", g.args)
	}
}

// An identity that cannot be made into a credential gives no client.
func TestNoClientWithoutACredential(t *testing.T) {
	broken := errors.New("DefaultAzureCredential: no credential")
	c := New(&identities{err: broken}, nil, nil)
	if _, err := c.Application(azure.Operator("t1"), graph.AppRef{AppID: "a"}); !errors.Is(err, broken) {
		t.Errorf("Application = %v, want %v", err, broken)
	}
	if _, err := c.Tenant(azure.Operator("t1")); !errors.Is(err, broken) {
		t.Errorf("Tenant = %v, want %v", err, broken)
	}
	if _, err := c.Cluster(azure.Operator("t1"), aks.ClusterRef{}); !errors.Is(err, broken) {
		t.Errorf("Cluster = %v, want %v", err, broken)
	}
}
