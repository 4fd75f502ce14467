package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/identity"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
)

// pendingRecheck is when a watch whose planned read is not answered comes back if nothing wakes
// it first: its answer wakes it, within a second, when the budget allows behind a throttled
// Graph, or, in a sweep of 100,000 watches, minutes later, when the status writes ahead of it
// let the planner read it. Longer than such a sweep: every watch still waiting came back at
// once, reconciled for nothing, and the garbage of tens of thousands of reconciles raised the
// sweep's peak memory by 56 MiB (BENCHMARKS.md, ninth run). Under the twenty minutes the planner
// keeps an answer: a watch whose wake was lost comes back while its answer is still there.
const pendingRecheck = 15 * time.Minute

// heldClusterTTL bounds how long a cluster read waits for the check that made it to be woken:
// longer than pendingRecheck, or a watch woken late would read its cluster again.
const heldClusterTTL = pendingRecheck + 5*time.Minute

// defaultCheckTimeout bounds one check: two Graph reads and a token, each normally well under a
// second, so that a Graph that never answers cannot hold a worker.
const defaultCheckTimeout = time.Minute

// scanTimeout bounds one tenant scan: two lists of up to 999 objects a page, each page seconds
// long in a large tenant.
const scanTimeout = 10 * time.Minute

// reconcileCheck reads the target's credentials into status when a check is due, or records why
// it could not and when it will try again. It returns an error only for failures that are not
// the check's (the API server, a cancelled reconcile), which controller-runtime retries.
func (r *CredentialWatchReconciler) reconcileCheck(ctx context.Context, w *watchState) (time.Time, error) {
	obj := w.obj
	due, wait, err := r.checkDue(ctx, w)
	if err != nil || !due {
		return wait, err
	}
	before := target.Condition(obj, v1alpha1.ConditionReady)

	checkCtx, cancel := context.WithTimeout(ctx, r.checkTimeout(w.kind))
	defer cancel()
	ctrl.LoggerFrom(ctx).V(1).Info("Reading " + w.kind.checked())
	f, err := r.read(checkCtx, w)
	if ctx.Err() != nil {
		// The operator is stopping: this is not the check failing.
		return time.Time{}, ctx.Err()
	}
	var apiErr *target.KubernetesError
	if errors.As(err, &apiErr) {
		return time.Time{}, apiErr
	}
	if errors.Is(err, graph.ErrPending) {
		// Nothing is known yet, and nothing is written: the answer wakes the watch, and the
		// check is due still when it does.
		if f != nil {
			f.hold(w)
		}
		w.readPending = true
		return w.now.Add(pendingRecheck), nil
	}
	if f != nil {
		f.note(w)
	}
	obj.Status.CheckRequest = obj.Annotations[v1alpha1.CheckAnnotation]
	if obj.Generation != obj.Status.ObservedGeneration {
		// A changed spec is a new attempt: it should not inherit the old spec's backoff.
		obj.Status.ConsecutiveFailures = 0
	}
	obj.Status.ObservedGeneration = obj.Generation
	var ie *identity.Error
	if errors.As(err, &ie) && ie.Pending {
		// An identity created with its watches signs in within seconds: nothing has failed yet,
		// and its signing in reconciles the watch.
		target.SetCondition(obj, v1alpha1.ConditionReady, metav1.ConditionUnknown, ie.Reason(), ie.Error(), w.now)
		return time.Time{}, nil
	}
	if err != nil {
		r.checkFailed(ctx, w, before, err)
		return time.Time{}, nil
	}
	r.checkSucceeded(w, before)
	f.record(checkCtx, w)
	return time.Time{}, nil
}

