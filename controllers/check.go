package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/identity"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/saissuer"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/aksfleet"
	"github.com/credwatch/credwatch/internal/target/tenantscan"
)

// Event reasons of a check.
const (
	eventCheckRecovered          = "CheckRecovered"
	eventOwnersUnreadable        = "OwnersUnreadable"
	eventServicePrincipalChanged = "ServicePrincipalChanged"
)

// pendingRecheck is when a watch whose planned read is not answered comes back if nothing wakes
// it first: its answer wakes it, within a second, when the budget allows behind a throttled
// Graph, or, in a sweep of 100,000 watches, minutes later, when the status writes ahead of it
// let the planner read it. Longer than such a sweep: every watch still waiting came back at
// once, reconciled for nothing, and the garbage of tens of thousands of reconciles raised the
// sweep's peak memory by 56 MiB (BENCHMARKS.md, ninth run). Under the twenty minutes the planner
// keeps an answer: a watch whose wake was lost comes back while its answer is still there.
const pendingRecheck = 15 * time.Minute

// heldClusterTTL bounds how long a cluster read waits for the check that made it to be woken:
// longer than pendingRecheck, or a watch woken late would read its cluster again.
const heldClusterTTL = pendingRecheck + 5*time.Minute

// defaultCheckTimeout bounds one check: two Graph reads and a token, each normally well under a
// second, so that a Graph that never answers cannot hold a worker.
const defaultCheckTimeout = time.Minute

// scanTimeout bounds one tenant scan: two lists of up to 999 objects a page, each page seconds
// long in a large tenant.
const scanTimeout = 10 * time.Minute

// reconcileCheck reads the target's credentials into status when a check is due, or records why
// it could not and when it will try again. It returns an error only for failures that are not
// the check's (the API server, a cancelled reconcile), which controller-runtime retries.
func (r *CredentialWatchReconciler) reconcileCheck(ctx context.Context, w *watchState) (time.Time, error) {
	obj := w.obj
	due, err := r.checkDue(ctx, w)
	if err != nil || !due {
		return time.Time{}, err
	}
	before := target.Condition(obj, v1alpha1.ConditionReady)

	checkCtx, cancel := context.WithTimeout(ctx, r.checkTimeout(obj.Spec.Target))
	defer cancel()
	ctrl.LoggerFrom(ctx).V(1).Info("Reading " + checked(obj.Spec.Target))
	res, err := r.read(checkCtx, w)
	if ctx.Err() != nil {
		// The operator is stopping: this is not the check failing.
		return time.Time{}, ctx.Err()
	}
	var apiErr *target.KubernetesError
	if errors.As(err, &apiErr) {
		return time.Time{}, apiErr
	}
	if errors.Is(err, graph.ErrPending) {
		// Nothing is known yet, and nothing is written: the answer wakes the watch, and the
		// check is due still when it does.
		r.holdCluster(w, res)
		w.readPending = true
		return w.now.Add(pendingRecheck), nil
	}
	if res.cluster != nil {
		r.recordCluster(obj, *res.cluster)
	}
	obj.Status.CheckRequest = obj.Annotations[v1alpha1.CheckAnnotation]
	if obj.Generation != obj.Status.ObservedGeneration {
		// A changed spec is a new attempt: it should not inherit the old spec's backoff.
		obj.Status.ConsecutiveFailures = 0
	}
	obj.Status.ObservedGeneration = obj.Generation
	var ie *identity.Error
	if errors.As(err, &ie) && ie.Pending {
		// An identity created with its watches signs in within seconds: nothing has failed yet,
		// and its signing in reconciles the watch.
		target.SetCondition(obj, v1alpha1.ConditionReady, metav1.ConditionUnknown, ie.Reason(), ie.Error(), w.now)
		return time.Time{}, nil
	}
	if err != nil {
		r.checkFailed(ctx, w, before, err)
		return time.Time{}, nil
	}
	r.checkSucceeded(w, before)
	r.record(checkCtx, w, res)
	return time.Time{}, nil
}

