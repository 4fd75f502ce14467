package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IdentitySpec says how an identity signs in to Azure, and what watches may do with it. Exactly
// one way to sign in is set.
type IdentitySpec struct {
	// WorkloadIdentity signs in as an Entra ID application federated with a ServiceAccount: the
	// operator asks the API server for a short-lived token of that ServiceAccount (audience
	// api://AzureADTokenExchange) and exchanges it with Entra ID. The ServiceAccount is in the
	// identity's namespace; for a ClusterAzureIdentity, in the operator's.
	// +optional
	WorkloadIdentity *WorkloadIdentitySignIn `json:"workloadIdentity,omitempty"`

	// ClientSecret signs in as an application with a client secret held in a Secret: in the
	// identity's namespace; for a ClusterAzureIdentity, in the operator's.
	// +optional
	ClientSecret *ClientSecretSignIn `json:"clientSecret,omitempty"`

	// ClientCertificate signs in as an application with a certificate and its private key, PEM,
	// held in a kubernetes.io/tls Secret (keys tls.crt and tls.key): in the identity's namespace;
	// for a ClusterAzureIdentity, in the operator's.
	// +optional
	ClientCertificate *ClientCertificateSignIn `json:"clientCertificate,omitempty"`

	// Operator signs in as the operator itself (azidentity's DefaultAzureCredential: workload
	// identity, managed identity or environment). Only a ClusterAzureIdentity may, since only a
	// cluster admin may hand out the operator's own rights.
	// +optional
	Operator *OperatorSignIn `json:"operator,omitempty"`

	// Allow is what watches may do with this identity. Anything it does not list is refused
	// before a request is sent to Azure.
	// +required
	Allow IdentityAllow `json:"allow"`
}

// WorkloadIdentitySignIn is an application federated with a ServiceAccount's tokens.
type WorkloadIdentitySignIn struct {
	// TenantID is the Entra ID tenant the application is registered in, a GUID.
	// +kubebuilder:validation:MaxLength=36
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$')",message="tenantID must be the directory's GUID, such as 72f988bf-86f1-41af-91ab-2d7cd011db47, not a domain name"
	// +required
	TenantID string `json:"tenantID"`

	// ClientID is the application's appId, a GUID.
	// +kubebuilder:validation:MaxLength=36
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$')",message="clientID must be the application's appId, a GUID, not its name"
	// +required
	ClientID string `json:"clientID"`

	// ServiceAccountRef names the ServiceAccount whose tokens the application trusts (its
	// federated credential's subject is system:serviceaccount:<namespace>:<name>).
	// +required
	ServiceAccountRef LocalRef `json:"serviceAccountRef"`
}

// ClientSecretSignIn is an application and a client secret of it.
type ClientSecretSignIn struct {
	// TenantID is the Entra ID tenant the application is registered in, a GUID.
	// +kubebuilder:validation:MaxLength=36
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$')",message="tenantID must be the directory's GUID, such as 72f988bf-86f1-41af-91ab-2d7cd011db47, not a domain name"
	// +required
	TenantID string `json:"tenantID"`

	// ClientID is the application's appId, a GUID.
	// +kubebuilder:validation:MaxLength=36
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$')",message="clientID must be the application's appId, a GUID, not its name"
	// +required
	ClientID string `json:"clientID"`

	// SecretRef names the Secret and the key holding the client secret, such as
	// {name: team-a-graph, key: clientSecret}.
	// +required
	SecretRef SecretKeyRef `json:"secretRef"`
}

// ClientCertificateSignIn is an application and a certificate of it.
type ClientCertificateSignIn struct {
	// TenantID is the Entra ID tenant the application is registered in, a GUID.
	// +kubebuilder:validation:MaxLength=36
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$')",message="tenantID must be the directory's GUID, such as 72f988bf-86f1-41af-91ab-2d7cd011db47, not a domain name"
	// +required
	TenantID string `json:"tenantID"`

	// ClientID is the application's appId, a GUID.
	// +kubebuilder:validation:MaxLength=36
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$')",message="clientID must be the application's appId, a GUID, not its name"
	// +required
	ClientID string `json:"clientID"`

	// SecretRef names a kubernetes.io/tls Secret: the certificate in tls.crt, its private key
	// (unencrypted PEM) in tls.key.
	// +required
	SecretRef LocalRef `json:"secretRef"`
}

// OperatorSignIn is the operator's own identity. It has no settings: the tenants it signs in to
// are those allow.tenants lists.
type OperatorSignIn struct{}

