package identity

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/target"
)

// SignIns turns identity objects into the identities the Azure clients sign in as, reading the
// Secrets they name. Both the watches and the identities' own controller use it, so that a watch
// signs in exactly as its identity's Ready condition says it can.
type SignIns struct {
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

// Identity is who id signs in to tenantID as.
func (s SignIns) Identity(ctx context.Context, id access.Identity, tenantID string) (azure.Identity, error) {
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
			return azure.Identity{}, &SecretError{id.String() + " keeps its Secret or ServiceAccount in the operator's namespace, which the operator does not know: run it with --operator-namespace (or POD_NAMESPACE)"}
		}
		ns = s.OperatorNamespace
	}
	switch {
	case spec.WorkloadIdentity != nil:
		w := spec.WorkloadIdentity
		if err := s.serviceAccountConsents(ctx, id, types.NamespacedName{Namespace: ns, Name: w.ServiceAccountRef.Name}); err != nil {
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

// legacyConsent is the annotation by which a ServiceAccount consented before
// v1alpha1.IdentityConsentAnnotation: Azure Workload Identity's webhook reads it, so every
// workload-identity ServiceAccount carries it, and it says nothing of who may borrow it.
const legacyConsent = "azure.workload.identity/client-id"

// ServiceAccountError is the ServiceAccount a workload identity names being missing, or not
// consenting to sign in as its client.
type ServiceAccountError struct{ msg string }

func (e *ServiceAccountError) Error() string { return e.msg }

// Reason is ReasonIdentityNotReady: for the watch, its identity cannot sign in.
func (e *ServiceAccountError) Reason() string { return v1alpha1.ReasonIdentityNotReady }

// serviceAccountConsents checks that the ServiceAccount names the identity id in its consent
// annotation (v1alpha1.IdentityConsentAnnotation). Whoever may create an identity may not mint
// that ServiceAccount's tokens: its own annotation, which only those who may edit it set, is
// what lets the operator do so for them, and it names the identity, not only the client, which
// any identity of the namespace could name.
func (s SignIns) serviceAccountConsents(ctx context.Context, id access.Identity, key types.NamespacedName) error {
	var sa corev1.ServiceAccount
	if err := s.Secrets.Get(ctx, key, &sa); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return &ServiceAccountError{fmt.Sprintf("ServiceAccount %s, which %s signs in with, does not exist", key, id)}
		case apierrors.IsForbidden(err):
			return &ServiceAccountError{fmt.Sprintf("the operator may not read ServiceAccounts in %s, so %s cannot sign in with workload identity there: "+
				"a cluster admin lists the namespace in the chart's workloadIdentityNamespaces", key.Namespace, id)}
		}
		return &target.KubernetesError{Err: fmt.Errorf("reading ServiceAccount %s: %w", key, err)}
	}
	want := ConsentName(id)
	for _, named := range strings.Split(sa.Annotations[v1alpha1.IdentityConsentAnnotation], ",") {
		if strings.TrimSpace(named) == want {
			return nil
		}
	}
	msg := fmt.Sprintf("ServiceAccount %s does not consent to sign in for %s: annotate it %s=%s", key, id, v1alpha1.IdentityConsentAnnotation, want)
	if _, ok := sa.Annotations[legacyConsent]; ok {
		msg += fmt.Sprintf(" (%s no longer consents: every workload-identity ServiceAccount carries it; docs/upgrading.md)", legacyConsent)
	}
	return &ServiceAccountError{msg}
}

// ConsentName is how a ServiceAccount's consent annotation names the identity id.
func ConsentName(id access.Identity) string {
	if id.Namespace != "" {
		return id.Namespace + "/" + id.Name
	}
	return id.Name
}

// secretData reads the Secret key names, all of which must be there and non-empty.
func (s SignIns) secretData(ctx context.Context, id access.Identity, key types.NamespacedName, keys ...string) (map[string][]byte, error) {
	var sec corev1.Secret
	if err := s.Secrets.Get(ctx, key, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &SecretError{fmt.Sprintf("Secret %s, which %s signs in with, does not exist", key, id)}
		}
		return nil, &target.KubernetesError{Err: fmt.Errorf("reading Secret %s: %w", key, err)}
	}
	for _, k := range keys {
		if len(sec.Data[k]) == 0 {
			return nil, &SecretError{fmt.Sprintf("Secret %s, which %s signs in with, has no key %s, or it is empty", key, id, k)}
		}
	}
	return sec.Data, nil
}

// SecretError is a problem with the Secret an identity signs in with: a person must fix it.
type SecretError struct{ msg string }

func (e *SecretError) Error() string { return e.msg }

// Reason is ReasonCredentialSecretInvalid.
func (e *SecretError) Reason() string { return v1alpha1.ReasonCredentialSecretInvalid }

// SignInReason is the Ready reason of an identity that failed to sign in. It differs from a
// watch's reason for the same failure where the identity's reader must act otherwise: a
// ServiceAccount that does not consent is the identity's token failing, for a watch its identity
// not being ready.
func SignInReason(err error) string {
	var se *SecretError
	var te *azure.TokenError
	var sae *ServiceAccountError
	switch {
	case errors.As(err, &sae):
		return v1alpha1.ReasonServiceAccountTokenFailed
	case errors.As(err, &se):
		return v1alpha1.ReasonCredentialSecretInvalid
	case errors.As(err, &te):
		return v1alpha1.ReasonServiceAccountTokenFailed
	case azerr.KindOf(err) == azerr.KindUnavailable:
		return v1alpha1.ReasonSignInUnavailable
	}
	return v1alpha1.ReasonAuthenticationFailed
}
