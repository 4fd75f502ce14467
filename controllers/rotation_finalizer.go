package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/rotation"
	"github.com/credwatch/credwatch/internal/target"
)

// rotationFinalizer keeps a watch whose rotation is in flight until the rotation has been rolled
// back, or its reset's outcome is known: deleting the watch must not strand a secret in Graph nor
// a reset half followed.
const rotationFinalizer = "credwatch.dev/rotation"

// eventRotationReleased: a deleted watch let go of its rotation.
const eventRotationReleased = "RotationReleased"

// +kubebuilder:rbac:groups=credwatch.dev,resources=credentialwatches,verbs=update

// setFinalizer adds or removes the rotation finalizer, with an optimistic lock.
func (r *CredentialWatchReconciler) setFinalizer(ctx context.Context, w *watchState, add bool) error {
	obj := w.obj.DeepCopy()
	var changed bool
	if add {
		changed = controllerutil.AddFinalizer(obj, rotationFinalizer)
	} else {
		changed = controllerutil.RemoveFinalizer(obj, rotationFinalizer)
	}
	if !changed {
		return nil
	}
	if err := r.Update(ctx, obj); err != nil {
		return &target.KubernetesError{Err: fmt.Errorf("updating the finalizers of the watch: %w", err)}
	}
	w.obj.Finalizers, w.stored.Finalizers = obj.Finalizers, obj.Finalizers
	w.obj.ResourceVersion, w.stored.ResourceVersion = obj.ResourceVersion, obj.ResourceVersion
	return nil
}

// finalizeRotation winds down the rotation of a watch being deleted, and lets the watch go once
// nothing is in flight: before any reset the rotation is aborted; once one began, the watch waits
// for that reset's outcome, at most rotation.ReleaseAfter, then lets go saying what it left. A cluster
// that no longer exists, or an identity that no longer allows the rotation, lets go at once.
func (r *CredentialWatchReconciler) finalizeRotation(ctx context.Context, w *watchState) (time.Time, error) {
	obj := w.obj
	if !controllerutil.ContainsFinalizer(obj, rotationFinalizer) {
		return time.Time{}, nil
	}
	if obj.Status.Rotation == nil {
		return time.Time{}, r.setFinalizer(ctx, w, false)
	}
	if obj.Status.Rotation.DeletionSeenTime == nil {
		// The operator's clock, not the API server's deletionTimestamp, bounds the wait.
		seen := metav1.NewTime(w.now)
		if err := r.writeNow(ctx, obj, w.stored, func(s *v1alpha1.CredentialWatchStatus) { s.Rotation.DeletionSeenTime = seen.DeepCopy() }); err != nil {
			return time.Time{}, err
		}
	}
	ro, _ := r.newRotationRun(w) // the API server validated the durations; a deleted watch is wound down regardless
	st := obj.Status.Rotation.DeepCopy()
	ro.pinTo(st)
	deadline := st.DeletionSeenTime.Add(rotation.ReleaseAfter)
	next, err := ro.windDown(ctx, *st, deadline)
	if err != nil && w.now.After(deadline) {
		return ro.release(ctx, *st, rotation.NotWoundDown(err))
	}
	return next, err
}

// windDown winds the rotation st of a deleted watch down (rotation.Machine.WindDown), once its
// identity still allows that, and lets the watch go when that is done or cannot be.
func (ro *rotationRun) windDown(ctx context.Context, st v1alpha1.RotationStatus, deadline time.Time) (time.Time, error) {
	g, err := ro.authorize(ctx, rotation.Abortable(st) != nil)
	var ke *target.KubernetesError
	if errors.As(err, &ke) {
		return time.Time{}, err
	}
	if err != nil {
		return ro.release(ctx, st, rotation.NotAllowedAnyMore(err))
	}
	ctx, cancel := context.WithTimeout(ctx, rotationTimeout)
	defer cancel()
	m, err := ro.machine(ctx, g, ro.store())
	if err != nil {
		if ro.now.After(deadline) {
			return ro.release(ctx, st, rotation.Unreachable(err))
		}
		return ro.apply(m.Unreachable(st, err), nil, "")
	}
	e, err := m.WindDown(ctx, st, deadline)
	switch {
	case err != nil:
		return time.Time{}, err
	case e.Done:
		return time.Time{}, ro.r.setFinalizer(ctx, ro.w, false)
	case e.Release != "":
		return ro.release(ctx, e.Status, e.Release)
	}
	return ro.apply(e.Result, nil, "")
}

// release lets a deleted watch go with its rotation st unfinished, and tells people what was left
// (rotation.Release).
func (ro *rotationRun) release(ctx context.Context, st v1alpha1.RotationStatus, why string) (time.Time, error) {
	msg := rotation.Release(ctx, rotation.Let{Store: ro.store(), Secret: ro.secretKey().String(), Credentials: ro.obj.Status.Credentials,
		Prefixes: ro.prefixes(), RemoveOld: ro.spec.RemoveOld}, st, why)
	ro.r.Recorder.Event(ro.obj, corev1.EventTypeWarning, eventRotationReleased, msg)
	return time.Time{}, ro.r.setFinalizer(ctx, ro.w, false)
}
