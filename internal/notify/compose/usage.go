package compose

import (
	"fmt"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/policy"
)

// withUse adds to the alert's credential what sign-ins say of c, when w reads them.
func withUse(a *notify.Alert, w *v1alpha1.CredentialWatch, c v1alpha1.Credential) {
	if a.Credential == nil || !policy.WatchSignInsKnown(w, a.At) {
		return
	}
	a.Credential.Usage = notify.UsageNotInUse
	if c.InUse {
		a.Credential.Usage = notify.UsageInUse
	}
	if c.LastSignIn != nil {
		a.Credential.LastSignIn = c.LastSignIn.Time
	}
}

// lastSignIn says when c last signed in, for sentences.
func lastSignIn(c v1alpha1.Credential) string {
	if c.LastSignIn == nil {
		return "never signed in"
	}
	return "last signed in at " + c.LastSignIn.UTC().Format(time.RFC3339)
}

// stillUsedFix is what to do about c, renewed by newer, that consumers still sign in with.
func stillUsedFix(w *v1alpha1.CredentialWatch, c, newer v1alpha1.Credential) string {
	return fmt.Sprintf("Something still signs in with this %s (it %s), not only with the newer %s, which %s: find it in the sign-in logs "+
		"(Entra admin center, Sign-in logs, Service principal sign-ins, Application ID %s: the Credential key ID column names the secret), "+
		"move it to the newer one (for an AKS cluster: az aks update-credentials --reset-service-principal), and this alert falls quiet "+
		"once this one has not signed in for %s.",
		noun(c), lastSignIn(c), describe(newer), lastSignIn(newer), w.AppID(), policy.HumanDuration(usageOf(w).ActiveWithin))
}

// usageOf is w's spec.usage, or its defaults, for the words of an alert.
func usageOf(w *v1alpha1.CredentialWatch) policy.Usage {
	u, err := policy.UsageOf(w.Spec.Usage)
	if err != nil || !u.On() {
		u.ActiveWithin = policy.DefaultActiveWithin
	}
	return u
}

// unusedAlert words the one alert of an expiring credential nothing uses.
func unusedAlert(a *notify.Alert, w *v1alpha1.CredentialWatch, c v1alpha1.Credential) {
	credentialFacts(a, c)
	withUse(a, w, c)
	a.Severity = notify.SeverityInfo
	var used []string
	for _, d := range w.Status.Credentials {
		if d.InUse && d.KeyID != c.KeyID {
			used = append(used, d.KeyID)
		}
	}
	a.Fix = fmt.Sprintf("Nothing needs to be renewed: this %s %s, while %s %s in use. Let it expire, or remove it now: %s. "+
		"credwatch does not remind you of it again unless it signs in.", noun(c), lastSignIn(c), notify.Some(used, len(used)),
		map[bool]string{true: "is", false: "are"}[len(used) == 1], DeleteCommand(appOf(w, c), c))
}

// movedOffAlert words the resolution of c, whose consumers moved to the credential that renewed it.
func movedOffAlert(a *notify.Alert, w *v1alpha1.CredentialWatch, c v1alpha1.Credential) {
	credentialFacts(a, c)
	withUse(a, w, c)
	newer := "the newer one"
	if n := policy.Newer(c, w.Status.Credentials); n != nil {
		newer = fmt.Sprintf("the newer %s, which %s", describe(*n), lastSignIn(*n))
	}
	a.Fix = fmt.Sprintf("Nothing: what used this %s moved to %s; this one %s. Remove it when you like: %s.",
		noun(c), newer, lastSignIn(c), DeleteCommand(appOf(w, c), c))
}

// heldAlert words a rotation held by an old secret still in use.
func heldAlert(a *notify.Alert, w *v1alpha1.CredentialWatch) {
	a.Severity = notify.SeverityWarning
	r := w.Status.Rotation
	if r == nil {
		return
	}
	a.Problem = r.Message
	secret := "the watch's Secret"
	if w.Spec.Rotation != nil {
		secret = "Secret " + w.Namespace + "/" + w.Spec.Rotation.SecretRef.Name
	}
	if len(r.OldSecretsInUse) == 0 {
		a.Fix = fmt.Sprintf("credwatch cannot tell whether the old secrets of %s are still used: see the Rotating and SignInsRead conditions. "+
			"Restore the sign-in reads, or, if nothing uses the old secrets, remove them by hand (az ad app credential delete --id %s --key-id <keyId>): "+
			"the rotation then finishes; the new secret %s is in %s.", r.AppID, r.AppID, r.KeyID, secret)
		return
	}
	old := r.OldSecretsInUse[0].KeyID
	a.Fix = fmt.Sprintf("Something never moved to the new secret %s: find it in the sign-in logs (Entra admin center, Sign-in logs, "+
		"Service principal sign-ins, Application ID %s: the Credential key ID column names the secret) and give it the new secret from %s. "+
		"credwatch retires the old one once it has not signed in for %s; to retire it now anyway, remove it by hand (az ad app credential delete --id %s --key-id %s).",
		r.KeyID, r.AppID, secret, policy.HumanDuration(usageOf(w).RetireQuiet()), r.AppID, old)
}

// credentialFacts are what an alert says of c whatever it is about.
func credentialFacts(a *notify.Alert, c v1alpha1.Credential) {
	a.Credential = &notify.Credential{KeyID: c.KeyID, Type: string(c.Type), Source: string(c.Source),
		DisplayName: c.DisplayName, Hint: c.Hint, End: c.EndTime.Time}
}

// noun is "secret" or "certificate".
func noun(c v1alpha1.Credential) string {
	if c.Type == v1alpha1.CredentialTypeCertificate {
		return "certificate"
	}
	return "secret"
}

// appOf is the appId c belongs to.
func appOf(w *v1alpha1.CredentialWatch, c v1alpha1.Credential) string {
	if c.AppID != "" {
		return c.AppID
	}
	return w.AppID()
}
