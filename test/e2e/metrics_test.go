package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"sigs.k8s.io/yaml"

	"github.com/credwatch/credwatch/test/controlplane"
	"github.com/credwatch/credwatch/test/fakeazure"
	"github.com/credwatch/credwatch/test/fakegraph"
	"github.com/credwatch/credwatch/test/kubecfg"
	"github.com/credwatch/credwatch/test/promtool"
)

const subscriptionID = "8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918"

// Every family the operator exposes: the fixture below brings each about, so that promtool sees
// them all and every dashboard panel has data.
var families = []string{
	"credwatch_credential_expiration_timestamp_seconds", "credwatch_credential_superseded", "credwatch_credential_policy_findings",
	"credwatch_watch_ready_status", "credwatch_watch_last_check_timestamp_seconds", "credwatch_watch_consecutive_check_failures",
	"credwatch_watch_state", "credwatch_watch_last_rotation_timestamp_seconds", "credwatch_watch_signing_key_drift",
	"credwatch_watch_rotation_in_progress", "credwatch_watch_rotation_step_failures", "credwatch_watch_rotation_blocked",
	"credwatch_aks_cluster_credential_expiration_timestamp_seconds", "credwatch_aks_cluster_info",
	"credwatch_graph_requests_total",
	"credwatch_image_pull_refusals_total", "credwatch_image_pull_refused_nodes", "credwatch_image_pull_events_ignored_total",
}

