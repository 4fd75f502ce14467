package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/rotation"
	"github.com/credwatch/credwatch/internal/rotation/secretstore"
	"github.com/credwatch/credwatch/internal/target"
)

// rotationFinalizer keeps a watch whose rotation is in flight until the rotation has been rolled
// back, or its reset's outcome is known: deleting the watch must not strand a secret in Graph nor
// a reset half followed.
const rotationFinalizer = "credwatch.dev/rotation"

// +kubebuilder:rbac:groups=credwatch.dev,resources=credentialwatches,verbs=update

// reconcileRotation starts a rotation when one is due and moves the one in progress on
// (rotation.Run), and takes the finalizer off a watch with no rotation in flight.
func (r *CredentialWatchReconciler) reconcileRotation(ctx context.Context, w *watchState) (time.Time, error) {
	var next time.Time
	if rotation.Wanted(w.obj) {
		run, err := rotation.NewRun(w.obj, w.now, r.rotationEdges(w))
		if err != nil {
			return time.Time{}, reconcile.TerminalError(err)
		}
		if next, err = run.Reconcile(ctx); err != nil {
			return time.Time{}, err
		}
	} else {
		meta.RemoveStatusCondition(&w.obj.Status.Conditions, v1alpha1.ConditionRotating)
	}
	if w.obj.Status.Rotation == nil {
		return next, r.setFinalizer(ctx, w, false)
	}
	return next, nil
}

// finalizeRotation winds down the rotation of a watch being deleted (rotation.Run.Finalize).
func (r *CredentialWatchReconciler) finalizeRotation(ctx context.Context, w *watchState) (time.Time, error) {
	if !controllerutil.ContainsFinalizer(w.obj, rotationFinalizer) {
		return time.Time{}, nil
	}
	run, _ := rotation.NewRun(w.obj, w.now, r.rotationEdges(w)) // the API server validated the durations; a deleted watch is wound down regardless
	return run.Finalize(ctx)
}

// rotationEdges are the watch's rotation's edges: its identity, Azure, its namespace's Secrets,
// its status, finalizer and events.
func (r *CredentialWatchReconciler) rotationEdges(w *watchState) rotation.Edges {
	named := r.identities().RefOf(w.obj)
	return rotation.Edges{
		Identity: named,
		Grant: func(ctx context.Context, ref *v1alpha1.IdentityRef) (access.Grant, error) {
			if equality.Semantic.DeepEqual(ref, named) {
				return r.grantOnce(ctx, w)
			}
			return r.identities().GrantOf(ctx, w.obj, ref)
		},
		Clients: func(ctx context.Context, g access.Grant, pin rotation.Pin) (rotation.Clients, error) {
			return r.rotationClients(ctx, g, pin)
		},
		Vaults: func(ctx context.Context, g access.Grant, pin rotation.Pin) (rotation.KeyVaults, error) {
			id, err := r.signIns().Identity(ctx, g.Identity, pin.TenantID)
			if err != nil {
				return nil, err
			}
			return rotation.VaultsOf(r.Azure, id)
		},
		Store: func(secretName string, pin rotation.Pin) rotation.Store {
			// Read one at a time, not from a cache, which would hold every Secret in the cluster.
			return &secretstore.Store{Reader: r.SecretReader, Writer: r.Client, Watch: w.obj, Target: secretName, TenantID: pin.TenantID, AppID: pin.AppID}
		},
		Ledger:    &watchLedger{r: r, w: w},
		Events:    watchEvents{rec: r.Recorder, obj: w.obj},
		Finalizer: func(ctx context.Context, add bool) error { return r.setFinalizer(ctx, w, add) },
		ClusterID: r.ClusterID,
		Pace:      r.Paces,
		GitHub:    r.GitHub,
		Token:     secretstore.Tokens{Reader: r.SecretReader, Namespace: w.obj.Namespace}.Read,
	}
}

// rotationClients are the pinned application and cluster, as the identity g signs in to them.
func (r *CredentialWatchReconciler) rotationClients(ctx context.Context, g access.Grant, pin rotation.Pin) (rotation.Clients, error) {
	id, err := r.signIns().Identity(ctx, g.Identity, pin.TenantID)
	if err != nil {
		return rotation.Clients{}, err
	}
	return rotation.ClientsOf(r.Azure, id, pin)
}

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

// watchLedger saves the rotation in the watch's status, with an optimistic lock.
type watchLedger struct {
	r *CredentialWatchReconciler
	w *watchState
}

func (l *watchLedger) Save(ctx context.Context, st v1alpha1.RotationStatus) error {
	return l.r.writeNow(ctx, l.w.obj, l.w.stored, func(s *v1alpha1.CredentialWatchStatus) { s.Rotation = st.DeepCopy() })
}

func (l *watchLedger) Abandon(ctx context.Context, why string) error {
	obj := l.w.obj
	abort := v1alpha1.LastAbort{Time: metav1.NewTime(l.w.now), Reason: why, Generation: obj.Generation, Request: obj.Annotations[v1alpha1.RotateAnnotation]}
	return l.r.writeNow(ctx, obj, l.w.stored, func(s *v1alpha1.CredentialWatchStatus) { s.Rotation, s.LastAbort = nil, abort.DeepCopy() })
}

func (l *watchLedger) Finish(ctx context.Context, done v1alpha1.LastRotation) error {
	// The check reads the new secret in at once, so that expiry and the next rotation are
	// reckoned from it rather than from the credentials read before.
	checkNow := metav1.NewTime(l.w.now)
	return l.r.writeNow(ctx, l.w.obj, l.w.stored, func(s *v1alpha1.CredentialWatchStatus) {
		s.Rotation, s.LastRotation, s.NextCheckTime = nil, done.DeepCopy(), checkNow.DeepCopy()
	})
}

// watchEvents records events on the watch.
type watchEvents struct {
	rec record.EventRecorder
	obj *v1alpha1.CredentialWatch
}

func (e watchEvents) Event(eventtype, reason, message string) {
	e.rec.Event(e.obj, eventtype, reason, message)
}
