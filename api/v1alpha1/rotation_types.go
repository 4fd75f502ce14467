package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CheckAnnotation asks for a check of Graph now: set it to any new value, such as a timestamp.
const CheckAnnotation = "credwatch.dev/check"

// RotateAnnotation asks for a rotation now, in the spirit of `cmctl renew`: set it to any new
// value (a timestamp, say) and a watch with rotation enabled rotates once for that value.
const RotateAnnotation = "credwatch.dev/rotate"

// ConfirmResetAnnotation lets a rotation held after repeated failed AKS resets go on: set it to
// the operation ID status.rotation.resetOperation names (or, when that is empty because the held
// secret was replaced, to status.rotation.keyID), once the cluster was checked (or moved onto the
// new secret by hand). It is honoured only while the watch's identity allows
// ResetCluster on the cluster: whoever may have the cluster reset may confirm it was.
const ConfirmResetAnnotation = "credwatch.dev/confirm-reset"

// AbortRotationAnnotation withdraws the rotation in progress: set it to any new value (a
// timestamp, say). Before any AKS reset the new secret is removed from Graph and its staging
// Secret deleted; once a reset began, or the new secret is in use, the abort is refused and the
// rotation finishes. Turning rotation off aborts the same way.
const AbortRotationAnnotation = "credwatch.dev/abort-rotation"

// LiftPacingAnnotation, set to a new value on the pacing record of an application (a ConfigMap
// credwatch-pace-<hash> in the operator's namespace, which the Paced message names), lets one
// rotation of the application start before its pace allows. Only who may write ConfigMaps in the
// operator's namespace can set it; a watch's author cannot.
const LiftPacingAnnotation = "credwatch.dev/lift-pacing"

// RotationMode says whether rotation writes or only reports what it would do.
// +kubebuilder:validation:Enum=Apply;DryRun
type RotationMode string

const (
	// RotationApply rotates.
	RotationApply RotationMode = "Apply"
	// RotationDryRun plans and reports every step without calling a write API.
	RotationDryRun RotationMode = "DryRun"
)

// RemoveOldPolicy says which old secrets rotation may delete once the new one is in use.
// +kubebuilder:validation:Enum=Never;CreatedByCredwatch
type RemoveOldPolicy string

const (
	// RemoveOldNever keeps every old secret.
	RemoveOldNever RemoveOldPolicy = "Never"
	// RemoveOldCreatedByCredwatch deletes only secrets credwatch created: never one someone else made.
	RemoveOldCreatedByCredwatch RemoveOldPolicy = "CreatedByCredwatch"
)

