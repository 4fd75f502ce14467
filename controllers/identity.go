package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/azure"
)

// identityError is why a watch has no identity it may use: a person must create, fix or name
// one. reason is the Ready condition's.
type identityError struct {
	reason string
	msg    string
	// pending: the identity has not tried to sign in yet; nothing has failed.
	pending bool
}

func (e *identityError) Error() string { return e.msg }

// Reason is the Ready reason the watch gets.
func (e *identityError) Reason() string { return e.reason }

// identityRefOf is the identity obj names, or the operator's default one; nil when there is none.
func (r *CredentialWatchReconciler) identityRefOf(obj *v1alpha1.CredentialWatch) *v1alpha1.IdentityRef {
	if ref := obj.Spec.IdentityRef; ref != nil {
		out := *ref
		// Any kind but a cluster identity is one of the watch's namespace, as grantOf reads it:
		// mapping an identity's changes to its watches must agree.
		if out.Kind != v1alpha1.KindClusterAzureIdentity {
			out.Kind = v1alpha1.KindAzureIdentity
		}
		return &out
	}
	if r.DefaultIdentity == "" {
		return nil
	}
	return &v1alpha1.IdentityRef{Kind: v1alpha1.KindClusterAzureIdentity, Name: r.DefaultIdentity}
}

// grantOnce is the watch's identity, found at most once a reconcile: the check and the rotation
// ask the same question of the same cache, and would get the same answer.
func (r *CredentialWatchReconciler) grantOnce(ctx context.Context, w *watchState) (access.Grant, error) {
	if !w.granted {
		w.grant, w.grantErr = r.grantOf(ctx, w.obj)
		w.granted = true
	}
	return w.grant, w.grantErr
}

// grantOf finds the identity obj uses, and checks that it is there and signs in. It never falls
// back from a watch's own choice to another identity: a watch that names one it may not use, or
// still names a Secret the old way, gets nothing.
func (r *CredentialWatchReconciler) grantOf(ctx context.Context, obj *v1alpha1.CredentialWatch) (access.Grant, error) {
	if obj.Spec.AzureCredentialRef != nil {
		return access.Grant{}, &identityError{reason: v1alpha1.ReasonIdentityMigrationNeeded, msg: "spec.azureCredentialRef is no longer supported, and this watch is not checked: " +
			"create an AzureIdentity in namespace " + obj.Namespace + " with spec.clientSecret naming Secret " + obj.Spec.AzureCredentialRef.Name +
			" and spec.allow covering the target, set spec.identityRef to it, and remove azureCredentialRef (see the README's upgrade notes)"}
	}
	ref := r.identityRefOf(obj)
	if ref == nil {
		return access.Grant{}, &identityError{reason: v1alpha1.ReasonNoIdentity, msg: "the watch names no identity and the operator has no default one (--default-identity): " +
			"create an AzureIdentity in namespace " + obj.Namespace + " that allows the target, and set spec.identityRef to it"}
	}
	var g access.Grant
	var conds []metav1.Condition
	var generation int64
	var observed int64
	switch ref.Kind {
	case v1alpha1.KindClusterAzureIdentity:
		var id v1alpha1.ClusterAzureIdentity
		if err := r.Get(ctx, types.NamespacedName{Name: ref.Name}, &id); err != nil {
			if obj.Spec.IdentityRef == nil && apierrors.IsNotFound(err) {
				return access.Grant{}, &identityError{reason: v1alpha1.ReasonIdentityNotFound, msg: "the operator's default identity, ClusterAzureIdentity " + ref.Name +
					", does not exist: a cluster admin creates it (the chart's defaultIdentity.tenants), or set spec.identityRef to an identity of this namespace"}
			}
			return access.Grant{}, identityLookupError(err, "ClusterAzureIdentity "+ref.Name)
		}
		g.Identity, conds, generation, observed = access.OfCluster(&id), id.Status.Conditions, id.Generation, id.Status.ObservedGeneration
	default:
		var id v1alpha1.AzureIdentity
		if err := r.Get(ctx, types.NamespacedName{Namespace: obj.Namespace, Name: ref.Name}, &id); err != nil {
			return access.Grant{}, identityLookupError(err, "AzureIdentity "+obj.Namespace+"/"+ref.Name)
		}
		g.Identity, conds, generation, observed = access.Of(&id), id.Status.Conditions, id.Generation, id.Status.ObservedGeneration
	}
	ready := meta.FindStatusCondition(conds, v1alpha1.ConditionReady)
	switch {
	case ready == nil || observed != generation:
		return access.Grant{}, &identityError{reason: v1alpha1.ReasonIdentityNotReady, msg: "Waiting for " + g.Identity.String() + " to sign in", pending: true}
	case ready.Status != metav1.ConditionTrue:
		return access.Grant{}, &identityError{reason: v1alpha1.ReasonIdentityNotReady, msg: fmt.Sprintf("%s does not sign in: %s", g.Identity, ready.Message)}
	}
	g.Namespace.Name = obj.Namespace
	if ref.Kind == v1alpha1.KindClusterAzureIdentity {
		// Labels only matter to a cluster identity's namespaceSelector.
		var ns corev1.Namespace
		if err := r.Get(ctx, types.NamespacedName{Name: obj.Namespace}, &ns); err != nil {
			return access.Grant{}, &kubernetesError{fmt.Errorf("reading namespace %s: %w", obj.Namespace, err)}
		}
		g.Namespace.Labels = ns.Labels
	}
	return g, nil
}