// LocalRef names an object in the namespace the reference is resolved in.
type LocalRef struct {
	// Name is the object's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// AllApplications in allow.applications allows every application of the allowed tenants.
const AllApplications = "*"

// IdentityAllow is the scope of an identity: where it may be used, and for what.
// +kubebuilder:validation:XValidation:rule="!has(self.applications) || !self.applications.exists(a, a == '*') || size(self.applications) == 1",message="allow.applications is either [\"*\"] for every application or a list of appIds, not both"
type IdentityAllow struct {
	// Tenants are the Entra ID tenants watches may use the identity in. Empty means the tenant
	// of its sign-in; an identity signing in as the operator must list them.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=36
	// +kubebuilder:validation:XValidation:rule="self.all(t, t.matches('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'))",message="allow.tenants must be directory GUIDs, such as 72f988bf-86f1-41af-91ab-2d7cd011db47"
	// +listType=set
	// +optional
	Tenants []string `json:"tenants,omitempty"`

	// Applications are the appIds whose credentials watches may read (and rotate, and whose
	// owners they may read, when operations allow), or ["*"] for every application of the
	// tenants. Empty allows none: only tenant scans, if allowed, and clusters on a managed identity.
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=36
	// +kubebuilder:validation:XValidation:rule="self.all(a, a == '*' || a.matches('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'))",message="allow.applications must be appIds (GUIDs) or \"*\" for every application"
	// +listType=set
	// +optional
	Applications []string `json:"applications,omitempty"`

	// Subscriptions are where the AKS clusters watches may read (and reset, when operations
	// allow) are. Empty allows none.
	// +kubebuilder:validation:MaxItems=256
	// +listType=map
	// +listMapKey=subscriptionID
	// +optional
	Subscriptions []SubscriptionScope `json:"subscriptions,omitempty"`

	// Operations are what watches may do beyond Watch, which is always allowed within the
	// scope above: Rotate, ResetCluster, TenantScan, ReadOwners, FleetScan, ReadSignIns,
	// ReadAuditLog, PublishKeyVault, PublishGitHub.
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	// +optional
	Operations []Operation `json:"operations,omitempty"`

	// KeyVaults are the Key Vaults, by URL (https://<name>.vault.azure.net/), that rotations may
	// write new secrets to when operations allow PublishKeyVault. Empty allows none.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.all(v, v.matches('^https://[a-z0-9][-a-z0-9]*[.](vault[.]azure[.]net|vault[.]azure[.]cn|vault[.]usgovcloudapi[.]net|managedhsm[.]azure[.]net)/?$'))",message="allow.keyVaults must be vault URLs, such as https://payments-kv.vault.azure.net/"
	// +listType=set
	// +optional
	KeyVaults []string `json:"keyVaults,omitempty"`

	// GitHubRepositories are the GitHub repositories, by URL (https://github.com/<owner>/<repo>,
	// or https://<host>/<owner>/<repo> on a GitHub Enterprise Server), whose Actions secrets
	// rotations may set when operations allow PublishGitHub; <owner>/* allows every repository
	// of an owner. Empty allows none.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=400
	// +kubebuilder:validation:XValidation:rule="self.all(r, r.matches('^https://[a-z0-9][-a-z0-9.]*[a-z0-9](:[0-9]{1,5})?/[A-Za-z0-9][A-Za-z0-9-]{0,38}/([A-Za-z0-9_-][A-Za-z0-9._-]{0,99}|[*])/?$'))",message="allow.githubRepositories must be repository URLs, such as https://github.com/contoso/deploy, or https://github.com/contoso/* for every repository of contoso"
	// +listType=set
	// +optional
	GitHubRepositories []string `json:"githubRepositories,omitempty"`
}

// SubscriptionScope is a subscription, or some of its resource groups.
type SubscriptionScope struct {
	// SubscriptionID is the subscription's GUID.
	// +kubebuilder:validation:MaxLength=36
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$')",message="subscriptionID must be the subscription's GUID, not its name"
	// +required
	SubscriptionID string `json:"subscriptionID"`

	// ResourceGroups limits the scope to these resource groups (compared without regard to
	// case, as Azure does); empty means the whole subscription.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=90
	// +listType=set
	// +optional
	ResourceGroups []string `json:"resourceGroups,omitempty"`
}

// NamespaceCondition admits namespaces to a ClusterAzureIdentity: those it lists by name, and
// those its selector matches.
type NamespaceCondition struct {
	// Namespaces are namespaces admitted by name.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`

	// NamespaceSelector admits the namespaces whose labels it matches; an empty selector ({})
	// matches every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// IdentityStatus is what the operator last saw when signing in as the identity.
type IdentityStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are Ready: the identity signed in to Entra ID at its last try. When it did not,
	// the message carries Entra ID's AADSTS error code and what to do.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// SignIn is how the identity signs in: WorkloadIdentity, ClientSecret, ClientCertificate or
	// Operator.
	// +optional
	SignIn string `json:"signIn,omitempty"`

	// LastSignInTime is when the identity last signed in.
	// +optional
	LastSignInTime *metav1.Time `json:"lastSignInTime,omitempty"`

	// NextSignInTime is when the identity signs in again to prove it still can.
	// +optional
	NextSignInTime *metav1.Time `json:"nextSignInTime,omitempty"`

	// ConsecutiveFailures counts failed sign-ins since the last success; it sets the backoff.
	// +optional
	ConsecutiveFailures int32 `json:"consecutiveFailures,omitempty"`
}

// AzureIdentitySpec is an identity the watches of its own namespace may use.
// +kubebuilder:validation:XValidation:rule="(has(self.workloadIdentity) ? 1 : 0) + (has(self.clientSecret) ? 1 : 0) + (has(self.clientCertificate) ? 1 : 0) + (has(self.operator) ? 1 : 0) == 1",message="set exactly one of workloadIdentity, clientSecret, clientCertificate: how the identity signs in"
// +kubebuilder:validation:XValidation:rule="!has(self.operator)",message="an AzureIdentity cannot sign in as the operator: only a cluster admin may hand out the operator's identity, with a ClusterAzureIdentity"
type AzureIdentitySpec struct {
	IdentitySpec `json:",inline"`
}

// ClusterAzureIdentitySpec is an identity the watches of the namespaces its conditions admit
// may use.
// +kubebuilder:validation:XValidation:rule="(has(self.workloadIdentity) ? 1 : 0) + (has(self.clientSecret) ? 1 : 0) + (has(self.clientCertificate) ? 1 : 0) + (has(self.operator) ? 1 : 0) == 1",message="set exactly one of workloadIdentity, clientSecret, clientCertificate, operator: how the identity signs in"
// +kubebuilder:validation:XValidation:rule="!has(self.operator) || (has(self.allow.tenants) && size(self.allow.tenants) > 0)",message="an identity signing in as the operator must list allow.tenants: the operator's identity may reach any tenant that trusts it"
type ClusterAzureIdentitySpec struct {
	IdentitySpec `json:",inline"`

	// Conditions admit the namespaces whose watches may use the identity: a namespace is
	// admitted when any condition admits it. Empty admits none; namespaceSelector: {} admits all.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Conditions []NamespaceCondition `json:"conditions,omitempty"`
}

// AzureIdentity is an Azure identity, and what the watches of its namespace may do with it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=azid,categories=credwatch
// +kubebuilder:printcolumn:name="Sign-in",type=string,JSONPath=`.status.signIn`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Operations",type=string,JSONPath=`.spec.allow.operations`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AzureIdentity struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is how the identity signs in and what it may be used for.
	// +required
	Spec AzureIdentitySpec `json:"spec"`

	// Status is what the operator last saw signing in.
	// +optional
	Status IdentityStatus `json:"status,omitempty"`
}

