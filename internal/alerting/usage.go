package alerting

import (
	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/policy"
)

// UnusedStep names the one alert of an expiring credential nothing uses.
const UnusedStep = "unused"

// movedOff reports whether c's consumers moved to the credential that renewed it, as sign-ins
// show: the newer one signed in, and c has not for usage.activeWithin. Then c is quiet until it
// goes, as one renewed by credwatch's own rotation is.
func (p *planner) movedOff(c v1alpha1.Credential) bool {
	if p.in.Usage == nil || c.InUse {
		return false
	}
	newer := policy.Newer(c, p.in.Credentials)
	return newer != nil && newer.LastSignIn != nil
}

// unused plans, on channel ch, the one alert of c, an expiring credential that has not signed in
// for usage.unusedAfter while another credential of the application is in use: "let it expire or
// remove it", told once when its reminders begin, instead of them. It reports whether c is such
// a credential, whose reminders are not planned.
func (p *planner) unused(ch string, c *v1alpha1.Credential) bool {
	u := p.in.Usage
	if u == nil || c.InUse || !p.anotherInUse(c.KeyID) {
		return false
	}
	since := c.StartTime
	if c.LastSignIn != nil {
		since = c.LastSignIn
	}
	if since != nil && p.now.Before(since.Add(u.UnusedAfter)) {
		p.soonest(since.Add(u.UnusedAfter))
		return false
	}
	end := c.EndTime.Time
	if _, ok := CurrentStep(end, p.now, p.in.RemindBefore); !ok {
		p.soonest(NextStepDue(end, p.now, p.in.RemindBefore))
		return true
	}
	subject := SubjectOf(*c)
	if last := p.last(ch, subject); last == nil || last.Step != UnusedStep {
		// Due when its first reminder would have been: the same ID however often it is planned.
		p.due(Planned{Channel: ch, Kind: alertkind.Unused, Subject: subject, Credential: c,
			Step: Step{Name: UnusedStep, Due: end.Add(-p.in.RemindBefore[0])}})
	}
	return true
}

func (p *planner) anotherInUse(keyID string) bool {
	for _, d := range p.in.Credentials {
		if d.KeyID != keyID && d.InUse {
			return true
		}
	}
	return false
}

// listed is the credential of subject, if status still lists it.
func (p *planner) listed(subject string) *v1alpha1.Credential {
	for i := range p.in.Credentials {
		if SubjectOf(p.in.Credentials[i]) == subject {
			return &p.in.Credentials[i]
		}
	}
	return nil
}
