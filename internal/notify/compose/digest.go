package compose

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/policy"
)

// MaxDigestEntries bounds a digest's lines and findings together: an owner of hundreds of
// applications gets a message a mail client still opens.
const MaxDigestEntries = 300

// Digest is recipient's digest of w's tenant for period, listing apps: their credentials by
// soonest end, then their findings.
func Digest(w *v1alpha1.CredentialWatch, recipient string, apps []policy.DigestApp, period DigestPeriod, h policy.Hygiene) notify.Digest {
	sum := sha256.Sum256([]byte(string(w.UID) + "/" + recipient + "/" + period.Start.UTC().String()))
	d := notify.Digest{ID: "digest-" + hex.EncodeToString(sum[:8]), Tenant: w.Spec.Target.TenantID(), Period: period.Start}
	var lines []notify.DigestLine
	var findings []notify.DigestFinding
	for _, a := range apps {
		name := appName(a.DisplayName, a.AppID)
		for _, c := range a.Credentials {
			lines = append(lines, notify.DigestLine{Application: a.DisplayName, AppID: a.AppID, Object: string(c.Source), Type: string(c.Type),
				KeyID: c.KeyID, Hint: c.Hint, DisplayName: c.DisplayName, State: string(c.State), End: c.EndTime.Time, Command: digestCommand(a.AppID, c)})
		}
		for _, f := range a.Findings {
			findings = append(findings, notify.DigestFinding{Application: name, AppID: a.AppID, Kind: string(f.Kind), Message: Finding(w, f, h)})
		}
	}
	sortLines(lines)
	if len(lines) > MaxDigestEntries {
		d.Omitted += len(lines) - MaxDigestEntries
		lines = lines[:MaxDigestEntries]
	}
	if room := MaxDigestEntries - len(lines); len(findings) > room {
		d.Omitted += len(findings) - room
		findings = findings[:room]
	}
	d.Lines, d.Findings = lines, findings
	d.Why = fmt.Sprintf("You get this because you own these applications in Entra ID tenant %s. It comes %s; an application tagged %s is left out. "+
		"Sent by credwatch for CredentialWatch %s/%s.", d.Tenant, period.every(), period.OptOutTag, w.Namespace, w.Name)
	if period.OptOutTag == "" {
		d.Why = fmt.Sprintf("You get this because you own these applications in Entra ID tenant %s. It comes %s. Sent by credwatch for CredentialWatch %s/%s.",
			d.Tenant, period.every(), w.Namespace, w.Name)
	}
	if recipient == policy.Fallback {
		d.Why = fmt.Sprintf("You get this because no owner of these applications in Entra ID tenant %s has a mailbox credwatch can write to: "+
			"add one (az ad app owner add --id <appId> --owner-object-id <user>). It comes %s. Sent by credwatch for CredentialWatch %s/%s.",
			d.Tenant, period.every(), w.Namespace, w.Name)
	}
	return d
}

func digestCommand(appID string, c v1alpha1.Credential) string {
	if c.Type == v1alpha1.CredentialTypeCertificate {
		return fmt.Sprintf("az ad app credential reset --id %s --append --create-cert", appID)
	}
	if c.Source == v1alpha1.SourceServicePrincipal {
		return fmt.Sprintf("az ad sp credential reset --id %s --append", appID)
	}
	return fmt.Sprintf("az ad app credential reset --id %s --append", appID)
}

func sortLines(lines []notify.DigestLine) {
	slices.SortStableFunc(lines, func(a, b notify.DigestLine) int {
		return cmp.Or(a.End.Compare(b.End), strings.Compare(a.AppID, b.AppID), strings.Compare(a.KeyID, b.KeyID))
	})
}

// DigestPeriod is what a digest says of the period it is for.
type DigestPeriod struct {
	Start time.Time
	// Schedule and OptOutTag are the watch's, for the digest's last words.
	Schedule  v1alpha1.DigestSchedule
	OptOutTag string
}

// every says when digests come, as people say it.
func (p DigestPeriod) every() string {
	s := p.Schedule
	at, zone := s.Time, s.TimeZone
	if at == "" {
		at = "09:00"
	}
	if zone == "" {
		zone = "UTC"
	}
	if s.Every == v1alpha1.EveryDay {
		return fmt.Sprintf("every day at %s %s", at, zone)
	}
	day := string(s.Weekday)
	if day == "" {
		day = "Monday"
	}
	return fmt.Sprintf("every %s at %s %s", day, at, zone)
}

// ExpiredNotice is the message that c, a credential of w's tenant, expired: its owners hear at
// once rather than in the next digest.
func ExpiredNotice(w *v1alpha1.CredentialWatch, c v1alpha1.Credential, now time.Time) notify.Alert {
	return notify.Alert{
		ID:   notify.AlertID(string(w.UID), string(c.Source)+"/"+c.KeyID, "expired-notice"),
		Kind: notify.KindExpired, Severity: notify.SeverityCritical,
		Namespace: w.Namespace, Name: w.Name, DisplayName: c.AppDisplayName, AppID: c.AppID, TenantID: w.Spec.Target.TenantID(),
		Credential: &notify.Credential{KeyID: c.KeyID, Type: string(c.Type), Source: string(c.Source), DisplayName: c.DisplayName, Hint: c.Hint, End: c.EndTime.Time},
		Fix:        "Whatever signs in with it fails now. Renew it (" + digestCommand(c.AppID, c) + "), move its users to the new one, then remove it.",
		At:         now,
	}
}

// DigestsLate is the alert to the fallback that the period starting at start ended with sent of
// recipients digests out and owners of unread applications still unread.
func DigestsLate(w *v1alpha1.CredentialWatch, start time.Time, sent, recipients, unread int32, now time.Time) notify.Alert {
	problem := fmt.Sprintf("Of the owner digests of the period that began %s, %d of %d went out", start.UTC().Format(time.RFC3339), sent, recipients)
	if unread > 0 {
		problem += fmt.Sprintf(", and the owners of %d applications could not be read", unread)
	}
	return notify.Alert{
		ID:   notify.AlertID(string(w.UID), "digests", "late@"+start.UTC().Format(time.RFC3339)),
		Kind: notify.KindDigestsLate, Severity: notify.SeverityWarning,
		Namespace: w.Namespace, Name: w.Name, TenantID: w.Spec.Target.TenantID(),
		Problem: problem + ". The rest are dropped: this period's digests list what still needs attention.",
		Fix: fmt.Sprintf("See kubectl get cw -n %s %s -o jsonpath='{.status.ownerDigests}' and its events: a relay that refuses or is slow, "+
			"an identity that may not read owners, or more owners than --digest-messages-per-minute lets through in a period.", w.Namespace, w.Name),
		At: now,
	}
}
