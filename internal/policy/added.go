package policy

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// MarkAdded sets AddedTime on the credentials of now that before, the credentials of the last
// check of the same application, did not hold, unless credwatch's own rotation added them:
// its secret, by keyId or by the display name it chose before creating it (a crash between
// Graph's answer and the status write leaves only that). Credentials before held keep
// their AddedTime. It returns those it marked. first is true for a watch's first check of the
// application, which records what is there and marks nothing: nothing says when it was added.
func MarkAdded(now []v1alpha1.Credential, before []v1alpha1.Credential, first bool, r *v1alpha1.RotationStatus, last *v1alpha1.LastRotation, at metav1.Time) []v1alpha1.Credential {
	known := make(map[string]*metav1.Time, len(before))
	for _, c := range before {
		known[strings.ToLower(c.KeyID)] = c.AddedTime
	}
	var marked []v1alpha1.Credential
	for i := range now {
		c := &now[i]
		was, ok := known[strings.ToLower(c.KeyID)]
		switch {
		case ok:
			c.AddedTime = was
		case first || ownSecret(*c, r, last):
		default:
			t := at
			c.AddedTime = &t
			marked = append(marked, *c)
		}
	}
	return marked
}

// ownSecret reports whether c is the secret of credwatch's rotation, in progress or last done.
func ownSecret(c v1alpha1.Credential, r *v1alpha1.RotationStatus, last *v1alpha1.LastRotation) bool {
	if last != nil && strings.EqualFold(last.KeyID, c.KeyID) {
		return true
	}
	return r != nil && (strings.EqualFold(r.KeyID, c.KeyID) ||
		c.Type == v1alpha1.CredentialTypePassword && r.DisplayName != "" && c.DisplayName == r.DisplayName)
}
