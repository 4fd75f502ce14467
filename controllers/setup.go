package controllers

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/pullauth"
)

// SetupWithManager registers the reconciler. Status-only updates are filtered out: the
// reconciler wrote them and schedules its own return.
func (r *CredentialWatchReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		// Annotations too: the rotate annotation asks for a rotation now.
		For(&v1alpha1.CredentialWatch{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		// Several at once, so that a watch waiting on a slow Graph or SMTP relay delays no other.
		// A watch asks its identity, and its namespace's labels, at every reconcile.
		Watches(&v1alpha1.AzureIdentity{}, handler.EnqueueRequestsFromMapFunc(r.watchesOfIdentity(mgr.GetClient(), v1alpha1.KindAzureIdentity)), builder.WithPredicates(identityChanged)).
		Watches(&v1alpha1.ClusterAzureIdentity{}, handler.EnqueueRequestsFromMapFunc(r.watchesOfIdentity(mgr.GetClient(), v1alpha1.KindClusterAzureIdentity)), builder.WithPredicates(identityChanged)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(watchesOfNamespace(mgr.GetClient())), builder.WithPredicates(labelsChanged)).
		// A fleet's watch deleted by hand is created again at once, not at the fleet's next check.
		Watches(&v1alpha1.CredentialWatch{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &v1alpha1.CredentialWatch{}, handler.OnlyControllerOwner()),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc: func(event.CreateEvent) bool { return false }, UpdateFunc: func(event.UpdateEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false }})).
		WithOptions(controller.Options{MaxConcurrentReconciles: maxConcurrentReconciles}).
		Named("credentialwatch")
	// Planned reads wake their watches through the queue itself: a channel could fill, and
	// block the planner on the controller.
	b = b.WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		r.queue.Store(&wakeQueue{q})
		return nil
	}))
	if r.PullsChanged != nil {
		b = b.WatchesRawSource(source.Channel(r.PullsChanged, handler.TypedEnqueueRequestsFromMapFunc(watchesOfRegistry(mgr.GetClient()))))
	}
	return b.Complete(r)
}

// watchesOfIdentity maps an identity to the watches that use it: a watch asks its identity at
// every reconcile, so that a narrowed identity stops what it no longer allows at once, and one
// that signs in again lets its watches check. It filters the cached watches rather than keep an
// index of them: an index costs every watch two set entries for the life of the process (7.7 MiB
// at 100,000), and identityChanged lets through only the rare changes that concern watches. The
// listing copies each watch's struct (about 650 bytes) for the moment it is filtered, as it did
// with the index for an identity that every watch uses, the default one.
func (r *CredentialWatchReconciler) watchesOfIdentity(c client.Reader, kind string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var opts []client.ListOption
		if kind == v1alpha1.KindAzureIdentity {
			opts = append(opts, client.InNamespace(o.GetNamespace()))
		}
		return requestsOf(ctx, c, "Listing the watches an identity's change concerns", func(w *v1alpha1.CredentialWatch) bool {
			return slices.ContainsFunc(r.identities().RefsOf(w), func(ref v1alpha1.IdentityRef) bool { return ref.Kind == kind && ref.Name == o.GetName() })
		}, opts...)
	}
}

// watchesOfNamespace maps a namespace to its watches: its labels decide which cluster identities
// admit them.
func watchesOfNamespace(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		return requestsOf(ctx, c, "Listing the watches a namespace's labels concern", func(*v1alpha1.CredentialWatch) bool { return true }, client.InNamespace(o.GetName()))
	}
}

// requestsOf requests the cached watches that keep lets through, of those opts list; listing is
// logged, should it fail.
func requestsOf(ctx context.Context, c client.Reader, listing string, keep func(*v1alpha1.CredentialWatch) bool, opts ...client.ListOption) []reconcile.Request {
	var list v1alpha1.CredentialWatchList
	if err := c.List(ctx, &list, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		// Only before the cache syncs; the watches' own reconciles catch up after.
		ctrl.LoggerFrom(ctx).Error(err, listing)
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if w := &list.Items[i]; keep(w) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
		}
	}
	return out
}

// identityChanged lets through the changes to an identity that can change what its watches may
// do: its spec, and whether it signs in. Its hourly sign-ins that change nothing else do not
// reconcile every watch that uses it. Identities listed when the operator starts are let
// through neither: every watch is queued by its own listing then, and mapping each identity to
// its watches would hold a copy of every watch's struct at the moment the cache is fullest.
var identityChanged = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return !e.IsInInitialList },
	UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() {
			return true
		}
		return readyOf(e.ObjectOld) != readyOf(e.ObjectNew)
	},
}

// readyOf is an identity's Ready status, reason and generation observed.
func readyOf(o client.Object) string {
	var conds []metav1.Condition
	switch id := o.(type) {
	case *v1alpha1.AzureIdentity:
		conds = id.Status.Conditions
	case *v1alpha1.ClusterAzureIdentity:
		conds = id.Status.Conditions
	}
	c := meta.FindStatusCondition(conds, v1alpha1.ConditionReady)
	if c == nil {
		return ""
	}
	return fmt.Sprintf("%s/%s/%d", c.Status, c.Reason, c.ObservedGeneration)
}

// labelsChanged lets through namespace changes that can change which cluster identities admit it.
var labelsChanged = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	DeleteFunc: func(event.DeleteEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !equality.Semantic.DeepEqual(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
	},
}

// watchesOfRegistry maps a registry whose incident changed to the watches whose spec.imagePulls
// covers it.
func watchesOfRegistry(c client.Reader) func(ctx context.Context, registry string) []reconcile.Request {
	return func(ctx context.Context, registry string) []reconcile.Request {
		ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("registry", registry))
		return requestsOf(ctx, c, "Listing the watches of a registry whose image pulls changed", func(w *v1alpha1.CredentialWatch) bool {
			// A registry that turned into a pods' registry may concern any watch that covers them.
			p := w.Spec.ImagePulls
			return p != nil && (p.CoversPodRegistries() || pullauth.Matches(p.Registries, registry))
		})
	}
}
