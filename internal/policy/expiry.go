package policy

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// Thresholds are a watch's warning and critical thresholds, parsed.
type Thresholds struct {
	Warning  time.Duration
	Critical time.Duration
}

// ThresholdsOf parses the thresholds of a spec.
func ThresholdsOf(t v1alpha1.Thresholds) (Thresholds, error) {
	w, err := t.Warning.Parse()
	if err != nil {
		return Thresholds{}, fmt.Errorf("thresholds.warning: %w", err)
	}
	c, err := t.Critical.Parse()
	if err != nil {
		return Thresholds{}, fmt.Errorf("thresholds.critical: %w", err)
	}
	return Thresholds{Warning: w, Critical: c}, nil
}

// StateAt is the state at now of a credential that ends at end. Each boundary belongs to the
// worse state: at exactly end-critical the credential is Critical, at exactly end it is Expired.
func StateAt(end, now time.Time, t Thresholds) v1alpha1.CredentialState {
	switch left := end.Sub(now); {
	case left <= 0:
		return v1alpha1.StateExpired
	case left <= t.Critical:
		return v1alpha1.StateCritical
	case left <= t.Warning:
		return v1alpha1.StateWarning
	default:
		return v1alpha1.StateValid
	}
}

// severity orders states from best to worst.
var severity = map[v1alpha1.CredentialState]int{
	v1alpha1.StateValid:    1,
	v1alpha1.StateWarning:  2,
	v1alpha1.StateCritical: 3,
	v1alpha1.StateExpired:  4,
}

// Worse reports whether a is a worse state than b.
func Worse(a, b v1alpha1.CredentialState) bool { return severity[a] > severity[b] }

// KnownState reports whether s is one of the states a credential can be in.
func KnownState(s v1alpha1.CredentialState) bool { return severity[s] > 0 }

// Summary is what a set of credentials amounts to at one instant.
type Summary struct {
	// State is the worst state of any credential, Valid when there are none.
	State v1alpha1.CredentialState
	// Earliest is the credential that ends first, nil when there are none.
	Earliest *v1alpha1.Credential
	// NextTransition is the first instant after now at which a credential changes state; zero
	// when none ever will (every credential already expired, or none at all).
	NextTransition time.Time
	// NextDisplayChange is when the time left to the earliest expiry, as HumanDuration shows
	// it, next reads differently; zero when there are no credentials.
	NextDisplayChange time.Time
}

// Evaluate sets each credential's State as of now and summarises them. creds is modified in place.
func Evaluate(creds []v1alpha1.Credential, now time.Time, t Thresholds) Summary {
	s := Summary{State: v1alpha1.StateValid}
	for i := range creds {
		creds[i].State = StateAt(creds[i].EndTime.Time, now, t)
		s.add(&creds[i], now, t)
	}
	s.finish(now)
	return s
}

// add counts c, whose State is set, into the summary.
func (s *Summary) add(c *v1alpha1.Credential, now time.Time, t Thresholds) {
	end := c.EndTime.Time
	if Worse(c.State, s.State) {
		s.State = c.State
	}
	if s.Earliest == nil || end.Before(s.Earliest.EndTime.Time) {
		s.Earliest = c
	}
	for _, at := range []time.Time{end.Add(-t.Warning), end.Add(-t.Critical), end} {
		if at.After(now) {
			s.NextTransition = Earliest(s.NextTransition, at)
		}
	}
}

func (s *Summary) finish(now time.Time) {
	if s.Earliest != nil {
		s.NextDisplayChange = NextDisplayChange(s.Earliest.EndTime.Time, now)
	}
}

// HumanDuration renders d as people read expiry: whole days from two days on, then hours, then
// minutes, negative once past. It rounds toward zero, so "1d" never shows for 47 hours.
func HumanDuration(d time.Duration) string {
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	unit := displayUnit(d)
	if d < time.Minute {
		sign = ""
	}
	return fmt.Sprintf("%s%d%s", sign, d/unit, unitSuffix[unit])
}

var unitSuffix = map[time.Duration]string{24 * time.Hour: "d", time.Hour: "h", time.Minute: "m"}

// displayUnit is the unit HumanDuration counts a span of length d in.
func displayUnit(d time.Duration) time.Duration {
	switch {
	case d >= 48*time.Hour:
		return 24 * time.Hour
	case d >= time.Hour:
		return time.Hour
	default:
		return time.Minute
	}
}

