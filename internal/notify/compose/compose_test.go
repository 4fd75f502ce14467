package compose_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alerting"
	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/compose"
	"github.com/credwatch/credwatch/internal/notify/notifytest"
)

// The words of every kind of alert, as every channel shows them; each channel's own golden
// files show its rendering of the same alerts.
func TestAlertWordsGolden(t *testing.T) {
	all := notifytest.Composed()
	kinds := map[alertkind.Kind]bool{}
	for name, a := range all {
		kinds[a.Kind] = true
		t.Run(name, func(t *testing.T) {
			notifytest.Golden(t, name, []byte(notify.Text(a)))
		})
	}
	for _, k := range []alertkind.Kind{alertkind.Reminder, alertkind.Expired, alertkind.Resolved, alertkind.CheckFailing,
		alertkind.CheckRecovered, alertkind.Rotated, alertkind.RotationFailing, alertkind.RotationHeld, alertkind.Unused, alertkind.PullsRefused, alertkind.PullsRecovered,
		alertkind.SigningKeyDrift, alertkind.SigningKeysAgree, alertkind.IssuerChanged, alertkind.CredentialAdded} {
		if !kinds[k] {
			t.Errorf("no golden alert of kind %s", k)
		}
	}
}

// Every way a check fails comes with what to do about it, in the CheckFailing alert.
func TestEveryCheckFailureHasAFix(t *testing.T) {
	for _, reason := range []string{
		v1alpha1.ReasonClusterNotFound, v1alpha1.ReasonResourceManagerUnreachable, v1alpha1.ReasonServicePrincipalNotFound,
		v1alpha1.ReasonAccessDenied, v1alpha1.ReasonAuthenticationFailed, v1alpha1.ReasonCredentialSecretInvalid,
		v1alpha1.ReasonThrottled, v1alpha1.ReasonGraphUnreachable, v1alpha1.ReasonGraphError, v1alpha1.ReasonFilterRejected,
		v1alpha1.ReasonEndpointUnreachable, v1alpha1.ReasonCanaryUnavailable, v1alpha1.ReasonIssuerNotChecked,
		v1alpha1.ReasonNoIdentity, v1alpha1.ReasonIdentityNotFound, v1alpha1.ReasonIdentityNotReady, v1alpha1.ReasonIdentityNotAllowed,
		v1alpha1.ReasonIdentityMigrationNeeded, v1alpha1.ReasonEndpointNotAllowed,
	} {
		if compose.CheckFix(reason) == "" {
			t.Errorf("no fix for %s", reason)
		}
	}
}

func TestRenewCommand(t *testing.T) {
	w := notifytest.Watch()
	tests := map[string]struct {
		c    v1alpha1.Credential
		want string
	}{
		"application secret": {c: v1alpha1.Credential{Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceApplication},
			want: "az ad app credential reset --id 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c --append"},
		"service principal certificate": {c: v1alpha1.Credential{Type: v1alpha1.CredentialTypeCertificate, Source: v1alpha1.SourceServicePrincipal},
			want: "az ad sp credential reset --id 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c --append --cert <new certificate>"},
		"a tenant scan's credential names its own application": {c: v1alpha1.Credential{Type: v1alpha1.CredentialTypePassword,
			Source: v1alpha1.SourceApplication, AppID: "11111111-2222-3333-4444-555555555555"},
			want: "az ad app credential reset --id 11111111-2222-3333-4444-555555555555 --append"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := compose.RenewCommand(w, tc.c); got != tc.want {
				t.Errorf("RenewCommand = %q, want %q", got, tc.want)
			}
		})
	}
}

// An alert's ID is the same however often the same step is planned, and differs between steps,
// so that a receiver can drop a duplicate.
func TestAlertIDFollowsTheStep(t *testing.T) {
	w := notifytest.Watch()
	c := w.Status.Credentials[0]
	plan := func(step string) alerting.Planned {
		return alerting.Planned{Kind: alertkind.Reminder, Subject: alerting.SubjectOf(c), Step: alerting.Step{Name: step, Due: c.EndTime.Time}, Credential: &c}
	}
	a, b := compose.Alert(w, plan("7d"), notifytest.At), compose.Alert(w, plan("7d"), notifytest.At.Add(3*time.Hour))
	if a.ID != b.ID {
		t.Errorf("the same step planned twice has IDs %s and %s", a.ID, b.ID)
	}
	if d := compose.Alert(w, plan("3d"), notifytest.At); d.ID == a.ID {
		t.Errorf("steps 7d and 3d share the ID %s", a.ID)
	}
}

