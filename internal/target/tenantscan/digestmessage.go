package tenantscan

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/compose"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
)

// MaxDigestEntries bounds a digest's lines and findings together: an owner of hundreds of
// applications gets a message a mail client still opens.
const MaxDigestEntries = 300

// Digest is recipient's digest of w's tenant for period, listing apps: their credentials by
// soonest end, then their findings.
func Digest(w *v1alpha1.CredentialWatch, recipient string, apps []DigestApp, period Period, h policy.Hygiene) notify.Digest {
	sum := sha256.Sum256([]byte(string(w.UID) + "/" + recipient + "/" + period.Start.UTC().String()))
	d := notify.Digest{ID: "digest-" + hex.EncodeToString(sum[:8]), Tenant: w.Spec.Target.TenantID(), Period: period.Start}
	var lines []notify.DigestLine
	var findings, unused []notify.DigestFinding
	signIns := target.SignInsRead(w)
	for _, a := range apps {
		name := compose.AppName(a.DisplayName, a.AppID)
		for _, c := range a.Credentials {
			lines = append(lines, notify.DigestLine{Application: a.DisplayName, AppID: a.AppID, Object: string(c.Source), Type: string(c.Type),
				KeyID: c.KeyID, Hint: c.Hint, DisplayName: c.DisplayName, State: string(c.State), End: c.EndTime.Time, Command: digestCommand(a.AppID, c),
				Use: compose.UsePhrase(c, signIns)})
		}
		for _, f := range a.Findings {
			df := notify.DigestFinding{Application: name, AppID: a.AppID, Kind: string(f.Kind), Message: compose.Finding(w, f, h)}
			if f.Kind == v1alpha1.FindingNeverUsed || f.Kind == v1alpha1.FindingUnused {
				unused = append(unused, df)
			} else {
				findings = append(findings, df)
			}
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
	if room := MaxDigestEntries - len(lines) - len(findings); len(unused) > room {
		d.Omitted += len(unused) - room
		unused = unused[:room]
	}
	d.Lines, d.Findings, d.Unused = lines, findings, unused
	d.Why = whyDigest(w, recipient, period)
	return d
}

// whyDigest says why recipient gets w's messages, when they come, and how an application leaves.
func whyDigest(w *v1alpha1.CredentialWatch, recipient string, period Period) string {
	tenant, every := w.Spec.Target.TenantID(), ScheduleText(period.Schedule)
	if recipient == Fallback {
		return fmt.Sprintf("You get this because no owner of these applications in Entra ID tenant %s has a mailbox credwatch can write to: "+
			"add one (az ad app owner add --id <appId> --owner-object-id <user>). Digests come %s. Sent by credwatch for CredentialWatch %s/%s.",
			tenant, every, w.Namespace, w.Name)
	}
	why := fmt.Sprintf("You get this because you own these applications in Entra ID tenant %s. Digests come %s", tenant, every)
	if period.OptOutTag != "" {
		why += "; an application tagged " + period.OptOutTag + " is left out"
	}
	return why + fmt.Sprintf(". Sent by credwatch for CredentialWatch %s/%s.", w.Namespace, w.Name)
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

// Period is what a digest says of the period it is for.
type Period struct {
	Start time.Time
	// Schedule and OptOutTag are the watch's, for the digest's last words.
	Schedule  v1alpha1.DigestSchedule
	OptOutTag string
}

// ScheduleText says when digests come, as people say it.
func ScheduleText(s v1alpha1.DigestSchedule) string {
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

// ExpiredDigest is the message to recipient that creds, credentials of its applications in w's
// tenant, expired since the last digest: it hears at once rather than in the next.
func ExpiredDigest(w *v1alpha1.CredentialWatch, recipient string, creds []v1alpha1.Credential, period Period) notify.Digest {
	keys := make([]string, 0, len(creds))
	lines := make([]notify.DigestLine, 0, len(creds))
	for _, c := range creds {
		keys = append(keys, string(c.Source)+"/"+c.KeyID)
		lines = append(lines, notify.DigestLine{Application: c.AppDisplayName, AppID: c.AppID, Object: string(c.Source), Type: string(c.Type),
			KeyID: c.KeyID, Hint: c.Hint, DisplayName: c.DisplayName, State: string(v1alpha1.StateExpired), End: c.EndTime.Time, Command: digestCommand(c.AppID, c)})
	}
	sortLines(lines)
	sum := sha256.Sum256([]byte(string(w.UID) + "/" + recipient + "/expired/" + strings.Join(keys, ",")))
	d := notify.Digest{ID: "expired-" + hex.EncodeToString(sum[:8]), Tenant: w.Spec.Target.TenantID(), Period: period.Start, Lines: lines, Expired: true}
	d.Why = whyDigest(w, recipient, period) + " Whatever signs in with these fails now: renew each, move its users to the new one, then remove it."
	return d
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
		Kind: alertkind.DigestsLate, Severity: notify.SeverityWarning,
		Namespace: w.Namespace, Name: w.Name, TenantID: w.Spec.Target.TenantID(),
		Problem: problem + ". The rest are dropped: this period's digests list what still needs attention.",
		Fix: fmt.Sprintf("See kubectl get cw -n %s %s -o jsonpath='{.status.ownerDigests}' and its events: a relay that refuses or is slow, "+
			"an identity that may not read owners, or more owners than --digest-messages-per-minute lets through in a period.", w.Namespace, w.Name),
		At: now,
	}
}
