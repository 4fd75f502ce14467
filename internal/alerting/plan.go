package alerting

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/policy"
)

// Planned is one alert due on one channel.
type Planned struct {
	Channel string
	Kind    alertkind.Kind
	Subject string
	Step    Step
	// Credential is what a reminder or an expiry is about; nil for the others.
	Credential *v1alpha1.Credential
	// Newer is the credential that renewed Credential, nil when none did: the alert goes on, as
	// whatever used the old one may not have moved to it.
	Newer *v1alpha1.Credential
	// Pull is the incident a refused-pulls alert is about; nil for the others.
	Pull *v1alpha1.PullIncident
	// Forget is true when, once delivered, the ledger entry goes: the matter is over.
	Forget bool
}

// Inputs is what deciding the due alerts takes, all of it from the watch's spec and status.
type Inputs struct {
	// Credentials as of the last successful check; Checked is false when there was none, and
	// then nothing is known to have been resolved.
	Credentials []v1alpha1.Credential
	Checked     bool
	// Ready is the watch's Ready condition, nil before the first check.
	Ready             *metav1.Condition
	Sent              []v1alpha1.SentAlert
	Channels          []string
	RemindBefore      []time.Duration
	CheckFailureAfter time.Duration
	// Rotation is the rotation in progress, LastRotation the last one done; nil when none.
	Rotation     *v1alpha1.RotationStatus
	LastRotation *v1alpha1.LastRotation
	// Pulls are the registries refusing image pulls now.
	Pulls []v1alpha1.PullIncident
	// Drift is the SigningKeyDrift condition of a serviceAccountIssuer target, nil for others.
	Drift *metav1.Condition
	// IssuerChanged is when the issuer URL last changed, nil when it has not.
	IssuerChanged *metav1.Time
	// Usage is spec.usage when the credentials' sign-ins are known (their InUse and LastSignIn
	// are evidence), nil when they are not.
	Usage *policy.Usage
}

// Plan is the alerts due now, and when the next one falls due.
type Plan struct {
	Due []Planned
	// Stale are ledger entries nothing will ever be sent about again: a subject that is gone, on
	// a channel the watch no longer has. Entries of a removed channel whose subject is still
	// there are kept, so that putting the channel back does not repeat the current step.
	Stale []v1alpha1.SentAlert
	// Next is when the next step falls due; zero when none will.
	Next time.Time
}

// Decide decides, per channel, which alerts are due at now: the latest step of each
// credential not yet sent there, a resolution for each credential alerted on that is gone or
// renewed, and a check-failure alert, or its recovery. In each channel they come soonest-expiring
// first. Steps keep their due time, and a resolution or recovery the due time of what it ends, so
// that an alert has the same ID however often it is planned.
func Decide(in Inputs, now time.Time) Plan {
	p := newPlanner(in, now)
	p.stale()
	for _, ch := range in.Channels {
		if in.Checked {
			p.credentials(ch)
			p.added(ch)
		}
		p.rotation(ch)
		p.pulls(ch)
		p.issuer(ch)
		p.check(ch)
	}
	return p.plan
}

// planner is what Decide works from and what it has planned so far.
type planner struct {
	in   Inputs
	now  time.Time
	sent map[[2]string]*v1alpha1.SentAlert // by channel and subject
	live map[string]bool                   // subjects that still call for alerts
	plan Plan
}

func newPlanner(in Inputs, now time.Time) *planner {
	p := &planner{in: in, now: now, sent: map[[2]string]*v1alpha1.SentAlert{}, live: map[string]bool{}}
	for i := range in.Sent {
		s := &in.Sent[i]
		p.sent[[2]string{s.Channel, s.Subject}] = s
	}
	for _, c := range in.Credentials {
		if !p.replacedByRotation(c) && !p.movedOff(c) {
			p.live[SubjectOf(c)] = true
		}
	}
	for _, c := range in.Credentials {
		if c.AddedTime != nil {
			p.live[AddedSubject(c)] = true
		}
	}
	for _, pi := range in.Pulls {
		p.live[PullSubject(pi.Registry)] = true
	}
	p.live[DriftSubject] = p.drifting()
	p.live[IssuerSubject] = in.IssuerChanged != nil
	return p
}

