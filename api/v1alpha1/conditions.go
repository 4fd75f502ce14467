package v1alpha1

// Condition types of a CredentialWatch.
const (
	// ConditionReady is True when the last check of Microsoft Graph succeeded.
	ConditionReady = "Ready"
	// ConditionExpiring is True when a credential is within the warning or critical threshold.
	ConditionExpiring = "Expiring"
	// ConditionExpired is True when a credential is past its end time.
	ConditionExpired = "Expired"
	// ConditionAlertsDelivered is True when every alert that fell due reached its channels.
	ConditionAlertsDelivered = "AlertsDelivered"
	// ConditionRotating is True while a rotation is in progress; its reason is the step.
	ConditionRotating = "Rotating"
	// ConditionSigningKeyDrift is True while the API servers disagree on the service-account
	// token keys of a serviceAccountIssuer target; its reason says how.
	ConditionSigningKeyDrift = "SigningKeyDrift"
	// ConditionImagePullsAuthorized is False while a registry of spec.imagePulls refuses pulls
	// for want of credentials; absent without spec.imagePulls.
	ConditionImagePullsAuthorized = "ImagePullsAuthorized"
	// ConditionSignInsRead is True when the credentials' sign-ins were read as
	// spec.usage.signIns asks; absent without it.
	ConditionSignInsRead = "SignInsRead"
)

// Reasons of the SignInsRead condition besides IdentityNotAllowed, AccessDenied and the other
// reasons of a failed read.
const (
	// ReasonSignInsRead: the report was read.
	ReasonSignInsRead = "Read"
	// ReasonSignInsUnavailable: the report cannot be had here: a tenant without Entra ID P1 or
	// P2, or a cloud other than the global one.
	ReasonSignInsUnavailable = "SignInsUnavailable"
)

// Reasons of the SigningKeyDrift condition. When several hold, the condition gives the first in
// this order, the most severe: a key signing now that another server rejects, a canary token
// rejected, issuers that differ, a key gone while its tokens live, tokens signed recently that a
// server rejects.
const (
	// ReasonKeysAgree: every API server accepts the tokens the others sign.
	ReasonKeysAgree = "KeysAgree"
	// ReasonSigningKeyNotShared: an API server signs with a key another does not serve.
	ReasonSigningKeyNotShared = "SigningKeyNotShared"
	// ReasonCanaryRejected: a token minted through one API server was rejected by another.
	ReasonCanaryRejected = "CanaryRejected"
	// ReasonIssuersDiffer: the API servers announce different issuer URLs.
	ReasonIssuersDiffer = "IssuersDiffer"
	// ReasonKeyRemovedEarly: a key left the key set while tokens it signed are still valid.
	ReasonKeyRemovedEarly = "KeyRemovedEarly"
	// ReasonSignedTokensStillRejected: an API server no longer signs with a key another does not
	// serve, but tokens it signed with that key before are still valid, and rejected there: the
	// aftermath of drift, until the tokens' lifetime runs out.
	ReasonSignedTokensStillRejected = "SignedTokensStillRejected"
)

// Reasons of the Ready condition of a serviceAccountIssuer target.
const (
	// ReasonEndpointUnreachable: an API server could not be read.
	ReasonEndpointUnreachable = "EndpointUnreachable"
	// ReasonCanaryUnavailable: no canary token could be minted: the ServiceAccount or the right
	// to create its tokens is missing.
	ReasonCanaryUnavailable = "CanaryUnavailable"
	// ReasonIssuerNotChecked: the operator runs without service-account issuer checks.
	ReasonIssuerNotChecked = "IssuerNotChecked"
	// ReasonEndpointNotAllowed: the watch names an endpoint that is not known to be an API server
	// of this cluster; it was not contacted.
	ReasonEndpointNotAllowed = "EndpointNotAllowed"
)

