package policy

import (
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alertkind"
)

// DefaultRemindBefore is the reminder schedule of a watch that sets none.
var DefaultRemindBefore = []time.Duration{30 * day, 14 * day, 7 * day, 3 * day, day}

// DefaultCheckFailureAfter is how long checks may fail before the channels are told.
const DefaultCheckFailureAfter = time.Hour

const day = 24 * time.Hour

// Step is one point of a credential's alert schedule: a reminder some time before its end, or
// a day after it. Steps are ordered by Due, which is all the ledger needs to compare.
type Step struct {
	// Name is how status and messages name the step: "7d" or "expired+3d".
	Name    string
	Due     time.Time
	Expired bool
}

// CurrentStep is the latest step of a credential ending at end that has fallen due by now; ok
// is false while none has. Reminders skipped while the operator was down are not sent late:
// only the latest counts, because it is the one with the news.
func CurrentStep(end, now time.Time, remindBefore []time.Duration) (step Step, ok bool) {
	if !now.Before(end) {
		n := now.Sub(end) / day
		return Step{Name: fmt.Sprintf("expired+%dd", n), Due: end.Add(n * day), Expired: true}, true
	}
	for _, d := range remindBefore {
		due := end.Add(-d)
		if !due.After(now) && (!ok || due.After(step.Due)) {
			step, ok = Step{Name: stepName(d), Due: due}, true
		}
	}
	return step, ok
}

// stepName names a reminder by its lead time in the largest whole unit: 30d, 36h, 90m.
func stepName(d time.Duration) string {
	switch {
	case d%day == 0:
		return fmt.Sprintf("%dd", d/day)
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	default:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
}

// NextStepDue is when the next step after now falls due: a reminder still ahead, or the next
// day of expiry.
func NextStepDue(end, now time.Time, remindBefore []time.Duration) time.Time {
	if !now.Before(end) {
		return end.Add((now.Sub(end)/day + 1) * day)
	}
	next := end
	for _, d := range remindBefore {
		if due := end.Add(-d); due.After(now) && due.Before(next) {
			next = due
		}
	}
	return next
}

// Due reports whether step should be sent, given the one last sent on the channel (nil if none).
// It compares whole seconds, the precision the ledger is stored with.
func Due(step Step, last *v1alpha1.SentAlert) bool {
	return last == nil || step.Due.Truncate(time.Second).After(last.DueTime.Time)
}

// Alert delivery backoff per channel: 1m, 2m, 4m, ... capped at 1h.
const (
	deliveryBase = time.Minute
	deliveryCap  = time.Hour
)

// DeliveryBackoff is how long after failures consecutive failed deliveries a channel is tried
// again; a peer's Retry-After is a floor.
func DeliveryBackoff(failures int32, retryAfter time.Duration) time.Duration {
	return max(Doubling(deliveryBase, deliveryCap, failures), retryAfter)
}

// RemindBefore parses a watch's reminder schedule, latest-first; empty means the default.
func RemindBefore(ds []v1alpha1.Duration) ([]time.Duration, error) {
	if len(ds) == 0 {
		return DefaultRemindBefore, nil
	}
	out := make([]time.Duration, 0, len(ds))
	for _, d := range ds {
		v, err := d.Parse()
		if err != nil {
			return nil, fmt.Errorf("alerts.remindBefore: %w", err)
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] > out[j] })
	return out, nil
}

// RotationSubject is the ledger subject of rotation alerts.
const RotationSubject = "rotation"

// rotationFailuresToAlert is how many failed tries of one rotation step make an alert: the first
// tries of waiting for a new secret to replicate are expected to fail.
const rotationFailuresToAlert = 5

// CheckSubject is the ledger subject of check-failure alerts.
const CheckSubject = "check"

// pullSubjectPrefix starts the ledger subjects of image-pull alerts, one per registry.
const pullSubjectPrefix = "pull/"

// PullSubject is the ledger subject of a registry's image-pull alerts.
func PullSubject(registry string) string { return pullSubjectPrefix + registry }

// PullRegistry is the registry of an image-pull alert's subject; ok is false for other subjects.
func PullRegistry(subject string) (registry string, ok bool) {
	return strings.CutPrefix(subject, pullSubjectPrefix)
}

// Ledger subjects of a serviceAccountIssuer target's alerts.
const (
	DriftSubject  = "issuer/drift"
	IssuerSubject = "issuer/url"
)