// replacedByRotation reports whether c was renewed by the secret of credwatch's own rotation, once
// that secret is in use: the rotation moved the watch's consumers (its Secret, its cluster) to it,
// and c is quiet until it is retired. That holds for every older secret of the application the
// rotation's secret renews, the one it replaced or another. A credential renewed any other way, by
// hand or by a pipeline, is not quiet: nothing says its consumers moved, and an AKS cluster moves
// only when it is reset.
func (p *planner) replacedByRotation(c v1alpha1.Credential) bool {
	for _, d := range p.in.Credentials {
		if policy.InUseByRotation(d.KeyID, p.in.LastRotation, p.in.Rotation) && policy.Renews(d, c) {
			return true
		}
	}
	return false
}

func (p *planner) drifting() bool {
	return p.in.Drift != nil && p.in.Drift.Status == metav1.ConditionTrue
}

func (p *planner) last(ch, subject string) *v1alpha1.SentAlert { return p.sent[[2]string{ch, subject}] }

func (p *planner) due(a Planned) { p.plan.Due = append(p.plan.Due, a) }

// soonest notes a moment at which a step falls due.
func (p *planner) soonest(t time.Time) {
	if t.After(p.now) {
		p.plan.Next = policy.Earliest(p.plan.Next, t)
	}
}

// stale finds the ledger entries of removed channels whose subject is gone too.
func (p *planner) stale() {
	if !p.in.Checked {
		return
	}
	configured := map[string]bool{}
	for _, ch := range p.in.Channels {
		configured[ch] = true
	}
	for _, s := range p.in.Sent {
		if !configured[s.Channel] && s.Subject != CheckSubject && s.Subject != RotationSubject && !p.live[s.Subject] {
			p.plan.Stale = append(p.plan.Stale, s)
		}
	}
}

// credentials plans each live credential's latest step, and the resolution of each credential
// alerted on that is gone or renewed.
func (p *planner) credentials(ch string) {
	for i := range p.in.Credentials {
		c := &p.in.Credentials[i]
		subject := SubjectOf(*c)
		if !p.live[subject] {
			continue
		}
		end := c.EndTime.Time
		if p.unused(ch, c) {
			continue
		}
		newer := policy.Newer(*c, p.in.Credentials)
		step, ok := CurrentStep(end, p.now, p.in.RemindBefore)
		if newer != nil && step.Expired {
			// Renewed and expired: told once, not daily, as an old secret often stays beside the
			// new one for good.
			step = Step{Name: "expired", Due: end, Expired: true}
		} else {
			p.soonest(NextStepDue(end, p.now, p.in.RemindBefore))
		}
		if !ok || !Due(step, p.last(ch, subject)) {
			continue
		}
		kind := alertkind.Reminder
		if step.Expired {
			kind = alertkind.Expired
		}
		p.due(Planned{Channel: ch, Kind: kind, Subject: subject, Step: step, Credential: c, Newer: newer})
	}
	for _, s := range p.in.Sent {
		if s.Channel == ch && credentialSubject(s.Subject) && !p.live[s.Subject] {
			// Still listed: its consumers moved off it (Credential says which).
			p.due(Planned{Channel: ch, Kind: alertkind.Resolved, Subject: s.Subject,
				Step: Step{Name: "resolved", Due: s.DueTime.Time}, Credential: p.listed(s.Subject), Forget: true})
		}
	}
}

// rotation plans the news of a rotation done, and of one whose step keeps failing.
func (p *planner) rotation(ch string) {
	last := p.last(ch, RotationSubject)
	// The news of the last rotation is told before the next begins, or not at all: the in-progress
	// rotation's news shares its ledger entry, and telling both would alternate them for ever.
	if r := p.in.LastRotation; r != nil && p.in.Rotation == nil && (last == nil || last.Step != r.KeyID) {
		p.due(Planned{Channel: ch, Kind: alertkind.Rotated, Subject: RotationSubject, Step: Step{Name: r.KeyID, Due: r.Time.Time}})
	}
	if r := p.in.Rotation; r != nil && r.HeldTime != nil {
		// Held for days by a consumer that never moved: that is the news, not a step's failures.
		step := Step{Name: "held/" + r.KeyID, Due: r.HeldTime.Time}
		if last == nil || last.Step != step.Name {
			p.due(Planned{Channel: ch, Kind: alertkind.RotationHeld, Subject: RotationSubject, Step: step})
		}
		return
	}
	// The first refusals of a new secret are replication; a cluster that fails is news at once.
	if r := p.in.Rotation; r != nil && (r.Failures >= rotationFailuresToAlert ||
		r.Failures > 0 && (r.Step == v1alpha1.StepSecretVerified || r.Step == v1alpha1.StepClusterUpdating)) {
		step := Step{Name: r.DisplayName + "/" + string(r.Step), Due: r.StartTime.Time}
		if last == nil || last.Step != step.Name {
			p.due(Planned{Channel: ch, Kind: alertkind.RotationFailing, Subject: RotationSubject, Step: step})
		}
	}
}

