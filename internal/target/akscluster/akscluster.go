// Package akscluster is the aksCluster kind of target: an AKS cluster read from Resource
// Manager, and the service principal it signs in with, read and recorded as the
// servicePrincipal kind reads one. A cluster on a managed identity has no secret to expire.
package akscluster

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/serviceprincipal"
)

// Azure is Resource Manager and Graph, as a watch's identity sees them.
type Azure interface {
	serviceprincipal.Azure
	// Cluster is the managed cluster c.
	Cluster(id azure.Identity, c aks.ClusterRef) (aks.ClusterClient, error)
}

// Kind reads and records AKS clusters, one reconcile at a time.
type Kind struct {
	Azure  Azure
	Events target.Events
	// Held keeps the clusters that checks waiting for Graph read; nil keeps none. HeldFor bounds
	// how long one is kept for the check that made it to be woken: longer than such a check waits
	// to come back on its own, or a watch woken late reads its cluster again.
	Held    *Held
	HeldFor time.Duration
	// MailsOwners reports whether the watch's alerts mail the application's owners, read with
	// the identity.
	MailsOwners func(*v1alpha1.CredentialWatch, access.Identity) bool
	// OwnerDomains are the domains owners' mail may go to; empty, the tenant's verified domains.
	OwnerDomains []string
	// SignInsUnavailable, Reports, Added, Own and Seen are the service principal's
	// (serviceprincipal.Kind).
	SignInsUnavailable string
	Reports            *serviceprincipal.Reports
	Added              func(tenantID string, n int)
	Own                serviceprincipal.OwnSecrets
	Seen               *serviceprincipal.Seen
}

// Found is what a check found: the cluster, once read, and its service principal's credentials,
// unless it signs in with a managed identity.
type Found struct {
	Cluster *aks.Cluster
	SP      serviceprincipal.Found
	Managed bool
}

const eventServicePrincipalChanged = "ServicePrincipalChanged"

// Ref names the cluster of an aksCluster target.
func Ref(t *v1alpha1.AKSClusterTarget) aks.ClusterRef {
	return aks.ClusterRef{SubscriptionID: t.SubscriptionID, ResourceGroup: t.ResourceGroup, Name: t.Name}
}

// Where is where ref is, as access sees it.
func Where(ref aks.ClusterRef) *access.Cluster {
	return &access.Cluster{SubscriptionID: ref.SubscriptionID, ResourceGroup: ref.ResourceGroup}
}

func (k Kind) sp() serviceprincipal.Kind {
	return serviceprincipal.Kind{Azure: k.Azure, Events: k.Events, MailsOwners: k.MailsOwners, OwnerDomains: k.OwnerDomains,
		SignInsUnavailable: k.SignInsUnavailable, Reports: k.Reports, Added: k.Added, Own: k.Own, Seen: k.Seen}
}

// Read reads the watch's cluster as id, which g allows to, then the credentials of the service
// principal it signs in with, once g allows that second request too. A cluster a pending check
// of the same watch read, as the same identity, not long ago, is not read again.
func (k Kind) Read(ctx context.Context, watch types.NamespacedName, g access.Grant, id azure.Identity, tenant string, ref aks.ClusterRef, ask graph.Ask, now time.Time) (Found, error) {
	c, ok := k.Held.take(watch, ref, id, now.Add(-k.HeldFor))
	if !ok {
		var err error
		if c, err = k.read(ctx, id, ref); err != nil {
			return Found{}, err
		}
	}
	f := Found{Cluster: &c}
	if c.ClientID == "" {
		f.Managed = true
		return f, nil
	}
	if err := g.Allow(access.Request{Operation: v1alpha1.OperationWatch, TenantID: tenant, AppID: c.ClientID}); err != nil {
		return f, err
	}
	var err error
	f.SP, err = k.sp().Read(ctx, g, id, tenant, c.ClientID, ask)
	return f, err
}

