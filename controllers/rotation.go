package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/rotation"
	"github.com/credwatch/credwatch/internal/target"
)

// eventRotationPlanned: a DryRun rotation said what it would do.
const eventRotationPlanned = "RotationPlanned"

// rotationTimeout bounds the Azure calls of one reconcile's rotation steps.
const rotationTimeout = 2 * time.Minute

// rotationRun is one reconcile's rotation: the watch, its settings, and what the rotation is
// about (pinned when it started, or the spec's when none is in progress).
type rotationRun struct {
	r    *CredentialWatchReconciler
	w    *watchState
	obj  *v1alpha1.CredentialWatch
	spec v1alpha1.Rotation
	rs   policy.RotationSettings
	pin  rotation.Pin
	now  time.Time
}

// reconcileRotation starts a rotation when one is due and moves the one in progress on, through
// the machine of package rotation. Every step is written to status, with an optimistic lock,
// before the next begins: an operator that stops anywhere finds where it was, and one working
// from a stale copy cannot write at all.
func (r *CredentialWatchReconciler) reconcileRotation(ctx context.Context, w *watchState) (time.Time, error) {
	next, err := r.rotate(ctx, w)
	if err == nil && w.obj.Status.Rotation == nil {
		err = r.setFinalizer(ctx, w, false)
	}
	return next, err
}

func (r *CredentialWatchReconciler) rotate(ctx context.Context, w *watchState) (time.Time, error) {
	obj := w.obj
	spec := obj.Spec.Rotation
	enabled := spec != nil && spec.Enabled
	if !enabled && obj.Status.Rotation == nil {
		meta.RemoveStatusCondition(&obj.Status.Conditions, v1alpha1.ConditionRotating)
		return time.Time{}, nil
	}
	ro, err := r.newRotationRun(w)
	if err != nil {
		return time.Time{}, reconcile.TerminalError(err)
	}
	if obj.Status.Rotation == nil {
		return ro.maybeStart(ctx)
	}
	return ro.resume(ctx, *obj.Status.Rotation.DeepCopy())
}

// newRotationRun is the rotation of the watch w, with its spec's settings; a rotation turned off by
// removing spec.rotation is finished with the defaults. An error names a duration that does not
// parse (the API server validates them), and the run has the settings parsed before it.
func (r *CredentialWatchReconciler) newRotationRun(w *watchState) (*rotationRun, error) {
	var spec v1alpha1.Rotation
	if s := w.obj.Spec.Rotation; s != nil {
		spec = *s
	}
	rs, err := policy.RotationSettingsOf(spec)
	return &rotationRun{r: r, w: w, obj: w.obj, spec: spec, rs: rs, now: w.now, pin: specPin(w.obj)}, err
}

// pinTo makes the run about the rotation in progress st, filling in what st did not pin (a
// rotation begun before tenants were pinned), and returns the spec's pin, to compare.
func (ro *rotationRun) pinTo(st *v1alpha1.RotationStatus) rotation.Pin {
	spec := ro.pin
	ro.pin = pinOf(*st, spec)
	st.TenantID, st.Cluster = ro.pin.TenantID, ro.pin.Cluster
	if st.SecretName != "" {
		ro.spec.SecretRef.Name = st.SecretName
	}
	return spec
}

// specPin is what a rotation starting now would be about.
func specPin(obj *v1alpha1.CredentialWatch) rotation.Pin {
	p := rotation.Pin{TenantID: obj.Spec.Target.TenantID(), AppID: obj.AppID()}
	if sp := obj.Status.ServicePrincipal; sp != nil {
		p.ApplicationObjectID = sp.ApplicationObjectID
	}
	if c := obj.Spec.Target.AKSCluster; c != nil {
		p.Cluster = &v1alpha1.RotationCluster{SubscriptionID: c.SubscriptionID, ResourceGroup: c.ResourceGroup, Name: c.Name}
	}
	return p
}

// pinOf is what the rotation in progress st is about. One started before tenants were pinned
// (some before clusters were too) takes what it lacks from the spec.
func pinOf(st v1alpha1.RotationStatus, spec rotation.Pin) rotation.Pin {
	p := rotation.Pin{TenantID: st.TenantID, AppID: st.AppID, ApplicationObjectID: st.ApplicationObjectID, Cluster: st.Cluster}
	if p.TenantID == "" {
		p.TenantID = spec.TenantID
		if p.Cluster == nil {
			p.Cluster = spec.Cluster
		}
	}
	return p
}

