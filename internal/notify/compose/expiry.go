package compose

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/policy"
)

// Condition is what a condition says.
type Condition struct {
	Status          metav1.ConditionStatus
	Reason, Message string
}

// ExpiryConditions are the Expiring and Expired conditions of credentials grouped as g, total of
// them in all, under thresholds t; with signIns, each names whether its credential is in use.
func ExpiryConditions(g policy.Groups, total int, t policy.Thresholds, signIns bool, now time.Time) (expiring, expired Condition) {
	expiryPhrase := func(subject string, c v1alpha1.Credential, now time.Time) string {
		p := expiryPhrase(subject, c, now)
		if use := UsePhrase(c, signIns); use != "" {
			p += "; " + use
		}
		return p
	}
	switch {
	case g.FirstCritical != nil:
		expiring = Condition{metav1.ConditionTrue, v1alpha1.ReasonWithinCritical,
			fmt.Sprintf("%s within %s (%d within %s); the first: %s", expireCount(g.Critical+g.Warning),
				policy.HumanDuration(t.Warning), g.Critical, policy.HumanDuration(t.Critical), expiryPhrase(describe(*g.FirstCritical), *g.FirstCritical, now))}
	case g.FirstWarning != nil:
		expiring = Condition{metav1.ConditionTrue, v1alpha1.ReasonWithinWarning,
			fmt.Sprintf("%s within %s; the first: %s", expireCount(g.Warning), policy.HumanDuration(t.Warning),
				expiryPhrase(describe(*g.FirstWarning), *g.FirstWarning, now))}
	default:
		expiring = Condition{metav1.ConditionFalse, v1alpha1.ReasonNoneExpiring,
			fmt.Sprintf("No credential expires within %s", policy.HumanDuration(t.Warning))}
	}
	if last := g.LastExpired; last != nil {
		expired = Condition{metav1.ConditionTrue, v1alpha1.ReasonCredentialExpired,
			fmt.Sprintf("%d of %d credentials expired; the latest: %s", g.Expired, total, expiryPhrase(describe(*last), *last, now))}
	} else {
		expired = Condition{metav1.ConditionFalse, v1alpha1.ReasonNoneExpired, "No credential has expired"}
	}
	return expiring, expired
}

func expireCount(n int) string {
	if n == 1 {
		return "1 credential expires"
	}
	return fmt.Sprintf("%d credentials expire", n)
}

// describe names a credential the way a person finds it again in the portal or az.
func describe(c v1alpha1.Credential) string {
	kind := "secret"
	if c.Type == v1alpha1.CredentialTypeCertificate {
		kind = "certificate"
	}
	name := ""
	if c.DisplayName != "" {
		name = fmt.Sprintf(" %q", notify.Shown(c.DisplayName))
	}
	if c.AppID != "" {
		return fmt.Sprintf("%s%s (keyId %s, on the %s object of %s)", kind, name, c.KeyID, c.Source, AppName(c.AppDisplayName, c.AppID))
	}
	return fmt.Sprintf("%s%s (keyId %s, on the %s object)", kind, name, c.KeyID, c.Source)
}

// AppName names an application as messages do: its display name and appId, or the appId alone.
func AppName(displayName, appID string) string {
	if displayName == "" {
		return appID
	}
	return fmt.Sprintf("%q (appId %s)", notify.Shown(displayName), appID)
}

// UsePhrase says whether c is in use, and when it last signed in; empty without signIns, when
// sign-ins are not known.
func UsePhrase(c v1alpha1.Credential, signIns bool) string {
	switch {
	case !signIns:
		return ""
	case c.InUse:
		return "in use, " + lastSignIn(c)
	}
	return "not in use, " + lastSignIn(c)
}

// expiryPhrase says when c expires or expired, with subject naming it.
func expiryPhrase(subject string, c v1alpha1.Credential, now time.Time) string {
	end := c.EndTime.UTC().Format(time.RFC3339)
	if left := c.EndTime.Sub(now); left > 0 {
		return fmt.Sprintf("%s expires at %s, in %s", subject, end, policy.HumanDuration(left))
	}
	return fmt.Sprintf("%s expired at %s, %s ago", subject, end, policy.HumanDuration(now.Sub(c.EndTime.Time)))
}

// StateChange says what happened to c, a credential of w, and how to renew it, for the event
// of its change of state.
func StateChange(w *v1alpha1.CredentialWatch, c v1alpha1.Credential, now time.Time) string {
	subject := describe(c)
	if c.AppID == "" { // a tenant scan's credentials name their application themselves
		subject += " of " + TargetName(w)
	}
	return fmt.Sprintf("%s; renew with: %s", capitalise(expiryPhrase(subject, c, now)), RenewCommand(w, c))
}

// TargetName names the watched application as people know it: its display name and appId.
func TargetName(w *v1alpha1.CredentialWatch) string {
	if sp := w.Status.ServicePrincipal; sp != nil {
		return AppName(sp.DisplayName, w.AppID())
	}
	return w.AppID()
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
