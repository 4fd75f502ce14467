package rotation

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
)

// SignIns is what the watch's last read of the sign-in report says of the application's secrets,
// and spec.usage: what counts as in use, and how long old secrets may keep signing in before the
// rotation holds. Unavailable says why the watch, which asks for sign-ins, cannot have them
// here (the report refused for good, the identity refusing it); Evidence is empty then.
type SignIns struct {
	Evidence    policy.SignInEvidence
	Usage       policy.Usage
	Unavailable string
}

// quiet reports whether the old secrets may go now, as sign-ins show (Settings.SignIns): none
// signed in since the new secret was put in use, on a report read late enough to show it. Until
// then it records in status which still sign in, holds the rotation once the wait is over, and
// returns when to look again. It also records the new secret's first sign-in after the move:
// its consumers, the cluster among them, moved onto it. Once a rotation has waited on sign-ins
// it goes on waiting for them: sign-ins turned off, refused or unavailable since leave it
// held, not retiring blind; removing the old secrets by hand lets it finish.
func (m *Machine) quiet(old []v1alpha1.Credential) (time.Time, bool) {
	s := m.Settings.SignIns
	if len(old) == 0 || !m.st.SignInsGated && (s == nil || s.Unavailable != "") {
		return time.Time{}, true
	}
	moved := m.movedAt()
	var e policy.SignInEvidence
	u := policy.Usage{ActiveWithin: policy.DefaultActiveWithin, RetireWait: policy.DefaultRetireWait}
	why := ""
	switch {
	case s == nil:
		why = "spec.usage.signIns was turned off after this rotation began waiting on sign-ins"
	case s.Unavailable != "":
		u, why = s.Usage, s.Unavailable
	default:
		e, u = s.Evidence, s.Usage
	}
	if last := e.Last[m.st.KeyID]; m.st.NewSecretSignIn == nil && last.After(moved) {
		t := metav1.NewTime(last)
		m.st.NewSecretSignIn = &t
		m.Events.Event(corev1.EventTypeNormal, EventNewSecretUsed, fmt.Sprintf("The new secret %s of %s signed in at %s, after it was put in use: its consumers moved onto it",
			m.st.KeyID, m.Settings.Target, last.UTC().Format(time.RFC3339)))
	}
	keys := make([]string, 0, len(old))
	for _, c := range old {
		keys = append(keys, c.KeyID)
	}
	q := policy.OldSecretsQuiet(keys, e, moved, m.Now, u)
	if q.Retire {
		m.st.OldSecretsInUse, m.st.HeldTime = nil, nil
		return time.Time{}, true
	}
	if why != "" {
		q.Message = "Old secrets wait for sign-ins to show them quiet, and none can be read: " + why +
			"; restore it, or remove the old secrets by hand if nothing uses them (" + strings.Join(keys, ", ") + ")"
	}
	m.st.OldSecretsInUse = q.Busy
	if q.Held && m.st.HeldTime == nil {
		t := metav1.NewTime(m.Now)
		m.st.HeldTime = &t
		m.Events.Event(corev1.EventTypeWarning, EventOldSecretInUse, "Retiring the old secrets of "+m.Settings.Target+" is held: "+q.Message)
	}
	m.oldInUse = q.Held
	next, _ := m.wait(q.Next, q.Message)
	return next, false
}

// movedAt is when the new secret was put in use: the rotation reached Retiring then, and handed
// it to the watch's Secret at once.
func (m *Machine) movedAt() time.Time {
	if t := m.st.StepTime; t != nil {
		return t.Time
	}
	return m.st.RetireTime.Add(-m.Settings.GracePeriod)
}

// SignInsOf is what the watch's status says of the sign-ins of application appID's secrets: nil
// when the watch does not ask for them; Unavailable set when it cannot have them here (the report
// unavailable, the identity refusing it). A status about another application, a read that
// failed, or the report's silence on a secret made less than its lag before the read is no
// evidence.
func SignInsOf(obj *v1alpha1.CredentialWatch, appID string) *SignIns {
	u, err := policy.UsageOf(obj.Spec.Usage)
	if err != nil || !u.On() {
		return nil
	}
	st := &obj.Status
	s := &SignIns{Usage: u}
	cond := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSignInsRead)
	if cond != nil && cond.Status == metav1.ConditionFalse &&
		(cond.Reason == v1alpha1.ReasonSignInsUnavailable || cond.Reason == v1alpha1.ReasonIdentityNotAllowed) {
		s.Unavailable = cmp.Or(cond.Message, cond.Reason)
		return s
	}
	if sp := st.ServicePrincipal; sp == nil || !strings.EqualFold(sp.AppID, appID) ||
		cond == nil || cond.Status != metav1.ConditionTrue || st.SignInsReadTime == nil {
		return s
	}
	read := st.SignInsReadTime.Time
	s.Evidence = policy.SignInEvidence{ReadTime: read, Last: map[string]time.Time{}}
	for _, c := range st.Credentials {
		if c.Source != v1alpha1.SourceApplication || c.Type != v1alpha1.CredentialTypePassword {
			continue
		}
		switch {
		case c.LastSignIn != nil:
			s.Evidence.Last[c.KeyID] = c.LastSignIn.Time
		case c.StartTime == nil || !read.Before(c.StartTime.Add(policy.RetireMargin)):
			s.Evidence.Last[c.KeyID] = time.Time{}
		}
	}
	return s
}
