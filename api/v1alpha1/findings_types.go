package v1alpha1

// Hygiene is the policy a watch's credentials are held to, beyond their expiry: reports of
// credentials people ask for again and again flag secrets that live too long, applications with
// too many, and secrets where the portal does not show them.
// +kubebuilder:validation:XValidation:rule="!has(self.maxLifetime) || !self.maxLifetime.matches('^[0-9]{1,6}[smhdw]$') || int(self.maxLifetime.substring(0, size(self.maxLifetime)-1)) * {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800}[self.maxLifetime.substring(size(self.maxLifetime)-1)] >= 86400",message="hygiene.maxLifetime must be at least 1d, such as 365d or 730d"
type Hygiene struct {
	// MaxLifetime is the longest a credential may be valid, from its start to its end; one
	// valid for longer is reported LongLived. Absent, 730d (two years, Graph's default for a new
	// secret; a day is allowed over it, since two calendar years may hold a leap day).
	// +optional
	MaxLifetime Duration `json:"maxLifetime,omitempty"`

	// MaxLiveSecrets is how many client secrets an application may hold that have not expired,
	// on its application and service-principal objects together; one with more is reported
	// ManySecrets. Absent, 2: the one in use and the one replacing it.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxLiveSecrets *int32 `json:"maxLiveSecrets,omitempty"`

	// UnusedAfter is how long a credential may go without signing in, when the watch reads
	// sign-ins (spec.usage.signIns): one older than that which has not signed in for as long is
	// reported Unused, or NeverUsed when the report knows no sign-in of it. Absent, 90d.
	// +optional
	UnusedAfter Duration `json:"unusedAfter,omitempty"`
}

// FindingKind names what is wrong with a credential, or with an application's credentials.
// +kubebuilder:validation:Enum=StartAfterEnd;NeverExpires;ServicePrincipalSecret;ManySecrets;LongLived;NeverUsed;Unused;NotYetValid
type FindingKind string

const (
	// FindingStartAfterEnd is a credential that starts after it ends: it never works.
	FindingStartAfterEnd FindingKind = "StartAfterEnd"
	// FindingNeverExpires is a credential whose end is the portal's "never" (year 2299 or later).
	FindingNeverExpires FindingKind = "NeverExpires"
	// FindingServicePrincipalSecret is a client secret on the service-principal object, which
	// the portal's app-registration blade does not show (az ad sp credential reset puts it there).
	FindingServicePrincipalSecret FindingKind = "ServicePrincipalSecret"
	// FindingManySecrets is an application with more live client secrets than the policy allows.
	FindingManySecrets FindingKind = "ManySecrets"
	// FindingLongLived is a credential valid for longer than the policy allows.
	FindingLongLived FindingKind = "LongLived"
	// FindingNeverUsed is a credential older than hygiene.unusedAfter that Graph's sign-in
	// activity report knows no sign-in of.
	FindingNeverUsed FindingKind = "NeverUsed"
	// FindingUnused is a credential older than hygiene.unusedAfter that has not signed in for as
	// long.
	FindingUnused FindingKind = "Unused"
	// FindingNotYetValid is a credential whose start is still to come.
	FindingNotYetValid FindingKind = "NotYetValid"
)

// FindingKinds are the kinds, most serious first.
var FindingKinds = []FindingKind{FindingStartAfterEnd, FindingNeverExpires, FindingServicePrincipalSecret,
	FindingManySecrets, FindingLongLived, FindingNeverUsed, FindingUnused, FindingNotYetValid}

// Finding is one credential, or one application, that breaks the watch's hygiene policy.
type Finding struct {
	// Kind is what is wrong.
	Kind FindingKind `json:"kind"`

	// AppID is the application's appId; set on tenant scans, where findings are of many.
	// +optional
	AppID string `json:"appID,omitempty"`

	// AppDisplayName is the application's display name; set on tenant scans.
	// +optional
	AppDisplayName string `json:"appDisplayName,omitempty"`

	// KeyID is the credential's keyId; empty for ManySecrets, which is of the application.
	// +optional
	KeyID string `json:"keyID,omitempty"`

	// Type is Password or Certificate; empty for ManySecrets.
	// +optional
	Type CredentialType `json:"type,omitempty"`

	// Source is the object the credential is on; empty for ManySecrets.
	// +optional
	Source CredentialSource `json:"source,omitempty"`

	// Message says what was found and what to do about it.
	Message string `json:"message"`
}

// FindingsStatus counts the findings of each kind, and lists the most serious.
type FindingsStatus struct {
	// StartAfterEnd, NeverExpires, ServicePrincipalSecret, ManySecrets, LongLived, NeverUsed,
	// Unused and NotYetValid count the findings of each kind.
	// +optional
	StartAfterEnd int32 `json:"startAfterEnd,omitempty"`
	// +optional
	NeverExpires int32 `json:"neverExpires,omitempty"`
	// +optional
	ServicePrincipalSecret int32 `json:"servicePrincipalSecret,omitempty"`
	// +optional
	ManySecrets int32 `json:"manySecrets,omitempty"`
	// +optional
	LongLived int32 `json:"longLived,omitempty"`
	// +optional
	NeverUsed int32 `json:"neverUsed,omitempty"`
	// +optional
	Unused int32 `json:"unused,omitempty"`
	// +optional
	NotYetValid int32 `json:"notYetValid,omitempty"`

	// Items are the findings, most serious kind first, at most 50; metrics count them all.
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	// +optional
	Items []Finding `json:"items,omitempty"`

	// Unlisted is how many findings Items leaves out for size.
	// +optional
	Unlisted int32 `json:"unlisted,omitempty"`
}

// Count is how many findings of kind s counts.
func (s *FindingsStatus) Count(kind FindingKind) int32 {
	if p := s.count(kind); p != nil {
		return *p
	}
	return 0
}

// SetCount sets how many findings of kind s counts.
func (s *FindingsStatus) SetCount(kind FindingKind, n int32) {
	if p := s.count(kind); p != nil {
		*p = n
	}
}

func (s *FindingsStatus) count(kind FindingKind) *int32 {
	switch kind {
	case FindingStartAfterEnd:
		return &s.StartAfterEnd
	case FindingNeverExpires:
		return &s.NeverExpires
	case FindingServicePrincipalSecret:
		return &s.ServicePrincipalSecret
	case FindingManySecrets:
		return &s.ManySecrets
	case FindingLongLived:
		return &s.LongLived
	case FindingNeverUsed:
		return &s.NeverUsed
	case FindingUnused:
		return &s.Unused
	case FindingNotYetValid:
		return &s.NotYetValid
	}
	return nil
}
