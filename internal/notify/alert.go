package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/credwatch/credwatch/internal/alertkind"
)

// Severity orders alerts for people and for routing (PagerDuty bridges key on it).
type Severity string

// The severities, from least to most urgent.
const (
	SeverityInfo     Severity = "info"
	SeverityWarning  Severity = "warning"
	SeverityCritical Severity = "critical"
)

// Credential is the credential an alert is about. There is never a secret in it.
type Credential struct {
	KeyID       string
	Type        string // Password or Certificate
	Source      string // Application or ServicePrincipal
	DisplayName string
	Hint        string
	End         time.Time
	// LastSignIn is when it last signed in, zero when it never did or sign-ins are not read
	// (Usage says which).
	LastSignIn time.Time
	// Usage is what sign-ins say of it: UsageInUse, UsageNotInUse, or empty when they are not read.
	Usage string
}

// What sign-ins say of a credential.
const (
	UsageInUse    = "in use"
	UsageNotInUse = "not in use"
)

// Pulls are a registry's refusals of image pulls. There are only names and counts in it.
type Pulls struct {
	Registry string
	// Scope is ClusterWide, NodeLocal, or Undetermined (told only if it still is at the end of the
	// window).
	Scope string
	// Nodes are nodes refused, at most ten; Failing counts them all, Pulling the nodes that
	// pulled from the registry meanwhile.
	Nodes            []string
	Failing, Pulling int
}

// Alert is one message, in terms every channel renders its own way.
type Alert struct {
	// ID is stable for one alert (watch, subject, step), so receivers can drop a duplicate.
	ID       string
	Kind     alertkind.Kind
	Severity Severity
	// Namespace and Name are the CredentialWatch's.
	Namespace, Name string
	// Cluster names the AKS cluster using the service principal, empty when unknown.
	Cluster string
	// DisplayName, AppID and TenantID identify the service principal.
	DisplayName, AppID, TenantID string
	// Credential is set for reminders, expiry and resolution.
	Credential *Credential
	// Pulls is set for refused image pulls and their recovery.
	Pulls *Pulls
	// Problem is why checks fail, for alertkind.CheckFailing.
	Problem string
	// Fix is what a person should do, as an exact command or a sentence.
	Fix string
	// At is when the alert was raised; "in 6 days" is counted from it.
	At time.Time
}

// Kinds of channel, as Channel.Name returns them.
const (
	ChannelSlack   = "slack"
	ChannelEmail   = "email"
	ChannelTeams   = "teams"
	ChannelWebhook = "webhook"
)

// Channel delivers alerts to one destination.
type Channel interface {
	// Name identifies the channel in status and events: slack, email, teams, webhook.
	Name() string
	Send(ctx context.Context, a Alert) error
}

// AlertID derives an Alert's ID from what makes it unique.
func AlertID(watchUID, subject, step string) string {
	sum := sha256.Sum256([]byte(watchUID + "\x00" + subject + "\x00" + step))
	return hex.EncodeToString(sum[:16])
}

// GoodNews reports whether the alert announces that a problem is over, which channels show as
// such whatever its severity.
func (a Alert) GoodNews() bool {
	return a.Kind == alertkind.Resolved || a.Kind == alertkind.CheckRecovered || a.Kind == alertkind.Rotated || a.Kind == alertkind.PullsRecovered ||
		a.Kind == alertkind.SigningKeysAgree || a.Kind == alertkind.ManagedIdentity
}

// Title is a one-line summary: an email subject, a notification preview.
func (a Alert) Title() string {
	sp := a.spName()
	switch a.Kind {
	case alertkind.Reminder, alertkind.Expired, alertkind.Resolved, alertkind.Unused:
		return a.credentialTitle(sp)
	case alertkind.CheckFailing:
		return fmt.Sprintf("credwatch cannot check the credentials of %s", sp)
	case alertkind.CheckRecovered:
		return fmt.Sprintf("credwatch can check the credentials of %s again", sp)
	case alertkind.Rotated:
		return fmt.Sprintf("credwatch rotated the client secret of %s", sp)
	case alertkind.RotationFailing:
		return fmt.Sprintf("Rotating the client secret of %s keeps failing", sp)
	case alertkind.RotationHeld:
		return fmt.Sprintf("Rotating the client secret of %s is held: its old secrets may still be in use", sp)
	case alertkind.CredentialAdded:
		what := "A certificate"
		if c := a.Credential; c != nil && c.Type == "Password" {
			what = "A secret"
		}
		return fmt.Sprintf("%s was added to %s, and not by credwatch", what, sp)
	case alertkind.PullsRefused:
		if a.Pulls != nil {
			return a.pullsTitle(sp)
		}
	case alertkind.PullsRecovered:
		if p := a.Pulls; p != nil {
			return fmt.Sprintf("Resolved: %s refuses no image pull any more", p.Registry)
		}
	case alertkind.SigningKeyDrift:
		return "The API servers disagree on the service-account token keys: pods may lose API access"
	case alertkind.SigningKeysAgree:
		return "Resolved: the API servers agree on the service-account token keys again"
	case alertkind.IssuerChanged:
		return "The cluster's service-account issuer changed"
	case alertkind.ManagedIdentity:
		return fmt.Sprintf("AKS cluster %s signs in with a managed identity now, no longer with %s", a.clusterName(), sp)
	case alertkind.DigestsLate:
		return fmt.Sprintf("Owner digests of tenant %s could not all go out before the next period began", a.TenantID)
	}
	return string(a.Kind)
}

