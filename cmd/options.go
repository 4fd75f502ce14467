package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	// Maintenance windows name IANA time zones; the operator's image need not ship a zoneinfo.
	_ "time/tzdata"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/azure/clients"
	"github.com/credwatch/credwatch/internal/compact"
	"github.com/credwatch/credwatch/internal/egress"
	"github.com/credwatch/credwatch/internal/graph/budget"
	"github.com/credwatch/credwatch/internal/graph/deltastore"
	"github.com/credwatch/credwatch/internal/graph/msgraph"
	"github.com/credwatch/credwatch/internal/graph/planner"
	cwmetrics "github.com/credwatch/credwatch/internal/metrics"
	"github.com/credwatch/credwatch/internal/pullauth"
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
	// ownerDomains are the domains owners' mail may go to; empty, each tenant's verified ones.
	ownerDomains   []string
	imagePulls     bool
	issuerChecks   bool
	issuerAllowed  []string
	pullThresholds pullauth.Thresholds
	destinations   egress.Policy
	// deltaReads answers checks from Graph's changes where that costs less; deltaFullEvery is
	// how often those checks are read and compared instead.
	deltaReads     bool
	deltaFullEvery time.Duration
	// publishHosts are the GitHub API hosts rotations may publish secrets to.
	publishHosts []string
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
	if err := o.checkSlackAPIURL(); err != nil {
		return cloud, nil, err
	}
	if o.issuerChecks && o.namespace == "" {
		// Without it the checks would be off, and watches would learn it only from their status.
		return cloud, nil, errors.New("the service-account issuer checks need the operator's namespace, where their canary ServiceAccount lives: " +
			"pass --operator-namespace, set POD_NAMESPACE, or run in a pod; or turn the checks off with --service-account-issuer=false")
	}
	return cloud, defaults, o.pullThresholds.Validate()
}

