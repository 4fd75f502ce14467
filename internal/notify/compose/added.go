package compose

import (
	"fmt"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/notify"
)

// addedAlert words the news of c, added to the watched application by something other than
// credwatch: a person renewing by hand, a pipeline, or someone keeping access to the tenant.
func addedAlert(a *notify.Alert, w *v1alpha1.CredentialWatch, c v1alpha1.Credential) {
	credentialFacts(a, c)
	a.Severity = notify.SeverityWarning
	if al := w.Spec.Alerts; al != nil && al.CredentialAddedSeverity != "" {
		a.Severity = notify.Severity(al.CredentialAddedSeverity)
	}
	start := "a start Graph does not give"
	if c.StartTime != nil {
		start = c.StartTime.UTC().Format(time.RFC3339)
	}
	a.Problem = fmt.Sprintf("%s appeared at %s, valid from %s, and credwatch did not add it.", describe(c), c.AddedTime.UTC().Format(time.RFC3339), start)
	if c.AddedBy != "" {
		a.Problem += " Added by: " + c.AddedBy + "."
	}
	if c.Source == v1alpha1.SourceServicePrincipal {
		a.Problem += " A credential on the service principal does not show in the portal's App registrations blade."
	}
	a.Fix = "If someone here added it, nothing. If nobody did, see who did in the directory audit log " +
		"(activity \"Update application – Certificates and secrets management\"), then remove it: " + DeleteCommand(appOf(w, c), c)
}
