// Package alertkind names what an alert announces. It is a leaf of its own so that deciding
// which alerts are due (internal/policy and the target kinds) and delivering them
// (internal/notify) share the words without either importing the other.
package alertkind

// Kind is what an alert announces.
type Kind string

const (
	// Reminder: a credential expires within one of the watch's reminder steps.
	Reminder Kind = "Reminder"
	// Expired: a credential has expired; repeated daily while it stays.
	Expired Kind = "Expired"
	// Resolved: a credential that was alerted on is gone (rotated or removed), or was renewed by
	// credwatch's own rotation, whose new secret is in use.
	Resolved Kind = "Resolved"
	// CheckFailing: the watch has not been able to read Graph for longer than allowed.
	CheckFailing Kind = "CheckFailing"
	// CheckRecovered: reading Graph works again after a CheckFailing alert.
	CheckRecovered Kind = "CheckRecovered"
	// Rotated: credwatch put a new secret in place.
	Rotated Kind = "Rotated"
	// RotationFailing: a rotation step keeps failing.
	RotationFailing Kind = "RotationFailing"
	// RotationHeld: an old secret still signs in usage.retireWait after the rotation's new one
	// was put in use; nothing is retired until it stops.
	RotationHeld Kind = "RotationHeld"
	// Unused: an expiring credential nothing signed in with for usage.unusedAfter, while another
	// credential of the application is in use; told once instead of reminders.
	Unused Kind = "Unused"
	// CredentialAdded: a credential appeared on a watched application or service principal,
	// added by something other than credwatch's rotation; told once.
	CredentialAdded Kind = "CredentialAdded"
	// PullsRefused: a registry refuses the cluster's image pulls for want of credentials.
	PullsRefused Kind = "PullsRefused"
	// PullsRecovered: the registry of a PullsRefused alert refuses no pull any more.
	PullsRecovered Kind = "PullsRecovered"
	// SigningKeyDrift: the cluster's API servers disagree on the service-account token keys.
	SigningKeyDrift Kind = "SigningKeyDrift"
	// SigningKeysAgree: the API servers of a SigningKeyDrift alert agree again.
	SigningKeysAgree Kind = "SigningKeysAgree"
	// IssuerChanged: the cluster's service-account issuer URL changed.
	IssuerChanged Kind = "IssuerChanged"
	// ManagedIdentity: an AKS cluster of a fleet signs in with a managed identity now, and no
	// longer depends on a service principal's secret.
	ManagedIdentity Kind = "ManagedIdentity"
	// DigestsLate: a period of owner digests ended before they could all go out.
	DigestsLate Kind = "DigestsLate"
)
