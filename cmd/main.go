// Command credwatch runs the credwatch operator: the CredentialWatch controller, its metrics and
// health endpoints, under leader election.
package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
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
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/controllers"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/azure/clients"
	"github.com/credwatch/credwatch/internal/compact"
	"github.com/credwatch/credwatch/internal/egress"
	"github.com/credwatch/credwatch/internal/graph/budget"
	"github.com/credwatch/credwatch/internal/graph/msgraph"
	"github.com/credwatch/credwatch/internal/graph/planner"
	"github.com/credwatch/credwatch/internal/ledger"
	cwmetrics "github.com/credwatch/credwatch/internal/metrics"
	"github.com/credwatch/credwatch/internal/notify/channels"
	"github.com/credwatch/credwatch/internal/pullauth"
	"github.com/credwatch/credwatch/internal/saissuer"
	"github.com/credwatch/credwatch/internal/target/aksfleet"
	"github.com/credwatch/credwatch/internal/target/tenantscan"
)

type options struct {
	metricsAddr    string
	secureMetrics  bool
	probeAddr      string
	pprofAddr      string
	leaderElection bool
	watchNamespace string
	cloudName      string
	authorityHost  string
	graphEndpoint  string
	graphAudience  string
	armEndpoint    string
	armAudience    string
	defaultAlerts  string
	defaultID      string
	namespace      string
	slackAPIURL    string
	graphBudget    int
	// digestsPerMinute paces owner digests.
	digestsPerMinute int
	imagePulls       bool
	issuerChecks     bool
	issuerAllowed    []string
	pullThresholds   pullauth.Thresholds
	destinations     egress.Policy
}

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

func (o options) cloud() (azure.Cloud, error) {
	c, err := azure.CloudNamed(o.cloudName)
	if err != nil {
		return c, err
	}
	for _, override := range []struct {
		to   *string
		from string
	}{{&c.AuthorityHost, o.authorityHost}, {&c.GraphEndpoint, o.graphEndpoint}, {&c.GraphAudience, o.graphAudience}, {&c.ARMEndpoint, o.armEndpoint}, {&c.ARMAudience, o.armAudience}} {
		if override.from != "" {
			*override.to = override.from
		}
	}
	if o.armEndpoint != "" && o.armAudience == "" {
		// A private or test endpoint issues tokens for itself, not for the public cloud's audience.
		c.ARMAudience = strings.TrimSuffix(o.armEndpoint, "/") + "/"
	}
	return c, c.Validate()
}

// serviceAccountNamespaceFile holds, in a pod, the namespace of its service account: the pod's.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// operatorNamespace finds the operator's namespace the way operators do: --operator-namespace
// (whose default is POD_NAMESPACE), then, in a pod, its service account's; empty outside a pod
// when neither is given.
func operatorNamespace(flagged string, readFile func(string) ([]byte, error)) string {
	if flagged != "" {
		return flagged
	}
	if b, err := readFile(serviceAccountNamespaceFile); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}

