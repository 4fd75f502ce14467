package controllers

import (
	"context"
	"errors"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/akscluster"
	"github.com/credwatch/credwatch/internal/target/issuer"
	"github.com/credwatch/credwatch/internal/target/serviceprincipal"
	"github.com/credwatch/credwatch/internal/target/tenantscan"
)

// The service-account issuer's checks: a canary token minted, and reviewed by each API server.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups="",namespace=credwatch-system,resources=serviceaccounts/token,verbs=create,resourceNames=credwatch-canary
// +kubebuilder:rbac:groups=discovery.k8s.io,namespace=default,resources=endpointslices,verbs=list
// +kubebuilder:rbac:urls=/.well-known/openid-configuration;/openid/v1/jwks,verbs=get

// kind is one kind of target on this reconciler's edges. Reconcile picks it once, by kindOf, and
// the steps ask it what the kind does at each; the kind's own package (internal/target/<kind>)
// reads, decides and words.
type kind interface {
	// request is what a check asks the watch's identity first; nil for a kind read without one.
	request(obj *v1alpha1.CredentialWatch) *access.Request
	// timeout bounds one check.
	timeout() time.Duration
	// read reads the target as id, which g allows to.
	read(ctx context.Context, w *watchState, g access.Grant, id azure.Identity) (found, error)
	// failed drops what the kind keeps of a watch whose check failed with reason.
	failed(w *watchState, reason string)
	// evaluate holds what the last check found to the clock, and returns when that next changes.
	evaluate(ctx context.Context, w *watchState) (time.Time, error)
	// follow does what the kind does after: a tenant scan's owner digests, a fleet's watches.
	follow(ctx context.Context, w *watchState) (time.Time, error)
	alert(ctx context.Context, w *watchState) (time.Time, error)
	// specChanged forgets what the watch's status holds of a kind it is no longer.
	specChanged(obj *v1alpha1.CredentialWatch)
	checked() string
}

// found is what a check of one kind found.
type found interface {
	// hold keeps what a check told to wait for Graph read, for the reconcile its answer wakes.
	hold(w *watchState)
	// note puts into status what the check learnt, also when it then failed.
	note(w *watchState)
	// record puts what a successful check found into status.
	record(ctx context.Context, w *watchState)
}

// kindOf is the kind of the watch's target: the one place the kind is decided.
func (r *CredentialWatchReconciler) kindOf(t v1alpha1.Target) kind {
	base := kindBase{r}
	switch {
	case t.ServicePrincipal != nil:
		return spKind{base}
	case t.AKSCluster != nil:
		return clusterKind{spKind{base}}
	case t.TenantScan != nil:
		return scanKind{base}
	case t.AKSFleet != nil:
		return fleetKind{base}
	case t.ServiceAccountIssuer != nil:
		return issuerKind{base}
	}
	return unknownKind{base}
}

// kindBase is what a kind does where it has nothing of its own to do.
type kindBase struct{ r *CredentialWatchReconciler }

func (kindBase) failed(*watchState, string) {}

func (kindBase) timeout() time.Duration { return defaultCheckTimeout }

// follow forgets the owner digests of a watch that is no tenant scan: one, once.
func (b kindBase) follow(_ context.Context, w *watchState) (time.Time, error) {
	b.r.forgetDigests(w)
	return time.Time{}, nil
}

func (b kindBase) alert(ctx context.Context, w *watchState) (time.Time, error) {
	return b.r.reconcileAlerts(ctx, w)
}

func (kindBase) specChanged(obj *v1alpha1.CredentialWatch) { obj.Status.Fleet = nil }

// checked names what a check reads, for its events and logs.
func (kindBase) checked() string { return "credentials" }

// watchRequest is a check's first request for a kind that asks its identity.
func watchRequest(obj *v1alpha1.CredentialWatch, op v1alpha1.Operation) *access.Request {
	return &access.Request{Operation: op, TenantID: obj.Spec.Target.TenantID()}
}

type spKind struct{ kindBase }

func (spKind) request(obj *v1alpha1.CredentialWatch) *access.Request {
	req := watchRequest(obj, v1alpha1.OperationWatch)
	req.AppID = obj.Spec.Target.ServicePrincipal.ClientID
	return req
}

func (k spKind) read(ctx context.Context, w *watchState, g access.Grant, id azure.Identity) (found, error) {
	t := w.obj.Spec.Target
	f, err := k.r.servicePrincipals().Read(ctx, g, id, t.TenantID(), t.ServicePrincipal.ClientID, serviceprincipal.WithKnown(k.r.ask(w), w.obj))
	return recordFunc(func(ctx context.Context, w *watchState) { k.r.servicePrincipals().Record(ctx, w.obj, f, w.now) }), err
}

func (k spKind) evaluate(_ context.Context, w *watchState) (time.Time, error) {
	return serviceprincipal.Evaluate(w.obj, w.stored, k.r.Recorder, w.settings, w.now), nil
}

// clusterKind is evaluated as its service principal is.
type clusterKind struct{ spKind }

func (clusterKind) request(obj *v1alpha1.CredentialWatch) *access.Request {
	req := watchRequest(obj, v1alpha1.OperationWatch)
	req.Cluster = akscluster.Where(akscluster.Ref(obj.Spec.Target.AKSCluster))
	return req
}

func (k clusterKind) read(ctx context.Context, w *watchState, g access.Grant, id azure.Identity) (found, error) {
	t := w.obj.Spec.Target
	ref := akscluster.Ref(t.AKSCluster)
	f, err := k.r.clusters().Read(ctx, target.KeyOf(w.obj), g, id, t.TenantID(), ref, k.r.ask(w), w.now)
	return clusterFound{k.r, f, id}, err
}

