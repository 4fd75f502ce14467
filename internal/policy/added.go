package policy

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// MarkAdded sets AddedTime on the credentials of now that before, the credentials of the last
// check of the same application, did not hold, unless credwatch's own rotation added them. A
// credential is known by its object, its type and its keyId: a certificate's keyId is the
// caller's to choose, and one reused on the other object is another credential. The rotation's
// secret is an application secret, known by keyId or, before its keyId is recorded, by the
// display name the rotation chose before creating it (a crash between Graph's answer and the
// status write leaves only that); own says whether another watch's rotation made a secret.
// Credentials before held keep their AddedTime and AddedBy. It returns those it marked. first is
// true for a watch's first check of the application, which records what is there and marks
// nothing: nothing says when it was added.
func MarkAdded(now []v1alpha1.Credential, before []v1alpha1.Credential, first bool, r *v1alpha1.RotationStatus, last *v1alpha1.LastRotation,
	own func(v1alpha1.Credential) bool, at metav1.Time) []v1alpha1.Credential {
	known := make(map[string]v1alpha1.Credential, len(before))
	for _, c := range before {
		known[credentialKey(c)] = c
	}
	var marked []v1alpha1.Credential
	for i := range now {
		c := &now[i]
		was, ok := known[credentialKey(*c)]
		switch {
		case ok:
			c.AddedTime, c.AddedBy = was.AddedTime, was.AddedBy
		case first || ownSecret(*c, r, last) || (own != nil && c.Source == v1alpha1.SourceApplication && c.Type == v1alpha1.CredentialTypePassword && own(*c)):
		default:
			t := at
			c.AddedTime = &t
			marked = append(marked, *c)
		}
	}
	return marked
}

// credentialKey is a credential's identity: its object, its type and its keyId.
func credentialKey(c v1alpha1.Credential) string {
	return string(c.Source) + "/" + string(c.Type) + "/" + strings.ToLower(c.KeyID)
}

// ownSecret reports whether c is the secret of credwatch's rotation, in progress or last done:
// an application secret, its keyId the rotation's, or, while the rotation has none recorded, its
// name the one the rotation chose.
func ownSecret(c v1alpha1.Credential, r *v1alpha1.RotationStatus, last *v1alpha1.LastRotation) bool {
	if c.Source != v1alpha1.SourceApplication || c.Type != v1alpha1.CredentialTypePassword {
		return false
	}
	if last != nil && strings.EqualFold(last.KeyID, c.KeyID) {
		return true
	}
	return r != nil && (strings.EqualFold(r.KeyID, c.KeyID) || r.KeyID == "" && r.DisplayName != "" && c.DisplayName == r.DisplayName)
}
