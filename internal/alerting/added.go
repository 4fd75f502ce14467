package alerting

import (
	"github.com/credwatch/credwatch/internal/alertkind"
)

// added plans, once per credential and channel, the news of a credential added by something other
// than credwatch (its AddedTime set by the check that found it). The ledger entry of one that is
// gone goes without a word: its reminders, if it had any, say it is resolved.
func (p *planner) added(ch string) {
	for i := range p.in.Credentials {
		c := &p.in.Credentials[i]
		if c.AddedTime == nil {
			continue
		}
		subject := AddedSubject(*c)
		step := Step{Name: "added", Due: c.AddedTime.Time}
		if Due(step, p.last(ch, subject)) {
			p.due(Planned{Channel: ch, Kind: alertkind.CredentialAdded, Subject: subject, Step: step, Credential: c})
		}
	}
	for _, s := range p.in.Sent {
		if _, ok := AddedCredential(s.Subject); ok && s.Channel == ch && !p.live[s.Subject] {
			p.plan.Stale = append(p.plan.Stale, s)
		}
	}
}