func (k Kind) read(ctx context.Context, id azure.Identity, ref aks.ClusterRef) (aks.Cluster, error) {
	c, err := k.Azure.Cluster(id, ref)
	if err != nil {
		return aks.Cluster{}, err
	}
	cl, err := c.Read(ctx)
	if err != nil {
		return aks.Cluster{}, &target.ClusterError{Err: err}
	}
	return cl, nil
}

// Hold keeps the cluster a check told to wait for Graph read, for the reconcile its answer wakes.
func (k Kind) Hold(watch types.NamespacedName, f Found, ref aks.ClusterRef, id azure.Identity, now time.Time) {
	if f.Cluster != nil {
		k.Held.put(watch, held{cluster: *f.Cluster, ref: ref, id: id.String(), at: now})
	}
}

// Note records what Resource Manager said of the cluster, also when the check then failed, and
// tells when the identity it signs in with changed: the credentials watched from now on are
// another service principal's.
func (k Kind) Note(obj *v1alpha1.CredentialWatch, f Found) {
	c := f.Cluster
	if c == nil {
		return
	}
	now := &v1alpha1.AKSClusterStatus{Identity: v1alpha1.IdentityServicePrincipal, ClientID: c.ClientID,
		ProvisioningState: c.ProvisioningState, PowerState: c.PowerState}
	if c.ClientID == "" {
		now.Identity = v1alpha1.IdentityManagedIdentity
	}
	if prev := obj.Status.AKSCluster; prev != nil && (prev.ClientID != now.ClientID || prev.Identity != now.Identity) {
		k.Events.Eventf(obj, corev1.EventTypeNormal, eventServicePrincipalChanged, "The AKS cluster now signs in with %s (it was %s)",
			identityOf(now), identityOf(prev))
	}
	obj.Status.AKSCluster = now
}

func identityOf(s *v1alpha1.AKSClusterStatus) string {
	if s.Identity == v1alpha1.IdentityManagedIdentity {
		return "a managed identity"
	}
	return "service principal " + s.ClientID
}

// Record puts what a successful check found into status.
func (k Kind) Record(ctx context.Context, obj *v1alpha1.CredentialWatch, f Found, now time.Time) {
	if !f.Managed {
		k.sp().Record(ctx, obj, f.SP, now)
		return
	}
	obj.Status.TenantScan, obj.Status.Fleet = nil, nil // a watch that scanned a tenant or a fleet before its spec changed
	obj.Status.ServicePrincipal, obj.Status.Credentials = nil, nil
	target.SetCondition(obj, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonManagedIdentity,
		"The AKS cluster signs in with a managed identity: it has no secret to expire", now)
}

// Held keeps, by watch, the cluster a check told to wait for Graph read, so that the planned
// check reads the cluster once. It is safe for concurrent use; a nil Held keeps nothing.
type Held struct{ m sync.Map }

type held struct {
	cluster aks.Cluster
	ref     aks.ClusterRef
	id      string
	at      time.Time
}

func (h *Held) put(watch types.NamespacedName, c held) {
	if h != nil {
		h.m.Store(watch, c)
	}
}

// take is the cluster held for the watch, when it is the same cluster read by the same identity
// after since; what was held goes either way.
func (h *Held) take(watch types.NamespacedName, ref aks.ClusterRef, id azure.Identity, since time.Time) (aks.Cluster, bool) {
	if h == nil {
		return aks.Cluster{}, false
	}
	v, ok := h.m.LoadAndDelete(watch)
	if !ok {
		return aks.Cluster{}, false
	}
	c := v.(held)
	if c.ref != ref || c.id != id.String() || !c.at.After(since) {
		return aks.Cluster{}, false
	}
	return c.cluster, true
}

// Forget drops what is held for a deleted watch.
func (h *Held) Forget(watch types.NamespacedName) {
	if h != nil {
		h.m.Delete(watch)
	}
}