// pulls tells an incident once per scope it takes (node-local turning cluster-wide is news), and
// its end once; one too early to tell is not told.
func (p *planner) pulls(ch string) {
	for i := range p.in.Pulls {
		in := &p.in.Pulls[i]
		subject := PullSubject(in.Registry)
		last := p.last(ch, subject)
		if t := in.TellTime; (t != nil && p.now.Before(t.Time)) || (t == nil && in.Scope == v1alpha1.PullScopeUndetermined) {
			// Not understood yet: an Undetermined incident is told only if it still is at the end
			// of the window, a decided one once its refusals settled.
			if t != nil {
				p.soonest(t.Time)
			}
			continue
		}
		if in.Scope == v1alpha1.PullScopeUndetermined && last != nil {
			// A told incident that falls to Undetermined (no other node pulled lately) is the same
			// incident, less understood: no news.
			continue
		}
		if last == nil || last.Step != string(in.Scope) {
			p.due(Planned{Channel: ch, Kind: alertkind.PullsRefused, Subject: subject,
				Step: Step{Name: string(in.Scope), Due: in.Since.Time}, Pull: in})
		}
	}
	for _, s := range p.in.Sent {
		if _, pull := PullRegistry(s.Subject); pull && s.Channel == ch && !p.live[s.Subject] {
			p.due(Planned{Channel: ch, Kind: alertkind.PullsRecovered, Subject: s.Subject,
				Step: Step{Name: "recovered", Due: s.DueTime.Time}, Forget: true})
		}
	}
}

// issuer tells drift once per reason, and its end once; an issuer change once per change.
func (p *planner) issuer(ch string) {
	if last := p.last(ch, DriftSubject); p.drifting() && (last == nil || last.Step != p.in.Drift.Reason) {
		p.due(Planned{Channel: ch, Kind: alertkind.SigningKeyDrift, Subject: DriftSubject,
			Step: Step{Name: p.in.Drift.Reason, Due: p.in.Drift.LastTransitionTime.Time}})
	} else if last != nil && !p.drifting() {
		p.due(Planned{Channel: ch, Kind: alertkind.SigningKeysAgree, Subject: DriftSubject,
			Step: Step{Name: "agree", Due: last.DueTime.Time}, Forget: true})
	}
	if c := p.in.IssuerChanged; c != nil {
		if step := (Step{Name: "changed", Due: c.Time}); Due(step, p.last(ch, IssuerSubject)) {
			p.due(Planned{Channel: ch, Kind: alertkind.IssuerChanged, Subject: IssuerSubject, Step: step})
		}
	}
}

// check tells checks failing for longer than CheckFailureAfter, and their recovery.
func (p *planner) check(ch string) {
	last := p.last(ch, CheckSubject)
	switch failing := p.in.Ready != nil && p.in.Ready.Status == metav1.ConditionFalse; {
	case failing:
		due := p.in.Ready.LastTransitionTime.Add(p.in.CheckFailureAfter)
		step := Step{Name: "failing", Due: due}
		if p.now.Before(due) {
			p.soonest(due)
		} else if Due(step, last) {
			p.due(Planned{Channel: ch, Kind: alertkind.CheckFailing, Subject: CheckSubject, Step: step})
		}
	case last != nil:
		p.due(Planned{Channel: ch, Kind: alertkind.CheckRecovered, Subject: CheckSubject,
			Step: Step{Name: "recovered", Due: last.DueTime.Time}, Forget: true})
	}
}
