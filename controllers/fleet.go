package controllers

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/alerting/delivery"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/channels"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/aksfleet"
)

// The watches a fleet creates, and the ledger of its messages in ConfigMaps it owns.
// +kubebuilder:rbac:groups=credwatch.dev,resources=credentialwatches,verbs=create;update;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get

// fleet is the aksFleet kind on this reconciler's edges.
func (r *CredentialWatchReconciler) fleet() aksfleet.Fleet {
	return aksfleet.Fleet{Azure: r.Azure, Watches: watchClient{r.Client}, Events: r.Recorder, Store: r.Fleets,
		MaxClusters: r.FleetClusters, WatchLimit: r.FleetWatches}
}

// fleetKind is the aksFleet kind: see aksfleet.Fleet.
type fleetKind struct{ kindBase }

func (fleetKind) request(obj *v1alpha1.CredentialWatch) *access.Request {
	// It asks again for each subscription and service principal as it finds them.
	return watchRequest(obj, v1alpha1.OperationFleetScan)
}

func (k fleetKind) read(ctx context.Context, w *watchState, g access.Grant, id azure.Identity) (found, error) {
	f := k.r.fleet()
	if err := f.Allowed(ctx, w.obj); err != nil {
		return nil, err
	}
	got, err := f.Read(ctx, target.KeyOf(w.obj), g, id, w.obj.Spec.Target.AKSFleet)
	if err != nil {
		return nil, err
	}
	tc, err := k.r.Azure.Tenant(id)
	if err != nil {
		return nil, err
	}
	_, held := k.r.Fleets.Get(target.KeyOf(w.obj))
	signIns := target.ReadTenantSignIns(ctx, tc, w.obj, g, k.r.SignInsUnavailable, held, w.now)
	return recordFunc(func(_ context.Context, w *watchState) { f.Record(w.obj, got, signIns, w.now) }), nil
}

func (fleetKind) timeout() time.Duration { return scanTimeout }

func (k fleetKind) failed(w *watchState, reason string) {
	if identityReasons[reason] && reason != v1alpha1.ReasonIdentityNotReady {
		// A fleet its identity no longer lets it read: its credentials leave the metrics too.
		k.r.Fleets.Forget(target.KeyOf(w.obj))
		w.obj.Status.Fleet = nil
	}
}

// evaluate evaluates what this process's last check of the fleet found, as the watch's identity
// still lets it show, for the steps after; see aksfleet.Fleet.Evaluate.
func (k fleetKind) evaluate(ctx context.Context, w *watchState) (time.Time, error) {
	g, err := k.r.grantOnce(ctx, w)
	if err != nil {
		// The check refused it already, and forgot the fleet; or the API server failed, and
		// the next reconcile sees.
		return time.Time{}, nil
	}
	var next time.Time
	w.fleet, next = k.r.fleet().Evaluate(w.obj, w.stored.Status.Fleet, g, w.settings.Thresholds, w.now)
	return next, nil
}

// follow keeps the aksCluster watches a fleet creates; see aksfleet.Fleet.SyncWatches.
func (k fleetKind) follow(ctx context.Context, w *watchState) (time.Time, error) {
	k.r.forgetDigests(w)
	if w.fleet == nil {
		// Until this process checks the fleet it knows no cluster: it neither creates nor deletes.
		return time.Time{}, nil
	}
	var unwatched int32
	if f := w.stored.Status.Fleet; f != nil {
		unwatched = f.Unwatched
	}
	return k.r.fleet().SyncWatches(ctx, w.obj, w.fleet, unwatched, w.now)
}

func (fleetKind) specChanged(*v1alpha1.CredentialWatch) {}

// alert tells a fleet's channels of its clusters (aksfleet.Fleet.Tell) through the delivery
// every watch's alerts use: failing channels back off as a watch's do, in status.alerts.
func (k fleetKind) alert(ctx context.Context, w *watchState) (time.Time, error) {
	r, obj, now := k.r, w.obj, w.now
	if w.fleet == nil || obj.Spec.Alerts == nil {
		// Until this process checks the fleet it knows no cluster to tell of.
		return time.Time{}, nil
	}
	set, cfgErr := r.Channels.For(ctx, aksfleet.WithOwnChannels(obj), access.Identity{}) // a fleet mails no owners
	failing, keep := delivery.LedgerOf(obj, set)
	defer keep()
	if len(set) == 0 {
		target.SetCondition(obj, v1alpha1.ConditionAlertsDelivered, metav1.ConditionTrue, v1alpha1.ReasonNoChannels, aksfleet.NoChannels, now)
		return time.Time{}, nil
	}
	book, err := r.Ledger.Load(ctx, target.LedgerOwner(obj))
	if err != nil {
		return target.LedgerRefused(obj, r.Recorder, err, now)
	}
	d := r.sender(w)
	send := func(ctx context.Context, ch channels.Channel, a notify.Alert) bool {
		return d.Send(ctx, failing, ch, a)
	}
	next, err := r.fleet().Tell(ctx, obj, w.fleet, aksfleet.Outbox{Channels: set, Failing: failing, Book: book, Ledger: r.Ledger, Send: send}, now)
	if err != nil {
		return target.LedgerRefused(obj, r.Recorder, err, now)
	}
	return d.Delivered(set, failing, cfgErr, next), nil
}

// watchClient is the API server's CredentialWatches, as the target kinds ask for them.
type watchClient struct{ c client.Client }

func (w watchClient) List(ctx context.Context, namespace string, labels map[string]string) ([]v1alpha1.CredentialWatch, error) {
	var list v1alpha1.CredentialWatchList
	opts := []client.ListOption{client.InNamespace(namespace)}
	if len(labels) > 0 {
		opts = append(opts, client.MatchingLabels(labels))
	}
	err := w.c.List(ctx, &list, opts...)
	return list.Items, err
}

func (w watchClient) Get(ctx context.Context, namespace, name string, into *v1alpha1.CredentialWatch) error {
	return w.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, into)
}

func (w watchClient) Create(ctx context.Context, cw *v1alpha1.CredentialWatch) error {
	return w.c.Create(ctx, cw)
}
func (w watchClient) Update(ctx context.Context, cw *v1alpha1.CredentialWatch) error {
	return w.c.Update(ctx, cw)
}

func (w watchClient) Delete(ctx context.Context, cw *v1alpha1.CredentialWatch) error {
	return w.c.Delete(ctx, cw, client.Preconditions{UID: &cw.UID})
}
