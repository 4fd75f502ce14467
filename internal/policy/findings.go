package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// Hygiene is a watch's hygiene policy, parsed.
type Hygiene struct {
	MaxLifetime    time.Duration
	MaxLiveSecrets int
	UnusedAfter    time.Duration
	// SignInsKnown: the credentials' last sign-ins were read (spec.usage.signIns), so that no
	// lastSignIn means none in the report's memory; without it nothing is Unused or NeverUsed.
	SignInsKnown bool
}

// The policy of a watch that sets none: Graph gives a new secret two years, and an application
// needs two secrets at most, the one in use and the one replacing it.
const (
	DefaultMaxLifetime    = 730 * 24 * time.Hour
	DefaultMaxLiveSecrets = 2
	// DefaultUnusedAfter is a quarter: long enough for a job run quarterly to sign in.
	DefaultUnusedAfter = 90 * 24 * time.Hour
)

// lifetimeSlack lets a credential of two calendar years, Graph's default, through a policy of
// 730 days when the two years hold a leap day.
const lifetimeSlack = 24 * time.Hour

// neverEnds is where "never expires" begins: the portal's "Never" wrote 2299-12-31, and older
// tools 9999-12-31. Nothing meant to be replaced is given centuries.
var neverEnds = time.Date(2299, time.January, 1, 0, 0, 0, 0, time.UTC)

// MaxListedFindings bounds the findings status lists; metrics count them all.
const MaxListedFindings = 50

// HygieneOf parses a spec's policy; nil is the default one.
func HygieneOf(h *v1alpha1.Hygiene) (Hygiene, error) {
	out := Hygiene{MaxLifetime: DefaultMaxLifetime, MaxLiveSecrets: DefaultMaxLiveSecrets, UnusedAfter: DefaultUnusedAfter}
	if h == nil {
		return out, nil
	}
	if h.UnusedAfter != "" {
		d, err := h.UnusedAfter.Parse()
		if err != nil {
			return Hygiene{}, fmt.Errorf("hygiene.unusedAfter: %w", err)
		}
		out.UnusedAfter = d
	}
	if h.MaxLifetime != "" {
		d, err := h.MaxLifetime.Parse()
		if err != nil {
			return Hygiene{}, fmt.Errorf("hygiene.maxLifetime: %w", err)
		}
		out.MaxLifetime = d
	}
	if h.MaxLiveSecrets != nil {
		out.MaxLiveSecrets = int(*h.MaxLiveSecrets)
	}
	return out, nil
}

// Finding is one credential, or one application's secrets, that break the policy.
type Finding struct {
	Kind v1alpha1.FindingKind
	// Credential is the credential found; for ManySecrets, which is of an application, only its
	// application's fields are set.
	Credential v1alpha1.Credential
	// LiveSecrets is how many live secrets a ManySecrets application holds.
	LiveSecrets int
}

// Findings is what a set of credentials breaks of a policy at one instant.
type Findings struct {
	Counts map[v1alpha1.FindingKind]int32
	// Listed are the findings, most serious kind first, then by appId and keyId, at most limit.
	Listed []Finding
	// Unlisted is how many did not fit in Listed.
	Unlisted int32
	// NextChange is the first instant after now at which the clock alone changes the findings:
	// a credential starts, or ends (an expired one is the expiry's business, not hygiene's).
	NextChange time.Time
}

// Total is how many findings there are.
func (f Findings) Total() int32 {
	var n int32
	for _, c := range f.Counts {
		n += c
	}
	return n
}