// A cluster-wide refusal names the expired secret that explains it, or says the secrets are fine.
func TestPullProblemNamesTheCause(t *testing.T) {
	w := notifytest.Watch()
	in := v1alpha1.PullIncident{Registry: "myacr.azurecr.io", Scope: v1alpha1.PullScopeClusterWide, Nodes: []string{"a", "b", "c"}, FailingNodes: 3}
	if got := compose.PullProblem(w, in, notifytest.At); !strings.Contains(got, "credentials are all valid") {
		t.Errorf("with valid secrets: %q", got)
	}
	w.Status.Credentials[0].EndTime.Time = notifytest.At.Add(-2 * time.Hour)
	if got := compose.PullProblem(w, in, notifytest.At); !strings.Contains(got, `The client secret "rbac" of the service principal expired 2h ago: this is why.`) {
		t.Errorf("with an expired secret: %q", got)
	}
	w.Status.LastCheckTime = nil
	if got := compose.PullProblem(w, in, notifytest.At); !strings.Contains(got, "has not read") {
		t.Errorf("before the first check: %q", got)
	}
}

// A reminder of a secret another renewed names the newer one and says what to make sure of: the
// seed incident's cluster ran on the old secret though a new one existed.
func TestAReminderOfARenewedSecretNamesTheNewer(t *testing.T) {
	w := notifytest.Watch()
	c := w.Status.Credentials[0]
	newer := v1alpha1.Credential{KeyID: "0f1e2d3c-4b5a-4697-8877-665544332211", DisplayName: "renewed", Type: c.Type, Source: c.Source,
		StartTime: &metav1.Time{Time: notifytest.At.Add(-time.Hour)}, EndTime: metav1.NewTime(notifytest.At.Add(365 * 24 * time.Hour))}
	a := compose.Alert(w, alerting.Planned{Kind: alertkind.Reminder, Subject: alerting.SubjectOf(c), Step: alerting.Step{Name: "7d", Due: c.EndTime.Time},
		Credential: &c, Newer: &newer}, notifytest.At)
	for _, want := range []string{`A newer secret "renewed" (keyId 0f1e2d3c-4b5a-4697-8877-665544332211`, "make sure every consumer moved to it",
		"for an AKS cluster, it moved only if you reset it"} {
		if !strings.Contains(a.Fix, want) {
			t.Errorf("fix %q does not say %q", a.Fix, want)
		}
	}
	if a.Credential.KeyID != c.KeyID {
		t.Errorf("the alert is about %s, want the old secret %s", a.Credential.KeyID, c.KeyID)
	}
}

// With rotation on, a secret renewed by hand still gets the advice to check its consumers: the
// rotation's reminder would point at a date months away. Renewed by the rotation in progress, it
// says credwatch rotates it.
func TestARenewedSecretOfAWatchThatRotates(t *testing.T) {
	w := notifytest.Watch()
	w.Spec.Rotation = &v1alpha1.Rotation{Enabled: true, Mode: v1alpha1.RotationApply, SecretRef: v1alpha1.SecretName{Name: "sp"}}
	c := w.Status.Credentials[0]
	newer := v1alpha1.Credential{KeyID: "0f1e2d3c-4b5a-4697-8877-665544332211", Type: c.Type, Source: c.Source,
		StartTime: &metav1.Time{Time: notifytest.At.Add(-time.Hour)}, EndTime: metav1.NewTime(notifytest.At.Add(365 * 24 * time.Hour))}
	plan := alerting.Planned{Kind: alertkind.Reminder, Subject: alerting.SubjectOf(c), Step: alerting.Step{Name: "7d", Due: c.EndTime.Time}, Credential: &c, Newer: &newer}
	if a := compose.Alert(w, plan, notifytest.At); !strings.Contains(a.Fix, "make sure every consumer moved to it") {
		t.Errorf("renewed by hand: fix %q", a.Fix)
	}
	w.Status.Rotation = &v1alpha1.RotationStatus{Step: v1alpha1.StepSecretStored, KeyID: newer.KeyID}
	if a := compose.Alert(w, plan, notifytest.At); !strings.HasPrefix(a.Fix, "Nothing: credwatch rotates") {
		t.Errorf("renewed by the rotation in progress: fix %q", a.Fix)
	}
}

// A credential added out of band is a warning unless the watch says how grave it is.
func TestCredentialAddedSeverity(t *testing.T) {
	for _, tc := range []struct {
		set  string
		want notify.Severity
	}{{"", notify.SeverityWarning}, {"critical", notify.SeverityCritical}, {"info", notify.SeverityInfo}} {
		w := notifytest.Watch()
		if tc.set != "" {
			w.Spec.Alerts = &v1alpha1.Alerts{CredentialAddedSeverity: tc.set}
		}
		added := metav1.NewTime(notifytest.At)
		c := w.Status.Credentials[0]
		c.AddedTime = &added
		a := compose.Alert(w, alerting.Planned{Kind: alertkind.CredentialAdded, Subject: alerting.AddedSubject(c), Step: alerting.Step{Name: "added", Due: added.Time}, Credential: &c}, notifytest.At)
		if a.Severity != tc.want {
			t.Errorf("credentialAddedSeverity %q: %s, want %s", tc.set, a.Severity, tc.want)
		}
	}
}
