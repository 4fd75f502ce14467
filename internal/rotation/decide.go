package rotation

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/rotation/pacing"
	"github.com/credwatch/credwatch/internal/target"
)

// What the rotation of a watch decides before its machine runs, and what it says of it: pure
// functions of the watch, the pin and the clock, so that each is table-tested.

// SpecPin is what a rotation of obj starting now would be about.
func SpecPin(obj *v1alpha1.CredentialWatch) Pin {
	p := Pin{TenantID: obj.Spec.Target.TenantID(), AppID: obj.AppID()}
	if sp := obj.Status.ServicePrincipal; sp != nil {
		p.ApplicationObjectID = sp.ApplicationObjectID
	}
	if c := obj.Spec.Target.AKSCluster; c != nil {
		p.Cluster = &v1alpha1.RotationCluster{SubscriptionID: c.SubscriptionID, ResourceGroup: c.ResourceGroup, Name: c.Name}
	}
	return p
}

// PinOf is what the rotation in progress st is about. One started before tenants were pinned
// (some before clusters were too, or identities) takes what it lacks from the spec's pin.
func PinOf(st v1alpha1.RotationStatus, spec Pin) Pin {
	p := Pin{TenantID: st.TenantID, AppID: st.AppID, ApplicationObjectID: st.ApplicationObjectID, Cluster: st.Cluster, Identity: st.Identity}
	if p.Identity == nil {
		p.Identity = spec.Identity
	}
	if p.TenantID == "" {
		p.TenantID = spec.TenantID
		if p.Cluster == nil {
			p.Cluster = spec.Cluster
		}
	}
	return p
}

// TargetChange says how the spec's target differs from the rotation's pinned one; empty when
// it does not. Azure's names and GUIDs are not case-sensitive.
func TargetChange(pinned, spec Pin) string {
	switch {
	case !strings.EqualFold(pinned.TenantID, spec.TenantID):
		return fmt.Sprintf("it began in tenant %s, and the spec now names tenant %s", pinned.TenantID, spec.TenantID)
	case spec.AppID != "" && !strings.EqualFold(pinned.AppID, spec.AppID):
		return fmt.Sprintf("it began for application %s, and the target now signs in as %s", pinned.AppID, spec.AppID)
	case pinned.Cluster != nil && (spec.Cluster == nil || !sameCluster(*pinned.Cluster, *spec.Cluster)):
		return fmt.Sprintf("it began for AKS cluster %s/%s, which the spec no longer names", pinned.Cluster.ResourceGroup, pinned.Cluster.Name)
	case pinned.Cluster == nil && spec.Cluster != nil:
		return fmt.Sprintf("it began for a service principal, and the spec now names AKS cluster %s/%s", spec.Cluster.ResourceGroup, spec.Cluster.Name)
	}
	return ""
}

func sameCluster(a, b v1alpha1.RotationCluster) bool {
	return strings.EqualFold(a.SubscriptionID, b.SubscriptionID) && strings.EqualFold(a.ResourceGroup, b.ResourceGroup) &&
		strings.EqualFold(a.Name, b.Name)
}

// Hold is a rotation that does not start, or does not move on, now: the Rotating condition's
// reason and message, and when to look again (zero: when the watch changes).
type Hold struct {
	Reason, Message string
	Next            time.Time
}

// WhyNotStart says why no rotation starts now, and nil when one does: none is due nor asked for, the last
// one was aborted and nothing changed since, something blocks it, or the maintenance window does
// not parse (found now, not after a secret was created for a reset that could never be
// scheduled).
func WhyNotStart(obj *v1alpha1.CredentialWatch, pin Pin, spec v1alpha1.Rotation, rotateBefore time.Duration, now time.Time) *Hold {
	st := obj.Status
	request := obj.Annotations[v1alpha1.RotateAnnotation]
	requested := policy.RotationRequested(request, st.LastRotation)
	dueAt := policy.RotationDueAt(st.Credentials, rotateBefore, now)
	if st.LastCheckTime == nil {
		return &Hold{Reason: v1alpha1.ReasonIdle, Message: "No rotation due"}
	}
	if !requested && now.Before(dueAt) {
		return &Hold{Reason: v1alpha1.ReasonIdle, Message: "Next rotation due at " + dueAt.UTC().Format(time.RFC3339), Next: dueAt}
	}
	// A rotation withdrawn because Rotate was revoked is not an abort anyone asked for: once
	// Rotate is allowed again, the next one starts by itself.
	if a := st.LastAbort; a != nil && a.Generation == obj.Generation && a.Reason != whyRevoked && (!requested || request == a.Request) {
		return &Hold{Reason: v1alpha1.ReasonRotationAborted, Message: fmt.Sprintf(
			"A rotation is due, but the last one was aborted at %s (%s): none starts by itself until the spec changes, or one is asked for with kubectl credwatch rotate",
			a.Time.UTC().Format(time.RFC3339), a.Reason)}
	}
	if why := blocked(st, pin); why != "" {
		return &Hold{Reason: v1alpha1.ReasonRotationBlocked, Message: why}
	}
	if _, _, err := policy.InWindow(spec.MaintenanceWindow, now); err != nil {
		return &Hold{Reason: v1alpha1.ReasonRotationBlocked, Message: "A rotation is due, but spec.rotation." + err.Error() + ": fix it, and the rotation starts"}
	}
	return nil
}