// checkDue reports whether the target is read now: when its schedule says so, and also when its
// identity no longer allows the check, or allows it again. Asking the identity costs no request
// to Azure, only reads of the cache, so it is asked at every reconcile: a change to an identity
// shows on the watches that use it at once, not at their next check.
//
// A check before its schedule waits a minute after the last (policy.CheckWait), and takes one of
// its namespace's early checks (target.EarlyChecksPerNamespace); wait says when to look again.
func (r *CredentialWatchReconciler) checkDue(ctx context.Context, w *watchState) (due bool, wait time.Time, err error) {
	obj := w.obj
	s := policy.CheckStateOf(obj, w.scanned)
	s.Gap = r.EarlyCheckGap
	if policy.CheckDue(s, w.now) {
		ask := fmt.Sprintf("%d/%s/%v", obj.Generation, obj.Annotations[v1alpha1.CheckAnnotation], obj.Status.LastCheckTime)
		if policy.EarlyCheck(s, w.now) && !r.early.Allow(target.KeyOf(obj), ask, w.now) {
			ctrl.LoggerFrom(ctx).V(1).Info("Check asked for before its schedule waits: the namespace made its early checks of this minute")
			return false, w.now.Add(time.Minute / target.EarlyChecksPerNamespace), nil
		}
		return true, time.Time{}, nil
	}
	wait = policy.CheckWait(s)
	if w.kind.request(obj) == nil {
		return false, wait, nil
	}
	_, err = r.authorizeCheck(ctx, w)
	var ke *target.KubernetesError
	if errors.As(err, &ke) {
		return false, time.Time{}, ke
	}
	ready := target.Condition(obj, v1alpha1.ConditionReady)
	refused := ready.Status != metav1.ConditionTrue && identityReasons[ready.Reason]
	return refused || (err != nil && target.ReasonFor(err) != ready.Reason), wait, nil
}

// identityReasons are the Ready reasons of a watch whose check was refused before Azure was
// asked: by its identity, or by its namespace's limit of fleets or tenant scans. What it read
// before goes.
var identityReasons = map[string]bool{
	v1alpha1.ReasonNoIdentity: true, v1alpha1.ReasonIdentityNotFound: true, v1alpha1.ReasonIdentityNotReady: true,
	v1alpha1.ReasonIdentityNotAllowed: true, v1alpha1.ReasonIdentityMigrationNeeded: true, v1alpha1.ReasonTooManyFleets: true,
	v1alpha1.ReasonTooManyScans: true,
}

// authorizeCheck finds the watch's identity and asks it for the check's first request: the
// application's credentials, the cluster (whose service principal is asked for once the cluster
// names it), the tenant scan or the fleet's.
func (r *CredentialWatchReconciler) authorizeCheck(ctx context.Context, w *watchState) (access.Grant, error) {
	g, err := r.grantOnce(ctx, w)
	if err != nil {
		return access.Grant{}, err
	}
	return g, g.Allow(*w.kind.request(w.obj))
}

func (r *CredentialWatchReconciler) checkTimeout(k kind) time.Duration {
	if r.CheckTimeout != 0 {
		return r.CheckTimeout
	}
	return k.timeout()
}

// read reads the watch's target as its identity, once that allows the check, or, for a kind
// read without one, as the operator.
func (r *CredentialWatchReconciler) read(ctx context.Context, w *watchState) (found, error) {
	if w.kind.request(w.obj) == nil {
		return w.kind.read(ctx, w, access.Grant{}, azure.Identity{})
	}
	g, err := r.authorizeCheck(ctx, w)
	if err != nil {
		return nil, err
	}
	id, err := r.signIns().Identity(ctx, g.Identity, w.obj.Spec.Target.TenantID())
	if err != nil {
		return nil, err
	}
	return w.kind.read(ctx, w, g, id)
}

// checkFailed schedules the next check with backoff and records the failure
// (target.CheckFailed), dropping what the failure says is gone.
func (r *CredentialWatchReconciler) checkFailed(ctx context.Context, w *watchState, before metav1.Condition, err error) {
	obj := w.obj
	wait := policy.Jitter(policy.RetryAfterFailure(obj.Status.ConsecutiveFailures+1, azerr.RetryAfterOf(err), w.settings.Interval), checkJitter, r.Rand)
	reason := target.CheckFailed(obj, before, r.Recorder, w.kind.checked(), err, w.now.Add(wait), w.now)
	ctrl.LoggerFrom(ctx).Info("Checking "+w.kind.checked()+" failed", "reason", reason, "error", err.Error(), "retryIn", wait.String())
	w.kind.failed(w, reason)
}

// checkSucceeded schedules the next check, and records the success (target.CheckSucceeded).
func (r *CredentialWatchReconciler) checkSucceeded(w *watchState, before metav1.Condition) {
	next := w.now.Add(policy.Jitter(w.settings.Interval, checkJitter, r.Rand))
	target.CheckSucceeded(w.obj, before, r.Recorder, w.kind.checked(), next, w.now)
}

// askerOf is who the watch key is to the read planner: asking again, it is answered once, and
// deleted, it withdraws what it asked.
func askerOf(key client.ObjectKey) string { return key.String() }