// checkDue reports whether the target is read now: when its schedule says so, and also when its
// identity no longer allows the check, or allows it again. Asking the identity costs no request
// to Azure, only reads of the cache, so it is asked at every reconcile: a change to an identity
// shows on the watches that use it at once, not at their next check.
func (r *CredentialWatchReconciler) checkDue(ctx context.Context, w *watchState) (bool, error) {
	obj := w.obj
	if policy.CheckDue(policy.CheckStateOf(obj, w.scanned), w.now) {
		return true, nil
	}
	if obj.Spec.Target.ServiceAccountIssuer != nil {
		return false, nil
	}
	_, err := r.authorizeCheck(ctx, w)
	var ke *target.KubernetesError
	if errors.As(err, &ke) {
		return false, ke
	}
	ready := target.Condition(obj, v1alpha1.ConditionReady)
	refused := ready.Status != metav1.ConditionTrue && identityReasons[ready.Reason]
	return refused || (err != nil && target.ReasonFor(err) != ready.Reason), nil
}

// identityReasons are the Ready reasons of a watch whose check was refused before Azure was
// asked: by its identity, or by its namespace's limit of fleets. What it read before goes.
var identityReasons = map[string]bool{
	v1alpha1.ReasonNoIdentity: true, v1alpha1.ReasonIdentityNotFound: true, v1alpha1.ReasonIdentityNotReady: true,
	v1alpha1.ReasonIdentityNotAllowed: true, v1alpha1.ReasonIdentityMigrationNeeded: true, v1alpha1.ReasonTooManyFleets: true,
}

// authorizeCheck finds the watch's identity and asks it for the check's first request: the
// application's credentials, the cluster (whose service principal is asked for once the cluster
// names it), or the tenant scan.
func (r *CredentialWatchReconciler) authorizeCheck(ctx context.Context, w *watchState) (access.Grant, error) {
	obj := w.obj
	g, err := r.grantOnce(ctx, w)
	if err != nil {
		return access.Grant{}, err
	}
	req := access.Request{Operation: v1alpha1.OperationWatch, TenantID: obj.Spec.Target.TenantID()}
	switch t := obj.Spec.Target; {
	case t.ServicePrincipal != nil:
		req.AppID = t.ServicePrincipal.ClientID
	case t.AKSCluster != nil:
		req.Cluster = accessCluster(clusterRef(t.AKSCluster))
	case t.TenantScan != nil:
		req.Operation = v1alpha1.OperationTenantScan
	case t.AKSFleet != nil:
		// It asks again for each subscription and service principal as it finds them.
		req.Operation = v1alpha1.OperationFleetScan
	}
	return g, g.Allow(req)
}

func (r *CredentialWatchReconciler) checkTimeout(t v1alpha1.Target) time.Duration {
	switch {
	case r.CheckTimeout != 0:
		return r.CheckTimeout
	case t.TenantScan != nil, t.AKSFleet != nil:
		return scanTimeout
	default:
		return defaultCheckTimeout
	}
}

