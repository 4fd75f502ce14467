package alerting

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
)

// Known sign-ins change what is said: an expiring credential nothing uses while another is in use
// is told once; one whose consumers moved to the secret that renewed it falls quiet; a rotation
// held by an old secret still in use is told once.
func TestPlanWithSignIns(t *testing.T) {
	ts := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	old := v1alpha1.Credential{KeyID: "old", Source: v1alpha1.SourceApplication, Type: v1alpha1.CredentialTypePassword,
		StartTime: ts(-360 * day), EndTime: metav1.NewTime(now.Add(5 * day))}
	other := v1alpha1.Credential{KeyID: "other", Source: v1alpha1.SourceServicePrincipal, Type: v1alpha1.CredentialTypeCertificate,
		StartTime: ts(-30 * day), EndTime: metav1.NewTime(now.Add(300 * day))}
	newer := v1alpha1.Credential{KeyID: "new", Source: v1alpha1.SourceApplication, Type: v1alpha1.CredentialTypePassword,
		StartTime: ts(-10 * day), EndTime: metav1.NewTime(now.Add(355 * day))}
	used := func(c v1alpha1.Credential, ago time.Duration) v1alpha1.Credential {
		c.LastSignIn, c.InUse = ts(-ago), ago < 7*day
		return c
	}
	usage := &policy.Usage{ActiveWithin: 7 * day, UnusedAfter: 90 * day, RetireWait: 7 * day}
	for name, tc := range map[string]struct {
		creds    []v1alpha1.Credential
		unknown  bool
		sent     []v1alpha1.SentAlert
		rotation *v1alpha1.RotationStatus
		last     *v1alpha1.LastRotation
		want     []string
		wantNext time.Duration
	}{
		"in use and expiring: reminded as ever": {creds: []v1alpha1.Credential{used(old, time.Hour), other},
			want: []string{"Reminder Application/old 7d"}, wantNext: 2 * day},
		"unused while another is in use: told once": {creds: []v1alpha1.Credential{old, used(other, time.Hour)},
			want: []string{"Unused Application/old unused"}, wantNext: 270 * day},
		"unused, told already: nothing more, not even at its end": {creds: []v1alpha1.Credential{used(old, 100*day), used(other, time.Hour)},
			sent: []v1alpha1.SentAlert{sentAlert("slack", "Application/old", UnusedStep, now.Add(-25*day))}, wantNext: 270 * day},
		"unused, and nothing else in use: reminded": {creds: []v1alpha1.Credential{old, other},
			want: []string{"Reminder Application/old 7d"}, wantNext: 2 * day},
		"unused for less than unusedAfter: reminded, until it is": {creds: []v1alpha1.Credential{used(old, 89*day), used(other, time.Hour)},
			want: []string{"Reminder Application/old 7d"}, wantNext: day},
		"sign-ins not known: reminded": {creds: []v1alpha1.Credential{old, used(other, time.Hour)}, unknown: true,
			want: []string{"Reminder Application/old 7d"}, wantNext: 2 * day},
		"renewed, the old one still in use: reminded": {creds: []v1alpha1.Credential{used(old, time.Hour), used(newer, time.Hour)},
			want: []string{"Reminder Application/old 7d"}, wantNext: 2 * day},
		"renewed, the newer one used and the old one not for activeWithin: quiet, resolved": {
			creds: []v1alpha1.Credential{used(old, 8*day), used(newer, time.Hour)},
			sent:  []v1alpha1.SentAlert{sentAlert("slack", "Application/old", "14d", now.Add(-9*day))},
			want:  []string{"Resolved Application/old resolved"}, wantNext: 325 * day},
		"renewed, the newer one never used: reminded": {creds: []v1alpha1.Credential{used(old, 8*day), newer},
			want: []string{"Reminder Application/old 7d"}, wantNext: 2 * day},
		"a rotation held by an old secret in use: told": {creds: []v1alpha1.Credential{other},
			rotation: &v1alpha1.RotationStatus{KeyID: "new", Step: v1alpha1.StepRetiring, HeldTime: ts(-time.Hour), Failures: 5},
			want:     []string{"RotationHeld rotation held/new"}, wantNext: 270 * day},
		"a rotation held, told already, after an earlier one completed": {creds: []v1alpha1.Credential{other},
			rotation: &v1alpha1.RotationStatus{KeyID: "new", Step: v1alpha1.StepRetiring, HeldTime: ts(-time.Hour)},
			last:     &v1alpha1.LastRotation{KeyID: "previous", Time: *ts(-200 * day)},
			sent:     []v1alpha1.SentAlert{sentAlert("slack", RotationSubject, "held/new", now.Add(-time.Hour))}, wantNext: 270 * day},
		"a rotation held, told already": {creds: []v1alpha1.Credential{other},
			rotation: &v1alpha1.RotationStatus{KeyID: "new", Step: v1alpha1.StepRetiring, HeldTime: ts(-time.Hour)},
			sent:     []v1alpha1.SentAlert{sentAlert("slack", RotationSubject, "held/new", now.Add(-time.Hour))}, wantNext: 270 * day},
	} {
		t.Run(name, func(t *testing.T) {
			in := Inputs{Credentials: tc.creds, Checked: true, Channels: []string{"slack"}, RemindBefore: DefaultRemindBefore,
				CheckFailureAfter: time.Hour, Sent: tc.sent, Rotation: tc.rotation, LastRotation: tc.last, Usage: usage}
			if tc.unknown {
				in.Usage = nil
			}
			plan := Decide(in, now)
			var got []string
			for _, p := range plan.Due {
				got = append(got, strings.Join([]string{string(p.Kind), p.Subject, p.Step.Name}, " "))
				if p.Kind == "Resolved" && (p.Credential == nil || p.Credential.KeyID != "old") {
					t.Errorf("the resolution does not say which credential is left: %+v", p.Credential)
				}
			}
			if strings.Join(got, "; ") != strings.Join(tc.want, "; ") {
				t.Errorf("due =\n  %s\nwant\n  %s", strings.Join(got, "; "), strings.Join(tc.want, "; "))
			}
			var next time.Duration
			if !plan.Next.IsZero() {
				next = plan.Next.Sub(now)
			}
			if next != tc.wantNext {
				t.Errorf("next = now+%v, want now+%v", next, tc.wantNext)
			}
		})
	}
}