// Reasons of the ImagePullsAuthorized condition.
const (
	// ReasonNoPullFailures: no registry of spec.imagePulls refused a pull in the window.
	ReasonNoPullFailures = "NoPullFailures"
	// ReasonClusterWidePullFailures: a registry refuses pulls on many nodes: the cluster's credential.
	ReasonClusterWidePullFailures = "ClusterWidePullFailures"
	// ReasonNodeLocalPullFailures: a registry refuses pulls on a few nodes only: their kubelets.
	ReasonNodeLocalPullFailures = "NodeLocalPullFailures"
	// ReasonPullFailures: a registry refuses pulls, and there is too little to tell where the fault is.
	ReasonPullFailures = "PullFailures"
	// ReasonPullsNotWatched (Unknown): the watch asks for image pulls, and the operator runs with
	// --image-pulls=false.
	ReasonPullsNotWatched = "NotWatched"
	// ReasonPullsListing (Unknown): the operator has not listed the cluster's pulls yet.
	ReasonPullsListing = "Listing"
	// ReasonPullsListFailed (Unknown): the operator cannot list or watch the cluster's pulls.
	ReasonPullsListFailed = "ListFailed"
)

// Reasons of the Ready condition. Each failure has its own, because each needs a different fix.
const (
	// ReasonChecked: Graph was read and the credentials recorded.
	ReasonChecked = "Checked"
	// ReasonManagedIdentity: the AKS cluster signs in with a managed identity; it has no secret to
	// expire.
	ReasonManagedIdentity = "ManagedIdentity"
	// ReasonClusterNotFound: Resource Manager has no such AKS cluster.
	ReasonClusterNotFound = "ClusterNotFound"
	// ReasonResourceManagerUnreachable: no answer from Azure Resource Manager, or a 5xx.
	ReasonResourceManagerUnreachable = "ResourceManagerUnreachable"
	// ReasonServicePrincipalNotFound: neither an application nor a service principal has the appId
	// in the tenant.
	ReasonServicePrincipalNotFound = "ServicePrincipalNotFound"
	// ReasonAccessDenied: Graph refused the operator's identity (403).
	ReasonAccessDenied = "AccessDenied"
	// ReasonAuthenticationFailed: no token could be obtained for the identity, or Graph rejected it (401).
	ReasonAuthenticationFailed = "AuthenticationFailed"
	// ReasonCredentialSecretInvalid: the Secret an identity signs in with is missing or malformed.
	ReasonCredentialSecretInvalid = "CredentialSecretInvalid"
	// ReasonNoIdentity: the watch names no identity, and the operator has no default identity.
	ReasonNoIdentity = "NoIdentity"
	// ReasonIdentityNotFound: the identity the watch names does not exist.
	ReasonIdentityNotFound = "IdentityNotFound"
	// ReasonIdentityNotReady: the identity the watch names has not signed in, or failed to.
	ReasonIdentityNotReady = "IdentityNotReady"
	// ReasonIdentityNotAllowed: the identity does not allow what the watch asks of it (its
	// namespace, tenant, application, cluster or operation); nothing was sent to Azure.
	ReasonIdentityNotAllowed = "IdentityNotAllowed"
	// ReasonTooManyFleets: the namespace runs as many aksFleet watches as it may, and this one,
	// the newest, is not checked; nothing was sent to Azure.
	ReasonTooManyFleets = "TooManyFleets"
	// ReasonTooManyScans: the namespace runs as many tenantScan watches as it may, and this one,
	// the newest, is not checked; nothing was sent to Graph.
	ReasonTooManyScans = "TooManyScans"
	// ReasonIdentityMigrationNeeded: the watch still carries azureCredentialRef, which is no
	// longer supported; it is not checked until it names an identity instead.
	ReasonIdentityMigrationNeeded = "IdentityMigrationNeeded"
	// ReasonThrottled: Graph answered 429; the next try waits at least its Retry-After.
	ReasonThrottled = "Throttled"
	// ReasonGraphUnreachable: no answer from Graph (connection refused, reset, timed out) or a 5xx.
	ReasonGraphUnreachable = "GraphUnreachable"
	// ReasonGraphError: Graph answered with an error none of the above covers.
	ReasonGraphError = "GraphError"
	// ReasonFilterRejected: Graph refused the tenant scan's filter.
	ReasonFilterRejected = "FilterRejected"
)

