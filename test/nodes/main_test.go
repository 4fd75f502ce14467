// Package nodes tells credwatch's stories on real nodes: two kubelets with containerd pulling from
// a registry that speaks ACR's token protocol, with the credential AKS gives its nodes (the real
// acr-credential-provider reading a per-node azure.json), and Entra ID's fake deciding whether
// the cluster's service principal may sign in. One cluster serves every test of the package.
package nodes

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack/slacktest"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	credwatchv1alpha1 "github.com/credwatch/credwatch/api/v1alpha1"

	"github.com/credwatch/credwatch/test/cluster"
	"github.com/credwatch/credwatch/test/fakeazure"
	"github.com/credwatch/credwatch/test/fakegraph"
	"github.com/credwatch/credwatch/test/mailpit"
	"github.com/credwatch/credwatch/test/registry"
	"github.com/credwatch/credwatch/test/slacklog"
)

const (
	tenantID = "72f988bf-86f1-41af-91ab-2d7cd011db47"
	// clusterApp is the cluster's service principal, whose secret the nodes pull with.
	clusterApp = "5b1f4c2e-9d3a-4e7b-8c6f-2a1d0e9b7c35"
	// loginServer is the registry's name in the pods' images, as ACR names registries; the
	// nodes' containerd sends it to the registry on the host.
	loginServer = "credwatch.azurecr.io"
	appImage    = loginServer + "/team/app:v1"
	pauseImage  = "localhost/credwatch/pause:test"
)

// env is what TestMain started for every test.
var env struct {
	cluster  *cluster.Cluster
	client   kubernetes.Interface
	crClient client.Client
	azure    *fakeazure.Azure
	graph    *fakegraph.Server
	registry *registry.Registry
	// mail and slack receive the alerts, at smtpAddr and slackAPI where pods reach them.
	mail     *mailpit.Server
	slack    *slacklog.Log
	smtpAddr string
	slackAPI string
	// secret is the cluster's service-principal secret the nodes' azure.json holds.
	secret fakegraph.PasswordCredential
}

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() || os.Getenv("CLUSTER_ASSETS") == "" {
		// Under -short, or outside `make test`, the tests say why they do not run.
		os.Exit(m.Run())
	}
	// What a killed run left is removed first, as Up would, so that what the machine had is known.
	if err := cluster.Sweep(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	before := hostState()
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	// Everything the cluster made is gone: its processes, network, mounts, cgroups and files, and
	// the host's iptables rules and the folders the daemons write to are as they were.
	if left := cluster.Leftovers(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "left on the machine: %v\n", left)
		code = 1
	}
	if after := hostState(); !slices.Equal(after, before) {
		fmt.Fprintf(os.Stderr, "the host changed:\nbefore %v\nafter  %v\n", before, after)
		code = 1
	}
	os.Exit(code)
}

// hostState is what the cluster must leave as it found it outside its own names: the host's
// iptables rules (the cluster's are in the nodes' network namespaces), what the folders hold that
// the daemons write to whatever they are configured with, and the kernel settings.
func hostState() []string {
	rules, err := exec.Command("iptables-save").Output()
	if err != nil {
		return []string{"iptables-save: " + err.Error()}
	}
	var state []string
	for _, line := range strings.Split(string(rules), "\n") {
		if strings.HasPrefix(line, "-") {
			state = append(state, "rule "+line)
		}
	}
	return append(state, cluster.HostState()...)
}

