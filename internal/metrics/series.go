package metrics

import (
	"bufio"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target/aksfleet"
)

// write writes each family's series together, as the text format requires: one pass over the
// watches per family. Labels are in name order, as client_golang writes them. One series for the
// status or state a watch is in, not one per possible value: zeros would double the series.
func (w *Watches) write(bw *bufio.Writer, list []*v1alpha1.CredentialWatch) {
	t := &textWriter{w: bw}
	w.writeCredentials(t, list)
	writeSignIns(t, list, w.clock.Now())

	writeWatches(t, list)
	writeFindings(t, list)
	w.writeFleets(t, list)

	writeRotations(t, list)
}

// writeWatches writes each watch's readiness, last check, failures, state, last rotation and
// signing-key drift.
func writeWatches(t *textWriter, list []*v1alpha1.CredentialWatch) {
	t.family("credwatch_watch_ready_status",
		"The Ready condition of a CredentialWatch: 1, labelled with the condition's status (True, False, Unknown).")
	for i := range list {
		cw := list[i]
		ready := metav1.ConditionUnknown
		for _, cond := range cw.Status.Conditions {
			if cond.Type == v1alpha1.ConditionReady {
				ready = cond.Status
			}
		}
		t.sample(1, "client_id", cw.AppID(), "condition", string(ready), "name", cw.Name, "namespace", cw.Namespace)
	}

	t.family("credwatch_watch_last_check_timestamp_seconds",
		"When the watch last checked successfully (Microsoft Graph, or the API servers of a serviceAccountIssuer target), as a Unix timestamp.")
	for i := range list {
		if cw := list[i]; cw.Status.LastCheckTime != nil {
			t.sample(cw.Status.LastCheckTime.Unix(), "client_id", cw.AppID(), "name", cw.Name, "namespace", cw.Namespace)
		}
	}

	t.family("credwatch_watch_consecutive_check_failures",
		"Failed checks of the watch since its last successful one; absent while checks succeed.")
	for i := range list {
		if cw := list[i]; cw.Status.ConsecutiveFailures > 0 {
			t.sample(int64(cw.Status.ConsecutiveFailures), "client_id", cw.AppID(), "name", cw.Name, "namespace", cw.Namespace)
		}
	}

	t.family("credwatch_watch_state",
		"The worst state of the watch's credentials: 1, labelled with the state (Valid, Warning, Critical, Expired); absent before the first check.")
	for i := range list {
		if cw := list[i]; cw.Status.State != "" {
			t.sample(1, "client_id", cw.AppID(), "name", cw.Name, "namespace", cw.Namespace, "state", string(cw.Status.State))
		}
	}

	t.family("credwatch_watch_last_rotation_timestamp_seconds",
		"When the watch last completed a rotation of its secret, as a Unix timestamp.")
	for i := range list {
		if cw := list[i]; cw.Status.LastRotation != nil {
			t.sample(cw.Status.LastRotation.Time.Unix(), "client_id", cw.AppID(), "name", cw.Name, "namespace", cw.Namespace)
		}
	}

	t.family("credwatch_watch_signing_key_drift",
		"1 while the API servers disagree on the service-account token keys, labelled with how (SigningKeyNotShared, CanaryRejected, IssuersDiffer, KeyRemovedEarly); absent otherwise.")
	for i := range list {
		cw := list[i]
		if c := meta.FindStatusCondition(cw.Status.Conditions, v1alpha1.ConditionSigningKeyDrift); c != nil && c.Status == metav1.ConditionTrue {
			t.sample(1, "name", cw.Name, "namespace", cw.Namespace, "reason", c.Reason)
		}
	}
}

// writeRotations writes the rotation in progress of each watch, how often its step failed, and
// whether it waits for a person.
func writeRotations(t *textWriter, list []*v1alpha1.CredentialWatch) {
	t.family("credwatch_watch_rotation_in_progress",
		"1 while a rotation is in progress, labelled with its step; absent otherwise.")
	for i := range list {
		if cw := list[i]; cw.Status.Rotation != nil {
			t.sample(1, "client_id", cw.AppID(), "name", cw.Name, "namespace", cw.Namespace, "step", string(cw.Status.Rotation.Step))
		}
	}

	// A rotation waits by design (a maintenance window, the grace period, Entra's replication), so
	// time at a step says nothing: failures at it do.
	t.family("credwatch_watch_rotation_step_failures",
		"Failed attempts at the current step of the rotation in progress, labelled with the step; absent when no rotation is in progress.")
	for i := range list {
		if cw := list[i]; cw.Status.Rotation != nil {
			t.sample(int64(cw.Status.Rotation.Failures), "client_id", cw.AppID(), "name", cw.Name, "namespace", cw.Namespace, "step", string(cw.Status.Rotation.Step))
		}
	}

	t.family("credwatch_watch_rotation_blocked",
		"1 while the watch's rotation cannot go on until a person acts (Rotating is False: blocked, held for confirmation, refused by its identity, its target changed, or left in DryRun), labelled with the condition's reason; absent while it rotates, is idle, only plans, or was aborted.")
	for i := range list {
		cw := list[i]
		if c := meta.FindStatusCondition(cw.Status.Conditions, v1alpha1.ConditionRotating); c != nil && c.Status == metav1.ConditionFalse && !waitingReasons[c.Reason] {
			t.sample(1, "client_id", cw.AppID(), "name", cw.Name, "namespace", cw.Namespace, "reason", c.Reason)
		}
	}
}

