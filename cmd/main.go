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
	"strings"
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
	"github.com/credwatch/credwatch/internal/graph/budget"
	"github.com/credwatch/credwatch/internal/ledger"
	cwmetrics "github.com/credwatch/credwatch/internal/metrics"
	"github.com/credwatch/credwatch/internal/notify/channels"
	"github.com/credwatch/credwatch/internal/pullauth"
	"github.com/credwatch/credwatch/internal/saissuer"
	"github.com/credwatch/credwatch/internal/target/aksfleet"
	"github.com/credwatch/credwatch/internal/target/tenantscan"
)

// planWindow is how long a planned read waits for others to share its $batch: short beside a
// check interval, long enough for the checks of one requeue burst to meet.
const planWindow = 100 * time.Millisecond

func main() {
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "Address of the metrics endpoint; 0 disables it.")
	flag.BoolVar(&o.secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS, authenticated and authorised through the API server.")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the liveness and readiness probes.")
	flag.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address of Go's pprof endpoints, for profiling memory and CPU; empty (the default) serves none.")
	flag.BoolVar(&o.leaderElection, "leader-elect", true, "Elect a leader, so that only one replica acts at a time.")
	flag.StringVar(&o.watchNamespace, "watch-namespace", "", "Watch only this namespace; empty watches all.")
	flag.StringVar(&o.cloudName, "azure-cloud", "AzurePublic", "Azure cloud: AzurePublic, AzureChina or AzureUSGovernment.")
	flag.StringVar(&o.authorityHost, "azure-authority-host", "", "Entra ID authority host; overrides the cloud's.")
	flag.StringVar(&o.graphEndpoint, "graph-endpoint", "", "Microsoft Graph endpoint; overrides the cloud's.")
	flag.StringVar(&o.graphAudience, "graph-audience", "", "Audience of Microsoft Graph tokens; empty means the Graph endpoint, which is Graph's audience in every Azure cloud.")
	flag.StringVar(&o.armEndpoint, "arm-endpoint", "", "Azure Resource Manager endpoint; overrides the cloud's.")
	flag.StringVar(&o.armAudience, "arm-audience", "", "Audience of Resource Manager tokens; overrides the cloud's (with --arm-endpoint alone, the endpoint).")
	flag.StringVar(&o.defaultID, "default-identity", "", "ClusterAzureIdentity used by watches that name no spec.identityRef; empty, such watches are not checked (Ready False NoIdentity). The identity still decides what they may do, and which namespaces may use it.")
	flag.StringVar(&o.defaultAlerts, "default-alerts", "", "YAML file of the alert channels (a CredentialWatch spec.alerts) for watches that name none; their Secrets live in the operator's namespace.")
	flag.IntVar(&o.digestsPerMinute, "digest-messages-per-minute", 30, "Owner digests and expiry messages of tenant scans sent in any minute, by all watches together: Exchange Online takes 30 a minute from one sender. 0 for no limit.")
	flag.IntVar(&o.graphBudget, "graph-budget", budget.SmallTenant, "Microsoft Graph resource units per 10 s credwatch may spend per application and tenant: 3500, 5000 or 8000 by tenant size (under 50, up to 500, over 500 users); lower leaves room for other applications.")
	flag.StringVar(&o.slackAPIURL, "slack-api-url", "", "Slack's Web API root for bot tokens, for GovSlack or a test server; empty means Slack's.")
	flag.BoolVar(&o.issuerChecks, "service-account-issuer", true, "Check the API servers' service-account issuer for watches with a serviceAccountIssuer target (needs the canary ServiceAccount in --operator-namespace, and the rights the chart's serviceAccountIssuer.enabled grants).")
	flag.Func("issuer-endpoints", "API server endpoints (https://host:port, comma-separated) that serviceAccountIssuer watches may name besides the kubernetes Service's and the operator's own.", func(v string) error {
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				o.issuerAllowed = append(o.issuerAllowed, e)
			}
		}
		return nil
	})
	flag.BoolVar(&o.imagePulls, "image-pulls", true, "Watch the cluster's image pulls for registries refusing credentials (needs list and watch on events, pods and nodes), for watches that set spec.imagePulls.")
	flag.DurationVar(&o.pullThresholds.Window, "image-pull-window", pullauth.DefaultThresholds.Window, "How far back image pulls count when telling a cluster-wide credential failure from a node's.")
	flag.IntVar(&o.pullThresholds.ClusterWideNodes, "image-pull-cluster-wide-nodes", pullauth.DefaultThresholds.ClusterWideNodes, "Nodes refused by a registry that make the failure the cluster's credential (in a smaller cluster, all its nodes).")
	flag.DurationVar(&o.pullThresholds.Settle, "image-pull-settle", pullauth.DefaultThresholds.Settle, "How long the refusals of an image-pull incident are gathered before it is told: the nodes of one failure report it within seconds of each other.")
	flag.IntVar(&o.pullThresholds.NodeLocalMaxNodes, "image-pull-node-local-max-nodes", pullauth.DefaultThresholds.NodeLocalMaxNodes, "At most this many refused nodes, while others pull from the registry, make the failure those nodes' kubelets.")
	flag.Var(&o.destinations.Allow, "alert-destinations-allow", "CIDRs, comma-separated, that the webhooks and SMTP hosts a CredentialWatch names may reach though they are loopback, private or link-local (a relay inside the cluster); plain http only to these. The default channels are not limited.")
	flag.Var(&o.destinations.Deny, "alert-destinations-deny", "CIDRs, comma-separated, that the webhooks and SMTP hosts a CredentialWatch names may not reach, besides loopback, private and link-local ranges: the cluster's Service and Pod CIDRs. Wins over --alert-destinations-allow.")
	flag.StringVar(&o.namespace, "operator-namespace", os.Getenv("POD_NAMESPACE"), "The operator's own namespace: the default channels' Secrets, cluster identities' Secrets and ServiceAccounts, the issuer checks' canary and the leader's Lease live there. Empty: POD_NAMESPACE, then the namespace of the pod's service account.")
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
	az, err := o.azure(cloud, ids)
	if err != nil {
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
	r := &controllers.CredentialWatchReconciler{
		Client:            mgr.GetClient(),
		SecretReader:      mgr.GetAPIReader(),
		DefaultIdentity:   o.defaultID,
		OperatorNamespace: o.namespace,
		ClusterID:         string(kubeSystem.UID),
		Recorder:          mgr.GetEventRecorderFor("credwatch"),
		Clock:             clock.RealClock{},
		Rand:              rand.Float64,
		Azure:             az,
		Channels:          &channels.Builder{Secrets: mgr.GetAPIReader(), Defaults: defaults, DefaultsNamespace: o.namespace, SlackAPIURL: o.slackAPIURL, Destinations: o.destinations},
		Scans:             scanStore,
		Fleets:            fleetStore,
		// Ledgers are read one watch at a time, not cached: a cache would hold every ConfigMap.
		Ledger:     &ledger.Store{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient()},
		Digests:    tenantscan.NewDigestStore(),
		DigestPace: tenantscan.NewPace(o.digestsPerMinute),
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
