package notifytest

import (
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alerting"
	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/compose"
)

const day = 24 * time.Hour

// Watch is a watch of an AKS cluster's service principal, checked an hour before At, whose
// secret "rbac" expires in six days.
func Watch() *v1alpha1.CredentialWatch {
	checked := metav1.NewTime(At.Add(-time.Hour))
	return &v1alpha1.CredentialWatch{
		ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "aks-prod", UID: "0b6f4c1e-uid"},
		Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{AKSCluster: &v1alpha1.AKSClusterTarget{
			TenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47", SubscriptionID: "8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918",
			ResourceGroup: "rg-prod", Name: "aks-prod-weu"}}},
		Status: v1alpha1.CredentialWatchStatus{
			LastCheckTime:    &checked,
			ServicePrincipal: &v1alpha1.ServicePrincipalStatus{AppID: "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c", DisplayName: "aks-prod-sp"},
			AKSCluster:       &v1alpha1.AKSClusterStatus{Identity: v1alpha1.IdentityServicePrincipal, ClientID: "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c"},
			Credentials: []v1alpha1.Credential{{KeyID: "5e1c9b2a-k1", Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceApplication,
				DisplayName: "rbac", Hint: "aPp", EndTime: metav1.NewTime(At.Add(6 * day)), State: v1alpha1.StateCritical}},
		},
	}
}

// composed is one alert of Composed: a watch as it stands, and what policy planned for it.
type composed struct {
	watch func(w *v1alpha1.CredentialWatch)
	plan  func(w *v1alpha1.CredentialWatch) alerting.Planned
}

// Composed is one alert of every kind, worded by compose from Watch as each situation leaves it,
// so that every channel's golden files show the messages people really get.
func Composed() map[string]notify.Alert {
	out := map[string]notify.Alert{}
	for name, c := range composedCases() {
		w := Watch()
		if c.watch != nil {
			c.watch(w)
		}
		out[name] = compose.Alert(w, c.plan(w), At)
	}
	return out
}

func planned(kind alertkind.Kind, subject, step string, due time.Time) alerting.Planned {
	return alerting.Planned{Channel: "slack-1a2b3c4d", Kind: kind, Subject: subject, Step: alerting.Step{Name: step, Due: due}}
}

func credentialPlan(kind alertkind.Kind, step string) func(w *v1alpha1.CredentialWatch) alerting.Planned {
	return func(w *v1alpha1.CredentialWatch) alerting.Planned {
		c := &w.Status.Credentials[0]
		p := planned(kind, alerting.SubjectOf(*c), step, c.EndTime.Add(-7*day))
		p.Credential = c
		return p
	}
}

func pullPlan(w *v1alpha1.CredentialWatch) alerting.Planned {
	in := &w.Status.ImagePulls[0]
	p := planned(alertkind.PullsRefused, alerting.PullSubject(in.Registry), string(in.Scope), in.Since.Time)
	p.Pull = in
	return p
}

func fixed(p alerting.Planned) func(*v1alpha1.CredentialWatch) alerting.Planned {
	return func(*v1alpha1.CredentialWatch) alerting.Planned { return p }
}

func condition(w *v1alpha1.CredentialWatch, t string, s metav1.ConditionStatus, reason, message string) {
	w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: message,
		LastTransitionTime: metav1.NewTime(At.Add(-2 * time.Hour))})
}