// TestScrapesPassPromtoolAndFeedTheDashboard runs the binary with a watch of every target kind,
// in every state a metric tells (valid to expired, renewed, failing, rotating, rotated, a policy
// finding, two API servers that drift, a fleet of both kinds of cluster, pulls refused
// cluster-wide), scrapes it twice, and has Prometheus's own tools judge the scrapes: promtool
// check metrics finds no fault in credwatch's names and help, and each query of the chart's
// dashboard, evaluated on the two scrapes by Prometheus's engine, has data.
func TestScrapesPassPromtoolAndFeedTheDashboard(t *testing.T) {
	needsControlPlane(t)
	work := t.TempDir()
	bin := operatorBinary(t)

	// Two API servers on one etcd that sign service-account tokens with different keys.
	cp := controlplane.Start(t)
	cp.StartB("k2", "k2")
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := kubecfg.Write(cp.Config, "metrics", kubeconfig); err != nil {
		t.Fatal(err)
	}
	kubectl := kubectlFor(t, kubeconfig)

	clusterApp := appID(100)
	azure, err := fakeazure.Start(work, tenantID, operatorClient, operatorSecret, func(rg, name string) (string, bool) {
		switch {
		case rg != "rg-prod":
			return "", false
		case name == "aks-sp":
			return clusterApp, true
		case name == "aks-mi":
			return "msi", true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(azure.Close)
	azure.AddToFleet(subscriptionID, "rg-prod", "aks-sp")
	azure.AddToFleet(subscriptionID, "rg-prod", "aks-mi")
	now := time.Now()
	secret := func(name string, start, end time.Duration) fakegraph.PasswordCredential {
		return fakegraph.PasswordCredential{KeyID: uuid.NewString(), DisplayName: name, SecretText: "e2e~" + name + "-0123456789", Start: now.Add(start), End: now.Add(end)}
	}
	// Watched applications, by the watch's name; "missing" names one Graph does not have.
	apps := map[string][]fakegraph.PasswordCredential{
		// 800 days long: a LongLived finding.
		"valid":    {secret("valid", -600*day, 200*day)},
		"warning":  {secret("warning", -345*day, 20*day)},
		"critical": {secret("critical", -360*day, 5*day)},
		"expired":  {secret("expired", -366*day, -day)},
		// Renewed with --append: the old secret stays beside the new.
		"renewed": {secret("renewed-old", -360*day, 5*day), secret("renewed-new", -day, 364*day)},
		// Due for rotation (30 days before its end, by default).
		"rotating": {secret("rotating", -355*day, 10*day)},
	}
	var watches strings.Builder
	i := 0
	for name, secrets := range apps {
		i++
		id := appID(i)
		azure.Graph.PutApplication(tenantID, fakegraph.Object{AppID: id, DisplayName: name, Passwords: secrets})
		azure.Graph.PutServicePrincipal(tenantID, fakegraph.Object{AppID: id, DisplayName: name})
		extra := ""
		switch name {
		case "critical":
			// In use, as its sign-in says; "warning" never signed in.
			azure.Graph.SignIn(tenantID, secrets[0].KeyID, now.Add(-time.Hour))
			extra = "  imagePulls: {registries: [\"*.azurecr.io\"]}\n  usage: {signIns: true}\n"
		case "warning":
			extra = "  usage: {signIns: true}\n"
		case "rotating":
			extra = "  rotation: {enabled: true, secretRef: {name: rotating-sp}}\n"
		}
		fmt.Fprintf(&watches, "---\napiVersion: credwatch.dev/v1alpha1\nkind: CredentialWatch\nmetadata: {name: %s, namespace: platform}\n"+
			"spec:\n  target:\n    servicePrincipal: {tenantID: %s, clientID: %s}\n%s", name, tenantID, id, extra)
	}
	azure.Graph.PutApplication(tenantID, fakegraph.Object{AppID: clusterApp, DisplayName: "aks-sp", Passwords: []fakegraph.PasswordCredential{secret("aks-sp", -100*day, 100*day)}})
	azure.Graph.PutServicePrincipal(tenantID, fakegraph.Object{AppID: clusterApp, DisplayName: "aks-sp"})
	fmt.Fprintf(&watches, `---
apiVersion: credwatch.dev/v1alpha1
kind: CredentialWatch
metadata: {name: missing, namespace: platform}
spec:
  target:
    servicePrincipal: {tenantID: %[1]s, clientID: %[2]s}
---
apiVersion: credwatch.dev/v1alpha1
kind: CredentialWatch
metadata: {name: cluster, namespace: platform}
spec:
  target:
    aksCluster: {tenantID: %[1]s, subscriptionID: %[3]s, resourceGroup: rg-prod, name: aks-sp}
---
apiVersion: credwatch.dev/v1alpha1
kind: CredentialWatch
metadata: {name: cluster-mi, namespace: platform}
spec:
  target:
    aksCluster: {tenantID: %[1]s, subscriptionID: %[3]s, resourceGroup: rg-prod, name: aks-mi}
  # A cluster on a managed identity has no secret to rotate: the rotation is blocked.
  rotation: {enabled: true, secretRef: {name: cluster-mi-sp}}
---
apiVersion: credwatch.dev/v1alpha1
kind: CredentialWatch
metadata: {name: tenant, namespace: platform}
spec:
  target:
    tenantScan: {tenantID: %[1]s}
---
apiVersion: credwatch.dev/v1alpha1
kind: CredentialWatch
metadata: {name: fleet, namespace: platform}
spec:
  target:
    aksFleet: {tenantID: %[1]s}
---
apiVersion: credwatch.dev/v1alpha1
kind: CredentialWatch
metadata: {name: issuer, namespace: platform}
spec:
  target:
    serviceAccountIssuer:
      endpoints: [%[4]q, %[5]q]
`, tenantID, appID(99), subscriptionID, cp.EndpointA(), cp.EndpointB())

	kubectl("apply", "-f", "charts/credwatch/crds/")
	awaitEstablished(t, kubeconfig, "credentialwatches.credwatch.dev", "clusterazureidentities.credwatch.dev")
	kubectl("create", "namespace", "platform")
	apply(t, kubectl, work, "identity.yaml", fmt.Sprintf(`apiVersion: credwatch.dev/v1alpha1
kind: ClusterAzureIdentity
metadata: {name: credwatch-default}
spec:
  operator: {}
  allow:
    tenants: [%s]
    applications: ["*"]
    subscriptions: [{subscriptionID: %s}]
    operations: [TenantScan, FleetScan, Rotate, ReadSignIns]
  conditions:
  - namespaces: [platform]
`, tenantID, subscriptionID))
	apply(t, kubectl, work, "watches.yaml", watches.String())
	// A rotation an earlier run of the operator completed, which its status keeps.
	kubectl("patch", "cw", "-n", "platform", "valid", "--subresource=status", "--type=merge", "-p",
		fmt.Sprintf(`{"status":{"lastRotation":{"time":%q,"keyID":"0a1b2c3d-0000-4000-8000-000000000001"}}}`, now.Add(-100*day).UTC().Format(time.RFC3339)))

	metricsAddr := freeAddr(t)
	var logs bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the operator logged:\n%s", logs.String())
		}
	})
	op, exited := startOperator(t, bin, append([]string{
		"--kubeconfig", kubeconfig, "--health-probe-bind-address", freeAddr(t),
		"--metrics-bind-address", metricsAddr, "--metrics-secure=false",
		"--operator-namespace", controlplane.CanaryNamespace, "--default-identity", "credwatch-default",
		"--issuer-endpoints", cp.EndpointB()}, azure.Flags()...), azure.Env(), &logs)

	refusePulls(t, kubectl, work, "platform", []string{"aks-pool1-0", "aks-pool1-1", "aks-pool1-2"})
	// A pull event of a node the cluster does not have: counted as ignored.
	apply(t, kubectl, work, "ignored.yaml", fmt.Sprintf(`apiVersion: v1
kind: Event
metadata: {name: api-0.ghost, namespace: platform}
involvedObject: {kind: Pod, namespace: platform, name: api-0, apiVersion: v1}
reason: Failed
type: Warning
message: 'Failed to pull image "myacr.azurecr.io/shop/api:1.4": failed to authorize: 401 Unauthorized'
source: {component: kubelet, host: ghost-node}
firstTimestamp: %[1]s
lastTimestamp: %[1]s
count: 1
`, now.UTC().Format(time.RFC3339)))

	url := "http://" + metricsAddr + "/metrics"
	want := append([]string(nil), families...)
	for _, state := range []string{"Valid", "Warning", "Critical", "Expired"} {
		want = append(want, `state="`+state+`"`)
	}
	want = append(want, `condition="False",name="missing"`, `identity="ManagedIdentity"`, `identity="ServicePrincipal"`,
		`credwatch_watch_signing_key_drift{name="issuer",namespace="platform",reason="SigningKeyNotShared"} 1`,
		`scope="ClusterWide"`, `credwatch_watch_rotation_blocked{client_id="",name="cluster-mi",namespace="platform",reason="Blocked"} 1`,
		"credwatch_credential_in_use{")
	first := scrapeUntil(t, url, want)

	// Another check of every watch, so that the counters move between the scrapes.
	kubectl("annotate", "cw", "-n", "platform", "--all", "credwatch.dev/check=again")
	second := scrapeUntil(t, url, want, func(s []byte) bool { return requests(s) > requests(first) })

	t.Run("promtool check metrics", func(t *testing.T) {
		// The whole scrape, controller-runtime's and Go's series too, as a Prometheus user sees it.
		if out, err := promtool.Try(t, bytes.NewReader(second), "check", "metrics"); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	})

	t.Run("every dashboard query has data", func(t *testing.T) {
		dashboardHasData(t, work, first, second)
	})

	// The secrets: the operator's, the fixture's, and the one its rotation made, if it got that far.
	secrets := []string{operatorSecret, "e2e~"}
	if made := kubectl("get", "secret", "-n", "platform", "rotating-sp", "--ignore-not-found", "-o", "jsonpath={.data.clientSecret}"); made != "" {
		text, err := base64.StdEncoding.DecodeString(made)
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, string(text))
	}
	// Stopped before its logs are read, which it writes until then.
	if err := op.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-exited
	for _, s := range secrets {
		if strings.Contains(logs.String(), s) || bytes.Contains(first, []byte(s)) || bytes.Contains(second, []byte(s)) {
			t.Errorf("a secret (%s...) is in the logs or the metrics", s[:4])
		}
	}
}

