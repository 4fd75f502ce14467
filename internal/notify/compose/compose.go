package compose

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alerting"
	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/policy"
)

// Alert words an alert policy planned for the watch w, as of now.
func Alert(w *v1alpha1.CredentialWatch, p alerting.Planned, now time.Time) notify.Alert {
	a := notify.Alert{
		ID:        notify.AlertID(string(w.UID), p.Subject, p.Step.Name+"@"+p.Step.Due.UTC().Truncate(time.Second).Format(time.RFC3339)),
		Kind:      p.Kind,
		Severity:  notify.SeverityInfo,
		Namespace: w.Namespace,
		Name:      w.Name,
		AppID:     w.AppID(),
		TenantID:  w.Spec.Target.TenantID(),
		At:        now,
	}
	if sp := w.Status.ServicePrincipal; sp != nil {
		a.DisplayName = sp.DisplayName
	}
	if c := w.Spec.Target.AKSCluster; c != nil {
		a.Cluster = c.ResourceGroup + "/" + c.Name
	}
	switch p.Kind {
	case alertkind.Reminder, alertkind.Expired:
		credentialAlert(&a, w, *p.Credential, p.Newer)
	case alertkind.Unused:
		unusedAlert(&a, w, *p.Credential)
	case alertkind.CredentialAdded:
		addedAlert(&a, w, *p.Credential)
	case alertkind.Resolved:
		if p.Credential != nil {
			movedOffAlert(&a, w, *p.Credential)
			break
		}
		source, keyID, _ := alerting.SubjectCredential(p.Subject)
		a.Credential = &notify.Credential{KeyID: keyID, Source: string(source)}
		a.Fix = "Nothing: the credential no longer exists on the " + string(source) + " object."
	case alertkind.CheckFailing:
		a.Severity = notify.SeverityWarning
		if ready := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady); ready != nil {
			a.Problem = ready.Reason + ": " + ready.Message
			a.Fix = CheckFix(ready.Reason)
		}
	case alertkind.CheckRecovered:
		a.Fix = "Nothing: checks work again."
	case alertkind.Rotated, alertkind.RotationFailing:
		rotationAlert(&a, w)
	case alertkind.RotationHeld:
		heldAlert(&a, w)
	case alertkind.PullsRefused, alertkind.PullsRecovered:
		pullsAlert(&a, w, p, now)
	case alertkind.SigningKeyDrift, alertkind.SigningKeysAgree, alertkind.IssuerChanged:
		issuerAlert(&a, w)
	}
	return a
}

var severities = map[v1alpha1.CredentialState]notify.Severity{
	v1alpha1.StateValid:    notify.SeverityInfo,
	v1alpha1.StateWarning:  notify.SeverityWarning,
	v1alpha1.StateCritical: notify.SeverityCritical,
	v1alpha1.StateExpired:  notify.SeverityCritical,
}

// SeverityOf is the severity of an alert about a credential in state s.
func SeverityOf(s v1alpha1.CredentialState) notify.Severity { return severities[s] }

func credentialAlert(a *notify.Alert, w *v1alpha1.CredentialWatch, c v1alpha1.Credential, newer *v1alpha1.Credential) {
	credentialFacts(a, c)
	withUse(a, w, c)
	a.Severity = severities[c.State]
	ownNew := newer != nil && w.Status.Rotation != nil && newer.KeyID == w.Status.Rotation.KeyID
	switch {
	case newer != nil && c.InUse && policy.WatchSignInsKnown(w, a.At):
		a.Fix = stillUsedFix(w, c, *newer)
	case newer != nil && !ownNew:
		// Renewed by hand or a pipeline: whether or not credwatch rotates, this one may be in use.
		// The seed incident's trap: a new secret exists, and the cluster still runs on the old one.
		created := "at a time Graph does not give"
		if newer.StartTime != nil {
			created = newer.StartTime.UTC().Format(time.RFC3339)
		}
		a.Fix = fmt.Sprintf("A newer %s exists, created %s, ending %s: make sure every consumer moved to it (for an AKS cluster, "+
			"it moved only if you reset it: az aks update-credentials --reset-service-principal), then remove this one.",
			describe(*newer), created, newer.EndTime.UTC().Format(time.RFC3339))
		if rotates(w, c) {
			a.Fix += " credwatch rotates the application's secret " + rotationWhen(w) + ", reckoned from the newer one."
		}
	case rotates(w, c):
		a.Fix = "Nothing: credwatch rotates the application's secret " + rotationWhen(w) + "."
	default:
		a.Fix = RenewCommand(w, c)
	}
}

