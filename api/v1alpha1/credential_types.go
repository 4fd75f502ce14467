package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// CredentialType tells a client secret from a certificate.
// +kubebuilder:validation:Enum=Password;Certificate
type CredentialType string

const (
	// CredentialTypePassword is a client secret (Graph passwordCredential).
	CredentialTypePassword CredentialType = "Password"
	// CredentialTypeCertificate is a certificate (Graph keyCredential).
	CredentialTypeCertificate CredentialType = "Certificate"
)

// CredentialSource is the Graph object a credential is attached to.
// +kubebuilder:validation:Enum=Application;ServicePrincipal
type CredentialSource string

const (
	// SourceApplication is the application object (the portal's app registration).
	SourceApplication CredentialSource = "Application"
	// SourceServicePrincipal is the service principal object (the portal's enterprise application).
	SourceServicePrincipal CredentialSource = "ServicePrincipal"
)

// CredentialState is how close a credential is to its expiry.
// +kubebuilder:validation:Enum=Valid;Warning;Critical;Expired
type CredentialState string

const (
	// StateValid is further from expiry than the warning threshold.
	StateValid CredentialState = "Valid"
	// StateWarning is within the warning threshold.
	StateWarning CredentialState = "Warning"
	// StateCritical is within the critical threshold.
	StateCritical CredentialState = "Critical"
	// StateExpired is past its end time.
	StateExpired CredentialState = "Expired"
)

// Credential is one secret or certificate as Microsoft Graph describes it. It never holds the
// secret itself: Graph returns that only once, when the secret is created.
type Credential struct {
	// KeyID is Graph's keyId, unique for the credential.
	KeyID string `json:"keyID"`

	// Type is Password (client secret) or Certificate.
	Type CredentialType `json:"type"`

	// Source is the object the credential is attached to: Application or ServicePrincipal.
	Source CredentialSource `json:"source"`

	// DisplayName is the credential's description, as set by whoever created it.
	// +optional
	DisplayName string `json:"displayName,omitempty"`

	// Hint is the first characters of a client secret, as Graph reports it to tell secrets apart.
	// +optional
	Hint string `json:"hint,omitempty"`

	// StartTime is when the credential became valid.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// EndTime is when the credential expires.
	EndTime metav1.Time `json:"endTime"`

	// State is Valid, Warning, Critical or Expired, as of the last reconcile.
	State CredentialState `json:"state"`

	// AppID is the appId of the application the credential belongs to; set on tenant scans,
	// where status lists the credentials of many.
	// +optional
	AppID string `json:"appID,omitempty"`

	// AppDisplayName is the display name of that application; set on tenant scans.
	// +optional
	AppDisplayName string `json:"appDisplayName,omitempty"`

	// AppObjectID is the object ID of that application's registration, by which Graph addresses
	// its owners; set on tenant scans, when the tenant holds the registration.
	// +optional
	AppObjectID string `json:"appObjectID,omitempty"`

	// LastSignIn is the credential's last sign-in as Graph's sign-in activity report has it, with
	// spec.usage.signIns: hours behind, and during the report's preview it may count sign-ins
	// that did not complete.
	// +optional
	LastSignIn *metav1.Time `json:"lastSignIn,omitempty"`

	// InUse says the credential signed in within spec.usage.activeWithin.
	// +optional
	InUse bool `json:"inUse,omitempty"`

	// AddedTime is when credwatch first saw the credential on an application it already
	// watched, added by something other than its own rotation: by hand, a pipeline, or someone
	// keeping access to the tenant. Absent for the credentials of a watch's first check.
	// +optional
	AddedTime *metav1.Time `json:"addedTime,omitempty"`

	// AddedBy is who added it and from where, as the directory audit log says (ReadAuditLog),
	// or why credwatch cannot tell; set with AddedTime.
	// +optional
	AddedBy string `json:"addedBy,omitempty"`
}