// checkFailed counts a failed check, schedules the next with backoff, and says why in the Ready
// condition, and in an event when the check starts failing or fails for another reason.
func (r *CredentialWatchReconciler) checkFailed(ctx context.Context, w *watchState, before metav1.Condition, err error) {
	obj, what := w.obj, checked(w.obj.Spec.Target)
	obj.Status.ConsecutiveFailures++
	wait := policy.Jitter(policy.RetryAfterFailure(obj.Status.ConsecutiveFailures, azerr.RetryAfterOf(err), w.settings.interval), checkJitter, r.Rand)
	next := metav1.NewTime(w.now.Add(wait))
	obj.Status.NextCheckTime = &next
	reason := target.ReasonFor(err)
	ctrl.LoggerFrom(ctx).Info("Checking "+what+" failed", "reason", reason, "error", err.Error(), "retryIn", wait.String())
	target.SetCondition(obj, v1alpha1.ConditionReady, metav1.ConditionFalse, reason,
		fmt.Sprintf("%v; retrying at %s", err, next.UTC().Format(time.RFC3339)), w.now)
	if before.Status != metav1.ConditionFalse || before.Reason != reason {
		// Once per kind of failure: retries would differ only in ports and times, which the
		// recorder cannot fold into one event.
		r.Recorder.Eventf(obj, corev1.EventTypeWarning, reason, "Checking %s failed: %v", what, err)
	}
	if reason == v1alpha1.ReasonServicePrincipalNotFound || reason == v1alpha1.ReasonClusterNotFound {
		forgetCredentials(obj)
	}
	if identityReasons[reason] && reason != v1alpha1.ReasonIdentityNotReady {
		// A tenant or fleet its identity no longer lets it read: its credentials leave the
		// metrics too. An identity that only fails to sign in for now keeps them, and spares a
		// full rescan.
		switch t := obj.Spec.Target; {
		case t.TenantScan != nil:
			r.Scans.Forget(client.ObjectKeyFromObject(obj))
			r.Digests.Forget(client.ObjectKeyFromObject(obj))
		case t.AKSFleet != nil:
			r.Fleets.Forget(client.ObjectKeyFromObject(obj))
			obj.Status.Fleet = nil
		}
	}
}

// checkSucceeded schedules the next check, and tells when checks work again.
func (r *CredentialWatchReconciler) checkSucceeded(w *watchState, before metav1.Condition) {
	obj := w.obj
	obj.Status.ConsecutiveFailures = 0
	last := metav1.NewTime(w.now)
	next := metav1.NewTime(w.now.Add(policy.Jitter(w.settings.interval, checkJitter, r.Rand)))
	obj.Status.LastCheckTime, obj.Status.NextCheckTime = &last, &next
	if before.Status == metav1.ConditionFalse {
		r.Recorder.Eventf(obj, corev1.EventTypeNormal, eventCheckRecovered, "Reading %s works again", checked(obj.Spec.Target))
	}
}

// checkResult is what a check found: the appId watched and its credentials, or that the target
// is an AKS cluster on a managed identity, which has none, or what a tenant scan found.
type checkResult struct {
	// grant is the identity the check used, and id who it signed in as; the owners are read
	// as the same, if the identity allows it.
	grant           access.Grant
	id              azure.Identity
	appID           string
	snap            graph.Snapshot
	managedIdentity bool
	// cluster is what Resource Manager said of an aksCluster target's cluster.
	cluster *aks.Cluster
	tenant  bool
	scan    tenantscan.Found
	fleet   *aksfleet.Found
	issuer  *saissuer.Observation
}

// read resolves the target to an appId, reading the AKS cluster when the target is one, and
// reads that appId's credentials from Graph.
func (r *CredentialWatchReconciler) read(ctx context.Context, w *watchState) (checkResult, error) {
	obj := w.obj
	if t := obj.Spec.Target.ServiceAccountIssuer; t != nil {
		if r.Issuer == nil {
			return checkResult{}, errIssuerNotChecked
		}
		obs, err := r.Issuer.Probe(ctx, t.Endpoints)
		return checkResult{issuer: &obs}, err
	}
	g, err := r.authorizeCheck(ctx, w)
	if err != nil {
		return checkResult{}, err
	}
	tenant := obj.Spec.Target.TenantID()
	res := checkResult{grant: g}
	if res.id, err = r.signIns().Identity(ctx, g.Identity, tenant); err != nil {
		return checkResult{}, err
	}
	switch t := obj.Spec.Target; {
	case t.ServicePrincipal != nil:
		res.appID = t.ServicePrincipal.ClientID
	case t.AKSCluster != nil:
		c, err := r.clusterOf(ctx, w, res.id, clusterRef(t.AKSCluster))
		if err != nil {
			return checkResult{}, err
		}
		res.cluster = &c
		if c.ClientID == "" {
			return checkResult{cluster: &c, managedIdentity: true}, nil
		}
		res.appID = c.ClientID
		// The cluster's service principal is a second request, asked for before Graph is.
		if err := g.Allow(access.Request{Operation: v1alpha1.OperationWatch, TenantID: tenant, AppID: res.appID}); err != nil {
			return checkResult{cluster: &c}, err
		}
	case t.TenantScan != nil:
		res.tenant = true
		tc, err := r.Azure.Tenant(res.id)
		if err != nil {
			return res, err
		}
		res.scan, err = tenantscan.Read(ctx, tc, t.TenantScan)
		return res, err
	case t.AKSFleet != nil:
		f := r.fleet()
		if err := f.Allowed(ctx, obj); err != nil {
			return res, err
		}
		found, err := f.Read(ctx, g, res.id, t.AKSFleet)
		res.fleet = &found
		return res, err
	default:
		return checkResult{}, errors.New("the target names no service principal, AKS cluster, tenant or fleet")
	}
	app, err := r.Azure.Application(res.id, graph.AppRef{AppID: res.appID})
	if err != nil {
		return checkResult{cluster: res.cluster}, err
	}
	key := client.ObjectKeyFromObject(obj)
	// An identity allowed to scan the tenant may read a sweep's watches in one listing of it.
	mayList := g.Allow(access.Request{Operation: v1alpha1.OperationTenantScan, TenantID: tenant}) == nil
	res.snap, err = app.Check(ctx, graph.Ask{Asker: askerOf(key), Wake: r.wakeup(key), MayList: mayList})
	return res, err
}

