package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/identity"
	"github.com/credwatch/credwatch/internal/statuspatch"
	"github.com/credwatch/credwatch/internal/target"
)

// SignIn signs in to Entra ID with a fresh credential: whether it accepts an identity now.
type SignIn interface {
	SignIn(ctx context.Context, id azure.Identity) error
}

// signInTimeout bounds one identity's sign-ins.
const signInTimeout = time.Minute

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
	wait := identity.SignedIn(obj, st, id, obj.GetGeneration(), err, r.Recorder, now)
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