// Paced says why no rotation of obj's application starts now by its record rec, nil when one
// may. A watch whose start rec holds, and that completed no rotation since, died before it could
// record it, or withdrew it before any reset (removing its secret): it may start again, as a
// watch deleted and created again may not (see StartOf).
func Paced(obj *v1alpha1.CredentialWatch, rec pacing.Record, now time.Time) *Hold {
	if restarts(obj, rec) {
		rec.LastStart = time.Time{}
	}
	if why, until := rec.Hold(now); why != "" {
		return &Hold{Reason: v1alpha1.ReasonRotationPaced, Message: why, Next: until}
	}
	return nil
}

// restarts reports whether obj's start would repeat the last one rec holds, which it made and
// completed no rotation since.
func restarts(obj *v1alpha1.CredentialWatch, rec pacing.Record) bool {
	st := obj.Status
	return rec.LastUID == string(obj.UID) && !rec.LastStart.IsZero() && (st.LastRotation == nil || st.LastRotation.Time.Time.Before(rec.LastStart))
}

// StartOf is what rec records of obj's rotation starting now, which Paced let start: when the
// application's day began (a restart keeps the start it repeats, so that withdrawing and asking
// again does not hold the application's other watches day after day), and whether it spends the
// admin's lift (only a start the pace would have held does).
func StartOf(obj *v1alpha1.CredentialWatch, rec pacing.Record, now time.Time) (at time.Time, spendLift bool) {
	if restarts(obj, rec) {
		return rec.LastStart, false
	}
	return now, rec.Lifted() && Paced(obj, rec.Unlifted(), now) != nil
}

// blocked says why a due rotation cannot start, empty when it can.
func blocked(st v1alpha1.CredentialWatchStatus, pin Pin) string {
	switch {
	case !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReady):
		return "A rotation is due, but the last check failed: it waits for a check that succeeds"
	case st.AKSCluster != nil && st.AKSCluster.Identity == v1alpha1.IdentityManagedIdentity:
		return "The AKS cluster uses a managed identity: there is no secret to rotate"
	case pin.ApplicationObjectID == "":
		return "A rotation is due, but this tenant holds no application object for the appId: secrets are added to the application, in its home tenant"
	case st.LastRotation != nil && (st.LastCheckTime == nil || st.LastCheckTime.Before(&st.LastRotation.Time)):
		return "The last rotation is not read back from Graph yet: the next check does that"
	}
	return ""
}

// Plan says what a rotation would do, for DryRun: prefixes name the watch's secrets, and the old
// ones it would remove are counted among the credentials obj's status last read.
func Plan(obj *v1alpha1.CredentialWatch, pin Pin, spec v1alpha1.Rotation, rs policy.RotationSettings, prefixes []string, now time.Time) string {
	steps := []string{
		fmt.Sprintf("add a secret named %s<watch>-<time> valid for %s to application %s", policy.CredwatchPrefix, policy.HumanDuration(rs.Validity), pin.ApplicationObjectID),
		fmt.Sprintf("write it to Secret %s/%s", obj.Namespace, spec.SecretRef.Name),
		"wait until Entra accepts it",
	}
	if c := pin.Cluster; c != nil {
		when := "at once"
		if w := spec.MaintenanceWindow; w != nil {
			_, next, _ := policy.InWindow(w, now)
			when = "in the maintenance window (next opening " + next.UTC().Format(time.RFC3339) + ")"
		}
		steps = append(steps, fmt.Sprintf("reset the service principal of AKS cluster %s/%s %s, which restarts its nodes", c.ResourceGroup, c.Name, when))
	}
	for _, sink := range spec.Publish {
		if kv := sink.KeyVault; kv != nil {
			steps = append(steps, "write it to "+kv.Name()+" as a new version")
		}
	}
	retire := "keep every old secret"
	if spec.RemoveOld != v1alpha1.RemoveOldNever {
		n := len(policy.Retirable(obj.Status.Credentials, prefixes, "", now.Add(rs.Validity), spec.RemoveOld))
		retire = fmt.Sprintf("remove %d old secrets credwatch created, after %s", n, policy.HumanDuration(rs.GracePeriod))
	}
	steps = append(steps, retire)
	return "DryRun: a rotation is due; it would " + strings.Join(steps, "; ")
}

