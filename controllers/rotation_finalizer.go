package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/rotation"
)

// rotationFinalizer keeps a watch whose rotation is in flight until the rotation has been rolled
// back, or its reset's outcome is known: deleting the watch must not strand a secret in Graph nor
// a reset half followed.
const rotationFinalizer = "credwatch.dev/rotation"

// releaseAfter bounds how long a deleted watch waits for its reset's outcome: a namespace being
// deleted must not hang for the hours a stuck reset can take.
const releaseAfter = time.Hour

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
		return &kubernetesError{fmt.Errorf("updating the finalizers of the watch: %w", err)}
	}
	w.obj.Finalizers, w.stored.Finalizers = obj.Finalizers, obj.Finalizers
	w.obj.ResourceVersion, w.stored.ResourceVersion = obj.ResourceVersion, obj.ResourceVersion
	return nil
}

// finalizeRotation winds down the rotation of a watch being deleted, and lets the watch go once
// nothing is in flight: before any reset the rotation is aborted; once one began, the watch waits
// for that reset's outcome, at most releaseAfter, then lets go saying what it left. A cluster
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
	deadline := st.DeletionSeenTime.Add(releaseAfter)
	next, err := ro.windDown(ctx, *st, deadline)
	if err != nil && w.now.After(deadline) {
		return ro.release(ctx, *st, fmt.Sprintf("it could not be wound down in %s: %v", releaseAfter, err))
	}
	return next, err
}

// windDown aborts the rotation st of a deleted watch, or follows its reset in flight, and lets
// the watch go when that is done or cannot be.
func (ro *rotationRun) windDown(ctx context.Context, st v1alpha1.RotationStatus, deadline time.Time) (time.Time, error) {
	r, w := ro.r, ro.w
	abortable := rotation.Abortable(st) == nil
	g, err := ro.authorize(ctx, !abortable)
	var ke *kubernetesError
	if errors.As(err, &ke) {
		return time.Time{}, err
	}
	if err != nil {
		return ro.release(ctx, st, fmt.Sprintf("its identity no longer allows it: %v", err))
	}
	ctx, cancel := context.WithTimeout(ctx, rotationTimeout)
	defer cancel()
	m, err := ro.machine(ctx, g, ro.store())
	if err != nil {
		if w.now.After(deadline) {
			return ro.release(ctx, st, fmt.Sprintf("Azure could not be reached for %s: %v", releaseAfter, err))
		}
		return ro.apply(m.Unreachable(st, err), nil, "")
	}
	if abortable {
		res, err := m.Abort(ctx, st, "the watch is being deleted")
		if err != nil {
			return time.Time{}, err
		}
		if res.Status == nil {
			return time.Time{}, r.setFinalizer(ctx, w, false)
		}
		if w.now.After(deadline) {
			return ro.release(ctx, *res.Status, "the new secret could not be removed in "+releaseAfter.String())
		}
		return ro.apply(res, nil, "")
	}
	if st.Step != v1alpha1.StepClusterUpdating || m.Cluster == nil {
		return ro.release(ctx, st, "no reset is in flight")
	}
	if _, err := m.Cluster.Read(ctx); azerr.KindOf(err) == azerr.KindNotFound {
		return ro.release(ctx, st, "its AKS cluster no longer exists")
	}
	if w.now.After(deadline) {
		return ro.release(ctx, st, "its reset's outcome was not known after "+releaseAfter.String())
	}
	res, err := m.Advance(ctx, st)
	if err != nil {
		return time.Time{}, err
	}
	if res.Status != nil && res.Status.Step == v1alpha1.StepClusterUpdating {
		next, _ := ro.apply(res, nil, "")
		return policy.Earliest(next, deadline), nil
	}
	if res.Status == nil {
		return time.Time{}, r.setFinalizer(ctx, w, false)
	}
	return ro.release(ctx, *res.Status, "its reset ended")
}

// release lets a deleted watch go with its rotation st unfinished: a secret a cluster may use is
// handed to the target Secret, so that its text outlives the watch's staging Secret, and an event
// lists what was left for people to finish.
func (ro *rotationRun) release(ctx context.Context, st v1alpha1.RotationStatus, why string) (time.Time, error) {
	var left []string
	if rotation.Abortable(st) == nil {
		// Never used: its staging copy goes now rather than when the garbage collector gets to it,
		// which would keep a watch created again under the name from rotating until then.
		if err := ro.store().Discard(ctx); err != nil {
			left = append(left, fmt.Sprintf("its staging Secret could not be deleted (%v)", err))
		}
	}
	if rotation.Abortable(st) != nil && st.KeyID != "" {
		where := "Secret " + ro.secretKey().String()
		if err := ro.store().Publish(ctx, st.KeyID); err != nil {
			where = fmt.Sprintf("no Secret: writing it to %s failed (%v)", ro.secretKey(), err)
		}
		left = append(left, fmt.Sprintf("the new secret %s, which the cluster may use, is in %s", st.KeyID, where))
	} else if st.KeyID != "" {
		left = append(left, fmt.Sprintf("the new secret %s, never used, is still in Graph", st.KeyID))
	}
	var expiry time.Time
	if st.Expiry != nil {
		expiry = st.Expiry.Time
	}
	var old []string
	for _, c := range policy.Retirable(ro.obj.Status.Credentials, ro.prefixes(), st.KeyID, expiry, ro.spec.RemoveOld) {
		old = append(old, c.KeyID)
	}
	if len(old) > 0 {
		left = append(left, "old secrets not retired: "+strings.Join(old, ", "))
	}
	msg := fmt.Sprintf("The watch is deleted and credwatch let go of its rotation at step %s (%s)", st.Step, why)
	if len(left) > 0 {
		msg += "; " + strings.Join(left, "; ") + fmt.Sprintf(". Remove a secret nothing uses with: az ad app credential delete --id %s --key-id <keyId>", st.AppID)
	}
	ro.r.Recorder.Event(ro.obj, corev1.EventTypeWarning, eventRotationReleased, msg)
	return time.Time{}, ro.r.setFinalizer(ctx, ro.w, false)
}