func identityLookupError(err error, what string) error {
	if apierrors.IsNotFound(err) {
		return &identityError{reason: v1alpha1.ReasonIdentityNotFound, msg: what + " does not exist: create it, or name another in spec.identityRef"}
	}
	return &kubernetesError{fmt.Errorf("reading %s: %w", what, err)}
}

// signIns turns identity objects into the identities the Azure clients sign in as, reading the
// Secrets they name. Both the watches and the identities' own controller use it, so that a watch
// signs in exactly as its identity's Ready condition says it can.
type signIns struct {
	// Secrets reads one Secret at a time; not a cache, which would hold every Secret in the cluster.
	Secrets client.Reader
	// OperatorNamespace holds the Secrets and ServiceAccounts of ClusterAzureIdentities.
	OperatorNamespace string
}

// Keys of a kubernetes.io/tls Secret.
const (
	tlsCertKey = corev1.TLSCertKey
	tlsKeyKey  = corev1.TLSPrivateKeyKey
)

// identity is who id signs in to tenantID as.
func (s signIns) identity(ctx context.Context, id access.Identity, tenantID string) (azure.Identity, error) {
	spec := id.Spec
	if spec.Operator != nil {
		// The API server refuses this for an AzureIdentity; refused here too, in case its CRD
		// was applied without the rule: the operator's identity is a cluster admin's to hand out.
		if id.Kind != v1alpha1.KindClusterAzureIdentity {
			return azure.Identity{}, errors.New(id.String() + " cannot sign in as the operator: only a ClusterAzureIdentity may")
		}
		return azure.Operator(tenantID), nil
	}
	ns := id.Namespace
	if ns == "" {
		if s.OperatorNamespace == "" {
			return azure.Identity{}, &secretError{id.String() + " keeps its Secret or ServiceAccount in the operator's namespace, which the operator does not know: run it with --operator-namespace (or POD_NAMESPACE)"}
		}
		ns = s.OperatorNamespace
	}
	switch {
	case spec.WorkloadIdentity != nil:
		w := spec.WorkloadIdentity
		if err := s.serviceAccountConsents(ctx, id, types.NamespacedName{Namespace: ns, Name: w.ServiceAccountRef.Name}, w.ClientID); err != nil {
			return azure.Identity{}, err
		}
		return azure.WorkloadIdentity(tenantID, w.ClientID, ns, w.ServiceAccountRef.Name), nil
	case spec.ClientSecret != nil:
		c := spec.ClientSecret
		data, err := s.secretData(ctx, id, types.NamespacedName{Namespace: ns, Name: c.SecretRef.Name}, c.SecretRef.Key)
		if err != nil {
			return azure.Identity{}, err
		}
		return azure.ClientSecret(tenantID, c.ClientID, string(data[c.SecretRef.Key])), nil
	case spec.ClientCertificate != nil:
		c := spec.ClientCertificate
		data, err := s.secretData(ctx, id, types.NamespacedName{Namespace: ns, Name: c.SecretRef.Name}, tlsCertKey, tlsKeyKey)
		if err != nil {
			return azure.Identity{}, err
		}
		pem := append(append(append([]byte{}, data[tlsCertKey]...), '\n'), data[tlsKeyKey]...)
		return azure.ClientCertificate(tenantID, c.ClientID, pem), nil
	}
	return azure.Identity{}, errors.New(id.String() + " names no way to sign in")
}

