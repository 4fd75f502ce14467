package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ServiceAccountIssuerTarget watches the service-account token issuer of the cluster the operator
// runs in: the keys every API server signs and verifies tokens with, and its issuer URL.
type ServiceAccountIssuerTarget struct {
	// Endpoints are the API servers to compare, as https://host:port. Empty, they are the
	// endpoints of the kubernetes Service in the default namespace, read at every check; name
	// them when a load balancer hides them.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=263
	// +kubebuilder:validation:XValidation:rule="self.all(e, e.matches('^https://[^/?#@ ]+$'))",message="endpoints are API server addresses such as https://10.0.0.4:6443: https, a host and port, no path"
	// +listType=set
	// +optional
	Endpoints []string `json:"endpoints,omitempty"`

	// TokenLifetime is how long tokens stay valid after they are signed; a key that leaves the
	// key set sooner after it last signed breaks the tokens it signed, which only checks at least
	// this frequent always see. 1h is the lifetime of projected service-account tokens, and of
	// extended ones once refreshed.
	// +kubebuilder:default="1h"
	// +optional
	TokenLifetime Duration `json:"tokenLifetime,omitempty"`
}

// ServiceAccountIssuerStatus is what the last check of the issuer found.
type ServiceAccountIssuerStatus struct {
	// Issuer is the issuer URL the API servers announce, which federated workload-identity
	// credentials trust.
	// +optional
	Issuer string `json:"issuer,omitempty"`

	// PreviousIssuer is the issuer URL announced before the last change, and IssuerChangeTime
	// when the change was seen; absent while it has not changed.
	// +optional
	PreviousIssuer string `json:"previousIssuer,omitempty"`
	// +optional
	IssuerChangeTime *metav1.Time `json:"issuerChangeTime,omitempty"`

	// Endpoints are the API servers checked, each with what it serves.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	Endpoints []IssuerEndpoint `json:"endpoints,omitempty"`

	// Keys are the key IDs the API servers have served, with when each was last served and last
	// seen signing: a key gone within the token lifetime of its last signature broke tokens.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Keys []ServedKey `json:"keys,omitempty"`
}

// IssuerEndpoint is one API server's view of the issuer.
type IssuerEndpoint struct {
	// Endpoint is the API server's address.
	Endpoint string `json:"endpoint"`
	// Issuer is the issuer its discovery document announces.
	// +optional
	Issuer string `json:"issuer,omitempty"`
	// KeyIDs are the IDs of the keys its JWKS serves, sorted.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	KeyIDs []string `json:"keyIDs,omitempty"`
	// SigningKeyID is the key the canary token minted through it was signed with.
	// +optional
	SigningKeyID string `json:"signingKeyID,omitempty"`
	// Problem is why it could not be read, or why it rejected the canary token.
	// +optional
	Problem string `json:"problem,omitempty"`
}

// ServedKey is a key ID and when the API servers last served it and signed with it.
type ServedKey struct {
	KeyID      string      `json:"keyID"`
	LastServed metav1.Time `json:"lastServed"`
	// LastSigned is the last check at which an API server signed the canary token with this key;
	// absent for a key only ever served for verification.
	// +optional
	LastSigned *metav1.Time `json:"lastSigned,omitempty"`
	// Signers are the API servers that signed the canary token with this key at the last check.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	Signers []string `json:"signers,omitempty"`
	// TokensValidUntil is until when tokens this key signed may still be presented: the first
	// check that found a server no longer signing with it, plus the token lifetime (it may have
	// signed until just before that check).
	// +optional
	TokensValidUntil *metav1.Time `json:"tokensValidUntil,omitempty"`
}
