package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/identity"
)

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
			ref := r.identities().RefOf(w)
			return ref != nil && ref.Kind == kind && ref.Name == o.GetName()
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

// identities finds the identities of watches, in the cache.
func (r *CredentialWatchReconciler) identities() identity.Finder {
	return identity.Finder{Client: r.Client, Default: r.DefaultIdentity}
}

// signIns reads how the identities of watches sign in, from their Secrets and ServiceAccounts.
func (r *CredentialWatchReconciler) signIns() identity.SignIns {
	return identity.SignIns{Secrets: r.SecretReader, OperatorNamespace: r.OperatorNamespace}
}

// grantOnce is the watch's identity, found at most once a reconcile: the check and the rotation
// ask the same question of the same cache, and would get the same answer.
func (r *CredentialWatchReconciler) grantOnce(ctx context.Context, w *watchState) (access.Grant, error) {
	if !w.granted {
		w.grant, w.grantErr = r.identities().Grant(ctx, w.obj)
		w.granted = true
	}
	return w.grant, w.grantErr
}
