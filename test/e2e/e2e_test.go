// Package e2e runs the real credwatch binary as its own process against the test control plane
// and the Azure fakes, and drives it only as a person would: kubectl to apply the chart's CRD and
// the samples and to read what happened, and an HTTP scrape of its metrics.
package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/credwatch/credwatch/test/fakeazure"
	"github.com/credwatch/credwatch/test/fakegraph"
	"github.com/credwatch/credwatch/test/kubecfg"
)

// The samples' tenant and service principal, which the fake holds.
const (
	tenantID       = "72f988bf-86f1-41af-91ab-2d7cd011db47"
	sampleAppID    = "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c"
	operatorClient = "0e4d2c1b-9a8f-4e7d-b6c5-a4b3c2d1e0f9"
	operatorSecret = "e2e~operator-secret-0123456789"
	day            = 24 * time.Hour
)

func TestOperatorBinaryWithKubectl(t *testing.T) {
	needsControlPlane(t)
	work := t.TempDir()

	// The binaries, built as a user builds them: the operator, and the kubectl plugin on PATH.
	bin := operatorBinary(t)
	build := exec.Command("go", "build", "-o", filepath.Join(work, "kubectl-credwatch"), "./cmd/kubectl-credwatch")
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kubectl-credwatch: %v\n%s", err, out)
	}
	t.Setenv("PATH", work+string(os.PathListSeparator)+os.Getenv("PATH"))

	env := &envtest.Environment{}
	t.Cleanup(func() { _ = env.Stop() }) // also what a failed Start started
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := kubecfg.Write(cfg, "e2e", kubeconfig); err != nil {
		t.Fatal(err)
	}
	// kubectl takes no flags before a plugin's name; the plugin reads KUBECONFIG like kubectl does.
	t.Setenv("KUBECONFIG", kubeconfig)
	plugin := func(args ...string) (string, error) {
		t.Helper()
		out, err := exec.Command("kubectl", append([]string{"credwatch"}, args...)...).CombinedOutput()
		return string(out), err
	}
	kubectl := kubectlFor(t, kubeconfig)

	// Azure, as the fakes: Graph and Entra ID, and Resource Manager behind HTTPS, with the one
	// cluster the AKS sample names, on a managed identity.
	azure, err := fakeazure.Start(work, tenantID, operatorClient, operatorSecret, func(rg, name string) (string, bool) {
		return "msi", rg == "rg-prod" && name == "aks-prod"
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(azure.Close)
	// The fleet sample finds that cluster in the identity's one subscription.
	azure.AddToFleet("8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918", "rg-prod", "aks-prod")
	graph := azure.Graph
	start := time.Now().Add(-360 * day)
	graph.PutApplication(tenantID, fakegraph.Object{AppID: sampleAppID, DisplayName: "aks-prod-sp", Tags: []string{"aks"},
		Passwords: []fakegraph.PasswordCredential{{DisplayName: "rbac", SecretText: "sAm~ple-secret-0123456789", Start: start, End: time.Now().Add(5*day + time.Hour)}}})
	graph.PutServicePrincipal(tenantID, fakegraph.Object{AppID: sampleAppID, DisplayName: "aks-prod-sp"})

	kubectl("apply", "-f", "charts/credwatch/crds/")
	awaitEstablished(t, kubeconfig, "credentialwatches.credwatch.dev", "clusterazureidentities.credwatch.dev", "azureidentities.credwatch.dev")

	// The default alert channel: a webhook, whose URL is in a Secret of the operator's namespace.
	hook := newReceiver(t)
	kubectl("create", "namespace", "credwatch-system")
	kubectl("create", "secret", "generic", "alerts-hook", "-n", "credwatch-system", "--from-literal=url="+hook.URL)
	defaultAlerts := filepath.Join(work, "default-alerts.yaml")
	if err := os.WriteFile(defaultAlerts, []byte("webhook:\n  urlSecretRef: {name: alerts-hook, key: url}\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	metricsAddr := freeAddr(t)
	var logs bytes.Buffer
	runOperator := func() (*exec.Cmd, chan error) {
		// The test's peers listen on loopback, which a watch naming one would need allowed; the
		// default channel is the operator's own and needs nothing.
		return startOperator(t, bin, append([]string{
			"--kubeconfig", kubeconfig, "--health-probe-bind-address", freeAddr(t),
			"--metrics-bind-address", metricsAddr, "--metrics-secure=false", "--alert-destinations-allow=127.0.0.0/8",
			"--default-alerts", defaultAlerts, "--operator-namespace", "credwatch-system", "--default-identity", "credwatch-default"}, azure.Flags()...),
			azure.Env(), &logs)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the operator logged:\n%s", logs.String())
		}
	})
	op, exited := runOperator()

	kubectl("create", "namespace", "platform")
	// A cluster admin offers the operator's identity to the namespace; its user applies watches.
	kubectl("apply", "-f", "config/samples/credwatch_v1alpha1_clusterazureidentity.yaml")
	kubectl("apply", "-n", "platform", "-k", "config/samples")
	kubectl("wait", "-n", "platform", "--for=condition=Ready", "cw/aks-prod-sp", "cw/aks-prod-cluster", "cw/tenant-aks-apps", "cw/aks-fleet", "--timeout=60s")

	table := kubectl("get", "cw", "-n", "platform", "-o", "wide")
	for _, want := range []string{"aks-prod-sp", "Critical", "5d", sampleAppID, "aks-prod-cluster"} {
		if !strings.Contains(table, want) {
			t.Errorf("kubectl get cw does not show %q:\n%s", want, table)
		}
	}
	described := kubectl("describe", "cw", "-n", "platform", "aks-prod-cluster")
	if !strings.Contains(described, "ManagedIdentity") {
		t.Errorf("kubectl describe does not say the cluster uses a managed identity:\n%s", described)
	}
	events := kubectl("get", "events", "-n", "platform", "-o", "custom-columns=REASON:.reason,OBJECT:.involvedObject.name")
	if !strings.Contains(events, "CredentialCritical") {
		t.Errorf("no CredentialCritical event:\n%s", events)
	}

	// The expiring secret's reminder reaches the default channel. Then the process is killed
	// without warning and started again: the reminder is not sent again, and nothing is lost.
	hook.waitFor(t, 1)
	if err := op.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	op, exited = runOperator()
	kubectl("annotate", "cw", "-n", "platform", "aks-prod-sp", "credwatch.dev/check=after-restart")
	// A check asked for comes a minute after the watch's last at most (policy.EarlyCheckGap).
	deadline := time.Now().Add(90 * time.Second)
	for kubectl("get", "cw", "-n", "platform", "aks-prod-sp", "-o", "jsonpath={.status.checkRequest}") != "after-restart" {
		if time.Now().After(deadline) {
			t.Fatal("the restarted operator did not check on request")
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if got := hook.received(); len(got) != 1 {
		t.Errorf("the webhook received %d alerts across the restart, want the one reminder once: %v", len(got), got)
	}

	// Image pulls: the registry refuses three nodes for want of credentials. The sample watch of
	// the service principal the cluster pulls with says so, and its channel hears it once. A pull
	// event counts only when its pod bears it out: a pod on that node, waiting on that image.
	refusePulls(t, kubectl, work, "platform", []string{"aks-pool1-0", "aks-pool1-1", "aks-pool1-2"})
	kubectl("wait", "-n", "platform", "--for=condition=ImagePullsAuthorized=False", "cw/aks-prod-sp", "--timeout=60s")
	if reason := kubectl("get", "cw", "-n", "platform", "aks-prod-sp", "-o", `jsonpath={.status.conditions[?(@.type=="ImagePullsAuthorized")].reason}`); reason != "ClusterWidePullFailures" {
		t.Errorf("ImagePullsAuthorized reason %q, want ClusterWidePullFailures", reason)
	}
	hook.waitFor(t, 2)

	// The service-account issuer of this one API server, through the canary ServiceAccount in the
	// operator's namespace: the binary reads the discovery document and JWKS and has its canary
	// token reviewed. (The kubernetes Service advertises an address envtest does not serve on, so
	// the endpoint is named.)
	kubectl("create", "serviceaccount", "credwatch-canary", "-n", "credwatch-system")
	issuerWatch := filepath.Join(work, "issuer.yaml")
	if err := os.WriteFile(issuerWatch, []byte(fmt.Sprintf(`apiVersion: credwatch.dev/v1alpha1
kind: CredentialWatch
metadata: {name: cluster-issuer, namespace: platform}
spec:
  target:
    serviceAccountIssuer:
      endpoints: [%q]
`, strings.TrimSuffix(cfg.Host, "/"))), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl("apply", "-f", issuerWatch)
	kubectl("wait", "-n", "platform", "--for=condition=SigningKeyDrift=False", "cw/cluster-issuer", "--timeout=60s")
	if keys := kubectl("get", "cw", "-n", "platform", "cluster-issuer", "-o", "jsonpath={.status.serviceAccountIssuer.endpoints[0].keyIDs}"); keys == "" || keys == "[]" {
		t.Errorf("the issuer watch records no key: %q", keys)
	}

	// The plugin: a table of every credential, a check on request, a refused rotation.
	table, err = plugin("status", "-A")
	if err != nil || !strings.Contains(table, "aks-prod-sp") || !strings.Contains(table, "Critical") || !strings.Contains(table, "aks-prod-cluster") {
		t.Errorf("kubectl credwatch status: %v\n%s", err, table)
	}
	if out, err := plugin("check", "aks-prod-sp", "-n", "platform"); err != nil {
		t.Fatalf("kubectl credwatch check: %v\n%s", err, out)
	}
	asked := kubectl("get", "cw", "-n", "platform", "aks-prod-sp", "-o", "jsonpath={.metadata.annotations.credwatch\\.dev/check}")
	deadline = time.Now().Add(30 * time.Second)
	for kubectl("get", "cw", "-n", "platform", "aks-prod-sp", "-o", "jsonpath={.status.checkRequest}") != asked {
		if time.Now().After(deadline) {
			t.Fatal("the check asked for with kubectl credwatch check was not made")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out, err := plugin("rotate", "-n", "platform", "aks-prod-sp"); err == nil || !strings.Contains(out, "rotation enabled") {
		t.Errorf("rotating a watch without rotation: %v\n%s", err, out)
	}

	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	scrape, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, want := range []string{
		`credwatch_credential_expiration_timestamp_seconds{client_id="` + sampleAppID + `"`,
		// The tenant sample's scan, filtered to the tagged application.
		`credwatch_credential_expiration_timestamp_seconds{client_id="` + sampleAppID + `",key_id=`,
		`name="tenant-aks-apps",namespace="platform",source="Application",type="Password"}`,
		`credwatch_watch_ready_status{client_id="",condition="True",name="aks-prod-cluster",namespace="platform"} 1`,
		`credwatch_graph_requests_total{code="200"}`,
		// The fleet sample's one cluster, on a managed identity.
		`credwatch_aks_cluster_info{client_id="",cluster="/subscriptions/8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918/resourceGroups/rg-prod/providers/Microsoft.ContainerService/managedClusters/aks-prod",identity="ManagedIdentity",name="aks-fleet",namespace="platform",subscription_id="8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918"} 1`,
		`credwatch_image_pull_refused_nodes{registry="myacr.azurecr.io",scope="ClusterWide"} 3`,
	} {
		if !strings.Contains(string(scrape), want) {
			t.Errorf("the metrics do not show %s", want)
		}
	}

	// The binary reads credentials by lists in a $batch, so many watches share a request.
	listed := 0
	for _, r := range graph.Requests() {
		if r.Batched && r.Path == "/v1.0/servicePrincipals" && strings.Contains(r.RawQuery, "filter=appId") {
			listed++
		}
	}
	if listed == 0 {
		t.Error("no credential read went through a list in a $batch")
	}

	// A clean stop on SIGTERM, within the pod's grace period.
	if err := op.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the operator stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("the operator did not stop within 30s of SIGTERM")
	}
	for _, secret := range []string{operatorSecret, "sAm~ple-secret"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the operator logged a secret (%s...)", secret[:4])
		}
	}
	if !strings.Contains(logs.String(), `"level":"info"`) {
		t.Errorf("the operator's logs are not JSON:\n%s", logs.String())
	}
}

// receiver is the default alert channel's webhook, keeping the alert IDs that arrived.
type receiver struct {
	*httptest.Server
	mu  sync.Mutex
	ids []string
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		rc.ids = append(rc.ids, r.Header.Get("X-Credwatch-Delivery"))
		rc.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) received() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.ids...)
}

func (rc *receiver) waitFor(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(rc.received()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the webhook received %d alerts, want %d", len(rc.received()), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
