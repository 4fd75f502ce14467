package aksfleet

import (
	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/target"
)

// Found is what one check of a fleet found.
type Found struct {
	// Subscriptions is how many subscriptions were searched.
	Subscriptions int
	Clusters      []Cluster
	// Unread are the subscriptions that could not be listed: their clusters are missing.
	Unread []v1alpha1.UnreadSubscription
	// Uncounted is how many clusters were found beyond the most a fleet holds.
	Uncounted int
	// Complete are the subscriptions listed whole, and "subscription/resource group" for those
	// listed a resource group at a time, in lower case: only there does a cluster's absence prove
	// it gone. None when clusters were left uncounted.
	Complete map[string]bool
	// UnreadApps is how many of the clusters' service principals could not be read, and
	// UnreadApp names the first by appId, with why: "<appId>: <error>".
	UnreadApps int
	UnreadApp  string
	// Read is what the read planner answered for each service principal, by appId: the next
	// check asks with it, and may be answered from Graph's changes since.
	Read map[string]graph.Snapshot
}

// Store keeps what each fleet's last check found, and what its identity lets it show.
type Store = target.Store[Found]

// NewStore returns an empty Store.
func NewStore() *Store { return target.NewStore[Found]() }
