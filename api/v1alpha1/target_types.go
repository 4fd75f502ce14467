package v1alpha1

// Target names one thing whose credentials are watched. Exactly one member is set.
// +kubebuilder:validation:XValidation:rule="(has(self.servicePrincipal) ? 1 : 0) + (has(self.aksCluster) ? 1 : 0) + (has(self.tenantScan) ? 1 : 0) + (has(self.serviceAccountIssuer) ? 1 : 0) + (has(self.aksFleet) ? 1 : 0) == 1",message="target must set exactly one of: servicePrincipal, aksCluster, tenantScan, serviceAccountIssuer, aksFleet"
type Target struct {
	// ServicePrincipal names an Entra ID application and its service principal by appId. The
	// credentials of both objects are watched: `az ad sp credential reset` puts secrets on the
	// service principal, where the portal's app-registration blade does not show them.
	// +optional
	ServicePrincipal *ServicePrincipalTarget `json:"servicePrincipal,omitempty"`

	// AKSCluster names an AKS managed cluster; the service principal it signs in with, read from
	// its servicePrincipalProfile at every check, is watched. A cluster on a managed identity has
	// no secret to expire, and the watch says so.
	// +optional
	AKSCluster *AKSClusterTarget `json:"aksCluster,omitempty"`

	// TenantScan watches every application and service principal of a tenant, or those its
	// filter selects, for teams that want the whole tenant covered. Status lists the credentials
	// that need attention; metrics cover every credential.
	// +optional
	TenantScan *TenantScanTarget `json:"tenantScan,omitempty"`

	// ServiceAccountIssuer watches the service-account token issuer of the cluster the operator
	// runs in: that every API server serves the same keys and accepts the tokens the others
	// sign, that no key leaves while tokens it signed are valid, and the issuer URL.
	// +optional
	ServiceAccountIssuer *ServiceAccountIssuerTarget `json:"serviceAccountIssuer,omitempty"`

	// AKSFleet finds every AKS cluster of a tenant's subscriptions, and watches the secrets of
	// the service principals those not on a managed identity sign in with.
	// +optional
	AKSFleet *AKSFleetTarget `json:"aksFleet,omitempty"`
}

// TenantScanTarget names a tenant whose applications and service principals are all watched.
type TenantScanTarget struct {
	// TenantID is the Entra ID tenant (directory) ID, a GUID.
	// +kubebuilder:validation:MaxLength=36
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$')",message="tenantID must be the directory's GUID, such as 72f988bf-86f1-41af-91ab-2d7cd011db47, not a domain name"
	// +required
	TenantID string `json:"tenantID"`

	// Filter is an OData $filter that Graph applies to the list of applications and to the list
	// of service principals, such as startswith(displayName,'prod-') or tags/any(t:t eq 'aks').
	// Graph's standard filters only (eq, in, startswith, any on appId, displayName, tags, ...):
	// no advanced query is sent. Empty scans everything.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.matches('[\\x00-\\x1f]')",message="filter must be one line of OData, without control characters"
	// +optional
	Filter string `json:"filter,omitempty"`
	// OwnerDigests mails each application's owners about their own applications: one digest a
	// period listing what needs attention, and a message at once when one of their credentials
	// expires in between. It needs ReadOwners in the identity's allow.operations.
	// +optional
	OwnerDigests *OwnerDigests `json:"ownerDigests,omitempty"`
}

// AKSClusterTarget identifies an AKS managed cluster in Azure Resource Manager.
type AKSClusterTarget struct {
	// TenantID is the Entra ID tenant of the cluster's subscription and service principal, a GUID.
	// +kubebuilder:validation:MaxLength=36
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$')",message="tenantID must be the directory's GUID, such as 72f988bf-86f1-41af-91ab-2d7cd011db47, not a domain name"
	// +required
	TenantID string `json:"tenantID"`

	// SubscriptionID is the subscription the cluster is in, a GUID.
	// +kubebuilder:validation:MaxLength=36
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$')",message="subscriptionID must be the subscription's GUID, not its name"
	// +required
	SubscriptionID string `json:"subscriptionID"`

	// ResourceGroup is the cluster's resource group.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=90
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-a-zA-Z0-9_.()]+$') && !self.endsWith('.')",message="resourceGroup must be a resource group name: letters, digits, '-', '_', '.', '(' and ')', not ending in '.'"
	// +required
	ResourceGroup string `json:"resourceGroup"`

	// Name is the cluster's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-zA-Z0-9]([-_a-zA-Z0-9]*[a-zA-Z0-9])?$')",message="name must be an AKS cluster name: letters, digits, '-' and '_', starting and ending with a letter or digit"
	// +required
	Name string `json:"name"`
}

// ServicePrincipalTarget identifies a service principal by its tenant and application (client) ID.
type ServicePrincipalTarget struct {
	// TenantID is the Entra ID tenant (directory) ID, a GUID.
	// +kubebuilder:validation:MaxLength=36
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$')",message="tenantID must be the directory's GUID, such as 72f988bf-86f1-41af-91ab-2d7cd011db47, not a domain name"
	// +required
	TenantID string `json:"tenantID"`

	// ClientID is the application (client) ID, the appId, a GUID.
	// +kubebuilder:validation:MaxLength=36
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$')",message="clientID must be the application's appId, a GUID such as 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c, not its name"
	// +required
	ClientID string `json:"clientID"`
}

// TenantID is the Entra ID tenant the target lives in.
func (t Target) TenantID() string {
	switch {
	case t.ServicePrincipal != nil:
		return t.ServicePrincipal.TenantID
	case t.AKSCluster != nil:
		return t.AKSCluster.TenantID
	case t.TenantScan != nil:
		return t.TenantScan.TenantID
	case t.AKSFleet != nil:
		return t.AKSFleet.TenantID
	}
	return ""
}
