package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CredentialWatchSpec names what to watch, with which identity, and when to raise the alarm.
// +kubebuilder:validation:XValidation:rule="!has(self.target.tenantScan) || !has(self.rotation)",message="rotation needs a servicePrincipal or aksCluster target: a tenant scan watches many applications and rotates none"
// +kubebuilder:validation:XValidation:rule="!has(self.target.serviceAccountIssuer) || (!has(self.rotation) && !has(self.imagePulls) && !has(self.identityRef))",message="a serviceAccountIssuer target has no Azure credential: rotation, imagePulls and identityRef need a servicePrincipal or aksCluster target"
// +kubebuilder:validation:XValidation:rule="!has(self.usage) || !has(self.target.serviceAccountIssuer)",message="spec.usage reads the sign-ins of Entra ID credentials, which a serviceAccountIssuer target has none of: remove it"
// +kubebuilder:validation:XValidation:rule="!has(self.target.tenantScan) || !has(self.imagePulls)",message="imagePulls needs a servicePrincipal or aksCluster target: it links the cluster's image pulls to the one service principal they sign in with"
// +kubebuilder:validation:XValidation:rule="!has(self.target.aksFleet) || (!has(self.rotation) && !has(self.imagePulls))",message="a fleet watch rotates nothing and diagnoses no image pulls: each of its clusters signs in with its own service principal; write an aksCluster watch for the cluster to rotate or diagnose"
// +kubebuilder:validation:XValidation:rule="!has(self.target.serviceAccountIssuer) || !has(self.hygiene)",message="hygiene needs a target with Azure credentials: a serviceAccountIssuer target has signing keys, which it checks for drift instead"
// +kubebuilder:validation:XValidation:rule="!has(self.target.aksFleet) || !has(self.hygiene)",message="a fleet reports no findings itself: each aksCluster watch its createWatches makes reports its own cluster's service principal, with the default policy"
// +kubebuilder:validation:XValidation:rule="!has(self.target.tenantScan) || !has(self.alerts)",message="alerts need a servicePrincipal or aksCluster target: a tenant scan reports through status, events and metrics (alert on credwatch_credential_expiration_timestamp_seconds), since a message per credential of a whole tenant would flood a channel"
type CredentialWatchSpec struct {
	// Target is the service principal whose credentials are watched.
	// +required
	Target Target `json:"target"`

	// IdentityRef names the identity the operator signs in to Azure with for this watch: an
	// AzureIdentity in the watch's namespace, or a ClusterAzureIdentity that admits it. Absent,
	// the ClusterAzureIdentity the operator's --default-identity flag names. The identity decides
	// what the watch may read and change; anything else is refused before Azure is asked.
	// +optional
	IdentityRef *IdentityRef `json:"identityRef,omitempty"`

	// AzureCredentialRef is no longer supported, and refused: it let any watch sign in as any
	// Secret's client, or as the operator. Create an AzureIdentity with clientSecret.secretRef
	// naming the Secret (key clientSecret), and set identityRef to it instead.
	// +kubebuilder:validation:XValidation:rule="false",message="azureCredentialRef was removed in credwatch.dev/v1alpha1: create an AzureIdentity in this namespace with spec.clientSecret {tenantID, clientID, secretRef: {name: <this Secret>, key: clientSecret}} and spec.allow naming the target, then set spec.identityRef: {kind: AzureIdentity, name: <it>} and delete azureCredentialRef"
	// +optional
	AzureCredentialRef *corev1.LocalObjectReference `json:"azureCredentialRef,omitempty"`

	// CheckInterval is how often Microsoft Graph is read, between 1m and 7d. Threshold crossings
	// are acted on at the moment they happen, whatever the interval.
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]{1,6}[smhdw]$') || int(self.substring(0, size(self)-1)) * {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800}[self.substring(size(self)-1)] >= 60",message="checkInterval must be at least 1m: Microsoft Graph is not polled more often than once a minute per watch"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]{1,6}[smhdw]$') || int(self.substring(0, size(self)-1)) * {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800}[self.substring(size(self)-1)] <= 604800",message="checkInterval must be at most 7d: a credential added or removed by hand would otherwise go unseen for longer than a week"
	// +kubebuilder:default="6h"
	// +optional
	CheckInterval Duration `json:"checkInterval,omitempty"`

	// Thresholds says how long before expiry a credential turns Warning and then Critical.
	// +kubebuilder:default={warning: "30d", critical: "7d"}
	// +optional
	Thresholds Thresholds `json:"thresholds,omitempty"`

	// Alerts says who is told, through which channels, and when.
	// +optional
	Alerts *Alerts `json:"alerts,omitempty"`

	// Rotation renews the client secret before it expires, and moves an AKS cluster onto it.
	// +optional
	Rotation *Rotation `json:"rotation,omitempty"`

	// ImagePulls reports image pulls that the registries of this cluster refuse, on this watch:
	// set it on the watch of the service principal the cluster's nodes pull images with.
	// +optional
	ImagePulls *ImagePulls `json:"imagePulls,omitempty"`

	// Hygiene is the policy the credentials are held to beyond their expiry, reported in
	// status.findings and the credwatch_credential_policy_findings metric. Absent, its defaults.
	// +optional
	Hygiene *Hygiene `json:"hygiene,omitempty"`

	// Usage reads which credentials are in use, from Graph's sign-in activity report. Absent, it
	// is not read.
	// +optional
	Usage *Usage `json:"usage,omitempty"`
}