// AbortAsked says why the rotation st of obj is to be aborted, with the value that asked; empty
// when it is not: rotation was turned off, or an abort annotation the rotation has not seen.
func AbortAsked(obj *v1alpha1.CredentialWatch, st v1alpha1.RotationStatus) (why, value string) {
	if s := obj.Spec.Rotation; s == nil || !s.Enabled {
		return "rotation was turned off", "spec.rotation.enabled=false"
	}
	if v := obj.Annotations[v1alpha1.AbortRotationAnnotation]; v != "" && v != st.AbortRequest {
		return v1alpha1.AbortRotationAnnotation + "=" + v, v
	}
	return "", ""
}

// AbortRefused is the event note of an abort asked for (why) after the rotation's reset began.
func AbortRefused(why string, err error) string {
	return fmt.Sprintf("The rotation is not aborted (%s): %v; it finishes instead, and old secrets are retired only once the new one is in use", why, err)
}

// DryRunWaits is the Rotating message of a rotation in progress while the mode is DryRun.
func DryRunWaits(step v1alpha1.RotationStep) string {
	return "The mode is DryRun: the rotation in progress waits at step " + string(step) + " and writes nothing until the mode is Apply"
}

// TargetChanged is the Rotating message of a rotation in progress whose target the spec no
// longer names (changed), before its first reset: it does not act.
func TargetChanged(step v1alpha1.RotationStep, changed string) string {
	return fmt.Sprintf("The rotation in progress waits at step %s: %s. Before its first reset it does not act on a target it was not started for: "+
		"put the spec back and it resumes, or abort it with kubectl credwatch rotate --abort", step, changed)
}

// WithChange is the Rotating condition c of a rotation at step whose target the spec no longer
// names (changed) but whose reset began: it finishes with what it pinned.
func WithChange(c Condition, changed string, step v1alpha1.RotationStep) Condition {
	c.Reason = v1alpha1.ReasonRotationTargetChanged
	c.Message = fmt.Sprintf("The spec changed (%s), but a reset of the pinned cluster began: this rotation finishes with what it pinned, "+
		"and the change applies to the next. At step %s: %s", changed, step, c.Message)
	return c
}

// Paused is the Rotating reason and message of a rotation that its identity does not allow, or
// that has no identity (err): it waits at its step st, or, with none, does not start.
func Paused(err error, st *v1alpha1.RotationStatus) (reason, message string) {
	reason = target.ReasonFor(err)
	if errors.Is(err, ErrForeign) {
		reason = v1alpha1.ReasonRotationBlocked
	}
	message = "A rotation is due, but it does not start: " + err.Error()
	if st != nil {
		message = fmt.Sprintf("The rotation waits at step %s: %v", st.Step, err)
	}
	return reason, message
}

// Adopted is the event note of a watch that took on the retirement its deleted predecessor of the
// same name left, at st.
func Adopted(st v1alpha1.RotationStatus) string {
	when := "once the grace period ends"
	if t := st.RetireTime; t != nil {
		when = "at " + t.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("The watch takes on the rotation a deleted watch of this name let go of: secret %s is in use, and the old secrets go %s", st.KeyID, when)
}

// released is the event note of a deleted watch that let go of its rotation st (why), leaving
// what left says for people to finish.
func released(st v1alpha1.RotationStatus, why string, left []string) string {
	msg := fmt.Sprintf("The watch is deleted and credwatch let go of its rotation at step %s (%s)", st.Step, why)
	if len(left) > 0 {
		msg += "; " + strings.Join(left, "; ") + fmt.Sprintf(". Remove a secret nothing uses with: az ad app credential delete --id %s --key-id <keyId>", st.AppID)
	}
	return msg
}