func composedCases() map[string]composed {
	expiredCert := func(w *v1alpha1.CredentialWatch) {
		c := &w.Status.Credentials[0]
		c.Type, c.Source, c.DisplayName, c.Hint = v1alpha1.CredentialTypeCertificate, v1alpha1.SourceServicePrincipal, "CN=aks-prod", ""
		c.EndTime, c.State = metav1.NewTime(At.Add(-3*day)), v1alpha1.StateExpired
	}
	rotating := func(w *v1alpha1.CredentialWatch) {
		w.Spec.Rotation = &v1alpha1.Rotation{Enabled: true, Mode: v1alpha1.RotationApply, RotateBefore: "3d", Validity: "365d", SecretRef: v1alpha1.SecretName{Name: "aks-sp"}}
	}
	cases := map[string]composed{
		"composed-reminder":            {plan: credentialPlan(alertkind.Reminder, "7d")},
		"composed-reminder-rotating":   {watch: rotating, plan: credentialPlan(alertkind.Reminder, "7d")},
		"composed-expired-certificate": {watch: expiredCert, plan: credentialPlan(alertkind.Expired, "expired")},
		"composed-resolved":            {plan: fixed(planned(alertkind.Resolved, "Application/0d3e-old", "resolved", At.Add(-day)))},
		"composed-check-failing": {
			watch: func(w *v1alpha1.CredentialWatch) {
				condition(w, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonAccessDenied,
					"reading application 3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c: access denied (HTTP 403, Authorization_RequestDenied); "+
						"the identity needs Application.Read.All (or Application.ReadWrite.OwnedBy as an owner of the application); retrying at 2026-12-02T09:15:00Z")
			},
			plan: fixed(planned(alertkind.CheckFailing, alerting.CheckSubject, "failing", At.Add(-time.Hour))),
		},
		"composed-check-recovered": {plan: fixed(planned(alertkind.CheckRecovered, alerting.CheckSubject, "recovered", At.Add(-time.Hour)))},
		"composed-rotated": {
			watch: func(w *v1alpha1.CredentialWatch) {
				rotating(w)
				w.Status.LastRotation = &v1alpha1.LastRotation{Time: metav1.NewTime(At.Add(-time.Minute)), KeyID: "9a8b7c6d-new"}
			},
			plan: fixed(planned(alertkind.Rotated, alerting.RotationSubject, "9a8b7c6d-new", At.Add(-time.Minute))),
		},
		"composed-rotation-failing": {
			watch: func(w *v1alpha1.CredentialWatch) {
				rotating(w)
				w.Status.Rotation = &v1alpha1.RotationStatus{Step: v1alpha1.StepClusterUpdating, Failures: 1,
					Message: "resetting the service principal of AKS cluster rg-prod/aks-prod-weu: Internal server error"}
			},
			plan: fixed(planned(alertkind.RotationFailing, alerting.RotationSubject, "credwatch-0b6f4c1e/ClusterUpdating", At.Add(-time.Hour))),
		},
	}
	maps.Copy(cases, pullAndIssuerCases())
	maps.Copy(cases, usageCases())
	maps.Copy(cases, addedCases())
	return cases
}

// incident sets the watch's one image-pull incident.
func incident(scope v1alpha1.PullScope, nodes []string, failing, pulling int32) func(w *v1alpha1.CredentialWatch) {
	return func(w *v1alpha1.CredentialWatch) {
		w.Status.ImagePulls = []v1alpha1.PullIncident{{Registry: "myacr.azurecr.io", Scope: scope, Nodes: nodes,
			FailingNodes: failing, PullingNodes: pulling, Since: metav1.NewTime(At.Add(-20 * time.Minute))}}
	}
}

// pullAndIssuerCases are the composed alerts of image pulls and of a serviceAccountIssuer target.
func pullAndIssuerCases() map[string]composed {
	return map[string]composed{
		"composed-pulls-cluster-wide": {
			watch: func(w *v1alpha1.CredentialWatch) {
				c := &w.Status.Credentials[0]
				c.EndTime, c.State = metav1.NewTime(At.Add(-2*time.Hour)), v1alpha1.StateExpired
				incident(v1alpha1.PullScopeClusterWide, []string{"aks-pool1-0", "aks-pool1-1", "aks-pool1-2"}, 3, 0)(w)
			},
			plan: pullPlan,
		},
		"composed-pulls-node-local": {watch: incident(v1alpha1.PullScopeNodeLocal, []string{"aks-pool1-3"}, 1, 4), plan: pullPlan},
		"composed-pulls-recovered":  {plan: fixed(planned(alertkind.PullsRecovered, alerting.PullSubject("myacr.azurecr.io"), "recovered", At.Add(-time.Hour)))},
		"composed-signing-key-drift": {
			watch: func(w *v1alpha1.CredentialWatch) {
				condition(w, v1alpha1.ConditionSigningKeyDrift, metav1.ConditionTrue, v1alpha1.ReasonCanaryRejected,
					"a token signed by https://10.0.0.5:6443 (key 7Hq…) was rejected by https://10.0.0.4:6443")
			},
			plan: fixed(planned(alertkind.SigningKeyDrift, alerting.DriftSubject, v1alpha1.ReasonCanaryRejected, At.Add(-2*time.Hour))),
		},
		"composed-signing-keys-agree": {plan: fixed(planned(alertkind.SigningKeysAgree, alerting.DriftSubject, "agree", At.Add(-2*time.Hour)))},
		"composed-issuer-changed": {
			watch: func(w *v1alpha1.CredentialWatch) {
				changed := metav1.NewTime(At.Add(-time.Hour))
				w.Status.ServiceAccountIssuer = &v1alpha1.ServiceAccountIssuerStatus{Issuer: "https://oidc.prod.example/new",
					PreviousIssuer: "https://oidc.prod.example/old", IssuerChangeTime: &changed}
			},
			plan: fixed(planned(alertkind.IssuerChanged, alerting.IssuerSubject, "changed", At.Add(-time.Hour))),
		},
	}
}

// Every is Alerts and Composed together: what each channel's golden files show.
func Every() map[string]notify.Alert {
	all := Alerts()
	maps.Copy(all, Composed())
	return all
}