// Thresholds are the times before expiry at which a credential turns Warning and Critical.
// +kubebuilder:validation:XValidation:rule="!self.warning.matches('^[0-9]{1,6}[smhdw]$') || !self.critical.matches('^[0-9]{1,6}[smhdw]$') || int(self.critical.substring(0, size(self.critical)-1)) * {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800}[self.critical.substring(size(self.critical)-1)] < int(self.warning.substring(0, size(self.warning)-1)) * {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800}[self.warning.substring(size(self.warning)-1)]",message="thresholds.critical must be shorter than thresholds.warning: a credential turns Warning first, then Critical closer to expiry"
type Thresholds struct {
	// Warning is how long before expiry a credential turns Warning.
	// +kubebuilder:default="30d"
	// +optional
	Warning Duration `json:"warning,omitempty"`

	// Critical is how long before expiry a credential turns Critical; shorter than Warning.
	// +kubebuilder:default="7d"
	// +optional
	Critical Duration `json:"critical,omitempty"`
}

// ServicePrincipalStatus describes the objects found for the target's appId.
type ServicePrincipalStatus struct {
	// AppID is the application (client) ID watched: the target's, or the AKS cluster's.
	// +optional
	AppID string `json:"appID,omitempty"`

	// DisplayName is the application's display name.
	// +optional
	DisplayName string `json:"displayName,omitempty"`

	// ApplicationObjectID is the object ID of the application, empty when this tenant holds no
	// application object for the appId (an application registered in another tenant).
	// +optional
	ApplicationObjectID string `json:"applicationObjectID,omitempty"`

	// ServicePrincipalObjectID is the object ID of the service principal, empty when the tenant
	// holds none for the appId.
	// +optional
	ServicePrincipalObjectID string `json:"servicePrincipalObjectID,omitempty"`

	// SingleSignOnMode is the service principal's preferredSingleSignOnMode. A SAML
	// single-sign-on service principal (saml) carries a signing certificate and a long-lived
	// secret on its own object by design, which hygiene findings leave alone.
	// +optional
	SingleSignOnMode string `json:"singleSignOnMode,omitempty"`

	// OwnerEmails are the mail addresses of the application's owners, read only when
	// alerts.email.notifyOwners is set, because that is who they are for.
	// +listType=atomic
	// +optional
	OwnerEmails []string `json:"ownerEmails,omitempty"`
}

// ClusterIdentity is how an AKS cluster signs in to Azure.
// +kubebuilder:validation:Enum=ServicePrincipal;ManagedIdentity
type ClusterIdentity string

const (
	// IdentityServicePrincipal: the cluster holds a service principal's secret, which expires.
	IdentityServicePrincipal ClusterIdentity = "ServicePrincipal"
	// IdentityManagedIdentity: the cluster uses a managed identity, which has no secret.
	IdentityManagedIdentity ClusterIdentity = "ManagedIdentity"
)

// AKSClusterStatus is what Resource Manager last said of the cluster.
type AKSClusterStatus struct {
	// Identity is ServicePrincipal or ManagedIdentity.
	Identity ClusterIdentity `json:"identity"`
	// ClientID is the appId of the cluster's service principal; empty on a managed identity.
	// +optional
	ClientID string `json:"clientID,omitempty"`
	// ProvisioningState is Resource Manager's: Succeeded, Updating, Failed, ...
	// +optional
	ProvisioningState string `json:"provisioningState,omitempty"`
	// PowerState is Running or Stopped.
	// +optional
	PowerState string `json:"powerState,omitempty"`
}

