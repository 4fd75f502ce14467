package v1alpha1

// DefaultOwnerMailAnnotation, set to "true" on a ClusterAzureIdentity, lets the operator's default
// channels (--default-alerts) mail the owners of the applications its watches check, when those
// channels ask for notifyOwners. Without it the default channels mail only their own recipients:
// the relay and its credentials are the admin's, and an identity that may read any application's
// owners would let a watch's author choose whom the organisation's relay mails.
const DefaultOwnerMailAnnotation = "credwatch.dev/default-owner-mail"

// IdentityConsentAnnotation is how a ServiceAccount consents to the workload identities that
// sign in with its tokens, which the operator mints: its value lists them, comma-separated, an
// AzureIdentity as <namespace>/<name> and a ClusterAzureIdentity as <name>. Only those who may
// edit the ServiceAccount can give it. azure.workload.identity/client-id, which consented in
// earlier releases, is on every workload-identity ServiceAccount already and let whoever may
// create an identity borrow any of them: it no longer consents.
const IdentityConsentAnnotation = "credwatch.dev/identity"
