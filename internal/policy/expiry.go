package policy

import (
	"fmt"
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

// Summary is what a set of credentials amounts to at one instant.
type Summary struct {
	// State is the worst state of any credential, Valid when there are none.
	State v1alpha1.CredentialState
	// Earliest is the credential that ends first, nil when there are none.
	Earliest *v1alpha1.Credential
	// NextTransition is the first instant after now at which a credential changes state; zero
	// when none ever will (every credential already expired, or none at all).
	NextTransition time.Time
}

// Evaluate sets each credential's State as of now and summarises them. creds is modified in place.
func Evaluate(creds []v1alpha1.Credential, now time.Time, t Thresholds) Summary {
	s := Summary{State: v1alpha1.StateValid}
	for i := range creds {
		c := &creds[i]
		end := c.EndTime.Time
		c.State = StateAt(end, now, t)
		if Worse(c.State, s.State) {
			s.State = c.State
		}
		if s.Earliest == nil || end.Before(s.Earliest.EndTime.Time) {
			s.Earliest = c
		}
		for _, at := range []time.Time{end.Add(-t.Warning), end.Add(-t.Critical), end} {
			if at.After(now) && (s.NextTransition.IsZero() || at.Before(s.NextTransition)) {
				s.NextTransition = at
			}
		}
	}
	return s
}

// HumanDuration renders d as people read expiry: whole days from two days on, then hours, then
// minutes, negative once past. It rounds toward zero, so "1d" never shows for 47 hours.
func HumanDuration(d time.Duration) string {
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%s%dd", sign, d/(24*time.Hour))
	case d >= time.Hour:
		return fmt.Sprintf("%s%dh", sign, d/time.Hour)
	default:
		return fmt.Sprintf("%s%dm", sign, d/time.Minute)
	}
}
