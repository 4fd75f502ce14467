package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/identity"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/statuspatch"
	"github.com/credwatch/credwatch/internal/target"
)

// SignIn signs in to Entra ID with a fresh credential: whether it accepts an identity now.
type SignIn interface {
	SignIn(ctx context.Context, id azure.Identity) error
}

// signInInterval is how often an identity proves it still signs in: often enough that a secret
// that expired or a federation that was removed shows before the watches' next checks, rarely
// enough to cost Entra ID nothing.
const signInInterval = time.Hour

// signInTimeout bounds one identity's sign-ins.
const signInTimeout = time.Minute

// Event reasons of an identity.
const (
	eventSignInFailed    = "SignInFailed"
	eventSignInRecovered = "SignInRecovered"
)

// IdentityReconciler signs in as AzureIdentities and ClusterAzureIdentities and reports in their
// Ready condition whether they can. It holds no rules about what they may be used for: access
// decides that, for each request of each watch.
type IdentityReconciler struct {
	client.Client
	// Secrets reads the Secrets identities sign in with, one at a time.
	Secrets           client.Reader
	OperatorNamespace string
	Recorder          record.EventRecorder
	Clock             clock.PassiveClock
	Azure             SignIn
	// Cluster selects ClusterAzureIdentities rather than AzureIdentities.
	Cluster bool
}

// +kubebuilder:rbac:groups=credwatch.dev,resources=azureidentities;clusterazureidentities,verbs=get;list;watch
// +kubebuilder:rbac:groups=credwatch.dev,resources=azureidentities/status;clusterazureidentities/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// fetch reads the identity named by key, of the reconciler's kind.
func (r *IdentityReconciler) fetch(ctx context.Context, key client.ObjectKey) (client.Object, access.Identity, *v1alpha1.IdentityStatus, error) {
	if r.Cluster {
		obj := &v1alpha1.ClusterAzureIdentity{}
		err := r.Get(ctx, key, obj)
		return obj, access.OfCluster(obj), &obj.Status, err
	}
	obj := &v1alpha1.AzureIdentity{}
	err := r.Get(ctx, key, obj)
	return obj, access.Of(obj), &obj.Status, err
}

// Reconcile signs in as the identity when its spec changed or its next sign-in is due, and
// records how it went.
func (r *IdentityReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj, id, st, err := r.fetch(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := st.DeepCopy()
	now := r.Clock.Now()
	if st.ObservedGeneration == obj.GetGeneration() && st.NextSignInTime != nil && now.Before(st.NextSignInTime.Time) {
		return ctrl.Result{RequeueAfter: st.NextSignInTime.Sub(now)}, nil
	}
	if st.ObservedGeneration != obj.GetGeneration() {
		st.ConsecutiveFailures = 0
	}
	st.ObservedGeneration, st.SignIn = obj.GetGeneration(), id.Spec.SignInMethod()
	prev := identityCondition(st)

	signInCtx, cancel := context.WithTimeout(ctx, signInTimeout)
	err = r.signIn(signInCtx, id)
	cancel()
	if ctx.Err() != nil {
		return ctrl.Result{}, ctx.Err()
	}
	var ke *target.KubernetesError
	if errors.As(err, &ke) {
		return ctrl.Result{}, ke
	}
	var wait time.Duration
	if err != nil {
		st.ConsecutiveFailures++
		wait = policy.RetryAfterFailure(st.ConsecutiveFailures, azerr.RetryAfterOf(err), signInInterval)
		reason := identity.SignInReason(err)
		msg := fmt.Sprintf("%v; signing in again at %s", err, now.Add(wait).UTC().Format(time.RFC3339))
		setIdentityCondition(st, obj.GetGeneration(), metav1.ConditionFalse, reason, msg, now)
		if prev.Status != metav1.ConditionFalse || prev.Reason != reason {
			r.Recorder.Eventf(obj, corev1.EventTypeWarning, eventSignInFailed, "Signing in as %s failed: %v", id, err)
		}
	} else {
		st.ConsecutiveFailures = 0
		wait = signInInterval
		last := metav1.NewTime(now)
		st.LastSignInTime = &last
		setIdentityCondition(st, obj.GetGeneration(), metav1.ConditionTrue, v1alpha1.ReasonSignedIn, "Entra ID issued a token to "+id.String(), now)
		if prev.Status == metav1.ConditionFalse {
			r.Recorder.Eventf(obj, corev1.EventTypeNormal, eventSignInRecovered, "Signing in as %s works again", id)
		}
	}
	next := metav1.NewTime(now.Add(wait))
	st.NextSignInTime = &next
	if err := statuspatch.Patch(ctx, r.Status(), v1alpha1.GroupVersion.WithKind(id.Kind), req.NamespacedName, before, st); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: wait}, nil
}

// signIn signs in as id to every tenant it signs in to: its home tenant, or each tenant an
// identity signing in as the operator allows.
func (r *IdentityReconciler) signIn(ctx context.Context, id access.Identity) error {
	tenants := []string{id.Spec.HomeTenant()}
	if id.Spec.Operator != nil {
		tenants = id.Spec.Allow.Tenants
	}
	s := identity.SignIns{Secrets: r.Secrets, OperatorNamespace: r.OperatorNamespace}
	for _, tenant := range tenants {
		az, err := s.Identity(ctx, id, tenant)
		if err != nil {
			return err
		}
		if err := r.Azure.SignIn(ctx, az); err != nil {
			return fmt.Errorf("signing in to tenant %s: %w", tenant, err)
		}
	}
	return nil
}

func identityCondition(st *v1alpha1.IdentityStatus) metav1.Condition {
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func setIdentityCondition(st *v1alpha1.IdentityStatus, generation int64, status metav1.ConditionStatus, reason, message string, now time.Time) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: status, Reason: reason,
		Message: message, ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)})
}

// SetupWithManager registers the reconciler for its kind. Status updates are its own, and are
// filtered out; it schedules its next sign-in itself.
func (r *IdentityReconciler) SetupWithManager(mgr ctrl.Manager) error {
	name, obj := "azureidentity", client.Object(&v1alpha1.AzureIdentity{})
	if r.Cluster {
		name, obj = "clusterazureidentity", &v1alpha1.ClusterAzureIdentity{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(obj, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named(name).
		Complete(r)
}