// rotates reports whether the watch's rotation replaces c: an application secret, rotated for real.
func rotates(w *v1alpha1.CredentialWatch, c v1alpha1.Credential) bool {
	r := w.Spec.Rotation
	return r != nil && r.Enabled && r.Mode != v1alpha1.RotationDryRun && c.Source == v1alpha1.SourceApplication && c.Type == v1alpha1.CredentialTypePassword
}

// rotationWhen says when a rotation comes, for reminders: from the moment it falls due.
func rotationWhen(w *v1alpha1.CredentialWatch) string {
	if w.Status.Rotation != nil {
		return "now (step " + string(w.Status.Rotation.Step) + ")"
	}
	rs, err := policy.RotationSettingsOf(*w.Spec.Rotation)
	if err != nil {
		return "when it falls due"
	}
	return "from " + policy.RotationDueAt(w.Status.Credentials, rs.RotateBefore, time.Time{}).UTC().Format(time.RFC3339)
}

func rotationAlert(a *notify.Alert, w *v1alpha1.CredentialWatch) {
	if a.Kind == alertkind.Rotated {
		if r := w.Status.LastRotation; r != nil {
			a.Credential = &notify.Credential{KeyID: r.KeyID, Type: string(v1alpha1.CredentialTypePassword), Source: string(v1alpha1.SourceApplication)}
		}
		a.Fix = "Nothing: the new secret is in Secret " + w.Namespace + "/" + w.Spec.Rotation.SecretRef.Name + " and, for an AKS target, in the cluster."
		if len(w.Spec.Rotation.Publish) > 0 {
			a.Fix += " It is also in each place spec.rotation.publish names."
		}
		return
	}
	a.Severity = notify.SeverityCritical
	if r := w.Status.Rotation; r != nil {
		a.Problem = "step " + string(r.Step) + ": " + r.Message
	}
	a.Fix = "See the Rotating condition of the CredentialWatch; credwatch goes on retrying with backoff."
}

func pullsAlert(a *notify.Alert, w *v1alpha1.CredentialWatch, p alerting.Planned, now time.Time) {
	if a.Kind == alertkind.PullsRecovered {
		registry, _ := alerting.PullRegistry(p.Subject)
		a.Pulls = &notify.Pulls{Registry: registry}
		a.Fix = "Nothing: the registry refuses no pull any more."
		return
	}
	in := *p.Pull
	a.Severity = notify.SeverityWarning
	if in.Scope == v1alpha1.PullScopeClusterWide {
		a.Severity = notify.SeverityCritical
	}
	a.Pulls = &notify.Pulls{Registry: in.Registry, Scope: string(in.Scope), Nodes: in.Nodes, Failing: int(in.FailingNodes), Pulling: int(in.PullingNodes)}
	a.Problem = PullProblem(w, in, now)
	a.Fix = pullFix(w, in)
}

func issuerAlert(a *notify.Alert, w *v1alpha1.CredentialWatch) {
	switch a.Kind {
	case alertkind.SigningKeyDrift:
		a.Severity = notify.SeverityCritical
		if c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionSigningKeyDrift); c != nil {
			a.Problem = c.Reason + ": " + c.Message
		}
		a.Fix = "Give every API server the same --service-account-key-file keys (every key any of them signs with, and old keys for a token lifetime after they stop signing) " +
			"before switching --service-account-signing-key-file; status.serviceAccountIssuer.endpoints shows what each serves and signs with."
	case alertkind.SigningKeysAgree:
		a.Fix = "Nothing: every API server accepts the tokens the others sign."
	case alertkind.IssuerChanged:
		a.Severity = notify.SeverityWarning
		if st := w.Status.ServiceAccountIssuer; st != nil {
			a.Problem = fmt.Sprintf("The issuer changed from %s to %s", st.PreviousIssuer, st.Issuer)
			a.Fix = "Update the issuer of every federated identity credential that trusts this cluster's service accounts " +
				"(az identity federated-credential update --issuer " + st.Issuer + "), or workload identity stops getting tokens."
		}
	}
}

