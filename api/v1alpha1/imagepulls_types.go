package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ImagePulls links a watch to the image pulls of the cluster the operator runs in. Set it on the
// watch of the service principal this cluster's nodes pull images with: pulls its registries
// refuse for want of credentials are then reported on the watch (condition, events, alerts),
// told apart as the whole cluster's credential or one node's kubelet.
// +kubebuilder:validation:XValidation:rule="has(self.registries)",message="imagePulls.registries must name the registries this service principal signs in to, such as [myacr.azurecr.io]: there is no default, since a pattern like *.azurecr.io lets anyone who may create pods raise a cluster-wide incident with pulls from a registry of theirs"
type ImagePulls struct {
	// Registries are the registry hosts the service principal signs in to, as patterns where *
	// matches any run of characters ("myacr.azurecr.io", "registry.example.com:5000"). Required:
	// name the cluster's own registries (az aks check-acr, or the ACRs its kubelet identity may
	// pull from); a broad pattern counts pulls from registries the cluster was never meant to use.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.all(r, r.matches('^[A-Za-z0-9*.:-]+$'))",message="registries are registry hosts or host patterns, such as *.azurecr.io or registry.example.com:5000: no scheme, no path"
	// +listType=set
	// +optional
	Registries []string `json:"registries,omitempty"`
	// PodRegistries, when true, adds every registry that refuses pods pulling with the node's
	// credential: pods without imagePullSecrets, whose kubelet signs in with the cluster's
	// identity. A pod with its own pull secret is refused for that secret, which this watch does
	// not hold. Off unless set: anyone who may create pods can have real kubelets pull from a
	// registry the cluster was never meant to use, and be refused on every node, which would
	// raise a cluster-wide alert.
	// +kubebuilder:default=false
	// +optional
	PodRegistries *bool `json:"podRegistries,omitempty"`
}

// CoversPodRegistries says whether the watch takes the registries its pods pull from with the
// node's credential, as it does only when told to.
func (p *ImagePulls) CoversPodRegistries() bool {
	return p.PodRegistries != nil && *p.PodRegistries
}

// PullScope says what image-pull authentication failures point at.
// +kubebuilder:validation:Enum=ClusterWide;NodeLocal;Undetermined
type PullScope string

const (
	// PullScopeClusterWide: pulls from the registry fail on many nodes, or on every node there
	// is: the cluster's credential is refused (an expired service principal secret, a removed
	// role assignment).
	PullScopeClusterWide PullScope = "ClusterWide"
	// PullScopeNodeLocal: pulls fail on one or a few nodes while other nodes pull from the same
	// registry: those nodes' kubelets do not present the credential, typically because their
	// credential provider was disabled at start-up.
	PullScopeNodeLocal PullScope = "NodeLocal"
	// PullScopeUndetermined: too few pulls yet to tell (one node failing, no other node pulling).
	PullScopeUndetermined PullScope = "Undetermined"
)

// PullIncident is a registry refusing image pulls for want of credentials, as seen over the
// operator's sliding window.
type PullIncident struct {
	// Registry is the registry host.
	Registry string `json:"registry"`
	// Scope is what the failures point at.
	Scope PullScope `json:"scope"`
	// Nodes are nodes whose latest pull from the registry was refused, at most ten, by name.
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	// +optional
	Nodes []string `json:"nodes,omitempty"`
	// FailingNodes counts the nodes whose latest pull from the registry was refused.
	FailingNodes int32 `json:"failingNodes"`
	// PullingNodes counts the nodes that pulled from the registry successfully in the window.
	// +optional
	PullingNodes int32 `json:"pullingNodes,omitempty"`
	// Since is the first refused pull of the incident.
	Since metav1.Time `json:"since"`
	// TellTime is when the incident is told, by event and alert: once its refusals settled
	// (--image-pull-settle), for a scope decided; at the end of --image-pull-window, for one still
	// Undetermined then.
	// +optional
	TellTime *metav1.Time `json:"tellTime,omitempty"`
	// ToldScope is the scope the last event told; empty before the first.
	// +optional
	ToldScope PullScope `json:"toldScope,omitempty"`
}