// credentialSubject reports whether subject is a credential's (see SubjectOf), not a check's, a
// rotation's, a registry's or an issuer's.
func credentialSubject(subject string) bool {
	_, _, ok := SubjectCredential(subject)
	return ok
}

// SubjectCredential is the object and keyId of a credential's subject (see SubjectOf); ok is
// false for other subjects.
func SubjectCredential(subject string) (source v1alpha1.CredentialSource, keyID string, ok bool) {
	src, keyID, _ := strings.Cut(subject, "/")
	if source = v1alpha1.CredentialSource(src); source != v1alpha1.SourceApplication && source != v1alpha1.SourceServicePrincipal {
		return "", "", false
	}
	return source, keyID, true
}

// SubjectOf is the ledger subject of a credential's alerts.
func SubjectOf(c v1alpha1.Credential) string { return string(c.Source) + "/" + c.KeyID }

// PlannedAlert is one alert due on one channel.
type PlannedAlert struct {
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

// AlertInputs is what deciding the due alerts takes, all of it from the watch's spec and status.
type AlertInputs struct {
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
}

// AlertPlan is the alerts due now, and when the next one falls due.
type AlertPlan struct {
	Due []PlannedAlert
	// Stale are ledger entries nothing will ever be sent about again: a subject that is gone, on
	// a channel the watch no longer has. Entries of a removed channel whose subject is still
	// there are kept, so that putting the channel back does not repeat the current step.
	Stale []v1alpha1.SentAlert
	// Next is when the next step falls due; zero when none will.
	Next time.Time
}

// PlanAlerts decides, per channel, which alerts are due at now: the latest step of each
// credential not yet sent there, a resolution for each credential alerted on that is gone or
// renewed, and a check-failure alert, or its recovery. In each channel they come soonest-expiring
// first. Steps keep their due time, and a resolution or recovery the due time of what it ends, so
// that an alert has the same ID however often it is planned.
func PlanAlerts(in AlertInputs, now time.Time) AlertPlan {
	p := newPlanner(in, now)
	p.stale()
	for _, ch := range in.Channels {
		if in.Checked {
			p.credentials(ch)
		}
		p.rotation(ch)
		p.pulls(ch)
		p.issuer(ch)
		p.check(ch)
	}
	return p.plan
}

// planner is what PlanAlerts works from and what it has planned so far.
type planner struct {
	in   AlertInputs
	now  time.Time
	sent map[[2]string]*v1alpha1.SentAlert // by channel and subject
	live map[string]bool                   // subjects that still call for alerts
	plan AlertPlan
}

func newPlanner(in AlertInputs, now time.Time) *planner {
	p := &planner{in: in, now: now, sent: map[[2]string]*v1alpha1.SentAlert{}, live: map[string]bool{}}
	for i := range in.Sent {
		s := &in.Sent[i]
		p.sent[[2]string{s.Channel, s.Subject}] = s
	}
	for _, c := range in.Credentials {
		if !p.replacedByRotation(c) {
			p.live[SubjectOf(c)] = true
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
		if InUseByRotation(d.KeyID, p.in.LastRotation, p.in.Rotation) && renews(d, c) {
			return true
		}
	}
	return false
}

// InUseByRotation reports whether keyID is a secret credwatch's rotations moved a watch's
// consumers onto: the last rotation's, or that of the rotation retiring the old ones once it
// handed its secret to the watch's Secret (RetireTime is set then): until then the old secret is
// all some consumers have.
func InUseByRotation(keyID string, last *v1alpha1.LastRotation, r *v1alpha1.RotationStatus) bool {
	return last != nil && last.KeyID == keyID ||
		r != nil && r.Step == v1alpha1.StepRetiring && r.RetireTime != nil && r.KeyID == keyID
}

func (p *planner) drifting() bool {
	return p.in.Drift != nil && p.in.Drift.Status == metav1.ConditionTrue
}

func (p *planner) last(ch, subject string) *v1alpha1.SentAlert { return p.sent[[2]string{ch, subject}] }

func (p *planner) due(a PlannedAlert) { p.plan.Due = append(p.plan.Due, a) }

// soonest notes a moment at which a step falls due.
func (p *planner) soonest(t time.Time) {
	if t.After(p.now) {
		p.plan.Next = Earliest(p.plan.Next, t)
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
		newer := Newer(*c, p.in.Credentials)
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
		p.due(PlannedAlert{Channel: ch, Kind: kind, Subject: subject, Step: step, Credential: c, Newer: newer})
	}
	for _, s := range p.in.Sent {
		if s.Channel == ch && credentialSubject(s.Subject) && !p.live[s.Subject] {
			p.due(PlannedAlert{Channel: ch, Kind: alertkind.Resolved, Subject: s.Subject,
				Step: Step{Name: "resolved", Due: s.DueTime.Time}, Forget: true})
		}
	}
}

// rotation plans the news of a rotation done, and of one whose step keeps failing.
func (p *planner) rotation(ch string) {
	last := p.last(ch, RotationSubject)
	if r := p.in.LastRotation; r != nil && (last == nil || last.Step != r.KeyID) {
		p.due(PlannedAlert{Channel: ch, Kind: alertkind.Rotated, Subject: RotationSubject, Step: Step{Name: r.KeyID, Due: r.Time.Time}})
	}
	// The first refusals of a new secret are replication; a cluster that fails is news at once.
	if r := p.in.Rotation; r != nil && (r.Failures >= rotationFailuresToAlert ||
		r.Failures > 0 && (r.Step == v1alpha1.StepSecretVerified || r.Step == v1alpha1.StepClusterUpdating)) {
		step := Step{Name: r.DisplayName + "/" + string(r.Step), Due: r.StartTime.Time}
		if last == nil || last.Step != step.Name {
			p.due(PlannedAlert{Channel: ch, Kind: alertkind.RotationFailing, Subject: RotationSubject, Step: step})
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
			p.due(PlannedAlert{Channel: ch, Kind: alertkind.PullsRefused, Subject: subject,
				Step: Step{Name: string(in.Scope), Due: in.Since.Time}, Pull: in})
		}
	}
	for _, s := range p.in.Sent {
		if _, pull := PullRegistry(s.Subject); pull && s.Channel == ch && !p.live[s.Subject] {
			p.due(PlannedAlert{Channel: ch, Kind: alertkind.PullsRecovered, Subject: s.Subject,
				Step: Step{Name: "recovered", Due: s.DueTime.Time}, Forget: true})
		}
	}
}

// issuer tells drift once per reason, and its end once; an issuer change once per change.
func (p *planner) issuer(ch string) {
	if last := p.last(ch, DriftSubject); p.drifting() && (last == nil || last.Step != p.in.Drift.Reason) {
		p.due(PlannedAlert{Channel: ch, Kind: alertkind.SigningKeyDrift, Subject: DriftSubject,
			Step: Step{Name: p.in.Drift.Reason, Due: p.in.Drift.LastTransitionTime.Time}})
	} else if last != nil && !p.drifting() {
		p.due(PlannedAlert{Channel: ch, Kind: alertkind.SigningKeysAgree, Subject: DriftSubject,
			Step: Step{Name: "agree", Due: last.DueTime.Time}, Forget: true})
	}
	if c := p.in.IssuerChanged; c != nil {
		if step := (Step{Name: "changed", Due: c.Time}); Due(step, p.last(ch, IssuerSubject)) {
			p.due(PlannedAlert{Channel: ch, Kind: alertkind.IssuerChanged, Subject: IssuerSubject, Step: step})
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
			p.due(PlannedAlert{Channel: ch, Kind: alertkind.CheckFailing, Subject: CheckSubject, Step: step})
		}
	case last != nil:
		p.due(PlannedAlert{Channel: ch, Kind: alertkind.CheckRecovered, Subject: CheckSubject,
			Step: Step{Name: "recovered", Due: last.DueTime.Time}, Forget: true})
	}
}

// Newer is the credential that renewed c, the one ending last; nil when none did. A credential
// renews c when it is of its kind, on the same object, and started and ends after it:
// `az ad app credential reset --append` renews that way, and leaves the old one in place.
func Newer(c v1alpha1.Credential, all []v1alpha1.Credential) *v1alpha1.Credential {
	var newer *v1alpha1.Credential
	for i := range all {
		if d := &all[i]; renews(*d, c) && (newer == nil || d.EndTime.After(newer.EndTime.Time)) {
			newer = d
		}
	}
	return newer
}

func renews(d, c v1alpha1.Credential) bool {
	return d.Type == c.Type && d.Source == c.Source && d.KeyID != c.KeyID && d.EndTime.After(c.EndTime.Time) && startOf(d).After(startOf(c))
}

func startOf(c v1alpha1.Credential) time.Time {
	if c.StartTime == nil {
		return time.Time{}
	}
	return c.StartTime.Time
}