// maybeStart starts a rotation that has fallen due, or been asked for, when nothing blocks it.
func (ro *rotationRun) maybeStart(ctx context.Context) (time.Time, error) {
	obj, now := ro.obj, ro.now
	request := obj.Annotations[v1alpha1.RotateAnnotation]
	requested := policy.RotationRequested(request, obj.Status.LastRotation)
	dueAt := policy.RotationDueAt(obj.Status.Credentials, ro.rs.RotateBefore, now)
	if obj.Status.LastCheckTime == nil || (!requested && now.Before(dueAt)) {
		msg := "No rotation due"
		if obj.Status.LastCheckTime != nil {
			msg = "Next rotation due at " + dueAt.UTC().Format(time.RFC3339)
		}
		target.SetCondition(obj, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonIdle, msg, now)
		if obj.Status.LastCheckTime == nil {
			return time.Time{}, nil
		}
		return dueAt, nil
	}
	if a := obj.Status.LastAbort; a != nil && a.Generation == obj.Generation && (!requested || request == a.Request) {
		target.SetCondition(obj, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonRotationAborted, fmt.Sprintf(
			"A rotation is due, but the last one was aborted at %s (%s): none starts by itself until the spec changes, or one is asked for with kubectl credwatch rotate",
			a.Time.UTC().Format(time.RFC3339), a.Reason), now)
		return time.Time{}, nil
	}
	if why := ro.blocked(); why != "" {
		target.SetCondition(obj, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonRotationBlocked, why, now)
		return time.Time{}, nil
	}
	if _, _, err := policy.InWindow(ro.spec.MaintenanceWindow, now); err != nil {
		// Found now, not after a secret was created for a reset that could never be scheduled.
		target.SetCondition(obj, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonRotationBlocked,
			"A rotation is due, but spec.rotation."+err.Error()+": fix it, and the rotation starts", now)
		return time.Time{}, nil
	}
	g, err := ro.authorize(ctx, true)
	if err != nil {
		return ro.paused(err)
	}
	store := ro.store()
	if _, err := store.Held(ctx); err != nil {
		return ro.paused(err)
	}
	if ro.spec.Mode == v1alpha1.RotationDryRun {
		plan := ro.plan()
		prev := meta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ConditionRotating)
		if prev == nil || prev.Message != plan {
			ro.r.Recorder.Event(obj, corev1.EventTypeNormal, eventRotationPlanned, plan)
		}
		target.SetCondition(obj, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonDryRun, plan, now)
		return time.Time{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, rotationTimeout)
	defer cancel()
	m, err := ro.machine(ctx, g, store)
	if err != nil {
		// Nothing was made yet: the rotation starts once the identity can reach Azure.
		if _, perr := ro.paused(err); perr != nil {
			return time.Time{}, perr
		}
		return now.Add(policy.PropagationBackoff(1)), nil
	}
	if err := ro.r.setFinalizer(ctx, ro.w, true); err != nil {
		return time.Time{}, err
	}
	ctrl.LoggerFrom(ctx).Info("Starting rotation")
	res, err := m.Start(ctx, ro.pin, rotation.Asked{Rotate: request, Abort: obj.Annotations[v1alpha1.AbortRotationAnnotation]})
	return ro.apply(res, err, "")
}

// resume moves the rotation in progress st on, or aborts it when asked and it still can be.
func (ro *rotationRun) resume(ctx context.Context, st v1alpha1.RotationStatus) (time.Time, error) {
	obj, now := ro.obj, ro.now
	spec := ro.pinTo(&st)
	if why, value := ro.abortAsked(st); why != "" {
		if err := rotation.Abortable(st); err == nil {
			return ro.abort(ctx, st, why)
		} else if value != st.AbortRequest {
			st.AbortRequest = value
			obj.Status.Rotation.AbortRequest = value // written by the deferred patch: refused once, said once
			ro.r.Recorder.Eventf(obj, corev1.EventTypeWarning, eventRotationAbortRefused,
				"The rotation is not aborted (%s): %v; it finishes instead, and old secrets are retired only once the new one is in use", why, err)
		}
	}
	if ro.spec.Mode == v1alpha1.RotationDryRun {
		target.SetCondition(obj, v1alpha1.ConditionRotating, metav1.ConditionFalse, string(st.Step),
			"The mode is DryRun: the rotation in progress waits at step "+string(st.Step)+" and writes nothing until the mode is Apply", now)
		return time.Time{}, nil
	}
	changed := targetChange(ro.pin, spec)
	if changed != "" && st.Resets == 0 {
		msg := fmt.Sprintf("The rotation in progress waits at step %s: %s. Before its first reset it does not act on a target it was not started for: "+
			"put the spec back and it resumes, or abort it with kubectl credwatch rotate --abort", st.Step, changed)
		if prev := target.Condition(obj, v1alpha1.ConditionRotating); prev.Reason != v1alpha1.ReasonRotationTargetChanged {
			ro.r.Recorder.Event(obj, corev1.EventTypeWarning, v1alpha1.ReasonRotationTargetChanged, msg)
		}
		target.SetCondition(obj, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonRotationTargetChanged, msg, now)
		return time.Time{}, nil
	}
	if t := st.NextAttemptTime; t != nil && now.Before(t.Time) {
		return t.Time, nil
	}
	return ro.drive(ctx, st, true, changed, func(ctx context.Context, m *rotation.Machine) (rotation.Result, error) {
		return m.Advance(ctx, st)
	})
}