func run(m *testing.M) (int, error) {
	env.secret = fakegraph.PasswordCredential{KeyID: "9e2b7c4d-1a3f-4e5b-8c7d-6f0a1b2c3d4e", DisplayName: "rbac",
		SecretText: "nodes~cluster-secret-0123456789", Start: time.Now().Add(-360 * 24 * time.Hour), End: time.Now().Add(5 * 24 * time.Hour).Truncate(time.Second)}
	providers := os.Getenv("CREDENTIAL_PROVIDERS")
	c, err := cluster.Up(context.Background(), cluster.Config{
		Assets: os.Getenv("CLUSTER_ASSETS"),
		Images: []string{filepath.Join(os.Getenv("CLUSTER_IMAGES"), "pause.tar"), os.Getenv("CREDWATCH_IMAGE")},
		Pause:  pauseImage,
		KubeletArgs: func(n *cluster.Node) []string {
			return []string{"--image-credential-provider-config=" + writeProviderConfig(n), "--image-credential-provider-bin-dir=" + providers}
		},
	})
	if err != nil {
		return 1, err
	}
	env.cluster = c
	defer func() { _ = c.Down() }()
	env.client = kubernetes.NewForConfigOrDie(c.Config)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return 1, err
	}
	if err := credwatchv1alpha1.AddToScheme(scheme); err != nil {
		return 1, err
	}
	if env.crClient, err = client.New(c.Config, client.Options{Scheme: scheme}); err != nil {
		return 1, err
	}
	if err := os.MkdirAll(filepath.Join(cluster.Dir, "azure"), 0o700); err != nil {
		return 1, err
	}
	if err := startAzure(c); err != nil {
		return 1, err
	}
	defer env.azure.Close()
	putClusterApp(env.secret)
	if err := startRegistry(c); err != nil {
		return 1, err
	}
	stopChannels, err := startChannels(c)
	if err != nil {
		return 1, err
	}
	defer stopChannels()
	code := 1
	if err = pushApp(c); err == nil {
		code = m.Run()
	}
	if code != 0 {
		fmt.Fprintln(os.Stderr, c.LogTails(40))
	}
	// The registry writes under the cluster's folder: it stops before Down removes it.
	return code, errors.Join(err, env.registry.Close(), c.Down())
}

// startChannels starts the alert channels' servers on the machine's loopback, mailpit and
// slacktest, and exposes them on the bridge for the operator's pod.
func startChannels(c *cluster.Cluster) (stop func(), err error) {
	dir := filepath.Join(cluster.Dir, "mailpit")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if env.mail, err = mailpit.Run(dir); err != nil {
		return nil, err
	}
	srv := slacktest.NewTestServer()
	srv.Start()
	ctx, cancel := context.WithCancel(context.Background())
	env.slack = slacklog.Listen(ctx, srv)
	stop = func() {
		cancel()
		srv.Stop()
		env.mail.Stop()
	}
	if env.smtpAddr, err = c.Expose(env.mail.SMTPAddr()); err != nil {
		stop()
		return nil, err
	}
	relay, err := c.Expose(srv.ServerAddr)
	if err != nil {
		stop()
		return nil, err
	}
	env.slackAPI = "http://" + relay + "/"
	return stop, nil
}

// putClusterApp puts the cluster's application with its one secret, as Entra holds it.
func putClusterApp(secret fakegraph.PasswordCredential) {
	env.graph.PutApplication(tenantID, fakegraph.Object{AppID: clusterApp, DisplayName: "aks-nodes-sp", Passwords: []fakegraph.PasswordCredential{secret}})
	env.graph.PutServicePrincipal(tenantID, fakegraph.Object{AppID: clusterApp, DisplayName: "aks-nodes-sp"})
}

