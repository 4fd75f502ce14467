package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/imagepulls"
	"github.com/credwatch/credwatch/internal/keyvault"
	"github.com/credwatch/credwatch/internal/ledger"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/rotation"
	"github.com/credwatch/credwatch/internal/rotation/pacing"
	"github.com/credwatch/credwatch/internal/statuspatch"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/akscluster"
	"github.com/credwatch/credwatch/internal/target/aksfleet"
	"github.com/credwatch/credwatch/internal/target/issuer"
	"github.com/credwatch/credwatch/internal/target/serviceprincipal"
	"github.com/credwatch/credwatch/internal/target/tenantscan"
)

// Azure gives clients of Azure, each bound to one identity and one target, so that a step can
// touch only what it asked for, and no argument can be swapped for another.
type Azure interface {
	// Application is app, and its service principal, in id's tenant.
	Application(id azure.Identity, app graph.AppRef) (graph.AppClient, error)
	// Tenant is every application and service principal of id's tenant.
	Tenant(id azure.Identity) (graph.TenantClient, error)
	// Cluster is the managed cluster c.
	Cluster(id azure.Identity, c aks.ClusterRef) (aks.ClusterClient, error)
	// Fleet is the managed clusters of tenantID's subscriptions.
	Fleet(id azure.Identity, tenantID string) (aks.FleetClient, error)
	// SignIn reports whether Entra ID accepts id now, with a fresh sign-in.
	SignIn(ctx context.Context, id azure.Identity) error
	// Withdraw forgets the planned reads a watch's checks asked for, by its askerOf: it is
	// deleted, and an answer it would never take holds back its identity's other reads.
	Withdraw(asker string)
	// KeyVaults are the Key Vaults id writes rotated secrets to.
	KeyVaults(id azure.Identity) (*keyvault.Vaults, error)
}

// statusWriteTimeout bounds the final status write of a reconcile.
const statusWriteTimeout = 15 * time.Second

// maxConcurrentReconciles bounds how many watches are worked on at once. Reads of concurrent
// watches share Graph $batch requests of up to ten appIds, so fewer workers than two batches'
// worth would leave batches half empty; a worker waiting on Graph costs only a goroutine.
const maxConcurrentReconciles = 20

// checkJitter spreads the checks of watches created together over a tenth of their interval.
const checkJitter = 0.1

// CredentialWatchReconciler keeps a CredentialWatch's status in step with Microsoft Graph and
// the clock.
type CredentialWatchReconciler struct {
	client.Client
	// SecretReader reads the Secrets identities sign in with, one at a time. It should not be a
	// cache: a cache would list and watch every Secret in the cluster.
	SecretReader client.Reader
	// DefaultIdentity names the ClusterAzureIdentity of watches that name none; empty, such
	// watches are not checked.
	DefaultIdentity string
	// OperatorNamespace holds the Secrets and ServiceAccounts of ClusterAzureIdentities.
	OperatorNamespace string
	// Paces keeps each application's record of rotations, in the operator's namespace.
	Paces *pacing.Store
	// ClusterID is the UID of this cluster's kube-system namespace. With a watch's namespace and
	// name it names the secrets the watch's rotations create (see policy.SecretPrefix).
	ClusterID string
	Recorder  record.EventRecorder
	Clock     clock.PassiveClock
	// Rand returns a number in [0, 1), for jitter.
	Rand func() float64
	// Azure is Graph and Resource Manager, as the identities of watches see them.
	Azure Azure
	// Channels builds the alert channels of a watch.
	Channels ChannelSource
	// OwnerDomains are the domains owners' mail may go to; empty, each tenant's verified domains.
	OwnerDomains []string
	// SignInsUnavailable says why the cloud has no sign-in activity reports; empty in the
	// global cloud.
	SignInsUnavailable string
	// CredentialsAdded counts credentials added out of band to watched applications, by tenant.
	CredentialsAdded func(tenantID string, n int)
	// Scans keeps what tenant scans found, between checks; the metrics read it too.
	Scans *tenantscan.Store
	// Fleets keeps what fleets' checks found, between checks; the metrics read it too. Nil
	// holds nothing: a fleet is then checked at every reconcile.
	Fleets *aksfleet.Store
	// EarlyCheckGap is the least time between two checks of a watch when the second is not the
	// schedule's; zero means policy.EarlyCheckGap.
	EarlyCheckGap time.Duration
	// CheckTimeout bounds one check of Graph; zero means a minute.
	CheckTimeout time.Duration
	// FleetClusters bounds the clusters one fleet holds, in memory, status counts and metrics;
	// zero means aksfleet.DefaultMaxClusters.
	FleetClusters int
	// FleetWatches bounds the watches one fleet creates; zero means aksfleet.MaxWatches.
	FleetWatches int
	// Ledger keeps what fleets told their channels, and what tenant scans' owner digests told
	// whom, in ConfigMaps the watches own.
	Ledger *ledger.Store
	// Digests keeps what tenant scans' owner digests know of this period: owners read, sent.
	Digests *tenantscan.DigestStore
	// DigestPace bounds the owner digests and messages sent a minute, by all watches together;
	// nil for no bound.
	DigestPace *tenantscan.Pace
	// ImagePulls gives the registries refusing the cluster's image pulls; nil when the operator
	// does not watch pulls.
	ImagePulls imagepulls.Incidents
	// PullsChanged names registries whose incident changed, to reconcile the watches covering them.
	PullsChanged <-chan event.TypedGenericEvent[string]
	// Issuer checks serviceAccountIssuer targets; nil when the operator cannot.
	Issuer issuer.Probe

	// early is each namespace's allowance of checks before their schedule.
	early target.EarlyChecks
	// reports shares the watches' reads of Graph's sign-in report; seen, what their checks found.
	reports serviceprincipal.Reports
	seen    serviceprincipal.Seen
	// queue is the controller's workqueue once it runs, where planned reads wake their watches.
	queue atomic.Pointer[wakeQueue]
	// heldClusters are the cluster reads of pending checks, by watch.
	heldClusters akscluster.Held
	// GitHub sets the Actions secrets rotations publish to; nil: none.
	GitHub rotation.GitHubSecrets
}

type wakeQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
}

// wakeup is what a planned read of the watch key calls when its answer is in: it queues the
// watch. Before the controller runs there is no queue, and the watch comes back on its own, at
// pendingRecheck.
func (r *CredentialWatchReconciler) wakeup(key client.ObjectKey) func() {
	return func() {
		if q := r.queue.Load(); q != nil {
			q.Add(reconcile.Request{NamespacedName: key})
		}
	}
}

// +kubebuilder:rbac:groups=credwatch.dev,resources=credentialwatches,verbs=get;list;watch
// +kubebuilder:rbac:groups=credwatch.dev,resources=credentialwatches/status,verbs=get;update;patch
// Secrets are read cluster-wide, one by name; writing them (a rotation's target) is granted per
// namespace by the chart's rotation.secretNamespaces, or config/rbac/rotation_secrets_role.yaml.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile runs the steps of a watch in order, writes status once, and comes back at the
// earliest moment a step has something new to do.
func (r *CredentialWatchReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	obj := &v1alpha1.CredentialWatch{}
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	k := r.kindOf(obj.Spec.Target)
	if obj.Generation != obj.Status.ObservedGeneration {
		// Another tenant or filter, or no scan at all: what was scanned is no longer what is watched.
		r.Scans.Forget(req.NamespacedName)
		r.Digests.Forget(req.NamespacedName)
		r.Fleets.Forget(req.NamespacedName)
		k.specChanged(obj)
	}
	stored := obj.DeepCopy()
	defer func() {
		// Written even when the operator is stopping: it records what was done, sent or claimed.
		patchCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusWriteTimeout)
		defer cancel()
		if err := statuspatch.Patch(patchCtx, r.Status(), v1alpha1.GroupVersion.WithKind("CredentialWatch"), req.NamespacedName, &stored.Status, &obj.Status); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	var w *watchState
	defer func() {
		if w == nil || !w.readPending {
			// What the watch asked the read planner before, it will not come for: it has its
			// answer, checks some other way now (another target, an identity that refuses it),
			// or is deleted. A reconcile that failed asks again when retried.
			r.Azure.Withdraw(askerOf(req.NamespacedName))
		}
	}()

	s, err := target.SettingsOf(obj.Spec)
	if err != nil {
		// The API server validates the spec; getting here means it did not, and retrying won't help.
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	_, scanned := r.Scans.Get(req.NamespacedName)
	if _, found := r.Fleets.Get(req.NamespacedName); found {
		scanned = true
	}
	w = &watchState{obj: obj, stored: stored, kind: k, settings: s, now: r.Clock.Now(), scanned: scanned}
	if obj.DeletionTimestamp != nil {
		// Only a rotation in flight holds a deleted watch: nothing else is done for it.
		next, err := r.finalizeRotation(ctx, w)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("rotation: %w", err)
		}
		return ctrl.Result{RequeueAfter: policy.RequeueAfter(w.now, time.Time{}, next)}, nil
	}
	return r.runSteps(ctx, w)
}