// drive runs act on a machine for the rotation st, once the watch's identity allows rotating the
// application (and, with reset, resetting its cluster), and applies the result.
func (ro *rotationRun) drive(ctx context.Context, st v1alpha1.RotationStatus, reset bool, changed string,
	act func(context.Context, *rotation.Machine) (rotation.Result, error)) (time.Time, error) {
	g, err := ro.authorize(ctx, reset)
	if err != nil {
		return ro.paused(err)
	}
	ctx, cancel := context.WithTimeout(ctx, rotationTimeout)
	defer cancel()
	m, err := ro.machine(ctx, g, ro.store())
	if err != nil {
		return ro.apply(m.Unreachable(st, err), nil, changed)
	}
	res, err := act(ctx, m)
	return ro.apply(res, err, changed)
}

// eventRotationAbortRefused: an abort came after a reset began, and the rotation finishes instead.
const eventRotationAbortRefused = "RotationAbortRefused"

// abortAsked says why the rotation st is to be aborted, with the value that asked; empty when it
// is not: rotation turned off, or an abort annotation the rotation has not seen.
func (ro *rotationRun) abortAsked(st v1alpha1.RotationStatus) (why, value string) {
	if s := ro.obj.Spec.Rotation; s == nil || !s.Enabled {
		return "rotation was turned off", "spec.rotation.enabled=false"
	}
	if v := ro.obj.Annotations[v1alpha1.AbortRotationAnnotation]; v != "" && v != st.AbortRequest {
		return v1alpha1.AbortRotationAnnotation + "=" + v, v
	}
	return "", ""
}

// abort withdraws the rotation st: only the identity's right to rotate the application is needed
// to remove the secret the rotation added.
func (ro *rotationRun) abort(ctx context.Context, st v1alpha1.RotationStatus, why string) (time.Time, error) {
	return ro.drive(ctx, st, false, "", func(ctx context.Context, m *rotation.Machine) (rotation.Result, error) {
		return m.Abort(ctx, st, why)
	})
}