// pullsTitle is the title of a PullsRefused alert.
func (a Alert) pullsTitle(sp string) string {
	p := a.Pulls
	if p.Scope == "NodeLocal" {
		return fmt.Sprintf("%s refuses image pulls on %s only: a kubelet fault, not the credentials of %s", p.Registry, Plural(p.Failing, "node"), sp)
	}
	return fmt.Sprintf("%s refuses image pulls on %s: the credentials of %s", p.Registry, Plural(p.Failing, "node"), sp)
}

// When says when the credential expires or expired, relative to At: "in 6 days", "3 days ago".
func (a Alert) When() string {
	if a.Credential == nil {
		return ""
	}
	d := a.Credential.End.Sub(a.At)
	if d > 0 {
		return "in " + humanSpan(d)
	}
	if -d < time.Minute {
		return "just now"
	}
	return humanSpan(-d) + " ago"
}

// Lines are the facts of the alert as label and value pairs, in the order people read them; every
// channel shows these, so they say the same thing everywhere.
func (a Alert) Lines() [][2]string {
	var out [][2]string
	add := func(label, value string) {
		if value != "" {
			out = append(out, [2]string{label, value})
		}
	}
	add("Service principal", a.spName())
	add("App ID", a.AppID)
	add("Tenant", a.TenantID)
	if c := a.Credential; c != nil {
		add("Credential", c.describe())
		add("Key ID", c.KeyID)
		add("Hint", c.Hint)
		add("On object", c.Source)
		if !c.End.IsZero() {
			add("Expires", c.End.UTC().Format("2006-01-02 15:04 UTC")+" ("+a.When()+")")
		}
		if c.Usage != "" {
			last := "never, as far as Graph's sign-in report knows"
			if !c.LastSignIn.IsZero() {
				last = c.LastSignIn.UTC().Format("2006-01-02 15:04 UTC")
			}
			add("Last sign-in", last+" ("+c.Usage+")")
		}
	}
	if p := a.Pulls; p != nil {
		add("Registry", p.Registry)
		if p.Failing > 0 {
			add("Refused on", Some(p.Nodes, p.Failing))
			if p.Pulling > 0 {
				add("Pulling fine", Plural(p.Pulling, "other node"))
			}
		}
	}
	add("Problem", a.Problem)
	add("Cluster", a.Cluster)
	add("Watch", a.Namespace+"/"+a.Name)
	add("Severity", string(a.Severity))
	return out
}

// credentialTitle is the title of an alert about one credential of sp.
func (a Alert) credentialTitle(sp string) string {
	switch a.Kind {
	case alertkind.Reminder:
		return fmt.Sprintf("%s of %s expires %s%s", a.credentialNoun(), sp, a.When(), a.inUse())
	case alertkind.Expired:
		return fmt.Sprintf("%s of %s expired %s%s", a.credentialNoun(), sp, a.When(), a.inUse())
	case alertkind.Unused:
		return fmt.Sprintf("%s of %s expires %s, and nothing uses it", a.credentialNoun(), sp, a.When())
	}
	if c := a.Credential; c != nil && c.Usage == UsageNotInUse {
		return fmt.Sprintf("Resolved: nothing uses the expiring %s of %s any more", strings.ToLower(a.credentialNoun()), sp)
	}
	return fmt.Sprintf("Resolved: the expiring %s of %s is gone", strings.ToLower(a.credentialNoun()), sp)
}

// inUse says, for a title, that the credential is in use, when sign-ins say so.
func (a Alert) inUse() string {
	if c := a.Credential; c != nil && c.Usage == UsageInUse {
		return ", and is in use"
	}
	return ""
}

// clusterName is the last part of the cluster's name or resource ID.
func (a Alert) clusterName() string {
	return a.Cluster[strings.LastIndex(a.Cluster, "/")+1:]
}

func (a Alert) spName() string {
	if a.DisplayName != "" {
		return Shown(a.DisplayName)
	}
	return a.AppID
}

// maxShown is how many characters of a name someone else chose a message shows.
const maxShown = 64

// Shown is a display name as messages show it: whoever owns an application chooses its names, so
// they are cut to maxShown characters and their control, format and separator characters (a line
// break that would start a mail header, U+2028, a direction override) become spaces.
func Shown(name string) string {
	var b strings.Builder
	n := 0
	for _, r := range name {
		if n == maxShown {
			b.WriteString("…")
			break
		}
		if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			r = ' '
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// credentialNoun names the kind of credential; "Credential" when only its key is known, as for
// one that is gone.
func (a Alert) credentialNoun() string {
	switch {
	case a.Credential == nil || a.Credential.Type == "Password":
		return "Secret"
	case a.Credential.Type == "Certificate":
		return "Certificate"
	default:
		return "Credential"
	}
}

func (c Credential) describe() string {
	noun := strings.ToLower(Alert{Credential: &c}.credentialNoun())
	if c.DisplayName != "" {
		return fmt.Sprintf("%s %q", noun, Shown(c.DisplayName))
	}
	return noun
}

// Some lists the names of some of total things: "a, b and 3 more".
func Some(names []string, total int) string {
	s := strings.Join(names, ", ")
	if more := total - len(names); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// Plural counts things as people do: "1 node", "3 nodes".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// humanSpan renders a span as people say it: "6 days", "1 day", "5 hours", "42 minutes".
func humanSpan(d time.Duration) string {
	switch {
	case d >= 24*time.Hour:
		return Plural(int(d/(24*time.Hour)), "day")
	case d >= time.Hour:
		return Plural(int(d/time.Hour), "hour")
	default:
		return Plural(int(d/time.Minute), "minute")
	}
}