// waitingReasons are the reasons of a Rotating condition that is False and needs no one: no
// rotation due, a rotation only planned (DryRun), or one a person aborted. Any other False reason
// waits for a person: a rotation blocked, held for confirmation, refused by its identity
// (paused), retargeted before its first reset, or left in DryRun midway.
var waitingReasons = map[string]bool{
	v1alpha1.ReasonIdle:            true,
	v1alpha1.ReasonDryRun:          true,
	v1alpha1.ReasonRotationAborted: true,
}

// writeCredentials writes when each credential of each watch expires, and which of them a newer
// one has replaced: an alert on expiry has to leave those out, or a secret renewed with
// `az ad app credential reset --append` would page until the old one is deleted.
func (w *Watches) writeCredentials(t *textWriter, list []*v1alpha1.CredentialWatch) {
	t.family("credwatch_credential_expiration_timestamp_seconds",
		"The date after which the credential expires, as a Unix timestamp.")
	// The credentials as read the first time, since a scan may replace them in between, and
	// which of them were replaced: indices into one slice for the whole scrape.
	type renewal struct {
		cw       *v1alpha1.CredentialWatch
		creds    []v1alpha1.Credential
		from, to int
	}
	var renewed []renewal
	var replaced []int
	now := w.clock.Now()
	for _, cw := range list {
		creds := w.credentials(cw)
		for _, cr := range creds {
			credentialSample(t, cr.EndTime.Unix(), cw, cr)
		}
		// A cluster moves onto a new secret only when reset, a rotating watch's Secret only when
		// rotated: a secret added by hand replaces nothing there.
		rotationOnly := cw.Spec.Target.AKSCluster != nil || cw.Spec.Rotation != nil && cw.Spec.Rotation.Enabled
		from := len(replaced)
		replaced = policy.Replaced(replaced, creds, cw.Status.LastRotation, cw.Status.Rotation, rotationOnly, now)
		if len(replaced) > from {
			renewed = append(renewed, renewal{cw, creds, from, len(replaced)})
		}
	}
	if len(renewed) == 0 {
		return
	}
	t.family("credwatch_credential_superseded",
		"1 for a credential a newer one of its kind on the same object has replaced: started and ending later (as `az ad app credential reset --append` leaves the old one beside it), and, for an aksCluster watch or one that rotates, put in use by credwatch's rotation; absent otherwise. Same labels as credwatch_credential_expiration_timestamp_seconds.")
	for _, r := range renewed {
		for _, i := range replaced[r.from:r.to] {
			credentialSample(t, 1, r.cw, r.creds[i])
		}
	}
}

// writeSignIns writes when each credential last signed in, and whether it is in use, as the
// watches that read sign-ins (spec.usage.signIns) have it; nothing for those that do not, or do
// not know.
func writeSignIns(t *textWriter, list []*v1alpha1.CredentialWatch, now time.Time) {
	started := false
	for _, cw := range list {
		for _, cr := range cw.Status.Credentials {
			if cr.LastSignIn == nil {
				continue
			}
			if !started {
				t.family("credwatch_credential_last_sign_in_timestamp_seconds",
					"When the credential last signed in, as Graph's sign-in activity report has it (spec.usage.signIns; hours behind), as a Unix timestamp; absent when unknown. Same labels as credwatch_credential_expiration_timestamp_seconds.")
				started = true
			}
			credentialSample(t, cr.LastSignIn.Unix(), cw, cr)
		}
	}
	started = false
	for _, cw := range list {
		if !policy.WatchSignInsKnown(cw, now) {
			continue
		}
		for _, cr := range cw.Status.Credentials {
			if !started {
				t.family("credwatch_credential_in_use",
					"1 for a credential that signed in within the watch's usage.activeWithin, 0 for one that did not (spec.usage.signIns); absent when the watch's sign-ins are not known. Same labels as credwatch_credential_expiration_timestamp_seconds.")
				started = true
			}
			var inUse int64
			if cr.InUse {
				inUse = 1
			}
			credentialSample(t, inUse, cw, cr)
		}
	}
}