// targetChange says how the spec's target differs from the rotation's pinned one; empty when
// it does not. Azure's names and GUIDs are not case-sensitive.
func targetChange(pinned, spec rotation.Pin) string {
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

// apply puts where the machine got to into the watch's status and Rotating condition.
func (ro *rotationRun) apply(res rotation.Result, err error, changed string) (time.Time, error) {
	if err != nil {
		return time.Time{}, err
	}
	ro.obj.Status.Rotation = res.Status
	c := res.Condition
	if changed != "" && c.Status == metav1.ConditionTrue {
		c.Reason = v1alpha1.ReasonRotationTargetChanged
		c.Message = fmt.Sprintf("The spec changed (%s), but a reset of the pinned cluster began: this rotation finishes with what it pinned, "+
			"and the change applies to the next. At step %s: %s", changed, res.Status.Step, c.Message)
	}
	target.SetCondition(ro.obj, v1alpha1.ConditionRotating, c.Status, c.Reason, c.Message, ro.now)
	return res.Next, nil
}

// authorize finds the watch's identity and checks that it allows what the rotation does from its
// step on: rotating the application's secrets, and, with reset, until the cluster has been moved
// onto the new one, resetting the cluster. It is asked at every reconcile, before any call to
// Azure, so that an identity that no longer allows the rotation stops it at its next step.
func (ro *rotationRun) authorize(ctx context.Context, reset bool) (access.Grant, error) {
	g, err := ro.r.grantOnce(ctx, ro.w)
	if err != nil {
		return access.Grant{}, err
	}
	if err := g.Allow(access.Request{Operation: v1alpha1.OperationRotate, TenantID: ro.pin.TenantID, AppID: ro.pin.AppID}); err != nil {
		return access.Grant{}, err
	}
	if c := ro.pin.Cluster; c != nil && reset && !ro.retiring() {
		if err := g.Allow(access.Request{Operation: v1alpha1.OperationResetCluster, TenantID: ro.pin.TenantID, Cluster: accessCluster(pinnedRef(c))}); err != nil {
			return access.Grant{}, err
		}
	}
	return g, nil
}

func (ro *rotationRun) retiring() bool {
	st := ro.obj.Status.Rotation
	return st != nil && st.Step == v1alpha1.StepRetiring
}

func pinnedRef(c *v1alpha1.RotationCluster) aks.ClusterRef {
	return aks.ClusterRef{SubscriptionID: c.SubscriptionID, ResourceGroup: c.ResourceGroup, Name: c.Name}
}

// paused shows a rotation that its identity does not allow, or that has no identity, as Rotating
// False with the reason, and does nothing else: whatever step it reached stays as it was, and
// it goes on when the identity allows it again (a change to the identity reconciles the watch).
func (ro *rotationRun) paused(err error) (time.Time, error) {
	var ke *kubernetesError
	if errors.As(err, &ke) {
		return time.Time{}, ke
	}
	reason := target.ReasonFor(err)
	if errors.Is(err, rotation.ErrForeign) {
		reason = v1alpha1.ReasonRotationBlocked
	}
	msg := "A rotation is due, but it does not start: " + err.Error()
	if st := ro.obj.Status.Rotation; st != nil {
		msg = fmt.Sprintf("The rotation waits at step %s: %v", st.Step, err)
	}
	if prev := target.Condition(ro.obj, v1alpha1.ConditionRotating); prev.Reason != reason {
		ro.r.Recorder.Event(ro.obj, corev1.EventTypeWarning, reason, msg)
	}
	target.SetCondition(ro.obj, v1alpha1.ConditionRotating, metav1.ConditionFalse, reason, msg, ro.now)
	return time.Time{}, nil
}

// blocked says why a due rotation cannot start, empty when it can.
func (ro *rotationRun) blocked() string {
	switch st := ro.obj.Status; {
	case !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReady):
		return "A rotation is due, but the last check failed: it waits for a check that succeeds"
	case st.AKSCluster != nil && st.AKSCluster.Identity == v1alpha1.IdentityManagedIdentity:
		return "The AKS cluster uses a managed identity: there is no secret to rotate"
	case ro.pin.ApplicationObjectID == "":
		return "A rotation is due, but this tenant holds no application object for the appId: secrets are added to the application, in its home tenant"
	case st.LastRotation != nil && (st.LastCheckTime == nil || st.LastCheckTime.Before(&st.LastRotation.Time)):
		return "The last rotation is not read back from Graph yet: the next check does that"
	}
	return ""
}

// plan says what a rotation would do, for DryRun.
func (ro *rotationRun) plan() string {
	steps := []string{
		fmt.Sprintf("add a secret named %s<watch>-<time> valid for %s to application %s", policy.CredwatchPrefix, policy.HumanDuration(ro.rs.Validity), ro.pin.ApplicationObjectID),
		fmt.Sprintf("write it to Secret %s/%s", ro.obj.Namespace, ro.spec.SecretRef.Name),
		"wait until Entra accepts it",
	}
	if c := ro.pin.Cluster; c != nil {
		when := "at once"
		if w := ro.spec.MaintenanceWindow; w != nil {
			_, next, _ := policy.InWindow(w, ro.now)
			when = "in the maintenance window (next opening " + next.UTC().Format(time.RFC3339) + ")"
		}
		steps = append(steps, fmt.Sprintf("reset the service principal of AKS cluster %s/%s %s, which restarts its nodes", c.ResourceGroup, c.Name, when))
	}
	retire := "keep every old secret"
	if ro.spec.RemoveOld != v1alpha1.RemoveOldNever {
		n := len(policy.Retirable(ro.obj.Status.Credentials, ro.prefixes(), "", ro.now.Add(ro.rs.Validity), ro.spec.RemoveOld))
		retire = fmt.Sprintf("remove %d old secrets credwatch created, after %s", n, policy.HumanDuration(ro.rs.GracePeriod))
	}
	steps = append(steps, retire)
	return "DryRun: a rotation is due; it would " + strings.Join(steps, "; ")
}

// prefix starts the display name of every secret this watch's rotations create.
func (ro *rotationRun) prefix() string {
	var cluster string
	if c := ro.pin.Cluster; c != nil {
		cluster = c.SubscriptionID + "/" + c.ResourceGroup + "/" + c.Name
	}
	return policy.SecretPrefix(ro.r.ClusterID, ro.obj.Namespace, ro.obj.Name, cluster)
}

// prefixes start the names of every secret of the watch's: under today's naming, and under the
// watch's UID, as rotations named them before.
func (ro *rotationRun) prefixes() []string {
	return []string{ro.prefix(), policy.WatchPrefix(string(ro.obj.UID))}
}

func (ro *rotationRun) secretKey() types.NamespacedName {
	return types.NamespacedName{Namespace: ro.obj.Namespace, Name: ro.spec.SecretRef.Name}
}
