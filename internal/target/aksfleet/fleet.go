package aksfleet

import (
	"context"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/target"
)

// DefaultMaxClusters bounds the clusters one fleet holds: each costs about a kilobyte of memory
// and two series, and a tenant can hold more clusters than one watch should carry.
const DefaultMaxClusters = 10000

// Fleet does what an aksFleet watch asks, one reconcile at a time. What its checks found is kept
// in Store between reconciles.
type Fleet struct {
	Azure   Azure
	Watches Watches
	Events  target.Events
	Store   *Store
	// MaxClusters bounds the clusters one fleet holds; zero means DefaultMaxClusters.
	MaxClusters int
	// WatchLimit bounds the watches one fleet creates; zero means MaxWatches.
	WatchLimit int
}

// Azure is Resource Manager and Graph, as a watch's identity sees them.
type Azure interface {
	// Fleet is the managed clusters of tenantID's subscriptions.
	Fleet(id azure.Identity, tenantID string) (aks.FleetClient, error)
	// Application is app, and its service principal, in id's tenant.
	Application(id azure.Identity, app graph.AppRef) (graph.AppClient, error)
}

// Watches is the API server, for the CredentialWatches of a namespace.
type Watches interface {
	target.Lister
	// Get reads the watch namespace/name into w.
	Get(ctx context.Context, namespace, name string, w *v1alpha1.CredentialWatch) error
	Create(ctx context.Context, w *v1alpha1.CredentialWatch) error
	Update(ctx context.Context, w *v1alpha1.CredentialWatch) error
	// Delete deletes w if it is still the object of w's UID.
	Delete(ctx context.Context, w *v1alpha1.CredentialWatch) error
}

// Now is a fleet as one reconcile evaluated it, for the steps after.
type Now struct {
	// Found is all the last check found; Shown, what the identity lets the fleet show.
	Found, Shown Found
	// Views are the shown clusters on a service principal, most in need of attention first.
	Views []ClusterView
}