// AnnotationWorkloadIdentityClientID is the annotation by which a ServiceAccount names the
// application its tokens sign in as, as Azure Workload Identity's webhook reads it.
const AnnotationWorkloadIdentityClientID = "azure.workload.identity/client-id"

// serviceAccountError: the ServiceAccount a workload identity names is missing, or does not
// consent to sign in as its client.
type serviceAccountError struct{ msg string }

func (e *serviceAccountError) Error() string { return e.msg }

// Reason is ReasonIdentityNotReady: for the watch, its identity cannot sign in.
func (e *serviceAccountError) Reason() string { return v1alpha1.ReasonIdentityNotReady }

// serviceAccountConsents checks that the ServiceAccount names clientID in its workload identity
// annotation. Whoever may create an identity may not mint that ServiceAccount's tokens: its own
// annotation, which only those who may edit it set, is what lets the operator do so for them.
func (s signIns) serviceAccountConsents(ctx context.Context, id access.Identity, key types.NamespacedName, clientID string) error {
	var sa corev1.ServiceAccount
	if err := s.Secrets.Get(ctx, key, &sa); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return &serviceAccountError{fmt.Sprintf("ServiceAccount %s, which %s signs in with, does not exist", key, id)}
		case apierrors.IsForbidden(err):
			return &serviceAccountError{fmt.Sprintf("the operator may not read ServiceAccounts in %s, so %s cannot sign in with workload identity there: "+
				"a cluster admin lists the namespace in the chart's workloadIdentityNamespaces", key.Namespace, id)}
		}
		return &kubernetesError{fmt.Errorf("reading ServiceAccount %s: %w", key, err)}
	}
	if !strings.EqualFold(sa.Annotations[AnnotationWorkloadIdentityClientID], clientID) {
		return &serviceAccountError{fmt.Sprintf("ServiceAccount %s does not consent to sign in as client %s: annotate it %s=%s",
			key, clientID, AnnotationWorkloadIdentityClientID, clientID)}
	}
	return nil
}

// secretData reads the Secret key names, all of which must be there and non-empty.
func (s signIns) secretData(ctx context.Context, id access.Identity, key types.NamespacedName, keys ...string) (map[string][]byte, error) {
	var sec corev1.Secret
	if err := s.Secrets.Get(ctx, key, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &secretError{fmt.Sprintf("Secret %s, which %s signs in with, does not exist", key, id)}
		}
		return nil, &kubernetesError{fmt.Errorf("reading Secret %s: %w", key, err)}
	}
	for _, k := range keys {
		if len(sec.Data[k]) == 0 {
			return nil, &secretError{fmt.Sprintf("Secret %s, which %s signs in with, has no key %s, or it is empty", key, id, k)}
		}
	}
	return sec.Data, nil
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
			ref := r.identityRefOf(w)
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
