package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// AKSFleetTarget finds the AKS clusters of a tenant's subscriptions, and watches the secrets of
// those that sign in with a service principal.
type AKSFleetTarget struct {
	// TenantID is the Entra ID tenant of the subscriptions and of the clusters' service
	// principals, a GUID.
	// +kubebuilder:validation:MaxLength=36
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$')",message="tenantID must be the directory's GUID, such as 72f988bf-86f1-41af-91ab-2d7cd011db47, not a domain name"
	// +required
	TenantID string `json:"tenantID"`

	// Subscriptions are the subscriptions searched. Empty searches every subscription of the
	// tenant that the identity can see (Resource Manager's list of subscriptions) and that its
	// allow.subscriptions covers.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=36
	// +kubebuilder:validation:XValidation:rule="self.all(s, s.matches('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'))",message="aksFleet.subscriptions must be subscription GUIDs, not names; leave it out to search every subscription the identity may read"
	// +listType=set
	// +optional
	Subscriptions []string `json:"subscriptions,omitempty"`

	// ResourceGroups limits the search to resource groups of these names, in every subscription
	// searched (compared without regard to case, as Azure does). Empty searches whole
	// subscriptions.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=90
	// +kubebuilder:validation:XValidation:rule="self.all(g, g.matches('^[-a-zA-Z0-9_.()]+$') && !g.endsWith('.'))",message="aksFleet.resourceGroups must be resource group names: letters, digits, '-', '_', '.', '(' and ')', not ending in '.'"
	// +listType=set
	// +optional
	ResourceGroups []string `json:"resourceGroups,omitempty"`

	// Tags a cluster must carry to be watched, each with the value given, or with any value
	// when the value is empty.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	Tags map[string]string `json:"tags,omitempty"`

	// CreateWatches, when set, creates an aksCluster CredentialWatch for each cluster of the
	// fleet that signs in with a service principal, in this namespace: named
	// <this watch's name>-<10 hex digits of a hash of the cluster's resource ID>, owned by this
	// watch, with its identityRef and checkInterval and this template. Each is kept to the
	// template, and deleted when its cluster is gone or on a managed identity, but only after a
	// complete listing of the cluster's subscription: a refused or failed listing deletes
	// nothing. At most 1,000 watches a fleet.
	// +optional
	CreateWatches *FleetWatchTemplate `json:"createWatches,omitempty"`
}

// FleetWatchTemplate is what each watch a fleet creates carries besides its cluster, and the
// fleet's identityRef and checkInterval. It has no imagePulls: those diagnose the cluster the
// operator runs in, which is one cluster of a fleet at most; write them on that cluster's watch.
// +kubebuilder:validation:XValidation:rule="!has(self.rotation) || !has(self.rotation.publish) || size(self.rotation.publish) == 0",message="createWatches.rotation.publish is not supported: each created watch rotates its own cluster's service principal, and all would write to the same sinks; publish from a watch of that cluster instead"
// +kubebuilder:validation:XValidation:rule="!has(self.rotation) || size(self.rotation.secretRef.name) <= 242",message="createWatches.rotation.secretRef.name is a prefix: each watch writes Secret <name>-<10 hex digits>, so it may be at most 242 characters"
type FleetWatchTemplate struct {
	// Thresholds of the watches; absent, the fleet's own.
	// +optional
	Thresholds *Thresholds `json:"thresholds,omitempty"`

	// Alerts of the watches: each tells its channels about its own cluster, once per step,
	// through its own ledger.
	// +optional
	Alerts *Alerts `json:"alerts,omitempty"`

	// Rotation of the watches, each through the identity checks of any watch (Rotate and
	// ResetCluster in the identity's allow.operations). secretRef.name is a prefix: each watch
	// writes Secret <secretRef.name>-<the 10 hex digits its own name ends with>.
	// +optional
	Rotation *Rotation `json:"rotation,omitempty"`
}