// checkSlackAPIURL refuses a Slack API root that would carry every watch's bot token in clear
// text: it is https, or plain http only to loopback or an --alert-destinations-allow address (a
// test server, a relay inside the cluster), as watches' own webhooks are.
func (o options) checkSlackAPIURL() error {
	if o.slackAPIURL == "" {
		return nil
	}
	u, err := url.Parse(o.slackAPIURL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("--slack-api-url %q: want an https URL, such as https://slack-gov.com/api/", o.slackAPIURL)
	}
	if u.Scheme == "http" {
		a, err := netip.ParseAddr(u.Hostname())
		if err != nil || (!a.IsLoopback() && !o.destinations.Allowlisted(a)) {
			return fmt.Errorf("--slack-api-url %q: plain http would carry every watch's Slack token in clear text; use https, or an address --alert-destinations-allow lists", o.slackAPIURL)
		}
	}
	return nil
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
func (o options) azure(cloud azure.Cloud, ids *azure.Identities) (*clients.Clients, *planner.Graph, error) {
	graphRequests, err := cwmetrics.NewGraphRequests(metrics.Registry)
	if err != nil {
		return nil, nil, err
	}
	// The budget is spent before a request is counted: waiting for it is not a request.
	transport := budget.New(clock.RealClock{}, o.graphBudget).RoundTripper(graphRequests.RoundTripper(http.DefaultTransport))
	graphClient, err := msgraph.New(cloud.GraphEndpoint, transport)
	if err != nil {
		return nil, nil, err
	}
	graphClient.SetScope(cloud.GraphScope())
	clusters, err := aks.New(cloud.ARMEndpoint, cloud.ARMAudience, nil)
	if err != nil {
		return nil, nil, err
	}
	g := planner.NewGraph(graphClient, clock.RealClock{}, planWindow)
	return clients.New(ids, g, clusters), g, nil
}

// useDelta has g answer checks from Graph's changes, kept in the operator's namespace, unless
// --delta-reads=false or the operator was not told its namespace.
func (o options) useDelta(mgr ctrl.Manager, g *planner.Graph) error {
	if !o.deltaReads || o.namespace == "" {
		ctrl.Log.Info("Checks are read, never answered from Graph's changes", "deltaReads", o.deltaReads, "operatorNamespace", o.namespace)
		return nil
	}
	counters, err := cwmetrics.NewDeltaRounds(metrics.Registry)
	if err != nil {
		return err
	}
	return g.UseDelta(planner.DeltaOptions{FullEvery: o.deltaFullEvery, Keeper: &deltastore.Store{
		Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(), Namespace: o.namespace,
		Events: mgr.GetEventRecorderFor("credwatch"), Counters: counters, Log: ctrl.Log.WithName("delta"),
	}})
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

// bindFlags binds the operator's flags to o.
func (o *options) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "Address of the metrics endpoint; 0 disables it.")
	fs.BoolVar(&o.secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS, authenticated and authorised through the API server.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the liveness and readiness probes.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address of Go's pprof endpoints, for profiling memory and CPU; empty (the default) serves none.")
	fs.BoolVar(&o.leaderElection, "leader-elect", true, "Elect a leader, so that only one replica acts at a time.")
	fs.StringVar(&o.watchNamespace, "watch-namespace", "", "Watch only this namespace; empty watches all.")
	fs.StringVar(&o.cloudName, "azure-cloud", "AzurePublic", "Azure cloud: AzurePublic, AzureChina or AzureUSGovernment.")
	fs.StringVar(&o.authorityHost, "azure-authority-host", "", "Entra ID authority host; overrides the cloud's.")
	fs.StringVar(&o.graphEndpoint, "graph-endpoint", "", "Microsoft Graph endpoint; overrides the cloud's.")
	fs.StringVar(&o.graphAudience, "graph-audience", "", "Audience of Microsoft Graph tokens; empty means the Graph endpoint, which is Graph's audience in every Azure cloud.")
	fs.StringVar(&o.armEndpoint, "arm-endpoint", "", "Azure Resource Manager endpoint; overrides the cloud's.")
	fs.StringVar(&o.armAudience, "arm-audience", "", "Audience of Resource Manager tokens; overrides the cloud's (with --arm-endpoint alone, the endpoint).")
	fs.StringVar(&o.defaultID, "default-identity", "", "ClusterAzureIdentity used by watches that name no spec.identityRef; empty, such watches are not checked (Ready False NoIdentity). The identity still decides what they may do, and which namespaces may use it.")
	fs.StringVar(&o.defaultAlerts, "default-alerts", "", "YAML file of the alert channels (a CredentialWatch spec.alerts) for watches that name none; their Secrets live in the operator's namespace.")
	fs.Func("owner-mail-domains", "Domains, comma-separated, that mail to applications' owners (notifyOwners) may go to; empty (the default), each tenant's verified domains, "+
		"read from Graph with the watch's identity (Organization.Read.All). A guest owner is never mailed.", func(v string) error {
		for _, d := range strings.Split(v, ",") {
			d = strings.ToLower(strings.TrimSpace(d))
			if d == "" {
				continue
			}
			if errs := validation.IsDNS1123Subdomain(d); len(errs) > 0 {
				return fmt.Errorf("%q is not a domain name: %s", d, strings.Join(errs, "; "))
			}
			o.ownerDomains = append(o.ownerDomains, d)
		}
		return nil
	})
	fs.IntVar(&o.digestsPerMinute, "digest-messages-per-minute", 30, "Owner digests and expiry messages of tenant scans sent in any minute, by all watches together: Exchange Online takes 30 a minute from one sender. 0 for no limit.")
	fs.IntVar(&o.graphBudget, "graph-budget", budget.SmallTenant, "Microsoft Graph resource units per 10 s credwatch may spend per application and tenant: 3500, 5000 or 8000 by tenant size (under 50, up to 500, over 500 users); lower leaves room for other applications.")
	fs.StringVar(&o.slackAPIURL, "slack-api-url", "", "Slack's Web API root for bot tokens, for GovSlack or a test server; empty means Slack's.")
	fs.BoolVar(&o.issuerChecks, "service-account-issuer", true, "Check the API servers' service-account issuer for watches with a serviceAccountIssuer target (needs the canary ServiceAccount in --operator-namespace, and the rights the chart's serviceAccountIssuer.enabled grants).")
	fs.Func("issuer-endpoints", "API server endpoints (https://host:port, comma-separated) that serviceAccountIssuer watches may name besides the kubernetes Service's and the operator's own.", func(v string) error {
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				o.issuerAllowed = append(o.issuerAllowed, e)
			}
		}
		return nil
	})
	o.bindPublishHosts(fs)
	fs.BoolVar(&o.deltaReads, "delta-reads", true, "Answer the checks of an identity that may scan its tenant (TenantScan) and watches more than fifteen of its applications from Microsoft Graph's changes to the tenant (delta queries), kept in the operator's namespace, rather than read each application; and scan a tenant (TenantScan without a filter) from the changes since its last scan, held in memory, rather than list it each time.")
	fs.DurationVar(&o.deltaFullEvery, "delta-full-every", 24*time.Hour, "How long a watch answered from Graph's changes goes before it is read again, and a tenant scanned from them before it is listed again, any difference counted in credwatch_graph_delta_missed_total; 0 never.")
	fs.BoolVar(&o.imagePulls, "image-pulls", true, "Watch the cluster's image pulls for registries refusing credentials (needs list and watch on events, pods and nodes), for watches that set spec.imagePulls.")
	fs.DurationVar(&o.pullThresholds.Window, "image-pull-window", pullauth.DefaultThresholds.Window, "How far back image pulls count when telling a cluster-wide credential failure from a node's.")
	fs.IntVar(&o.pullThresholds.ClusterWideNodes, "image-pull-cluster-wide-nodes", pullauth.DefaultThresholds.ClusterWideNodes, "Nodes refused by a registry that make the failure the cluster's credential (in a smaller cluster, all its nodes).")
	fs.DurationVar(&o.pullThresholds.Settle, "image-pull-settle", pullauth.DefaultThresholds.Settle, "How long the refusals of an image-pull incident are gathered before it is told: the nodes of one failure report it within seconds of each other.")
	fs.IntVar(&o.pullThresholds.NodeLocalMaxNodes, "image-pull-node-local-max-nodes", pullauth.DefaultThresholds.NodeLocalMaxNodes, "At most this many refused nodes, while others pull from the registry, make the failure those nodes' kubelets.")
	fs.Var(&o.destinations.Allow, "alert-destinations-allow", "CIDRs, comma-separated, that the webhooks and SMTP hosts a CredentialWatch names may reach though they are loopback, private or link-local (a relay inside the cluster); plain http only to these. The default channels are not limited.")
	fs.Var(&o.destinations.Deny, "alert-destinations-deny", "CIDRs, comma-separated, that the webhooks and SMTP hosts a CredentialWatch names may not reach, besides loopback, private and link-local ranges: the cluster's Service and Pod CIDRs. Wins over --alert-destinations-allow.")
	fs.StringVar(&o.namespace, "operator-namespace", os.Getenv("POD_NAMESPACE"), "The operator's own namespace: the default channels' Secrets, cluster identities' Secrets and ServiceAccounts, the issuer checks' canary and the leader's Lease live there. Empty: POD_NAMESPACE, then the namespace of the pod's service account.")
}

// signInsUnavailable says why the cloud has no sign-in activity reports: Graph serves them in
// the global cloud only.
func signInsUnavailable(cloud string) string {
	if cloud == "AzurePublic" {
		return ""
	}
	return "Graph's sign-in activity reports are not available in this cloud (" + cloud + "), only in the global one"
}

// bindPublishHosts binds --publish-hosts, the API hosts rotations may publish secrets to.
func (o *options) bindPublishHosts(fs *flag.FlagSet) {
	// Only hosts a sink kind speaks to: a GitHub sink may name any listed host, and sends its token there.
	o.publishHosts = []string{"api.github.com"}
	fs.Func("publish-hosts", "GitHub API hosts, comma-separated, that rotations may publish new secrets to (spec.rotation.publish githubActions): api.github.com by default; add a GitHub Enterprise Server's host to publish there.", func(v string) error {
		o.publishHosts = nil
		for _, h := range strings.Split(v, ",") {
			if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
				o.publishHosts = append(o.publishHosts, h)
			}
		}
		return nil
	})
}