// Rotation renews the application's client secret before it expires and, for an AKS target,
// moves the cluster onto the new one.
// +kubebuilder:validation:XValidation:rule="!has(self.publish) || self.publish.all(p, !has(p.githubActions) || p.githubActions.tokenSecretRef.name != self.secretRef.name)",message="a githubActions sink's tokenSecretRef must not name rotation.secretRef's Secret, which holds the client secret itself"
// +kubebuilder:validation:XValidation:rule="!has(self.rotateBefore) || !has(self.validity) || !self.rotateBefore.matches('^[0-9]{1,6}[smhdw]$') || !self.validity.matches('^[0-9]{1,6}[smhdw]$') || int(self.rotateBefore.substring(0, size(self.rotateBefore)-1)) * {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800}[self.rotateBefore.substring(size(self.rotateBefore)-1)] < int(self.validity.substring(0, size(self.validity)-1)) * {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800}[self.validity.substring(size(self.validity)-1)]",message="rotation.rotateBefore must be shorter than rotation.validity, or every new secret would be due for rotation at once"
type Rotation struct {
	// Enabled turns rotation on.
	Enabled bool `json:"enabled"`

	// Mode is Apply (the default) or DryRun, which plans and reports every step and writes nothing.
	// +kubebuilder:default=Apply
	// +optional
	Mode RotationMode `json:"mode,omitempty"`

	// RotateBefore is how long before the newest secret of the application expires a rotation
	// starts, at least 1h.
	// +kubebuilder:default="30d"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]{1,6}[smhdw]$') || int(self.substring(0, size(self)-1)) * {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800}[self.substring(size(self)-1)] >= 3600",message="rotation.rotateBefore must be at least 1h: a rotation takes time (Entra's replication, a maintenance window, an AKS reset) and must end before the old secret does"
	// +optional
	RotateBefore Duration `json:"rotateBefore,omitempty"`

	// Validity is how long a new secret lasts, from 1d to 730d: Graph's limit unless a tenant
	// policy sets a shorter one.
	// +kubebuilder:default="365d"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]{1,6}[smhdw]$') || int(self.substring(0, size(self)-1)) * {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800}[self.substring(size(self)-1)] >= 86400",message="rotation.validity must be at least 1d: a shorter secret would be due again before consumers could pick it up"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]{1,6}[smhdw]$') || int(self.substring(0, size(self)-1)) * {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800}[self.substring(size(self)-1)] <= 63072000",message="rotation.validity must be at most 730d, the longest secret Graph issues"
	// +optional
	Validity Duration `json:"validity,omitempty"`

	// SecretRef names the Secret in the watch's namespace that receives each new secret, under
	// the keys tenantID, clientID, clientSecret, keyID and expiry, for other consumers too.
	SecretRef SecretName `json:"secretRef"`

	// GracePeriod is how long old secrets stay after the new one is in use, for consumers that
	// still hold them; at least 1h.
	// +kubebuilder:default="7d"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]{1,6}[smhdw]$') || int(self.substring(0, size(self)-1)) * {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800}[self.substring(size(self)-1)] >= 3600",message="rotation.gracePeriod must be at least 1h: consumers that read the Secret (pods, pipelines) need time to move to the new secret before the old one goes"
	// +optional
	GracePeriod Duration `json:"gracePeriod,omitempty"`

	// RemoveOld says which old secrets are deleted after the grace period.
	// +kubebuilder:default=CreatedByCredwatch
	// +optional
	RemoveOld RemoveOldPolicy `json:"removeOld,omitempty"`

	// MaintenanceWindow limits when an AKS cluster is moved onto the new secret, a step that
	// restarts or reimages its nodes. Absent, any time.
	// +optional
	MaintenanceWindow *MaintenanceWindow `json:"maintenanceWindow,omitempty"`

	// Publish lists where else each new secret goes, for its consumers outside the cluster. Each
	// sink is written once the new secret is verified (and an AKS cluster moved onto it), before
	// any old secret may be retired: a sink that fails holds the retirement.
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Publish []PublishSink `json:"publish,omitempty"`
}

// SecretName names a Secret in the watch's namespace.
type SecretName struct {
	// Name of the Secret: a DNS subdomain name, such as payments-sp.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="secretRef.name must be a Secret name: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, such as payments-sp"
	Name string `json:"name"`
}

// MaintenanceWindow is a weekly window: on the given days, from start for duration, in timeZone.
type MaintenanceWindow struct {
	// Days are the days the window opens on; empty means every day.
	// +kubebuilder:validation:MaxItems=7
	// +listType=set
	// +optional
	Days []Weekday `json:"days,omitempty"`

	// Start is when the window opens, as HH:MM on a 24-hour clock.
	// +kubebuilder:validation:XValidation:rule="self.matches('^([01][0-9]|2[0-3]):[0-5][0-9]$')",message="start must be HH:MM on a 24-hour clock, such as 02:00"
	Start string `json:"start"`

	// Duration is how long the window stays open, from 30m to 24h.
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]{1,6}[smhdw]$') || int(self.substring(0, size(self)-1)) * {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800}[self.substring(size(self)-1)] >= 1800",message="duration must be at least 30m: an AKS reset takes minutes, and a window it cannot fit in never opens for it"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]{1,6}[smhdw]$') || int(self.substring(0, size(self)-1)) * {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800}[self.substring(size(self)-1)] <= 86400",message="duration must be at most 24h"
	Duration Duration `json:"duration"`

	// TimeZone is an IANA time zone, such as Europe/Amsterdam; UTC when empty.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TimeZone string `json:"timeZone,omitempty"`
}

// Weekday is a day of the week.
// +kubebuilder:validation:Enum=Monday;Tuesday;Wednesday;Thursday;Friday;Saturday;Sunday
type Weekday string

