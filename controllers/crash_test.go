package controllers

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azure/clients"
	"github.com/credwatch/credwatch/internal/graph"
)

// errDied is what every write answers once the simulated process has died.
var errDied = errors.New("the operator process died here")

// mortal is an operator process that dies at a chosen moment: after budget more writes, to the
// API server or to Azure. Once dead, it reaches nothing any more, so what is stored, in the API
// server and in Azure, is exactly what was written before.
type mortal struct {
	dead *atomic.Bool
	// budget, when set, is how many more writes get through before the process dies.
	budget *atomic.Int32
}

// dies spends one write and reports whether the process is dead before it.
func (m mortal) dies() bool {
	if m.dead.Load() {
		return true
	}
	if m.budget != nil && m.budget.Add(-1) < 0 {
		m.dead.Store(true)
	}
	return m.dead.Load()
}

// diesAfter is for writes to Azure, which land before the process can die: it reports whether
// the process was dead already, and spends the write, so the process may die right after it.
func (m mortal) diesAfter() (deadBefore bool) {
	if m.dead.Load() {
		return true
	}
	m.dies()
	return false
}

// crashingClient is the API server as a mortal process sees it.
type crashingClient struct {
	client.Client
	mortal
}

func (c crashingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if c.dies() {
		return errDied
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c crashingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if c.dies() {
		return errDied
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c crashingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if c.dies() {
		return errDied
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c crashingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if c.dies() {
		return errDied
	}
	return c.Client.Delete(ctx, obj, opts...)
}

func (c crashingClient) Status() client.SubResourceWriter {
	return crashingStatus{c.Client.Status(), c.mortal}
}

type crashingStatus struct {
	client.SubResourceWriter
	mortal
}

func (s crashingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if s.dies() {
		return errDied
	}
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func (s crashingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if s.dies() {
		return errDied
	}
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// dyingGraph is Graph as a mortal process sees it: a write lands, and the process may die right
// after, before it can act on the answer.
type dyingGraph struct {
	clients.Graph
	mortal
}

func (g dyingGraph) ReadCredentials(ctx context.Context, cred azcore.TokenCredential, appID string) (graph.Snapshot, error) {
	if g.dead.Load() {
		return graph.Snapshot{}, errDied
	}
	return g.Graph.ReadCredentials(ctx, cred, appID)
}

func (g dyingGraph) Check(ctx context.Context, cred azcore.TokenCredential, appID string, ask graph.Ask) (graph.Snapshot, error) {
	if g.dead.Load() {
		return graph.Snapshot{}, errDied
	}
	return g.Graph.Check(ctx, cred, appID, ask)
}

func (g dyingGraph) AddPassword(ctx context.Context, cred azcore.TokenCredential, applicationID, displayName string, end time.Time) (graph.NewSecret, error) {
	if g.diesAfter() {
		return graph.NewSecret{}, errDied
	}
	s, err := g.Graph.AddPassword(ctx, cred, applicationID, displayName, end)
	if g.dead.Load() {
		return graph.NewSecret{}, errDied
	}
	return s, err
}

func (g dyingGraph) RemovePassword(ctx context.Context, cred azcore.TokenCredential, applicationID, keyID string) error {
	if g.diesAfter() {
		return errDied
	}
	err := g.Graph.RemovePassword(ctx, cred, applicationID, keyID)
	if g.dead.Load() {
		return errDied
	}
	return err
}

// dyingClusters is Resource Manager as a mortal process sees it.
type dyingClusters struct {
	clients.Clusters
	mortal
}

func (c dyingClusters) StartReset(ctx context.Context, cred azcore.TokenCredential, ref aks.ClusterRef, sp aks.ServicePrincipal) (string, bool, error) {
	if c.diesAfter() {
		return "", false, errDied
	}
	token, done, err := c.Clusters.StartReset(ctx, cred, ref, sp)
	if c.dead.Load() {
		return "", false, errDied
	}
	return token, done, err
}