// askerOf is who the watch key is to the read planner: asking again, it is answered once, and
// deleted, it withdraws what it asked.
func askerOf(key client.ObjectKey) string { return key.String() }

// heldCluster is a cluster read by a check told to wait for Graph, kept for the reconcile its
// answer wakes, so that a planned check reads the cluster once.
type heldCluster struct {
	cluster aks.Cluster
	ref     aks.ClusterRef
	id      string
	at      time.Time
}

// holdCluster keeps the cluster a pending check read.
func (r *CredentialWatchReconciler) holdCluster(w *watchState, res checkResult) {
	if res.cluster == nil {
		return
	}
	r.heldClusters.Store(client.ObjectKeyFromObject(w.obj), heldCluster{cluster: *res.cluster,
		ref: clusterRef(w.obj.Spec.Target.AKSCluster), id: res.id.String(), at: w.now})
}

// clusterOf is the cluster a pending check of the watch read, when it is the same cluster read
// by the same identity not long ago, or else the cluster read now.
func (r *CredentialWatchReconciler) clusterOf(ctx context.Context, w *watchState, id azure.Identity, ref aks.ClusterRef) (aks.Cluster, error) {
	if v, ok := r.heldClusters.LoadAndDelete(client.ObjectKeyFromObject(w.obj)); ok {
		if h := v.(heldCluster); h.ref == ref && h.id == id.String() && w.now.Sub(h.at) < heldClusterTTL {
			return h.cluster, nil
		}
	}
	return r.readCluster(ctx, id, ref)
}

// accessCluster is where ref is, as access sees it.
func accessCluster(ref aks.ClusterRef) *access.Cluster {
	return &access.Cluster{SubscriptionID: ref.SubscriptionID, ResourceGroup: ref.ResourceGroup}
}

func (r *CredentialWatchReconciler) readCluster(ctx context.Context, id azure.Identity, ref aks.ClusterRef) (aks.Cluster, error) {
	c, err := r.Azure.Cluster(id, ref)
	if err != nil {
		return aks.Cluster{}, err
	}
	cl, err := c.Read(ctx)
	if err != nil {
		return aks.Cluster{}, &target.ClusterError{Err: err}
	}
	return cl, nil
}

// clusterRef names the cluster of an aksCluster target.
func clusterRef(t *v1alpha1.AKSClusterTarget) aks.ClusterRef {
	return aks.ClusterRef{SubscriptionID: t.SubscriptionID, ResourceGroup: t.ResourceGroup, Name: t.Name}
}

// checked names what a check of target reads, for its events and logs.
func checked(target v1alpha1.Target) string {
	if target.ServiceAccountIssuer != nil {
		return "the service-account issuer"
	}
	return "credentials"
}
