// Command credwatch runs the credwatch operator: the CredentialWatch controller, its metrics and
// health endpoints, under leader election.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"time"

	// Maintenance windows name IANA time zones; the operator's image need not ship a zoneinfo.
	_ "time/tzdata"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientfeatures "k8s.io/client-go/features"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/controllers"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/azure/clients"
	"github.com/credwatch/credwatch/internal/githubsecrets"
	"github.com/credwatch/credwatch/internal/ledger"
	cwmetrics "github.com/credwatch/credwatch/internal/metrics"
	"github.com/credwatch/credwatch/internal/notify/channels"
	"github.com/credwatch/credwatch/internal/pullauth"
	"github.com/credwatch/credwatch/internal/rotation/pacing"
	"github.com/credwatch/credwatch/internal/saissuer"
	"github.com/credwatch/credwatch/internal/target/aksfleet"
	"github.com/credwatch/credwatch/internal/target/tenantscan"
)

// planWindow is how long a planned read waits for others to share its $batch: short beside a
// check interval, long enough for the checks of one requeue burst to meet.
const planWindow = 100 * time.Millisecond

func main() {
	var o options
	o.bindFlags(flag.CommandLine)
	// Structured JSON logs unless --zap-devel asks for the console encoder.
	zapOpts := zap.Options{Development: false}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	o.namespace = operatorNamespace(o.namespace, os.ReadFile)
	// Without a limit, Go lets the heap grow to twice what is live before it collects: at 100,000
	// watches the pod would pass its memory limit, and be killed, with half of it garbage. Nine
	// tenths of the container's limit makes Go collect sooner instead (GOMEMLIMIT, when set, wins;
	// AUTOMEMLIMIT=off turns this off).
	_, _ = memlimit.Set(memlimit.WithProvider(memlimit.FromCgroup), memlimit.WithRatio(0.9),
		memlimit.WithLogger(slog.New(logr.ToSlogHandler(ctrl.Log.WithName("memlimit")))))
	// What the operator holds lives as long as the process (the cache's watches, the queue), and
	// what it allocates besides dies within a reconcile: letting the heap grow by half its live
	// size, not by all of it, costs the collector about a seventh more CPU in a sweep and saves
	// about a quarter of the memory (BENCHMARKS.md). GOGC, when set, wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	clientfeatures.ReplaceFeatureGates(streamedLists{clientfeatures.FeatureGates(), os.LookupEnv})

	if err := run(o); err != nil {
		// Plain, not a JSON record with a stack trace: most of these are a flag to fix.
		fmt.Fprintln(os.Stderr, "credwatch:", err)
		os.Exit(1)
	}
}

// gracefulShutdown is how long reconciles under way may take to finish when the operator stops;
// it fits in Kubernetes' default 30 s termination grace period.
var gracefulShutdown = 25 * time.Second

func run(o options) error {
	cloud, defaults, err := o.validate()
	if err != nil {
		return err
	}
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("connecting to the cluster: %w", err)
	}
	if _, inCluster := os.LookupEnv("KUBERNETES_SERVICE_HOST"); o.leaderElection && o.namespace == "" && !inCluster {
		return errors.New("--leader-elect outside a cluster needs --operator-namespace (or POD_NAMESPACE) for its Lease")
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))

	// The watches' series are appended to the registry's by their own handler (see
	// cwmetrics.Watches); it is set once the manager, and so its cache, exists: before the
	// metrics server starts.
	var watches *cwmetrics.Watches
	mgr, err := ctrl.NewManager(restConfig, o.managerOptions(scheme, &watches))
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	scanStore, fleetStore := tenantscan.NewStore(), aksfleet.NewStore()
	ctx := ctrl.SetupSignalHandler()
	cached, err := cwmetrics.CachedWatches(ctx, mgr.GetCache())
	if err != nil {
		return fmt.Errorf("reading CredentialWatches for metrics: %w", err)
	}
	watches = cwmetrics.NewWatches(cached, scanStore, fleetStore, clock.RealClock{})

	ids := azure.NewIdentities(cloud, nil, nil)
	ids.Tokens = azure.KubeTokens{Client: mgr.GetClient()}
	az, graphAPI, err := o.azure(cloud, ids)
	if err != nil {
		return err
	}
	if err := o.useDelta(mgr, graphAPI); err != nil {
		return err
	}
	if err := o.setupIdentities(mgr, az); err != nil {
		return err
	}
	r, err := o.watchReconciler(ctx, mgr, scheme, az, defaults, scanStore, fleetStore)
	if err != nil {
		return err
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the CredentialWatch controller: %w", err)
	}
	if err := errors.Join(mgr.AddHealthzCheck("healthz", healthz.Ping), mgr.AddReadyzCheck("readyz", healthz.Ping)); err != nil {
		return err
	}
	ctrl.Log.Info("Starting manager", "graphEndpoint", cloud.GraphEndpoint, "authorityHost", cloud.AuthorityHost)
	return mgr.Start(ctx)
}