// AzureIdentityList is a list of AzureIdentity.
// +kubebuilder:object:root=true
type AzureIdentityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the identities.
	Items []AzureIdentity `json:"items"`
}

// ClusterAzureIdentity is an Azure identity a cluster admin offers to the watches of some
// namespaces, and what they may do with it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cazid,categories=credwatch
// +kubebuilder:printcolumn:name="Sign-in",type=string,JSONPath=`.status.signIn`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Operations",type=string,JSONPath=`.spec.allow.operations`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterAzureIdentity struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is how the identity signs in, what it may be used for, and by which namespaces.
	// +required
	Spec ClusterAzureIdentitySpec `json:"spec"`

	// Status is what the operator last saw signing in.
	// +optional
	Status IdentityStatus `json:"status,omitempty"`
}

// ClusterAzureIdentityList is a list of ClusterAzureIdentity.
// +kubebuilder:object:root=true
type ClusterAzureIdentityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the identities.
	Items []ClusterAzureIdentity `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AzureIdentity{}, &AzureIdentityList{}, &ClusterAzureIdentity{}, &ClusterAzureIdentityList{})
}

// Kinds an identityRef may name.
const (
	KindAzureIdentity        = "AzureIdentity"
	KindClusterAzureIdentity = "ClusterAzureIdentity"
)

// IdentityRef names the identity a watch signs in to Azure with.
type IdentityRef struct {
	// Kind is AzureIdentity (in the watch's namespace) or ClusterAzureIdentity.
	// +kubebuilder:validation:Enum=AzureIdentity;ClusterAzureIdentity
	// +kubebuilder:default="AzureIdentity"
	// +optional
	Kind string `json:"kind,omitempty"`

	// Name is the identity's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// SignInMethod names how spec signs in, for status and messages.
func (s IdentitySpec) SignInMethod() string {
	switch {
	case s.WorkloadIdentity != nil:
		return "WorkloadIdentity"
	case s.ClientSecret != nil:
		return "ClientSecret"
	case s.ClientCertificate != nil:
		return "ClientCertificate"
	case s.Operator != nil:
		return "Operator"
	}
	return ""
}

// HomeTenant is the tenant the identity's application is registered in; empty for the operator,
// which signs in wherever allow.tenants says.
func (s IdentitySpec) HomeTenant() string {
	switch {
	case s.WorkloadIdentity != nil:
		return s.WorkloadIdentity.TenantID
	case s.ClientSecret != nil:
		return s.ClientSecret.TenantID
	case s.ClientCertificate != nil:
		return s.ClientCertificate.TenantID
	}
	return ""
}

// AllowedTenants are the tenants the identity may be used in.
func (s IdentitySpec) AllowedTenants() []string {
	if len(s.Allow.Tenants) > 0 || s.HomeTenant() == "" {
		return s.Allow.Tenants
	}
	return []string{s.HomeTenant()}
}
