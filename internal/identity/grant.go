// Package identity finds the identity a watch uses among the API server's AzureIdentities and
// ClusterAzureIdentities, and turns it into whom the Azure clients sign in as, reading the
// Secret or ServiceAccount it names. What an identity allows is access's to decide.
package identity

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/target"
)

// Error is why a watch has no identity it may use: a person must create, fix or name one.
type Error struct {
	reason string
	msg    string
	// Pending: the identity has not tried to sign in yet; nothing has failed.
	Pending bool
}

func (e *Error) Error() string { return e.msg }

// Reason is the Ready reason the watch gets.
func (e *Error) Reason() string { return e.reason }

// Finder finds the identity a watch uses, through a cache of identities and namespaces.
type Finder struct {
	Client client.Reader
	// Default names the ClusterAzureIdentity of watches that name none; empty, such watches
	// have none.
	Default string
}

// RefOf is the identity obj names, or the operator's default one; nil when there is none.
func (f Finder) RefOf(obj *v1alpha1.CredentialWatch) *v1alpha1.IdentityRef {
	if ref := obj.Spec.IdentityRef; ref != nil {
		out := kindOf(*ref)
		return &out
	}
	if f.Default == "" {
		return nil
	}
	return &v1alpha1.IdentityRef{Kind: v1alpha1.KindClusterAzureIdentity, Name: f.Default}
}

// RefsOf are the identities obj acts with: the one it names (RefOf), the one its rotation in
// progress started with, and those of its Key Vault sinks. A change to any of them concerns obj.
func (f Finder) RefsOf(obj *v1alpha1.CredentialWatch) []v1alpha1.IdentityRef {
	var refs []v1alpha1.IdentityRef
	if ref := f.RefOf(obj); ref != nil {
		refs = append(refs, *ref)
	}
	if st := obj.Status.Rotation; st != nil && st.Identity != nil {
		refs = append(refs, *st.Identity)
	}
	if spec := obj.Spec.Rotation; spec != nil {
		for _, s := range spec.Publish {
			if kv := s.KeyVault; kv != nil && kv.IdentityRef != nil {
				refs = append(refs, kindOf(*kv.IdentityRef))
			}
		}
	}
	return refs
}

// kindOf is ref with its kind as Grant reads it: any kind but a cluster identity is one of the
// watch's namespace. Mapping an identity's changes to its watches must agree.
func kindOf(ref v1alpha1.IdentityRef) v1alpha1.IdentityRef {
	if ref.Kind != v1alpha1.KindClusterAzureIdentity {
		ref.Kind = v1alpha1.KindAzureIdentity
	}
	return ref
}

// Grant finds the identity obj uses, and checks that it is there and signs in. It never falls
// back from a watch's own choice to another identity: a watch that names one it may not use, or
// still names a Secret the old way, gets nothing.
func (f Finder) Grant(ctx context.Context, obj *v1alpha1.CredentialWatch) (access.Grant, error) {
	if obj.Spec.AzureCredentialRef != nil {
		return access.Grant{}, &Error{reason: v1alpha1.ReasonIdentityMigrationNeeded, msg: "spec.azureCredentialRef is no longer supported, and this watch is not checked: " +
			"create an AzureIdentity in namespace " + obj.Namespace + " with spec.clientSecret naming Secret " + obj.Spec.AzureCredentialRef.Name +
			" and spec.allow covering the target, set spec.identityRef to it, and remove azureCredentialRef (see docs/upgrading.md)"}
	}
	return f.GrantOf(ctx, obj, f.RefOf(obj))
}

// GrantOf finds the identity ref for obj, as Grant does obj's own: a rotation acts with the
// identity it started with, whatever obj names now. A nil ref is no identity at all.
func (f Finder) GrantOf(ctx context.Context, obj *v1alpha1.CredentialWatch, ref *v1alpha1.IdentityRef) (access.Grant, error) {
	if ref == nil {
		return access.Grant{}, &Error{reason: v1alpha1.ReasonNoIdentity, msg: "the watch names no identity and the operator has no default one (--default-identity): " +
			"create an AzureIdentity in namespace " + obj.Namespace + " that allows the target, and set spec.identityRef to it"}
	}
	var g access.Grant
	var conds []metav1.Condition
	var generation int64
	var observed int64
	switch ref.Kind {
	case v1alpha1.KindClusterAzureIdentity:
		var id v1alpha1.ClusterAzureIdentity
		if err := f.Client.Get(ctx, types.NamespacedName{Name: ref.Name}, &id); err != nil {
			if obj.Spec.IdentityRef == nil && ref.Name == f.Default && apierrors.IsNotFound(err) {
				return access.Grant{}, &Error{reason: v1alpha1.ReasonIdentityNotFound, msg: "the operator's default identity, ClusterAzureIdentity " + ref.Name +
					", does not exist: a cluster admin creates it (the chart's defaultIdentity.tenants), or set spec.identityRef to an identity of this namespace"}
			}
			return access.Grant{}, identityLookupError(err, "ClusterAzureIdentity "+ref.Name)
		}
		g.Identity, conds, generation, observed = access.OfCluster(&id), id.Status.Conditions, id.Generation, id.Status.ObservedGeneration
	default:
		var id v1alpha1.AzureIdentity
		if err := f.Client.Get(ctx, types.NamespacedName{Namespace: obj.Namespace, Name: ref.Name}, &id); err != nil {
			return access.Grant{}, identityLookupError(err, "AzureIdentity "+obj.Namespace+"/"+ref.Name)
		}
		g.Identity, conds, generation, observed = access.Of(&id), id.Status.Conditions, id.Generation, id.Status.ObservedGeneration
	}
	ready := meta.FindStatusCondition(conds, v1alpha1.ConditionReady)
	switch {
	case ready == nil || observed != generation:
		return access.Grant{}, &Error{reason: v1alpha1.ReasonIdentityNotReady, msg: "Waiting for " + g.Identity.String() + " to sign in", Pending: true}
	case ready.Status != metav1.ConditionTrue:
		return access.Grant{}, &Error{reason: v1alpha1.ReasonIdentityNotReady, msg: fmt.Sprintf("%s does not sign in: %s", g.Identity, ready.Message)}
	}
	g.Namespace.Name = obj.Namespace
	if ref.Kind == v1alpha1.KindClusterAzureIdentity {
		// Labels only matter to a cluster identity's namespaceSelector.
		var ns corev1.Namespace
		if err := f.Client.Get(ctx, types.NamespacedName{Name: obj.Namespace}, &ns); err != nil {
			return access.Grant{}, &target.KubernetesError{Err: fmt.Errorf("reading namespace %s: %w", obj.Namespace, err)}
		}
		g.Namespace.Labels = ns.Labels
	}
	return g, nil
}

func identityLookupError(err error, what string) error {
	if apierrors.IsNotFound(err) {
		return &Error{reason: v1alpha1.ReasonIdentityNotFound, msg: what + " does not exist: create it, or name another in spec.identityRef"}
	}
	return &target.KubernetesError{Err: fmt.Errorf("reading %s: %w", what, err)}
}