// FindingsOf holds every credential of all to h at now. saml says which appIds' service
// principals are set up for SAML single sign-on: their signing certificate and long-lived secret
// sit on the service principal by design, so the credentials there are exempt from the lifetime
// and service-principal-object findings (and are not counted among the application's secrets).
// The credentials of a watch of one application have no appId: they are all of one.
func FindingsOf(all []v1alpha1.Credential, saml func(appID string) bool, now time.Time, h Hygiene, limit int) Findings {
	f := Findings{Counts: map[v1alpha1.FindingKind]int32{}}
	var found []Finding
	add := func(kind v1alpha1.FindingKind, c v1alpha1.Credential) {
		f.Counts[kind]++
		found = append(found, Finding{Kind: kind, Credential: c})
	}
	type app struct {
		first   v1alpha1.Credential
		secrets int
	}
	apps := map[string]*app{}
	for _, c := range all {
		end, start := c.EndTime.Time, startOf(c)
		if !start.IsZero() && start.After(end) {
			add(v1alpha1.FindingStartAfterEnd, c)
			continue
		}
		if !end.After(now) {
			continue
		}
		exempt := c.Source == v1alpha1.SourceServicePrincipal && saml(c.AppID)
		kinds, next := ofCredential(c, start, end, exempt, now, h)
		for _, kind := range kinds {
			add(kind, c)
		}
		f.NextChange = Earliest(f.NextChange, end, next)
		if !exempt && c.Type == v1alpha1.CredentialTypePassword {
			a := apps[c.AppID]
			if a == nil {
				a = &app{first: v1alpha1.Credential{AppID: c.AppID, AppDisplayName: c.AppDisplayName, AppObjectID: c.AppObjectID}}
				apps[c.AppID] = a
			}
			a.secrets++
		}
	}
	for _, a := range apps {
		if a.secrets > h.MaxLiveSecrets {
			f.Counts[v1alpha1.FindingManySecrets]++
			found = append(found, Finding{Kind: v1alpha1.FindingManySecrets, Credential: a.first, LiveSecrets: a.secrets})
		}
	}
	slices.SortFunc(found, compareFindings)
	if len(found) > limit {
		f.Unlisted = int32(len(found) - limit)
		found = found[:limit:limit]
	}
	f.Listed = found
	return f
}

func compareFindings(a, b Finding) int {
	if c := slices.Index(v1alpha1.FindingKinds, a.Kind) - slices.Index(v1alpha1.FindingKinds, b.Kind); c != 0 {
		return c
	}
	if c := strings.Compare(a.Credential.AppID, b.Credential.AppID); c != 0 {
		return c
	}
	if c := strings.Compare(string(a.Credential.Source), string(b.Credential.Source)); c != 0 {
		return c
	}
	return strings.Compare(a.Credential.KeyID, b.Credential.KeyID)
}

// ofCredential is what a live credential c, from start to end, breaks of h at now, and when the
// clock alone next changes that besides its end; exempt: a SAML service principal's, by design.
func ofCredential(c v1alpha1.Credential, start, end time.Time, exempt bool, now time.Time, h Hygiene) ([]v1alpha1.FindingKind, time.Time) {
	var kinds []v1alpha1.FindingKind
	var next time.Time
	switch {
	case exempt:
	case !end.Before(neverEnds):
		kinds = append(kinds, v1alpha1.FindingNeverExpires)
	case !start.IsZero() && end.Sub(start) > h.MaxLifetime+lifetimeSlack:
		kinds = append(kinds, v1alpha1.FindingLongLived)
	}
	if !exempt && c.Type == v1alpha1.CredentialTypePassword && c.Source == v1alpha1.SourceServicePrincipal {
		kinds = append(kinds, v1alpha1.FindingServicePrincipalSecret)
	}
	if start.After(now) {
		kinds = append(kinds, v1alpha1.FindingNotYetValid)
		next = start
	}
	if h.SignInsKnown && !exempt {
		kind, at := unused(c, start, now, h.UnusedAfter)
		if kind != "" {
			kinds = append(kinds, kind)
		}
		next = Earliest(next, at)
	}
	return kinds, next
}

// unused is NeverUsed or Unused for a credential c that started at start, when it is older than
// after and has not signed in for as long (or ever, as far as the report knows); otherwise "" and
// when it would become so.
func unused(c v1alpha1.Credential, start, now time.Time, after time.Duration) (v1alpha1.FindingKind, time.Time) {
	if start.IsZero() {
		return "", time.Time{} // no start: its age is unknown
	}
	since, kind := start, v1alpha1.FindingNeverUsed
	if c.LastSignIn != nil {
		since, kind = Latest(start, c.LastSignIn.Time), v1alpha1.FindingUnused
	}
	if at := since.Add(after); now.Before(at) {
		return "", at
	}
	return kind, time.Time{}
}