// runSteps runs the watch's steps in order, and returns when the earliest has something new to do.
func (r *CredentialWatchReconciler) runSteps(ctx context.Context, w *watchState) (ctrl.Result, error) {
	var moments []time.Time
	for _, st := range r.steps(w.kind) {
		next, err := st.run(ctx, w)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("%s: %w", st.name, err)
		}
		moments = append(moments, next)
		if w.readPending {
			// The steps after the check act on what it finds, in a moment.
			break
		}
	}
	var nextCheck time.Time // none until a check is scheduled: a watch waiting for its identity
	if t := w.obj.Status.NextCheckTime; t != nil && !w.readPending {
		nextCheck = t.Time
	}
	return ctrl.Result{RequeueAfter: policy.RequeueAfter(w.now, nextCheck, moments...)}, nil
}

// forget drops what this process keeps of a deleted watch.
func (r *CredentialWatchReconciler) forget(key client.ObjectKey) {
	r.Scans.Forget(key)
	r.Digests.Delete(key)
	r.Fleets.Forget(key)
	r.heldClusters.Forget(key)
	r.early.Forget(key)
	r.Azure.Withdraw(askerOf(key))
}

// watchState is what the steps of one reconcile share.
type watchState struct {
	obj *v1alpha1.CredentialWatch
	// stored is the watch as the API server holds it, the base of the deferred status patch;
	// steps that must write before they act (a claimed alert, a rotation step) update it too.
	stored *v1alpha1.CredentialWatch
	// kind is the kind of the watch's target.
	kind     kind
	settings target.Settings
	now      time.Time
	// scanned is true when this process holds the watch's last tenant scan.
	scanned bool
	// readPending is a check waiting for its planned read: due still, it is not rescheduled.
	readPending bool
	// fleet is what this process's last check of a fleet found and may show, as of now; nil
	// until the fleet is evaluated, which needs a check by this process.
	fleet *aksfleet.Now
	// grant and grantErr are the watch's identity, once granted is set: see grantOnce.
	grant    access.Grant
	grantErr error
	granted  bool
}

// step is one named part of a reconcile. It changes the watch's status in memory and returns
// when it next has something to do, zero for never; an error is the reconcile's, not the
// watch's (the API server, a cancelled reconcile), and controller-runtime retries it.
type step struct {
	name string
	run  func(context.Context, *watchState) (time.Time, error)
}

// steps are a reconcile's steps for a watch of kind k, in order: each reads what the ones
// before it wrote.
func (r *CredentialWatchReconciler) steps(k kind) []step {
	return []step{
		{"check", r.reconcileCheck},
		{"expiry", k.evaluate},
		{"follow", k.follow},
		{"rotation", r.reconcileRotation},
		{"imagePulls", r.reconcileImagePulls},
		{"alerts", k.alert},
	}
}

// writeNow writes a part of status at once, with an optimistic lock, where the deferred patch
// would come too late: a claim before an alert is sent, a rotation step before the next begins.
// mutate changes that part; it is applied to the object, to the write, and to stored, the base
// of the deferred patch, which therefore does not write it again. A conflict means another
// reconcile wrote the watch since this one read it: this one must not act.
func (r *CredentialWatchReconciler) writeNow(ctx context.Context, obj, stored *v1alpha1.CredentialWatch, mutate func(*v1alpha1.CredentialWatchStatus)) error {
	base := obj.DeepCopy()
	write := obj.DeepCopy()
	mutate(&write.Status)
	if err := r.Status().Patch(ctx, write, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	mutate(&obj.Status)
	mutate(&stored.Status)
	obj.ResourceVersion, stored.ResourceVersion = write.ResourceVersion, write.ResourceVersion
	return nil
}