// TenantScanStatus counts the objects and credentials of a tenant scan.
type TenantScanStatus struct {
	// Applications is how many applications the last scan found.
	Applications int32 `json:"applications"`
	// ServicePrincipals is how many service principals the last scan found.
	ServicePrincipals int32 `json:"servicePrincipals"`
	// Credentials is how many secrets and certificates they carry.
	Credentials int32 `json:"credentials"`
	// UnreadableApplications is how many applications registered in the tenant the identity
	// may not read: their service principals were listed, they were not, and their credentials
	// are in no count (the identity needs Application.Read.All).
	// +optional
	UnreadableApplications int32 `json:"unreadableApplications,omitempty"`
	// Renewed is how many of them were renewed by a newer credential of their kind on the same
	// object (az ad app credential reset --append): they need nothing, and are counted nowhere else.
	Renewed int32 `json:"renewed"`
	// Warning, Critical and Expired count the other credentials in each state, as of the last reconcile.
	Warning  int32 `json:"warning"`
	Critical int32 `json:"critical"`
	Expired  int32 `json:"expired"`
	// Unlisted is how many credentials that need attention status.credentials leaves out for
	// size; metrics report every one.
	Unlisted int32 `json:"unlisted"`
	// Added counts the credentials that appeared between two scans, added by something other
	// than credwatch's rotations, since the watch began.
	// +optional
	Added int32 `json:"added,omitempty"`
	// RecentlyAdded lists the last of them, the latest last, at most 50, each Valid or Expired
	// as of when it was found.
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	// +optional
	RecentlyAdded []Credential `json:"recentlyAdded,omitempty"`
}

// CredentialWatchStatus is what the operator last saw of the target.
type CredentialWatchStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are Ready (the last check of Graph succeeded), Expiring (a credential is within
	// a threshold) and Expired (a credential is past its end time).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ServicePrincipal describes the Graph objects found for the target.
	// +optional
	ServicePrincipal *ServicePrincipalStatus `json:"servicePrincipal,omitempty"`

	// AKSCluster describes the cluster an aksCluster target names, as last read.
	// +optional
	AKSCluster *AKSClusterStatus `json:"aksCluster,omitempty"`

	// TenantScan counts what the last scan of a tenantScan target found.
	// +optional
	TenantScan *TenantScanStatus `json:"tenantScan,omitempty"`

	// OwnerDigests is how the owner digests of a tenantScan target stand.
	// +optional
	OwnerDigests *DigestsStatus `json:"ownerDigests,omitempty"`

	// SignInsReadTime is when the credentials' sign-ins were last read (spec.usage.signIns).
	// +optional
	SignInsReadTime *metav1.Time `json:"signInsReadTime,omitempty"`

	// Fleet is what the last check of an aksFleet target found.
	// +optional
	Fleet *FleetStatus `json:"fleet,omitempty"`

	// Credentials lists every secret and certificate of the application and the service
	// principal, soonest expiry first. On a tenant scan it lists those that need attention
	// (not Valid, and not renewed by a newer one), nearest their expiry first, at most 100.
	// +listType=atomic
	// +optional
	Credentials []Credential `json:"credentials,omitempty"`

	// State is the worst state among the credentials; empty until the first successful check.
	// +optional
	State CredentialState `json:"state,omitempty"`

	// EarliestExpiry is the soonest end time among the credentials.
	// +optional
	EarliestExpiry *metav1.Time `json:"earliestExpiry,omitempty"`

	// ExpiresIn is the time from the last reconcile to EarliestExpiry, for people: 12d, 5h,
	// or negative once expired (-3d).
	// +optional
	ExpiresIn string `json:"expiresIn,omitempty"`

	// InUse names the credentials in use (spec.usage.signIns), for people: the first eight
	// characters of each keyId, the latest to sign in first, at most three and a count of the
	// rest; empty when none is, or sign-ins are not read.
	// +optional
	InUse string `json:"inUse,omitempty"`

	// LastCheckTime is when the target was last read successfully: Microsoft Graph, or the API
	// servers of a serviceAccountIssuer target.
	// +optional
	LastCheckTime *metav1.Time `json:"lastCheckTime,omitempty"`

	// NextCheckTime is when Microsoft Graph will be read next.
	// +optional
	NextCheckTime *metav1.Time `json:"nextCheckTime,omitempty"`

	// CheckRequest is the value of the check annotation the last check answered.
	// +optional
	CheckRequest string `json:"checkRequest,omitempty"`

	// ConsecutiveFailures counts failed checks since the last success; it sets the retry backoff,
	// and survives operator restarts because it lives here.
	// +optional
	ConsecutiveFailures int32 `json:"consecutiveFailures,omitempty"`

	// Alerts is the delivery ledger of the watch's alerts.
	// +optional
	Alerts *AlertsStatus `json:"alerts,omitempty"`

	// Rotation is the rotation in progress, absent when none is.
	// +optional
	Rotation *RotationStatus `json:"rotation,omitempty"`

	// LastRotation is the last rotation that completed.
	// +optional
	LastRotation *LastRotation `json:"lastRotation,omitempty"`

	// LastAbort is the last rotation that was aborted. No rotation starts by itself again until
	// the spec changes or one is asked for with credwatch.dev/rotate.
	// +optional
	LastAbort *LastAbort `json:"lastAbort,omitempty"`

	// ServiceAccountIssuer is what the last check of a serviceAccountIssuer target found.
	// +optional
	ServiceAccountIssuer *ServiceAccountIssuerStatus `json:"serviceAccountIssuer,omitempty"`

	// Findings are the credentials that break spec.hygiene's policy; absent when none does.
	// +optional
	Findings *FindingsStatus `json:"findings,omitempty"`

	// ImagePulls are the registries of spec.imagePulls refusing pulls for want of credentials
	// now, absent when none is.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	ImagePulls []PullIncident `json:"imagePulls,omitempty"`
}