type clusterFound struct {
	r  *CredentialWatchReconciler
	f  akscluster.Found
	id azure.Identity
}

func (c clusterFound) hold(w *watchState) {
	c.r.clusters().Hold(target.KeyOf(w.obj), c.f, akscluster.Ref(w.obj.Spec.Target.AKSCluster), c.id, w.now)
}
func (c clusterFound) note(w *watchState) { c.r.clusters().Note(w.obj, c.f) }
func (c clusterFound) record(ctx context.Context, w *watchState) {
	c.r.clusters().Record(ctx, w.obj, c.f, w.now)
}

// servicePrincipals and clusters are those kinds on this reconciler's edges.
func (r *CredentialWatchReconciler) servicePrincipals() serviceprincipal.Kind {
	return serviceprincipal.Kind{Azure: r.Azure, Events: r.Recorder, MailsOwners: r.Channels.NotifiesOwners, OwnerDomains: r.OwnerDomains,
		SignInsUnavailable: r.SignInsUnavailable, Reports: &r.reports, Added: r.CredentialsAdded, Own: r.Paces, Seen: &r.seen}
}

func (r *CredentialWatchReconciler) clusters() akscluster.Kind {
	return akscluster.Kind{Azure: r.Azure, Events: r.Recorder, Held: &r.heldClusters, HeldFor: heldClusterTTL, MailsOwners: r.Channels.NotifiesOwners,
		OwnerDomains: r.OwnerDomains, SignInsUnavailable: r.SignInsUnavailable, Reports: &r.reports, Added: r.CredentialsAdded, Own: r.Paces, Seen: &r.seen}
}

// ask is how the read planner knows the watch, and wakes it once its answer is in.
func (r *CredentialWatchReconciler) ask(w *watchState) graph.Ask {
	return graph.Ask{Asker: askerOf(target.KeyOf(w.obj)), Wake: r.wakeup(target.KeyOf(w.obj))}
}

type issuerKind struct{ kindBase }

func (issuerKind) request(*v1alpha1.CredentialWatch) *access.Request { return nil }

func (k issuerKind) read(ctx context.Context, w *watchState, _ access.Grant, _ azure.Identity) (found, error) {
	if k.r.Issuer == nil {
		return nil, issuer.ErrNotChecked
	}
	obs, err := k.r.Issuer.Probe(ctx, w.obj.Spec.Target.ServiceAccountIssuer.Endpoints)
	return recordFunc(func(_ context.Context, w *watchState) { issuer.Record(w.obj, obs, k.r.Recorder, w.now) }), err
}

func (issuerKind) checked() string { return issuer.Checked }

// evaluate does nothing: an issuer has keys, not credentials that expire.
func (issuerKind) evaluate(context.Context, *watchState) (time.Time, error) { return time.Time{}, nil }

// recordFunc is what a check of a kind that holds and notes nothing found.
type recordFunc func(context.Context, *watchState)

func (recordFunc) hold(*watchState)                            {}
func (recordFunc) note(*watchState)                            {}
func (f recordFunc) record(ctx context.Context, w *watchState) { f(ctx, w) }

type scanKind struct{ kindBase }

func (scanKind) request(obj *v1alpha1.CredentialWatch) *access.Request {
	return watchRequest(obj, v1alpha1.OperationTenantScan)
}

func (k scanKind) read(ctx context.Context, w *watchState, g access.Grant, id azure.Identity) (found, error) {
	if err := tenantscan.Allowed(ctx, watchClient{k.r.Client}, w.obj); err != nil {
		return nil, err
	}
	tc, err := k.r.Azure.Tenant(id)
	if err != nil {
		return nil, err
	}
	prev, held := k.r.Scans.Get(target.KeyOf(w.obj))
	f, err := tenantscan.Read(ctx, tc, w.obj.Spec.Target.TenantScan, len(prev.Credentials))
	if err != nil {
		return nil, err
	}
	signIns := target.ReadTenantSignIns(ctx, tc, w.obj, g, k.r.SignInsUnavailable, held, w.now)
	return recordFunc(func(ctx context.Context, w *watchState) { k.r.scan().Record(ctx, w.obj, f, signIns, w.now) }), nil
}

func (scanKind) timeout() time.Duration { return scanTimeout }

func (k scanKind) failed(w *watchState, reason string) {
	if identityReasons[reason] && reason != v1alpha1.ReasonIdentityNotReady {
		// A tenant its identity no longer lets it read: its credentials leave the metrics too.
		// An identity that only fails to sign in for now keeps them, and spares a full rescan.
		k.r.Scans.Forget(target.KeyOf(w.obj))
		k.r.Digests.Forget(target.KeyOf(w.obj))
	}
}

func (k scanKind) evaluate(_ context.Context, w *watchState) (time.Time, error) {
	return k.r.scan().Evaluate(w.obj, w.stored, w.settings.Thresholds, w.settings.Hygiene, w.now), nil
}

func (k scanKind) follow(ctx context.Context, w *watchState) (time.Time, error) {
	return k.r.reconcileDigests(ctx, w)
}

// alert sends nothing: a scan reports through status, events and metrics (see the CRD's rules).
func (scanKind) alert(context.Context, *watchState) (time.Time, error) { return time.Time{}, nil }

// unknownKind is a target that names none of the kinds: the API server's rules refuse it.
type unknownKind struct{ kindBase }

func (unknownKind) request(obj *v1alpha1.CredentialWatch) *access.Request {
	return watchRequest(obj, v1alpha1.OperationWatch)
}

func (unknownKind) read(context.Context, *watchState, access.Grant, azure.Identity) (found, error) {
	return nil, errors.New("the target names no service principal, AKS cluster, tenant or fleet")
}

func (unknownKind) evaluate(context.Context, *watchState) (time.Time, error) {
	return time.Time{}, nil
}
