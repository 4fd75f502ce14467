package aksfleet

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// MaxWatches bounds the watches one fleet creates: each is an object the API server stores
// and a watch the operator checks, and a namespace's author should not get thousands by one line.
const MaxWatches = 1000

// fleetWatchHash is how many hex digits of a cluster's hashed resource ID end its watch's name:
// 40 bits, so that a fleet of 1,000 clusters meets a collision about once in two million fleets,
// and one that does reports it rather than sharing a watch.
const fleetWatchHash = 10

// WatchName names the watch a fleet creates for the cluster whose resource ID is clusterID.
// A cluster's name may hold characters an object's may not ('_', upper case), and names repeat
// across resource groups: the resource ID, hashed, does neither.
func WatchName(fleet, clusterID string) string {
	return fleet + "-" + fleetHash(clusterID)
}

func fleetHash(clusterID string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(clusterID)))
	return hex.EncodeToString(sum[:])[:fleetWatchHash]
}

// WatchSpec is the spec of the watch fleet creates for cluster c: an aksCluster target in
// the fleet's tenant, the fleet's identity and interval, and its template; a rotation writes the
// Secret the template's prefix names, ended by the cluster's hash.
func WatchSpec(fleet v1alpha1.CredentialWatchSpec, c Cluster) v1alpha1.CredentialWatchSpec {
	f := fleet.Target.AKSFleet
	spec := v1alpha1.CredentialWatchSpec{
		Target: v1alpha1.Target{AKSCluster: &v1alpha1.AKSClusterTarget{
			TenantID: f.TenantID, SubscriptionID: c.SubscriptionID, ResourceGroup: c.ResourceGroup, Name: ClusterName(c.ID)}},
		IdentityRef:   fleet.IdentityRef.DeepCopy(),
		CheckInterval: fleet.CheckInterval,
		Thresholds:    fleet.Thresholds,
	}
	// Without alerts of its own a watch would tell the operator's default channels: a fleet's
	// author does not get a thousand watches' messages into an admin's channel by leaving them out.
	off := false
	spec.Alerts = &v1alpha1.Alerts{UseDefaultChannels: &off}
	t := f.CreateWatches
	if t == nil {
		return spec
	}
	if t.Thresholds != nil {
		spec.Thresholds = *t.Thresholds
	}
	if a := t.Alerts; a != nil {
		spec.Alerts = a.DeepCopy()
		if a.Slack == nil && a.Email == nil && a.Teams == nil && a.Webhook == nil {
			spec.Alerts.UseDefaultChannels = &off
		}
	}
	if t.Rotation != nil {
		spec.Rotation = t.Rotation.DeepCopy()
		spec.Rotation.SecretRef.Name += "-" + fleetHash(c.ID)
		// Admission refuses sinks here; a fleet admitted before it did must not have every
		// cluster's secret written to one place.
		spec.Rotation.Publish = nil
	}
	return spec
}

// ClusterName is the last segment of a managed cluster's resource ID.
func ClusterName(id string) string {
	return id[strings.LastIndex(id, "/")+1:]
}

// WatchFate is what becomes of a watch a fleet created, after a check.
type WatchFate int

const (
	// KeepWatch: its cluster is in the fleet on a service principal, or nothing proves otherwise.
	KeepWatch WatchFate = iota
	// DeleteGone: its subscription was listed whole, and the cluster was not in it.
	DeleteGone
	// DeleteManagedIdentity: its subscription was listed whole, and the cluster signs in with a
	// managed identity.
	DeleteManagedIdentity
)

// WatchFateOf decides what becomes of the watch of the cluster clusterID, from the clusters
// a check found and the subscriptions it listed whole. Deleting a watch drops its ledger and any
// rotation under way, so only a complete listing of the cluster's subscription may: a refusal, a
// timeout or a page that failed proves nothing about the clusters it did not return.
func WatchFateOf(clusterID string, found []Cluster, complete map[string]bool) WatchFate {
	whole := ListedWhole(complete, clusterID)
	for _, c := range found {
		if strings.EqualFold(c.ID, clusterID) {
			if c.AppID == "" && whole {
				return DeleteManagedIdentity
			}
			return KeepWatch
		}
	}
	if whole {
		return DeleteGone
	}
	return KeepWatch
}

// ListedWhole reports whether a check listed whole the subscription, or the resource group, of
// the resource clusterID: an identity scoped to some resource groups lists only those, and the
// others' clusters are not gone for being missing.
func ListedWhole(complete map[string]bool, clusterID string) bool {
	sub, rg := segment(clusterID, "subscriptions"), segment(clusterID, "resourcegroups")
	return sub != "" && (complete[sub] || rg != "" && complete[sub+"/"+rg])
}

// segment is what follows name in a resource ID, in lower case; empty if it has no such part.
func segment(id, name string) string {
	parts := strings.Split(strings.ToLower(id), "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == name {
			return parts[i+1]
		}
	}
	return ""
}