// watchReconciler is the CredentialWatch controller, on the manager's clients and the stores the
// metrics read.
func (o options) watchReconciler(ctx context.Context, mgr ctrl.Manager, scheme *runtime.Scheme, az *clients.Clients, defaults *v1alpha1.Alerts,
	scanStore *tenantscan.Store, fleetStore *aksfleet.Store) (*controllers.CredentialWatchReconciler, error) {
	// Rotations name their secrets after the cluster, so that watches of one application on two
	// clusters keep apart: its kube-system namespace's UID is the ID Kubernetes has for it.
	var kubeSystem corev1.Namespace
	if err := mgr.GetAPIReader().Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, &kubeSystem); err != nil {
		return nil, fmt.Errorf("reading namespace kube-system, whose UID names this cluster: %w", err)
	}
	added, err := cwmetrics.NewCredentialsAdded(metrics.Registry)
	if err != nil {
		return nil, err
	}
	r := &controllers.CredentialWatchReconciler{
		Client:             mgr.GetClient(),
		SecretReader:       mgr.GetAPIReader(),
		DefaultIdentity:    o.defaultID,
		OperatorNamespace:  o.namespace,
		OwnerDomains:       o.ownerDomains,
		SignInsUnavailable: signInsUnavailable(o.cloudName),
		CredentialsAdded:   added.Added,
		// Read by name when a rotation may start, not cached, as ledgers.
		Paces:     &pacing.Store{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(), Namespace: o.namespace},
		ClusterID: string(kubeSystem.UID),
		Recorder:  mgr.GetEventRecorderFor("credwatch"),
		Clock:     clock.RealClock{},
		Rand:      rand.Float64,
		Azure:     az,
		Channels:  &channels.Builder{Secrets: mgr.GetAPIReader(), Defaults: defaults, DefaultsNamespace: o.namespace, SlackAPIURL: o.slackAPIURL, Destinations: o.destinations},
		Scans:     scanStore,
		Fleets:    fleetStore,
		// Ledgers are read one watch at a time, not cached: a cache would hold every ConfigMap.
		Ledger:     &ledger.Store{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient()},
		Digests:    tenantscan.NewDigestStore(),
		DigestPace: tenantscan.NewPace(o.digestsPerMinute),
		// Only to the hosts the admin allows, and through the destination policy.
		GitHub: githubsecrets.New(o.publishHosts, o.destinations.HTTPClient(time.Minute)),
	}
	if err := o.watchImagePulls(mgr, scheme, r); err != nil {
		return nil, err
	}
	// The canary ServiceAccount of serviceAccountIssuer targets lives in the operator's namespace,
	// which validate made sure of.
	if o.issuerChecks {
		r.Issuer = &saissuer.Prober{Config: mgr.GetConfig(), Reader: mgr.GetAPIReader(), Namespace: o.namespace, Allowed: o.issuerAllowed}
	}
	return r, nil
}

// setupIdentities registers the controllers of AzureIdentities and ClusterAzureIdentities.
func (o options) setupIdentities(mgr ctrl.Manager, az *clients.Clients) error {
	for _, clusterScoped := range []bool{false, true} {
		ir := &controllers.IdentityReconciler{Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), OperatorNamespace: o.namespace,
			Recorder: mgr.GetEventRecorderFor("credwatch"), Clock: clock.RealClock{}, Azure: az, Cluster: clusterScoped}
		if err := ir.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the identity controller: %w", err)
		}
	}
	return nil
}

// watchImagePulls runs the image-pull watcher under the manager and hands it to r, unless
// --image-pulls=false.
func (o options) watchImagePulls(mgr ctrl.Manager, scheme *runtime.Scheme, r *controllers.CredentialWatchReconciler) error {
	if !o.imagePulls {
		return nil
	}
	pullClient, err := client.NewWithWatch(mgr.GetConfig(), client.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	nodes := &pullauth.NodeSet{}
	tracker := pullauth.NewTracker(o.pullThresholds, nodes.Count)
	changed := make(chan event.TypedGenericEvent[string], 64)
	watcher := &pullauth.Watcher{Client: pullClient, Tracker: tracker, Clock: clock.RealClock{}, Changed: changed, Nodes: nodes}
	if err := mgr.Add(watcher); err != nil {
		return err
	}
	metrics.Registry.MustRegister(cwmetrics.NewImagePulls(tracker, clock.RealClock{}))
	r.ImagePulls, r.PullsChanged = watcher, changed
	return nil
}