// RotationStep is where a rotation in progress is. Each step is written to status before the
// next begins, so that an operator that stops anywhere resumes where it was.
// +kubebuilder:validation:Enum=Started;SecretStored;SecretVerified;ClusterUpdating;Retiring
type RotationStep string

const (
	// StepStarted: the new secret's name is recorded; it may or may not exist in Graph yet.
	StepStarted RotationStep = "Started"
	// StepSecretStored: the new secret exists and is in the target Secret.
	StepSecretStored RotationStep = "SecretStored"
	// StepSecretVerified: Entra accepts the new secret.
	StepSecretVerified RotationStep = "SecretVerified"
	// StepClusterUpdating: the AKS cluster is being moved onto the new secret.
	StepClusterUpdating RotationStep = "ClusterUpdating"
	// StepRetiring: the new secret is in use; old ones go after the grace period.
	StepRetiring RotationStep = "Retiring"
)

// RotationStatus is the rotation in progress.
type RotationStatus struct {
	// Step is the step reached.
	Step RotationStep `json:"step"`
	// DisplayName names the new secret in Graph, chosen before it is created so that one left
	// behind by a crash is found again.
	DisplayName string `json:"displayName"`
	// Identity is the identity the rotation started with, which it acts with to its end, as
	// it is allowed at each step: an identityRef changed meanwhile can neither hold the rotation
	// where it is nor move it on with other rights. Absent from a rotation an earlier version
	// began, which takes the spec's.
	// +optional
	Identity *IdentityRef `json:"identity,omitempty"`
	// AppID and ApplicationObjectID are the application being rotated, fixed when the rotation
	// starts: if an AKS cluster moves to another service principal meanwhile, the rotation stops
	// rather than hand the cluster another application's secret.
	AppID               string `json:"appID"`
	ApplicationObjectID string `json:"applicationObjectID"`
	// TenantID is the application's tenant, fixed when the rotation starts. Absent from a
	// rotation started before tenants were pinned, which uses the spec's tenant.
	// +optional
	TenantID string `json:"tenantID,omitempty"`
	// Cluster is the AKS cluster the rotation moves onto the new secret, fixed when it starts:
	// should the watch stop naming it, the rotation waits rather than retire a secret the cluster
	// may still sign in with, or reset another cluster. Absent for a service principal target.
	// +optional
	Cluster *RotationCluster `json:"cluster,omitempty"`
	// KeyID is the new secret's keyId, once it exists.
	// +optional
	KeyID string `json:"keyID,omitempty"`
	// SecretDigest is the SHA-256 of the new secret's text, in hex, never the text: before each
	// sign-in check, reset, publication and retirement, the Secret holding the text must still
	// hold this one. A Secret changed to hold another secret's text under this keyId would move
	// the cluster onto a secret the rotation then retires.
	// +optional
	SecretDigest string `json:"secretDigest,omitempty"`
	// Expiry is when the new secret expires.
	// +optional
	Expiry *metav1.Time `json:"expiry,omitempty"`
	// ResumeToken follows the AKS reset operation across restarts. It names the operation and
	// holds no secret.
	// +optional
	ResumeToken string `json:"resumeToken,omitempty"`
	// AddTime is when addPassword was last sent for the new secret. An answer lost on the way may
	// hide a secret Graph made, which its list shows only later: no second one is added until
	// the list had time to show the first.
	// +optional
	AddTime *metav1.Time `json:"addTime,omitempty"`
	// Acceptances counts the sign-ins Entra accepted with the new secret since FirstAcceptedTime:
	// one is not enough, since Entra's replicas learn of a secret at different times.
	// +optional
	Acceptances int32 `json:"acceptances,omitempty"`
	// FirstAcceptedTime is when Entra first accepted the new secret.
	// +optional
	FirstAcceptedTime *metav1.Time `json:"firstAcceptedTime,omitempty"`
	// Resets counts the AKS resets this rotation attempted, including those refused at once.
	// +optional
	Resets int32 `json:"resets,omitempty"`
	// FailedResets counts the reset operations that reported failure. Such a reset may have
	// applied part of the change, so the old secret stays until a later one succeeds.
	// +optional
	FailedResets int32 `json:"failedResets,omitempty"`
	// ResetOperation is the ID of the last reset operation Resource Manager started, as
	// Azure-AsyncOperation names it; a held rotation is confirmed with it.
	// +optional
	ResetOperation string `json:"resetOperation,omitempty"`
	// StartTime is when the rotation started.
	StartTime metav1.Time `json:"startTime"`
	// StepTime is when the current step was reached.
	// +optional
	StepTime *metav1.Time `json:"stepTime,omitempty"`
	// RetireTime is when old secrets may go.
	// +optional
	RetireTime *metav1.Time `json:"retireTime,omitempty"`
	// Failures counts failed attempts at the current step.
	// +optional
	Failures int32 `json:"failures,omitempty"`
	// Message says what the current step waits for, or why it failed.
	// +optional
	Message string `json:"message,omitempty"`
	// NextAttemptTime is when the current step is tried again.
	// +optional
	NextAttemptTime *metav1.Time `json:"nextAttemptTime,omitempty"`
	// Request is the rotate annotation's value this rotation answers, if it was asked for.
	// +optional
	Request string `json:"request,omitempty"`
	// SecretName is spec.rotation.secretRef.name when the rotation started: the Secret that gets
	// the new secret once it is in use.
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// AbortRequest is the abort annotation's value when the rotation started, or when an abort
	// was refused: only another value asks this rotation to abort.
	// +optional
	AbortRequest string `json:"abortRequest,omitempty"`
	// NewSecretSignIn is when the new secret was first seen signing in after it was put in use
	// (spec.usage.signIns): its consumers, an AKS cluster among them, moved onto it.
	// +optional
	NewSecretSignIn *metav1.Time `json:"newSecretSignIn,omitempty"`
	// SignInsGated is true once retiring waited on sign-ins (spec.usage.signIns): from then on
	// old secrets go only on evidence nothing uses them, or when removed by hand, whatever
	// becomes of spec.usage, the identity or the licence.
	// +optional
	SignInsGated bool `json:"signInsGated,omitempty"`
	// OldSecretsInUse are the old secrets that signed in after the new one was put in use
	// (spec.usage.signIns): none is retired until they stop.
	// +listType=atomic
	// +optional
	OldSecretsInUse []KeySignIn `json:"oldSecretsInUse,omitempty"`
	// HeldTime is when waiting for old secrets to stop signing in outlasted usage.retireWait:
	// the rotation is held, and alerted, until they stop.
	// +optional
	HeldTime *metav1.Time `json:"heldTime,omitempty"`
	// Published are the sinks of spec.rotation.publish the new secret was written to, each once.
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	Published []PublishedSink `json:"published,omitempty"`
	// DeletionSeenTime is when credwatch first found the watch being deleted: it lets the watch
	// go an hour later at the latest, whatever the rotation's state.
	// +optional
	DeletionSeenTime *metav1.Time `json:"deletionSeenTime,omitempty"`
}

// LastAbort records the last rotation that was aborted.
type LastAbort struct {
	// Time is when it was aborted.
	Time metav1.Time `json:"time"`
	// Reason says who asked: the abort annotation, rotation turned off, the watch deleted.
	Reason string `json:"reason"`
	// Generation is the watch's generation then.
	Generation int64 `json:"generation"`
	// Request is the rotate annotation's value then, which does not start another rotation.
	// +optional
	Request string `json:"request,omitempty"`
}

// RotationCluster names the AKS cluster of a rotation.
type RotationCluster struct {
	SubscriptionID string `json:"subscriptionID"`
	ResourceGroup  string `json:"resourceGroup"`
	Name           string `json:"name"`
}

// LastRotation records the last rotation that completed.
type LastRotation struct {
	// Time is when it completed.
	Time metav1.Time `json:"time"`
	// KeyID is the secret it put in place.
	KeyID string `json:"keyID"`
	// Request is the rotate annotation's value it answered, if any.
	// +optional
	Request string `json:"request,omitempty"`
	// NewSecretSignIn is when the new secret was first seen signing in after it was put in use
	// (spec.usage.signIns).
	// +optional
	NewSecretSignIn *metav1.Time `json:"newSecretSignIn,omitempty"`
}
