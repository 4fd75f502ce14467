package notifytest

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alerting"
	"github.com/credwatch/credwatch/internal/alertkind"
)

// signIns makes w read its credentials' sign-ins, last an hour before At, and the secret "rbac"
// last signed in ago before At (never, for zero), and in use if within a week.
func signIns(ago time.Duration) func(w *v1alpha1.CredentialWatch) {
	return func(w *v1alpha1.CredentialWatch) {
		w.Spec.Usage = &v1alpha1.Usage{SignIns: true, ActiveWithin: "7d", UnusedAfter: "90d", RetireWait: "7d"}
		read := metav1.NewTime(At.Add(-time.Hour))
		w.Status.SignInsReadTime = &read
		condition(w, v1alpha1.ConditionSignInsRead, metav1.ConditionTrue, v1alpha1.ReasonSignInsRead, "Read the sign-ins of 2 credentials")
		c := &w.Status.Credentials[0]
		start := metav1.NewTime(At.Add(-359 * day))
		c.StartTime = &start
		if ago > 0 {
			last := metav1.NewTime(At.Add(-ago))
			c.LastSignIn, c.InUse = &last, ago < 7*day
		}
	}
}

// renewal adds the secret "rbac-2026" that renewed "rbac", last signed in ago before At (never, for
// zero).
func renewal(ago time.Duration) func(w *v1alpha1.CredentialWatch) {
	return func(w *v1alpha1.CredentialWatch) {
		start := metav1.NewTime(At.Add(-20 * day))
		c := v1alpha1.Credential{KeyID: "7c4d2e1f-k2", Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceApplication,
			DisplayName: "rbac-2026", Hint: "rB2", StartTime: &start, EndTime: metav1.NewTime(At.Add(345 * day)), State: v1alpha1.StateValid}
		if ago > 0 {
			last := metav1.NewTime(At.Add(-ago))
			c.LastSignIn, c.InUse = &last, ago < 7*day
		}
		w.Status.Credentials = append(w.Status.Credentials, c)
	}
}

func both(edits ...func(*v1alpha1.CredentialWatch)) func(*v1alpha1.CredentialWatch) {
	return func(w *v1alpha1.CredentialWatch) {
		for _, e := range edits {
			e(w)
		}
	}
}

// renewedPlan is the reminder of "rbac", renewed by the second credential.
func renewedPlan(kind alertkind.Kind, step string) func(w *v1alpha1.CredentialWatch) alerting.Planned {
	return func(w *v1alpha1.CredentialWatch) alerting.Planned {
		p := credentialPlan(kind, step)(w)
		p.Newer = &w.Status.Credentials[1]
		return p
	}
}

// usageCases are the composed alerts of a watch that reads its credentials' sign-ins.
func usageCases() map[string]composed {
	return map[string]composed{
		"composed-reminder-in-use": {watch: signIns(2 * time.Hour), plan: credentialPlan(alertkind.Reminder, "7d")},
		"composed-unused": {
			watch: both(signIns(120*day), renewal(time.Hour)),
			plan:  credentialPlan(alertkind.Unused, alerting.UnusedStep),
		},
		"composed-renewed-still-used": {
			watch: both(signIns(3*time.Hour), renewal(0)),
			plan:  renewedPlan(alertkind.Reminder, "7d"),
		},
		"composed-resolved-moved-off": {
			watch: both(signIns(9*day), renewal(time.Hour)),
			plan: func(w *v1alpha1.CredentialWatch) alerting.Planned {
				c := &w.Status.Credentials[0]
				p := planned(alertkind.Resolved, alerting.SubjectOf(*c), "resolved", c.EndTime.Add(-14*day))
				p.Credential = c
				return p
			},
		},
		"composed-rotation-held": {
			watch: func(w *v1alpha1.CredentialWatch) {
				signIns(time.Hour)(w)
				w.Spec.Rotation = &v1alpha1.Rotation{Enabled: true, Mode: v1alpha1.RotationApply, RotateBefore: "30d", Validity: "365d", SecretRef: v1alpha1.SecretName{Name: "aks-sp"}}
				held, moved := metav1.NewTime(At.Add(-time.Hour)), At.Add(-7*day-time.Hour)
				w.Status.Rotation = &v1alpha1.RotationStatus{Step: v1alpha1.StepRetiring, KeyID: "9a8b7c6d-new", AppID: "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c",
					HeldTime: &held, OldSecretsInUse: []v1alpha1.KeySignIn{{KeyID: "5e1c9b2a-k1", LastSignIn: metav1.NewTime(At.Add(-time.Hour))}},
					Message: "Old secret 5e1c9b2a-k1 (last sign-in " + At.Add(-time.Hour).UTC().Format(time.RFC3339) + ") still signs in after the new secret was put in use at " +
						moved.UTC().Format(time.RFC3339) + "; each goes once it has not signed in for 7d; held since " + held.UTC().Format(time.RFC3339) +
						" (usage.retireWait 7d): nothing is retired until they stop"}
			},
			plan: fixed(planned(alertkind.RotationHeld, alerting.RotationSubject, "held/9a8b7c6d-new", At.Add(-time.Hour))),
		},
		"composed-rotation-held-unread": {
			watch: func(w *v1alpha1.CredentialWatch) {
				signIns(time.Hour)(w)
				w.Spec.Rotation = &v1alpha1.Rotation{Enabled: true, Mode: v1alpha1.RotationApply, RotateBefore: "30d", Validity: "365d", SecretRef: v1alpha1.SecretName{Name: "aks-sp"}}
				held := metav1.NewTime(At.Add(-time.Hour))
				w.Status.Rotation = &v1alpha1.RotationStatus{Step: v1alpha1.StepRetiring, KeyID: "9a8b7c6d-new", AppID: "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c",
					HeldTime: &held, SignInsGated: true,
					Message: "Old secrets wait for sign-ins to show them quiet, and none can be read: Sign-ins are not read: the identity does not allow ReadSignIns; " +
						"restore it, or remove the old secrets by hand if nothing uses them (5e1c9b2a-k1)"}
			},
			plan: fixed(planned(alertkind.RotationHeld, alerting.RotationSubject, "held/9a8b7c6d-new", At.Add(-time.Hour))),
		},
	}
}

// addedCases are the composed alerts of a credential added by something other than credwatch.
func addedCases() map[string]composed {
	return map[string]composed{
		"composed-credential-added": {
			watch: func(w *v1alpha1.CredentialWatch) {
				start, added := metav1.NewTime(At.Add(-3*time.Hour)), metav1.NewTime(At.Add(-time.Hour))
				w.Status.Credentials = append(w.Status.Credentials, v1alpha1.Credential{KeyID: "8d2f4a6c-k9", Type: v1alpha1.CredentialTypePassword,
					Source: v1alpha1.SourceServicePrincipal, DisplayName: "keep-access", Hint: "Q7x", StartTime: &start,
					EndTime: metav1.NewTime(At.Add(730 * day)), State: v1alpha1.StateValid, AddedTime: &added,
					AddedBy: "user mallory@contoso.example at " + At.Add(-2*time.Hour).UTC().Format(time.RFC3339) + " (Add service principal credentials)"})
			},
			plan: func(w *v1alpha1.CredentialWatch) alerting.Planned {
				c := &w.Status.Credentials[1]
				p := planned(alertkind.CredentialAdded, alerting.AddedSubject(*c), "added", c.AddedTime.Time)
				p.Credential = c
				return p
			},
		},
	}
}