// NextDisplayChange is the first whole second after now at which HumanDuration(end - t) reads
// differently from HumanDuration(end - now), so that a status showing "expires in" can be
// refreshed exactly when it would go stale.
func NextDisplayChange(end, now time.Time) time.Time {
	if left := end.Sub(now); left > 0 {
		unit := displayUnit(left)
		n := left / unit // shown while left stays above n units
		return end.Add(-n * unit).Add(time.Second).Truncate(time.Second)
	}
	past := now.Sub(end)
	unit := displayUnit(past)
	return end.Add((past/unit + 1) * unit)
}

// Worsened lists the credentials in after that are in a worse state than they were in before,
// or that are new and not Valid: the ones worth an event.
func Worsened(before, after []v1alpha1.Credential) []v1alpha1.Credential {
	was := map[string]v1alpha1.CredentialState{}
	for _, c := range before {
		was[string(c.Source)+"/"+c.KeyID] = c.State
	}
	var out []v1alpha1.Credential
	for _, c := range after {
		prev, seen := was[string(c.Source)+"/"+c.KeyID]
		if (!seen && c.State != v1alpha1.StateValid) || (seen && Worse(c.State, prev)) {
			out = append(out, c)
		}
	}
	return out
}

// Groups counts credentials that need attention by state, and names the most telling one of
// each: the Critical and the Warning one that end soonest, and the Expired one that ended last.
type Groups struct {
	Expired, Critical, Warning               int
	FirstCritical, FirstWarning, LastExpired *v1alpha1.Credential
}

// GroupsOf groups credentials whose states are set.
func GroupsOf(creds []v1alpha1.Credential) Groups {
	var g Groups
	for i := range creds {
		g.add(&creds[i])
	}
	return g
}

func (g *Groups) add(c *v1alpha1.Credential) {
	end := c.EndTime.Time
	switch c.State {
	case v1alpha1.StateExpired:
		g.Expired++
		if g.LastExpired == nil || end.After(g.LastExpired.EndTime.Time) {
			g.LastExpired = c
		}
	case v1alpha1.StateCritical:
		g.Critical++
		if g.FirstCritical == nil || end.Before(g.FirstCritical.EndTime.Time) {
			g.FirstCritical = c
		}
	case v1alpha1.StateWarning:
		g.Warning++
		if g.FirstWarning == nil || end.Before(g.FirstWarning.EndTime.Time) {
			g.FirstWarning = c
		}
	}
}

// BySoonestEnd orders credentials by their end, then keyId: the order status and messages list them in.
func BySoonestEnd(a, b v1alpha1.Credential) int {
	return cmp.Or(a.EndTime.Compare(b.EndTime.Time), strings.Compare(a.KeyID, b.KeyID))
}

// InUseByRotation reports whether keyID is a secret credwatch's rotations moved a watch's
// consumers onto: the last rotation's, or that of the rotation retiring the old ones once it
// handed its secret to the watch's Secret (RetireTime is set then): until then the old secret is
// all some consumers have.
func InUseByRotation(keyID string, last *v1alpha1.LastRotation, r *v1alpha1.RotationStatus) bool {
	return last != nil && last.KeyID == keyID ||
		r != nil && r.Step == v1alpha1.StepRetiring && r.RetireTime != nil && r.KeyID == keyID
}

// Newer is the credential that renewed c, the one ending last; nil when none did. A credential
// renews c when it is of its kind, on the same object, and started and ends after it:
// `az ad app credential reset --append` renews that way, and leaves the old one in place.
func Newer(c v1alpha1.Credential, all []v1alpha1.Credential) *v1alpha1.Credential {
	var newer *v1alpha1.Credential
	for i := range all {
		if d := &all[i]; Renews(*d, c) && (newer == nil || d.EndTime.After(newer.EndTime.Time)) {
			newer = d
		}
	}
	return newer
}

// Renews reports whether d renews c, as Newer means it.
func Renews(d, c v1alpha1.Credential) bool {
	return d.Type == c.Type && d.Source == c.Source && d.KeyID != c.KeyID && d.EndTime.After(c.EndTime.Time) && startOf(d).After(startOf(c))
}

func startOf(c v1alpha1.Credential) time.Time {
	if c.StartTime == nil {
		return time.Time{}
	}
	return c.StartTime.Time
}