// loadDefaultAlerts reads the operator-wide alert channels, nil when none are configured.
func (o options) loadDefaultAlerts() (*v1alpha1.Alerts, error) {
	if o.defaultAlerts == "" {
		return nil, nil
	}
	if o.namespace == "" {
		return nil, errors.New("--default-alerts needs --operator-namespace (or POD_NAMESPACE): the channels' Secrets are read there")
	}
	data, err := os.ReadFile(o.defaultAlerts)
	if err != nil {
		return nil, fmt.Errorf("reading --default-alerts: %w", err)
	}
	var a v1alpha1.Alerts
	if err := yaml.UnmarshalStrict(data, &a); err != nil {
		return nil, fmt.Errorf("--default-alerts %s: %w", o.defaultAlerts, err)
	}
	if len(a.RemindBefore) > 0 || a.CheckFailureAfter != "" || a.UseDefaultChannels != nil {
		return nil, fmt.Errorf("--default-alerts %s: only channels are set here; the schedule (remindBefore, checkFailureAfter) is each watch's own", o.defaultAlerts)
	}
	if a.Slack == nil && a.Email == nil && a.Teams == nil && a.Webhook == nil {
		return nil, fmt.Errorf("--default-alerts %s names no channel: set slack, email, teams or webhook", o.defaultAlerts)
	}
	return &a, nil
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
	// Rotations name their secrets after the cluster, so that watches of one application on two
	// clusters keep apart: its kube-system namespace's UID is the ID Kubernetes has for it.
	var kubeSystem corev1.Namespace
	if err := mgr.GetAPIReader().Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, &kubeSystem); err != nil {
		return fmt.Errorf("reading namespace kube-system, whose UID names this cluster: %w", err)
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
		return err
	}
	// The canary ServiceAccount of serviceAccountIssuer targets lives in the operator's namespace,
	// which validate made sure of.
	if o.issuerChecks {
		r.Issuer = &saissuer.Prober{Config: mgr.GetConfig(), Reader: mgr.GetAPIReader(), Namespace: o.namespace, Allowed: o.issuerAllowed}
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

// validate checks the flags that need no cluster, and reads the cloud and default channels.
func (o options) validate() (azure.Cloud, *v1alpha1.Alerts, error) {
	cloud, err := o.cloud()
	if err != nil {
		return cloud, nil, fmt.Errorf("cloud configuration: %w", err)
	}
	defaults, err := o.loadDefaultAlerts()
	if err != nil {
		return cloud, nil, err
	}
	if o.graphBudget <= 0 {
		return cloud, nil, fmt.Errorf("--graph-budget must be positive, not %d", o.graphBudget)
	}
	if o.issuerChecks && o.namespace == "" {
		// Without it the checks would be off, and watches would learn it only from their status.
		return cloud, nil, errors.New("the service-account issuer checks need the operator's namespace, where their canary ServiceAccount lives: " +
			"pass --operator-namespace, set POD_NAMESPACE, or run in a pod; or turn the checks off with --service-account-issuer=false")
	}
	return cloud, defaults, o.pullThresholds.Validate()
}

// managerOptions are the manager's, its metrics server's among them, which serves *watches.
func (o options) managerOptions(scheme *runtime.Scheme, watches **cwmetrics.Watches) ctrl.Options {
	metricsOpts := metricsserver.Options{
		BindAddress:   o.metricsAddr,
		SecureServing: o.secureMetrics,
		// HTTP/2 is off, as kubebuilder advises, against the HTTP/2 rapid-reset attacks.
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	}
	// controller-runtime's one hook around its /metrics handler is the filter.
	metricsOpts.FilterProvider = func(c *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
		authorize := metricsserver.Filter(func(_ logr.Logger, h http.Handler) (http.Handler, error) { return h, nil })
		if o.secureMetrics {
			var err error
			if authorize, err = filters.WithAuthenticationAndAuthorization(c, hc); err != nil {
				return nil, err
			}
		}
		return func(log logr.Logger, h http.Handler) (http.Handler, error) {
			return authorize(log, (*watches).Handler(h))
		}, nil
	}
	// The cache holds every watch for the life of the process: see internal/compact.
	cacheOpts := cache.Options{DefaultTransform: compact.Transform}
	if o.watchNamespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{o.watchNamespace: {}}
	}
	return ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsOpts,
		HealthProbeBindAddress: o.probeAddr,
		PprofBindAddress:       o.pprofAddr,
		LeaderElection:         o.leaderElection,
		LeaderElectionID:       "credwatch.credwatch.dev",
		// In a pod controller-runtime finds its namespace itself; outside one it must be told.
		LeaderElectionNamespace: o.namespace,
		// A new leader should not wait out the old one's lease after a clean stop.
		LeaderElectionReleaseOnCancel: true,
		// Reconciles under way get this long to finish on SIGTERM; their context is cancelled, so
		// the writes that must not be lost (a claimed alert's outcome, a new secret) run on their own.
		GracefulShutdownTimeout: &gracefulShutdown,
		Cache:                   cacheOpts,
		MapperProvider:          newRememberedMappings,
	}
}

// azure is Graph and Resource Manager in cloud, each client bound to an identity and a target.
func (o options) azure(cloud azure.Cloud, ids *azure.Identities) (*clients.Clients, error) {
	graphRequests, err := cwmetrics.NewGraphRequests(metrics.Registry)
	if err != nil {
		return nil, err
	}
	// The budget is spent before a request is counted: waiting for it is not a request.
	transport := budget.New(clock.RealClock{}, o.graphBudget).RoundTripper(graphRequests.RoundTripper(http.DefaultTransport))
	graphClient, err := msgraph.New(cloud.GraphEndpoint, transport)
	if err != nil {
		return nil, err
	}
	graphClient.SetScope(cloud.GraphScope())
	clusters, err := aks.New(cloud.ARMEndpoint, cloud.ARMAudience, nil)
	if err != nil {
		return nil, err
	}
	return clients.New(ids, planner.NewGraph(graphClient, clock.RealClock{}, planWindow), clusters), nil
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

// streamedLists has the cache's informers fill from a stream (client-go's WatchListClient, on by
// default from client-go 0.35; served by default by Kubernetes 1.32 and from 1.34): otherwise a
// list of every watch is one response holding them all, decoded at once with their
// managedFields, before the informer's transform trims them. On a restart at 30,000 checked
// watches that list took the operator past twice the memory it needed for the rest of its life
// (BENCHMARKS.md, section 0). An API server that refuses to stream is listed as before. One that
// accepts but never sends the bookmark ending the stream (some proxies) leaves the caches
// unsynced, and so do watch bookmarks turned off in the cache's options: there,
// KUBE_FEATURE_WatchListClient=false, client-go's own switch, turns streaming off.
type streamedLists struct {
	clientfeatures.Gates
	lookupEnv func(string) (string, bool)
}

func (g streamedLists) Enabled(f clientfeatures.Feature) bool {
	if f == clientfeatures.WatchListClient {
		if _, set := g.lookupEnv("KUBE_FEATURE_" + string(f)); !set {
			return true
		}
	}
	return g.Gates.Enabled(f)
}
