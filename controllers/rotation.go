package controllers

import (
	"context"
	"errors"
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
	"github.com/credwatch/credwatch/internal/target/akscluster"
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
	return &rotationRun{r: r, w: w, obj: w.obj, spec: spec, rs: rs, now: w.now, pin: rotation.SpecPin(w.obj)}, err
}

// pinTo makes the run about the rotation in progress st, filling in what st did not pin (a
// rotation begun before tenants were pinned), and returns the spec's pin, to compare.
func (ro *rotationRun) pinTo(st *v1alpha1.RotationStatus) rotation.Pin {
	spec := ro.pin
	ro.pin = rotation.PinOf(*st, spec)
	st.TenantID, st.Cluster = ro.pin.TenantID, ro.pin.Cluster
	if st.SecretName != "" {
		ro.spec.SecretRef.Name = st.SecretName
	}
	return spec
}

// maybeStart starts a rotation that has fallen due, or been asked for, when nothing blocks it.
func (ro *rotationRun) maybeStart(ctx context.Context) (time.Time, error) {
	obj, now := ro.obj, ro.now
	if h := rotation.WhyNotStart(obj, ro.pin, ro.spec, ro.rs.RotateBefore, now); h != nil {
		target.SetCondition(obj, v1alpha1.ConditionRotating, metav1.ConditionFalse, h.Reason, h.Message, now)
		return h.Next, nil
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
		plan := rotation.Plan(obj, ro.pin, ro.spec, ro.rs, ro.prefixes(), now)
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
	res, err := m.Start(ctx, ro.pin, rotation.Asked{Rotate: obj.Annotations[v1alpha1.RotateAnnotation], Abort: obj.Annotations[v1alpha1.AbortRotationAnnotation]})
	return ro.apply(res, err, "")
}

// resume moves the rotation in progress st on, or aborts it when asked and it still can be.
func (ro *rotationRun) resume(ctx context.Context, st v1alpha1.RotationStatus) (time.Time, error) {
	obj, now := ro.obj, ro.now
	spec := ro.pinTo(&st)
	if why, value := rotation.AbortAsked(obj, st); why != "" {
		if err := rotation.Abortable(st); err == nil {
			return ro.abort(ctx, st, why)
		} else if value != st.AbortRequest {
			st.AbortRequest = value
			obj.Status.Rotation.AbortRequest = value // written by the deferred patch: refused once, said once
			ro.r.Recorder.Event(obj, corev1.EventTypeWarning, eventRotationAbortRefused, rotation.AbortRefused(why, err))
		}
	}
	if ro.spec.Mode == v1alpha1.RotationDryRun {
		target.SetCondition(obj, v1alpha1.ConditionRotating, metav1.ConditionFalse, string(st.Step), rotation.DryRunWaits(st.Step), now)
		return time.Time{}, nil
	}
	changed := rotation.TargetChange(ro.pin, spec)
	if changed != "" && st.Resets == 0 {
		msg := rotation.TargetChanged(st.Step, changed)
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

// abort withdraws the rotation st: only the identity's right to rotate the application is needed
// to remove the secret the rotation added.
func (ro *rotationRun) abort(ctx context.Context, st v1alpha1.RotationStatus, why string) (time.Time, error) {
	return ro.drive(ctx, st, false, "", func(ctx context.Context, m *rotation.Machine) (rotation.Result, error) {
		return m.Abort(ctx, st, why)
	})
}

// apply puts where the machine got to into the watch's status and Rotating condition.
func (ro *rotationRun) apply(res rotation.Result, err error, changed string) (time.Time, error) {
	if err != nil {
		return time.Time{}, err
	}
	ro.obj.Status.Rotation = res.Status
	c := res.Condition
	if changed != "" && c.Status == metav1.ConditionTrue {
		c = rotation.WithChange(c, changed, res.Status.Step)
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
		if err := g.Allow(access.Request{Operation: v1alpha1.OperationResetCluster, TenantID: ro.pin.TenantID, Cluster: akscluster.Where(pinnedRef(c))}); err != nil {
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
	var ke *target.KubernetesError
	if errors.As(err, &ke) {
		return time.Time{}, ke
	}
	reason, msg := rotation.Paused(err, ro.obj.Status.Rotation)
	if prev := target.Condition(ro.obj, v1alpha1.ConditionRotating); prev.Reason != reason {
		ro.r.Recorder.Event(ro.obj, corev1.EventTypeWarning, reason, msg)
	}
	target.SetCondition(ro.obj, v1alpha1.ConditionRotating, metav1.ConditionFalse, reason, msg, ro.now)
	return time.Time{}, nil
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
