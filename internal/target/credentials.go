package target

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/policy"
)

// SAML is the preferredSingleSignOnMode of a service principal set up for SAML single sign-on.
const SAML = "saml"

// Credential is c as status records it.
func Credential(c graph.Credential) v1alpha1.Credential {
	cred := v1alpha1.Credential{
		KeyID:       c.KeyID,
		Type:        v1alpha1.CredentialType(c.Type),
		Source:      v1alpha1.CredentialSource(c.Source),
		DisplayName: c.DisplayName,
		Hint:        c.Hint,
		// Status stores whole seconds; a fraction kept here would differ from the stored value,
		// and every schedule computed from it would differ from the last one.
		EndTime: metav1.NewTime(c.End.Truncate(time.Second)),
	}
	if !c.Start.IsZero() {
		start := metav1.NewTime(c.Start.Truncate(time.Second))
		cred.StartTime = &start
	}
	return cred
}

// Credentials lists a snapshot's credentials as status records them, soonest expiry first.
func Credentials(snap graph.Snapshot) []v1alpha1.Credential {
	out := make([]v1alpha1.Credential, 0, len(snap.Credentials))
	for _, c := range snap.Credentials {
		out = append(out, Credential(c))
	}
	slices.SortStableFunc(out, policy.BySoonestEnd)
	return out
}