// Reasons of the Ready condition of an AzureIdentity or ClusterAzureIdentity, besides
// ReasonCredentialSecretInvalid and ReasonAuthenticationFailed.
const (
	// ReasonSignedIn: Entra ID issued the identity a token at its last sign-in.
	ReasonSignedIn = "SignedIn"
	// ReasonSignInUnavailable: Entra ID did not answer, or could not be reached.
	ReasonSignInUnavailable = "SignInUnavailable"
	// ReasonServiceAccountTokenFailed: the ServiceAccount token of a workload identity could not
	// be minted: the ServiceAccount is missing, or the operator may not create its tokens.
	ReasonServiceAccountTokenFailed = "ServiceAccountTokenFailed"
)

// Reasons of the Expiring and Expired conditions.
const (
	// ReasonWithinWarning: the earliest expiring credential is within the warning threshold.
	ReasonWithinWarning = "WithinWarning"
	// ReasonWithinCritical: a credential is within the critical threshold.
	ReasonWithinCritical = "WithinCritical"
	// ReasonNoneExpiring: every credential is further from expiry than the warning threshold.
	ReasonNoneExpiring = "NoneExpiring"
	// ReasonCredentialExpired: a credential is past its end time.
	ReasonCredentialExpired = "CredentialExpired"
	// ReasonNoneExpired: no credential is past its end time.
	ReasonNoneExpired = "NoneExpired"
)

// Reasons of the AlertsDelivered condition.
const (
	// ReasonDelivered: every due alert was delivered, or none was due.
	ReasonDelivered = "Delivered"
	// ReasonNoChannels: the watch names no channel and uses no default channel.
	ReasonNoChannels = "NoChannels"
	// ReasonChannelMisconfigured: a channel's Secret is missing or malformed; a person must fix it.
	ReasonChannelMisconfigured = "ChannelMisconfigured"
	// ReasonDeliveryFailed: a channel refused or did not answer; delivery is retried with backoff.
	ReasonDeliveryFailed = "DeliveryFailed"
	// ReasonDestinationRefused: a destination the watch names (a webhook, Teams or Slack webhook
	// URL, an SMTP host) is one the operator's destination policy refuses to connect to: inside
	// the cluster or its host, or plain http. Retried with backoff, in case its name moves.
	ReasonDestinationRefused = "DestinationRefused"
)

// Reasons of the Rotating condition besides the steps (RotationStep values), which are its
// reasons while a rotation is in progress.
const (
	// ReasonIdle: no rotation is due.
	ReasonIdle = "Idle"
	// ReasonDryRun: a rotation is due and was planned, not carried out (mode DryRun).
	ReasonDryRun = "DryRun"
	// ReasonRotationBlocked: a rotation is due but cannot start (no application object in the
	// tenant, a check failing, a cluster on a managed identity).
	ReasonRotationBlocked = "Blocked"
	// ReasonRotationTargetChanged: the spec names another tenant, application or cluster than the
	// rotation in progress pinned; before any reset it waits for the spec to be put back or the
	// rotation aborted, after one it finishes with what it pinned.
	ReasonRotationTargetChanged = "RotationTargetChanged"
	// ReasonRotationAborted: the last rotation was aborted; none starts by itself until the spec
	// changes or one is asked for.
	ReasonRotationAborted = "Aborted"
	// ReasonResetNeedsConfirmation: AKS resets reported failure three times; the rotation keeps
	// the old secret and waits for credwatch.dev/confirm-reset.
	ReasonResetNeedsConfirmation = "ResetNeedsConfirmation"
	// ReasonRotationOldSecretInUse: an old secret still signed in usage.retireWait after the new
	// one was put in use; the rotation retires nothing until it stops.
	ReasonRotationOldSecretInUse = "RotationOldSecretInUse"
	// ReasonRotationPaced: a rotation is due, but the application was rotated less than a day
	// ago, or the grace period of a rotation let go of by a deleted watch has not ended: rotations
	// of an application are paced whatever happens to the watches.
	ReasonRotationPaced = "Paced"
)