// FleetStatus is what the last check of an aksFleet target found.
type FleetStatus struct {
	// Subscriptions is how many subscriptions were searched, those that could not be read
	// included.
	Subscriptions int32 `json:"subscriptions"`
	// Clusters is how many clusters were found.
	Clusters int32 `json:"clusters"`
	// ServicePrincipal and ManagedIdentity count the clusters by how they sign in to Azure.
	ServicePrincipal int32 `json:"servicePrincipal"`
	ManagedIdentity  int32 `json:"managedIdentity"`
	// Warning, Critical and Expired count the clusters on a service principal whose earliest
	// secret or certificate is in that state, as of the last reconcile.
	Warning  int32 `json:"warning"`
	Critical int32 `json:"critical"`
	Expired  int32 `json:"expired"`
	// Unlisted is how many clusters that need attention the list leaves out for size; metrics
	// report every one.
	Unlisted int32 `json:"unlisted"`
	// Uncounted is how many clusters were found beyond the most a fleet holds (10,000): they are
	// in no count, list or metric. Narrow the fleet with subscriptions, resourceGroups or tags,
	// or split it.
	// +optional
	Uncounted int32 `json:"uncounted,omitempty"`

	// Watches is how many aksCluster watches the fleet owns, with createWatches.
	// +optional
	Watches int32 `json:"watches,omitempty"`
	// Unwatched is how many clusters on a service principal have no watch of the fleet's:
	// beyond the 1,000 a fleet creates, or whose watch's name another watch has taken.
	// +optional
	Unwatched int32 `json:"unwatched,omitempty"`

	// Attention lists the clusters on a service principal that most need attention, nearest
	// expiry first: those whose credentials could not be read, then by earliest expiry.
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	// +optional
	Attention []FleetCluster `json:"attention,omitempty"`

	// UnreadServicePrincipals is how many of the clusters' service principals could not be read,
	// such as one whose application the identity may not read: the Ready message names one,
	// and why; status.fleet.attention lists their clusters first.
	// +optional
	UnreadServicePrincipals int32 `json:"unreadServicePrincipals,omitempty"`

	// Unread are the subscriptions that could not be read, and why: their clusters are missing
	// from the counts.
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	// +optional
	Unread []UnreadSubscription `json:"unread,omitempty"`
}

// FleetCluster is one cluster of a fleet and its service principal's earliest expiry.
type FleetCluster struct {
	// ID is the cluster's resource ID.
	ID string `json:"id"`
	// SubscriptionID is the cluster's subscription.
	SubscriptionID string `json:"subscriptionID"`
	// AppID is the appId of the service principal the cluster signs in with.
	AppID string `json:"appID"`
	// EarliestExpiry is when the service principal's first secret or certificate ends, or, when
	// KeyInUse is known, when that one ends; absent when its credentials could not be read.
	// +optional
	EarliestExpiry *metav1.Time `json:"earliestExpiry,omitempty"`
	// KeyInUse is the keyId of the credential the cluster signs in with, as Graph's sign-in
	// report shows (spec.usage.signIns): the one in use that signed in last, when the service
	// principal serves this cluster alone; absent otherwise.
	// +optional
	KeyInUse string `json:"keyInUse,omitempty"`
	// State is that credential's state; empty when the credentials could not be read.
	// +optional
	State CredentialState `json:"state,omitempty"`
	// Reason says why the credentials could not be read, such as IdentityNotAllowed when the
	// identity's allow.applications does not name the appId.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// UnreadSubscription is a subscription a fleet's check could not list.
type UnreadSubscription struct {
	// SubscriptionID is the subscription.
	SubscriptionID string `json:"subscriptionID"`
	// Reason is Forbidden, NotFound, Throttled, Unavailable or IdentityNotAllowed.
	Reason string `json:"reason"`
	// Message says what failed and, for a refusal, the permission that is missing.
	Message string `json:"message"`
}
