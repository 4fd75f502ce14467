package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Alerts says who is told about a watch's credentials, and when. A watch that names no channel
// uses the operator's default channels, unless useDefaultChannels is false.
type Alerts struct {
	// Slack posts to a Slack channel, with a bot token or through an incoming webhook.
	// +optional
	Slack *SlackAlerts `json:"slack,omitempty"`

	// Email mails a list of recipients, and optionally the application's owners.
	// +optional
	Email *EmailAlerts `json:"email,omitempty"`

	// Teams posts an Adaptive Card to a Microsoft Teams channel through its Workflows webhook.
	// +optional
	Teams *TeamsAlerts `json:"teams,omitempty"`

	// Webhook POSTs a JSON document (schema credwatch.dev/v1, see docs/webhook.md) for anything
	// else: PagerDuty or Opsgenie bridges, ticketing.
	// +optional
	Webhook *WebhookAlerts `json:"webhook,omitempty"`

	// UseDefaultChannels, when this watch names no channel, sends its alerts to the operator's
	// default channels. Set it to false to send nothing at all.
	// +kubebuilder:default=true
	// +optional
	UseDefaultChannels *bool `json:"useDefaultChannels,omitempty"`

	// RemindBefore lists how long before expiry a reminder goes out, once each. After expiry a
	// message goes out once a day until the credential is gone.
	// +kubebuilder:default={"30d","14d","7d","3d","1d"}
	// +kubebuilder:validation:MaxItems=10
	// +listType=set
	// +optional
	RemindBefore []Duration `json:"remindBefore,omitempty"`

	// CheckFailureAfter is how long checks may fail (Graph unreachable, access denied) before
	// the channels are told; recovery is announced once.
	// +kubebuilder:default="1h"
	// +optional
	CheckFailureAfter Duration `json:"checkFailureAfter,omitempty"`

	// CredentialAddedSeverity is the severity of the alert that a credential was added to the
	// application by something other than credwatch: info, warning (the default) or critical;
	// a team that treats it as a possible intrusion pages on critical.
	// +kubebuilder:validation:Enum=info;warning;critical
	// +kubebuilder:default=warning
	// +optional
	CredentialAddedSeverity string `json:"credentialAddedSeverity,omitempty"`
}

// SecretKeyRef names one key of a Secret in the watch's namespace.
type SecretKeyRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Key in the Secret's data.
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// SlackAlerts posts to Slack. Set tokenSecretRef and channel, or webhookSecretRef.
// +kubebuilder:validation:XValidation:rule="has(self.tokenSecretRef) != has(self.webhookSecretRef)",message="slack needs exactly one of tokenSecretRef (with channel) or webhookSecretRef"
// +kubebuilder:validation:XValidation:rule="!has(self.tokenSecretRef) || has(self.channel)",message="slack.channel is required with tokenSecretRef: a bot token can post anywhere"
type SlackAlerts struct {
	// Channel is the channel ID or name a bot token posts to, such as C0123456789 or
	// #platform-alerts. An incoming webhook posts to its own channel.
	// +optional
	Channel string `json:"channel,omitempty"`

	// TokenSecretRef names the Secret key holding a bot token (xoxb-...) with chat:write.
	// +optional
	TokenSecretRef *SecretKeyRef `json:"tokenSecretRef,omitempty"`

	// WebhookSecretRef names the Secret key holding an incoming-webhook URL. The URL is a
	// credential, so it lives in a Secret.
	// +optional
	WebhookSecretRef *SecretKeyRef `json:"webhookSecretRef,omitempty"`
}

// EmailAlerts mails alerts through an SMTP server.
// +kubebuilder:validation:XValidation:rule="(has(self.to) && size(self.to) > 0) || (has(self.notifyOwners) && self.notifyOwners)",message="email needs recipients in to, or notifyOwners: true"
type EmailAlerts struct {
	// To lists the recipients.
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MaxLength=254
	// +kubebuilder:validation:items:Pattern=`^[^@\s]+@[^@\s]+$`
	// +optional
	To []string `json:"to,omitempty"`

	// NotifyOwners also mails the application's owners, as Microsoft Graph lists them, so that
	// the person who owns the app hears of it, not only a central inbox.
	// +optional
	NotifyOwners bool `json:"notifyOwners,omitempty"`

	// SMTP is the server that relays the mail.
	SMTP SMTPServer `json:"smtp"`
}

// SMTPTLS is how the SMTP connection is encrypted.
// +kubebuilder:validation:Enum=StartTLS;ImplicitTLS;None
type SMTPTLS string

