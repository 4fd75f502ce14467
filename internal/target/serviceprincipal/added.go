package serviceprincipal

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
)

// EventCredentialAdded tells of a credential that appeared on a watched application, added by
// something other than credwatch's rotation.
const EventCredentialAdded = "CredentialAdded"

// markAdded marks the credentials of obj's status that before, its last check of the same
// application, did not hold and credwatch's rotation did not add (policy.MarkAdded), and tells of
// each in an event, at most target.MaxStateEvents, and to Added.
func (k Kind) markAdded(obj *v1alpha1.CredentialWatch, before []v1alpha1.Credential, first bool, now time.Time) {
	st := &obj.Status
	added := policy.MarkAdded(st.Credentials, before, first, st.Rotation, st.LastRotation, metav1.NewTime(now))
	for i, c := range added {
		if k.Added != nil {
			k.Added(obj.Spec.Target.TenantID())
		}
		if i == target.MaxStateEvents {
			k.Events.Eventf(obj, corev1.EventTypeWarning, EventCredentialAdded, "%d more credentials were added; status.credentials marks each with addedTime", len(added)-i)
			break
		}
		k.Events.Event(obj, corev1.EventTypeWarning, EventCredentialAdded, AddedMessage(st.ServicePrincipal, c))
	}
}

// AddedMessage tells of c, added to the application sp names by something other than credwatch.
func AddedMessage(sp *v1alpha1.ServicePrincipalStatus, c v1alpha1.Credential) string {
	what, cli, cert := "Certificate", "app", " --cert"
	if c.Type == v1alpha1.CredentialTypePassword {
		what, cert = "Secret", ""
	}
	if c.Source == v1alpha1.SourceServicePrincipal {
		// Invisible in the portal's app registration blade: say where to look.
		cli = "sp"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q (keyId %s", what, c.DisplayName, c.KeyID)
	if c.Hint != "" {
		fmt.Fprintf(&b, ", hint %s", c.Hint)
	}
	fmt.Fprintf(&b, ", on the %s object) appeared on %q (appId %s) at %s, added by something other than credwatch", c.Source, sp.DisplayName, sp.AppID,
		c.AddedTime.UTC().Format(time.RFC3339))
	if c.StartTime != nil {
		fmt.Fprintf(&b, "; valid from %s", c.StartTime.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&b, " until %s. If nobody here added it, see who did in the directory audit log (activity \"Update application – Certificates and secrets management\"), "+
		"and remove it with: az ad %s credential delete --id %s --key-id %s%s", c.EndTime.UTC().Format(time.RFC3339), cli, sp.AppID, c.KeyID, cert)
	return b.String()
}