// credentialSample writes a series of one credential of a watch.
func credentialSample(t *textWriter, value int64, cw *v1alpha1.CredentialWatch, cr v1alpha1.Credential) {
	id := cw.AppID()
	if cr.AppID != "" {
		id = cr.AppID
	}
	t.sample(value, "client_id", id, "key_id", cr.KeyID, "name", cw.Name, "namespace", cw.Namespace,
		"source", string(cr.Source), "type", string(cr.Type))
}

// credentials are a watch's credentials: for a tenant scan this process ran, all it found.
func (w *Watches) credentials(cw *v1alpha1.CredentialWatch) []v1alpha1.Credential {
	if cw.Spec.Target.TenantScan != nil {
		if found, ok := w.scans.Get(types.NamespacedName{Namespace: cw.Namespace, Name: cw.Name}); ok {
			all := found.Credentials
			return all
		}
	}
	return cw.Status.Credentials
}

// writeFindings counts each watch's credentials that break its hygiene policy, by kind.
func writeFindings(t *textWriter, list []*v1alpha1.CredentialWatch) {
	t.family("credwatch_credential_policy_findings",
		"Credentials that break the watch's hygiene policy (spec.hygiene), by kind (StartAfterEnd, NeverExpires, ServicePrincipalSecret, ManySecrets, LongLived, NotYetValid); absent when none does.")
	for _, cw := range list {
		f := cw.Status.Findings
		if f == nil {
			continue
		}
		for _, kind := range v1alpha1.FindingKinds {
			if n := f.Count(kind); n > 0 {
				t.sample(int64(n), "client_id", cw.AppID(), "kind", string(kind), "name", cw.Name, "namespace", cw.Namespace)
			}
		}
	}
}

// writeFleets writes the clusters of each fleet: how each signs in, and when the first credential
// of its service principal ends.
func (w *Watches) writeFleets(t *textWriter, list []*v1alpha1.CredentialWatch) {
	type cluster struct {
		id, sub, appID string
		end            *metav1.Time
	}
	byWatch := map[*v1alpha1.CredentialWatch][]cluster{}
	for _, cw := range list {
		if cw.Spec.Target.AKSFleet == nil {
			continue
		}
		var found aksfleet.Found
		ok := false
		if w.fleets != nil {
			found, ok = w.fleets.Shown(types.NamespacedName{Namespace: cw.Namespace, Name: cw.Name})
		}
		if !ok {
			// A replica that has not listed the fleet reports what its status lists, while the
			// identity still allows it.
			if fs := cw.Status.Fleet; fs != nil && readyOf(cw) == metav1.ConditionTrue {
				for _, c := range fs.Attention {
					byWatch[cw] = append(byWatch[cw], cluster{c.ID, c.SubscriptionID, c.AppID, c.EarliestExpiry})
				}
			}
			continue
		}
		for _, c := range found.Clusters {
			byWatch[cw] = append(byWatch[cw], cluster{c.ID, c.SubscriptionID, c.AppID, aksfleet.EarliestEnd(c.Counted())})
		}
	}
	if len(byWatch) == 0 {
		return
	}
	t.family("credwatch_aks_cluster_credential_expiration_timestamp_seconds",
		"When the first secret or certificate of the service principal an AKS cluster of a fleet signs in with ends, or, when the fleet's sign-ins show which one the cluster uses (spec.usage.signIns), when that one ends, as a Unix timestamp.")
	for _, cw := range list {
		for _, c := range byWatch[cw] {
			if c.end != nil {
				t.sample(c.end.Unix(), "client_id", c.appID, "cluster", c.id, "name", cw.Name, "namespace", cw.Namespace, "subscription_id", c.sub)
			}
		}
	}
	t.family("credwatch_aks_cluster_info",
		"1 for each AKS cluster of a fleet, labelled with how it signs in to Azure (ServicePrincipal, ManagedIdentity).")
	for _, cw := range list {
		for _, c := range byWatch[cw] {
			identity := v1alpha1.IdentityServicePrincipal
			if c.appID == "" {
				identity = v1alpha1.IdentityManagedIdentity
			}
			t.sample(1, "client_id", c.appID, "cluster", c.id, "identity", string(identity), "name", cw.Name, "namespace", cw.Namespace, "subscription_id", c.sub)
		}
	}
}

func readyOf(cw *v1alpha1.CredentialWatch) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(cw.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return c.Status
	}
	return metav1.ConditionUnknown
}