func appID(i int) string { return fmt.Sprintf("0e2e0000-0000-4000-8000-%012d", i) }

// scrapeUntil scrapes url until the scrape holds each of want and done says so, for 90 seconds.
func scrapeUntil(t *testing.T, url string, want []string, done ...func([]byte) bool) []byte {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		scrape, missing := scrapeOnce(url, want)
		ok := missing == "" && scrape != nil
		for _, d := range done {
			ok = ok && d(scrape)
		}
		if ok {
			return scrape
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90s the metrics still lack %q:\n%s", missing, scrape)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func scrapeOnce(url string, want []string) ([]byte, string) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err.Error()
	}
	defer resp.Body.Close()
	scrape, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err.Error()
	}
	for _, w := range want {
		if !bytes.Contains(scrape, []byte(w)) {
			return scrape, w
		}
	}
	return scrape, ""
}

var graphRequests = regexp.MustCompile(`(?m)^credwatch_graph_requests_total\{[^}]*\} ([0-9.e+]+)$`)

// requests is the sum of credwatch_graph_requests_total in a scrape.
func requests(scrape []byte) float64 {
	var sum float64
	for _, m := range graphRequests.FindAllSubmatch(scrape, -1) {
		var v float64
		_, _ = fmt.Sscan(string(m[1]), &v)
		sum += v
	}
	return sum
}

// dashboardHasData has promtool evaluate each query of the chart's dashboard at the second of two
// scrapes a minute apart, and fails for each that gives nothing. promtool parses each first.
func dashboardHasData(t *testing.T, dir string, scrapes ...[]byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(), "charts/credwatch/files/dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	series, err := promtool.Series(scrapes...)
	if err != nil {
		t.Fatal(err)
	}
	type sample struct {
		Labels string  `json:"labels"`
		Value  float64 `json:"value"`
	}
	type exprTest struct {
		Expr       string   `json:"expr"`
		EvalTime   string   `json:"eval_time"`
		ExpSamples []sample `json:"exp_samples"`
	}
	var tests []exprTest
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			// One sample, 1, when the query has any data; none when it has none.
			tests = append(tests, exprTest{Expr: "count(" + tg.Expr + ") > bool 0", EvalTime: "1m", ExpSamples: []sample{{"{}", 1}}})
		}
	}
	if len(tests) < 10 {
		t.Fatalf("the dashboard has %d queries", len(tests))
	}
	file, err := yaml.Marshal(map[string]any{
		"evaluation_interval": "1m",
		"tests": []any{map[string]any{
			"name": "the dashboard on two scrapes of the operator", "interval": "1m",
			"input_series": series, "promql_expr_test": tests,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "dashboard.test.yaml")
	if err := os.WriteFile(p, file, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := promtool.Try(t, nil, "test", "rules", p); err != nil {
		t.Errorf("a dashboard query has no data on the operator's scrapes, or does not parse:\n%s", out)
	}
}
