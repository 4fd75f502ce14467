package compose

import (
	"fmt"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
)

// Finding says what f found on w's credentials under policy h, and what to do about it, with
// the az command that does it.
func Finding(w *v1alpha1.CredentialWatch, f policy.Finding, h policy.Hygiene) string {
	c := f.Credential
	appID, app := c.AppID, AppName(c.AppDisplayName, c.AppID)
	if appID == "" { // a watch of one application: its credentials do not name it
		appID, app = w.AppID(), TargetName(w)
	}
	subject := describe(c)
	if c.AppID == "" {
		subject += " of " + app
	}
	subject = capitalise(subject)
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	start := time.Time{}
	if c.StartTime != nil {
		start = c.StartTime.Time
	}
	switch f.Kind {
	case v1alpha1.FindingStartAfterEnd:
		return fmt.Sprintf("%s starts at %s, after it ends at %s: nothing can ever sign in with it; remove it (%s)",
			subject, at(start), at(c.EndTime.Time), DeleteCommand(appID, c))
	case v1alpha1.FindingNeverExpires:
		return fmt.Sprintf("%s never expires (it ends at %s): a leaked copy would work for ever; add one that expires, move its users to it, then remove this one (%s)",
			subject, at(c.EndTime.Time), DeleteCommand(appID, c))
	case v1alpha1.FindingLongLived:
		return fmt.Sprintf("%s is valid for %s (%s to %s), longer than the %s the policy allows: add a shorter-lived one, move its users to it, then remove this one (%s)",
			subject, days(c.EndTime.Sub(start)), at(start), at(c.EndTime.Time), days(h.MaxLifetime), DeleteCommand(appID, c))
	case v1alpha1.FindingServicePrincipalSecret:
		return fmt.Sprintf("%s is on the service principal, where the portal's app registration does not show it (az ad sp credential reset puts secrets there): if nothing signs in with it, remove it (%s)",
			subject, DeleteCommand(appID, c))
	case v1alpha1.FindingManySecrets:
		return fmt.Sprintf("%s holds %d client secrets that have not expired, more than the %d the policy allows: remove those nothing signs in with (az ad app credential list --id %s and az ad sp credential list --id %s show them)",
			capitalise(app), f.LiveSecrets, h.MaxLiveSecrets, appID, appID)
	case v1alpha1.FindingNeverUsed:
		return fmt.Sprintf("%s has not signed in since it was created at %s, as far as Graph's sign-in report knows, longer than the %s the policy allows: if nothing needs it, remove it (%s)",
			subject, at(start), days(h.UnusedAfter), DeleteCommand(appID, c))
	case v1alpha1.FindingUnused:
		return fmt.Sprintf("%s last signed in at %s, longer ago than the %s the policy allows: if nothing needs it any more, let it expire or remove it (%s)",
			subject, at(c.LastSignIn.Time), days(h.UnusedAfter), DeleteCommand(appID, c))
	case v1alpha1.FindingNotYetValid:
		return fmt.Sprintf("%s is not valid before %s: nothing can sign in with it until then", subject, at(start))
	}
	return subject
}

// DeleteCommand is the az command that removes c from the application appID or its service
// principal.
func DeleteCommand(appID string, c v1alpha1.Credential) string {
	object := "app"
	if c.Source == v1alpha1.SourceServicePrincipal {
		object = "sp"
	}
	cmd := fmt.Sprintf("az ad %s credential delete --id %s --key-id %s", object, appID, c.KeyID)
	if c.Type == v1alpha1.CredentialTypeCertificate {
		cmd += " --cert"
	}
	return cmd
}

func days(d time.Duration) string {
	n := int64(d / (24 * time.Hour))
	if n == 1 {
		return "1 day"
	}
	return fmt.Sprintf("%d days", n)
}