// CredentialWatch watches the secrets and certificates of an Azure service principal and reports
// when they near expiry.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cw,categories=credwatch
// +kubebuilder:validation:XValidation:rule="!has(self.spec.target.aksFleet) || !has(self.spec.target.aksFleet.createWatches) || size(self.metadata.name) <= 242",message="a fleet with createWatches names its watches <its name>-<10 hex digits>, so its own name may be at most 242 characters"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.target.aksFleet) || !has(self.spec.target.aksFleet.createWatches) || !has(self.spec.target.aksFleet.createWatches.rotation) || self.spec.target.aksFleet.createWatches.rotation.secretRef.name != 'credwatch-rotation-' + self.metadata.name",message="createWatches.rotation.secretRef.name must not be credwatch-rotation-<the fleet's name>: each watch keeps its new secret in Secret credwatch-rotation-<its own name> until it is in use; name another prefix, such as <the fleet's name>-sp"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Earliest Expiry",type=string,JSONPath=`.status.earliestExpiry`
// +kubebuilder:printcolumn:name="Expires In",type=string,JSONPath=`.status.expiresIn`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Client ID",type=string,JSONPath=`.status.servicePrincipal.appID`,priority=1
// +kubebuilder:printcolumn:name="In Use",type=string,JSONPath=`.status.inUse`,priority=1
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.rotation) || self.spec.rotation.secretRef.name != 'credwatch-rotation-' + self.metadata.name",message="spec.rotation.secretRef.name must not be credwatch-rotation-<the watch's name>: that is the Secret a rotation keeps its new secret in until it is in use; name another, such as <the watch's name>-sp"
type CredentialWatch struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what to watch and how.
	// +required
	Spec CredentialWatchSpec `json:"spec"`

	// Status is what the operator last saw.
	// +optional
	Status CredentialWatchStatus `json:"status,omitempty"`
}

// CredentialWatchList is a list of CredentialWatch.
// +kubebuilder:object:root=true
type CredentialWatchList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the watches.
	Items []CredentialWatch `json:"items"`
}

func init() {
	SchemeBuilder.Register(&CredentialWatch{}, &CredentialWatchList{})
}

// AppID is the appId the watch watches: its target's, or the one its AKS cluster was last seen
// signing in with; empty when not known yet, when the cluster uses a managed identity, and on a
// tenant scan, which watches many.
func (w *CredentialWatch) AppID() string {
	if sp := w.Spec.Target.ServicePrincipal; sp != nil {
		return sp.ClientID
	}
	if c := w.Status.AKSCluster; c != nil {
		return c.ClientID
	}
	return ""
}