// checkFixes says what a person can do about each reason checks fail.
var checkFixes = map[string]string{
	v1alpha1.ReasonServicePrincipalNotFound:   "Check spec.target: no application or service principal in the tenant has this appId.",
	v1alpha1.ReasonAccessDenied:               "Grant the identity credwatch signs in with what the problem says it needs: a Microsoft Graph application permission (with admin consent), or a Resource Manager role holding the action.",
	v1alpha1.ReasonAuthenticationFailed:       "Check the identity credwatch signs in with: its Secret, certificate or federated credential, or the operator's workload identity (kubectl get azid,cazid -A).",
	v1alpha1.ReasonCredentialSecretInvalid:    "Create or fix the Secret the watch's identity signs in with (the problem names it and the key it needs).",
	v1alpha1.ReasonNoIdentity:                 "Set spec.identityRef to an identity that allows the target, or ask a cluster admin for a default one (--default-identity).",
	v1alpha1.ReasonIdentityNotFound:           "Create the identity the watch names, or name another in spec.identityRef.",
	v1alpha1.ReasonIdentityNotReady:           "Fix the identity the watch names: its Ready condition says why it does not sign in.",
	v1alpha1.ReasonIdentityNotAllowed:         "Ask a cluster admin to widen the identity (spec.allow, or the namespaces its conditions admit), or name one that allows this in spec.identityRef.",
	v1alpha1.ReasonIdentityMigrationNeeded:    "Replace spec.azureCredentialRef with spec.identityRef naming an AzureIdentity that signs in with that Secret (docs/upgrading.md).",
	v1alpha1.ReasonThrottled:                  "Nothing yet: Microsoft Graph is throttling and credwatch retries after the wait it asks for.",
	v1alpha1.ReasonGraphUnreachable:           "Check that the operator can reach Microsoft Graph and the login endpoint (egress, proxy, DNS).",
	v1alpha1.ReasonGraphError:                 "See the Ready condition of the CredentialWatch for Graph's answer.",
	v1alpha1.ReasonClusterNotFound:            "Check spec.target.aksCluster: Resource Manager has no such cluster in that subscription and resource group, or the operator's identity cannot see it.",
	v1alpha1.ReasonResourceManagerUnreachable: "Check that the operator can reach Azure Resource Manager (egress, proxy, DNS); credwatch retries with backoff.",
	v1alpha1.ReasonFilterRejected:             "Fix spec.target.tenantScan.filter: Microsoft Graph refused it (see the Ready condition for why).",
	v1alpha1.ReasonEndpointUnreachable:        "Check that the operator can reach every API server endpoint, or name the reachable ones in spec.target.serviceAccountIssuer.endpoints.",
	v1alpha1.ReasonEndpointNotAllowed:         "Name only API servers of this cluster in spec.target.serviceAccountIssuer.endpoints, or leave it empty for the kubernetes Service's; an admin allows others with --issuer-endpoints.",
	v1alpha1.ReasonCanaryUnavailable:          "Create the ServiceAccount credwatch-canary in the operator's namespace and let the operator create its tokens (the chart does both).",
	// A watch that cannot do its job is a failing one: someone asked for it, and must hear.
	v1alpha1.ReasonIssuerNotChecked: "Run the operator with --service-account-issuer=true (chart: serviceAccountIssuer.enabled=true), or delete the watch.",
}

// CheckFix says what a person can do about checks failing for reason; empty for a reason that
// is not a failure.
func CheckFix(reason string) string { return checkFixes[reason] }

// RenewCommand adds a new credential beside c; --append keeps the old one working until every
// consumer has moved to the new.
func RenewCommand(w *v1alpha1.CredentialWatch, c v1alpha1.Credential) string {
	appID := appOf(w, c)
	object := "app"
	if c.Source == v1alpha1.SourceServicePrincipal {
		object = "sp"
	}
	if c.Type == v1alpha1.CredentialTypeCertificate {
		return fmt.Sprintf("az ad %s credential reset --id %s --append --cert <new certificate>", object, appID)
	}
	return fmt.Sprintf("az ad %s credential reset --id %s --append", object, appID)
}