// writeProviderConfig writes what AKS gives a node's kubelet to pull from ACR: the credential
// provider's configuration, and azure.json with the cluster's service principal.
func writeProviderConfig(n *cluster.Node) string {
	writeAzureJSON(n, clusterApp, env.secret.SecretText)
	conf := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: acr-credential-provider
    matchImages: ["*.azurecr.io", "*.azurecr.cn", "*.azurecr.de", "*.azurecr.us"]
    defaultCacheDuration: 10m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
    args: [%q]
`, filepath.Join(n.Dir(), "azure.json"))
	file := filepath.Join(n.Dir(), "credential-provider.yaml")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		panic(err)
	}
	return file
}

// writeAzureJSON writes the node's /etc/kubernetes/azure.json, as AKS does on a node's creation
// and on a reset of the cluster's service principal.
func writeAzureJSON(n *cluster.Node, clientID, secret string) {
	conf := fmt.Sprintf(`{"cloud": "AzurePublicCloud", "tenantId": %q, "aadClientId": %q, "aadClientSecret": %q,
 "subscriptionId": %q, "resourceGroup": "MC_rg-prod_aks-prod_westeurope", "location": "westeurope",
 "useManagedIdentityExtension": false, "userAssignedIdentityID": ""}
`, tenantID, clientID, secret, subscriptionID)
	if err := os.WriteFile(filepath.Join(n.Dir(), "azure.json"), []byte(conf), 0o600); err != nil {
		panic(err)
	}
}

// startAzure starts the fakes of Microsoft Graph, Entra ID and Resource Manager on the host's
// address on the bridge, where the operator's pod reaches them, with a certificate of the
// cluster's CA, which the pod is given as a private cloud's CA would be. Resource Manager knows
// one cluster, aks-prod, whose nodes sign in as the cluster's service principal.
func startAzure(c *cluster.Cluster) error {
	certFile, keyFile, err := c.ServingCert("azure", []net.IP{net.ParseIP(cluster.HostIP)})
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return err
	}
	env.azure, err = fakeazure.StartOn(filepath.Join(cluster.Dir, "azure"), tenantID, operatorClient, operatorSecret,
		func(rg, name string) (string, bool) { return clusterApp, rg == "rg-prod" && name == "aks-prod" }, cluster.HostIP, &cert)
	if err != nil {
		return err
	}
	env.graph = env.azure.Graph
	env.azure.OnReset(resetNodes)
	return nil
}

// reset is a reset of the cluster's service principal, as the nodes' agent saw it: when, onto
// which of the application's secrets (by keyId), and a digest of the secret's text.
type reset struct {
	at     time.Time
	keyID  string
	digest [sha256.Size]byte
}

// agent is the nodes' agent, which AKS runs on each node of a cluster it resets.
var agent struct {
	mu     sync.Mutex
	resets []reset
}

// resetNodes does on the nodes what AKS does when Resource Manager resets the cluster's service
// principal: each node's azure.json gets the new client ID and secret, and its kubelet restarts
// (AKS restarts or reimages the nodes), so that the next pull signs in with them. Resource
// Manager's operation succeeds only once every node has them.
func resetNodes(_, _, clientID, secret string) error {
	seen := reset{at: time.Now(), digest: sha256.Sum256([]byte(secret))}
	app, _ := env.graph.Application(tenantID, clientID)
	for _, p := range app.Passwords {
		if p.SecretText == secret {
			seen.keyID = p.KeyID
		}
	}
	agent.mu.Lock()
	agent.resets = append(agent.resets, seen)
	agent.mu.Unlock()
	return moveNodes(clientID, secret)
}

// moveNodes gives every node's kubelet the client ID and secret, one node after the other.
func moveNodes(clientID, secret string) error {
	for _, n := range env.cluster.Nodes {
		writeAzureJSON(n, clientID, secret)
		if err := env.cluster.RestartKubelet(n); err != nil {
			return err
		}
	}
	return nil
}

// resets are the resets the nodes' agent has seen.
func resets() []reset {
	agent.mu.Lock()
	defer agent.mu.Unlock()
	return slices.Clone(agent.resets)
}

func startRegistry(c *cluster.Cluster) error {
	cert, key, err := c.ServingCert("registry", []net.IP{net.ParseIP(cluster.HostIP)})
	if err != nil {
		return err
	}
	env.registry, err = registry.Start(context.Background(), registry.Config{
		Binary: os.Getenv("REGISTRY_BIN"), Dir: filepath.Join(cluster.Dir, "registry"),
		Addr: net.JoinHostPort(cluster.HostIP, "5000"), LoginServer: loginServer,
		CertFile: cert, KeyFile: key, Entra: env.graph, Tenant: tenantID, Pullers: []string{clusterApp},
	})
	if err != nil {
		return err
	}
	return env.registry.WriteHosts(c.HostsDir(), c.CAFile())
}

// pushApp pushes the team's image to the registry as its admin would, from the first node's
// containerd, which has the image's content, and then forgets it there, so that every node
// pulls it.
func pushApp(c *cluster.Cluster) error {
	n := c.Nodes[0]
	steps := [][]string{
		{"images", "tag", pauseImage, appImage},
		{"images", "push", "--hosts-dir", c.HostsDir(), "--user", env.registry.Admin[0] + ":" + env.registry.Admin[1], appImage},
		{"images", "rm", appImage},
	}
	for _, s := range steps {
		if _, err := n.Ctr(s...); err != nil {
			return fmt.Errorf("pushing the team's image: %w", err)
		}
	}
	return nil
}
