package alerting

import (
	"strings"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// RotationSubject is the ledger subject of rotation alerts.
const RotationSubject = "rotation"

// rotationFailuresToAlert is how many failed tries of one rotation step make an alert: the first
// tries of waiting for a new secret to replicate are expected to fail.
const rotationFailuresToAlert = 5

// CheckSubject is the ledger subject of check-failure alerts.
const CheckSubject = "check"

// pullSubjectPrefix starts the ledger subjects of image-pull alerts, one per registry.
const pullSubjectPrefix = "pull/"

// PullSubject is the ledger subject of a registry's image-pull alerts.
func PullSubject(registry string) string { return pullSubjectPrefix + registry }

// PullRegistry is the registry of an image-pull alert's subject; ok is false for other subjects.
func PullRegistry(subject string) (registry string, ok bool) {
	return strings.CutPrefix(subject, pullSubjectPrefix)
}

// Ledger subjects of a serviceAccountIssuer target's alerts.
const (
	DriftSubject  = "issuer/drift"
	IssuerSubject = "issuer/url"
)

// credentialSubject reports whether subject is a credential's (see SubjectOf), not a check's, a
// rotation's, a registry's or an issuer's.
func credentialSubject(subject string) bool {
	_, _, ok := SubjectCredential(subject)
	return ok
}

// SubjectCredential is the object and keyId of a credential's subject (see SubjectOf); ok is
// false for other subjects.
func SubjectCredential(subject string) (source v1alpha1.CredentialSource, keyID string, ok bool) {
	src, keyID, _ := strings.Cut(subject, "/")
	if source = v1alpha1.CredentialSource(src); source != v1alpha1.SourceApplication && source != v1alpha1.SourceServicePrincipal {
		return "", "", false
	}
	return source, keyID, true
}

// SubjectOf is the ledger subject of a credential's alerts.
func SubjectOf(c v1alpha1.Credential) string { return string(c.Source) + "/" + c.KeyID }

// addedSubjectPrefix starts the ledger subjects of CredentialAdded alerts, one per credential:
// apart from its reminders, which go on as for any credential.
const addedSubjectPrefix = "added/"

// AddedSubject is the ledger subject of the CredentialAdded alert of c.
func AddedSubject(c v1alpha1.Credential) string { return addedSubjectPrefix + SubjectOf(c) }

// AddedCredential is the subject of a credential's CredentialAdded alert; ok is false for other
// subjects.
func AddedCredential(subject string) (credential string, ok bool) {
	return strings.CutPrefix(subject, addedSubjectPrefix)
}