const (
	// SMTPStartTLS upgrades a plain connection and refuses to send if the server cannot.
	SMTPStartTLS SMTPTLS = "StartTLS"
	// SMTPImplicitTLS speaks TLS from the first byte (usually port 465).
	SMTPImplicitTLS SMTPTLS = "ImplicitTLS"
	// SMTPNoTLS sends in the clear, for a relay on the same node or network only.
	SMTPNoTLS SMTPTLS = "None"
)

// SMTPServer is where mail is handed over, and as whom.
type SMTPServer struct {
	// Host is the server's DNS name or address.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Host string `json:"host"`

	// Port is the server's port: usually 587 for StartTLS, 465 for ImplicitTLS.
	// +kubebuilder:default=587
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// TLS is StartTLS (the default), ImplicitTLS or None.
	// +kubebuilder:default=StartTLS
	// +optional
	TLS SMTPTLS `json:"tls,omitempty"`

	// From is the sender address.
	// +kubebuilder:validation:Pattern=`^[^@\s]+@[^@\s]+$`
	// +kubebuilder:validation:MaxLength=254
	From string `json:"from"`

	// AuthSecretRef names a Secret with keys username and password for SMTP AUTH. In a watch's
	// own alerts the Secret must be labelled credwatch.dev/smtp-auth=true (SMTPAuthLabel): the
	// relay the watch names gets the password.
	// +optional
	AuthSecretRef *corev1.LocalObjectReference `json:"authSecretRef,omitempty"`

	// CASecretRef names a Secret whose key ca.crt holds the PEM certificates that the server's
	// certificate must chain to, for relays with a private CA. Absent, the system's roots.
	// +optional
	CASecretRef *corev1.LocalObjectReference `json:"caSecretRef,omitempty"`
}

// TeamsAlerts posts to a Microsoft Teams channel.
type TeamsAlerts struct {
	// WebhookSecretRef names the Secret key holding the Workflows webhook URL.
	WebhookSecretRef SecretKeyRef `json:"webhookSecretRef"`
}

// WebhookAlerts POSTs alerts as JSON.
type WebhookAlerts struct {
	// URLSecretRef names the Secret key holding the URL; URLs often carry a token.
	URLSecretRef SecretKeyRef `json:"urlSecretRef"`

	// SigningKeySecretRef names the Secret key holding an HMAC key; with it every request carries
	// X-Credwatch-Signature so the receiver can check it came from credwatch.
	// +optional
	SigningKeySecretRef *SecretKeyRef `json:"signingKeySecretRef,omitempty"`
}

// SentAlert records the latest alert delivered about one subject on one channel. Reminder steps
// are ordered by when they fall due, so the latest is all that needs remembering: a step is sent
// only when it falls due after the one recorded.
type SentAlert struct {
	// Channel is slack, email, teams or webhook.
	Channel string `json:"channel"`
	// Subject is the credential (Source/keyID) or "check" for check failures.
	Subject string `json:"subject"`
	// Step names the schedule step: a remindBefore duration such as 7d, expired+3d, or failing.
	Step string `json:"step"`
	// DueTime is when the step fell due; a later step is sent, an earlier or equal one is not.
	DueTime metav1.Time `json:"dueTime"`
	// SentTime is when it was delivered.
	SentTime metav1.Time `json:"sentTime"`
}

// ChannelFailure records a channel whose deliveries fail, for backoff across restarts.
type ChannelFailure struct {
	// Channel is slack, email, teams or webhook.
	Channel string `json:"channel"`
	// Failures counts failed deliveries since the last success.
	Failures int32 `json:"failures"`
	// Message says why the last delivery failed; it never holds a secret.
	Message string `json:"message"`
	// Reason is the AlertsDelivered reason this failure gives: DestinationRefused when the
	// operator's destination policy refused the channel's destination, else DeliveryFailed.
	// +optional
	Reason string `json:"reason,omitempty"`
	// NextAttemptTime is when delivery is tried again.
	NextAttemptTime metav1.Time `json:"nextAttemptTime"`
}

// AlertsStatus is the delivery ledger: what was sent, and which channels are failing.
type AlertsStatus struct {
	// Sent holds the latest alert delivered per channel and subject.
	// +listType=atomic
	// +optional
	Sent []SentAlert `json:"sent,omitempty"`

	// Failing lists channels whose last delivery failed.
	// +listType=atomic
	// +optional
	Failing []ChannelFailure `json:"failing,omitempty"`
}

// SMTPAuthLabel, set to "true" on a Secret, lets a watch's own email channel send its username
// and password to the SMTP relay the watch names. Without it, any Secret of the namespace with
// those keys would go to any relay whoever may create a watch chose.
const SMTPAuthLabel = "credwatch.dev/smtp-auth"
