// Package chart tests the Helm chart: it lints, renders into objects the real API server accepts,
// grants the manager what controller-gen says it needs, and its dashboard and alert rules query
// metrics the operator exposes.
package chart

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/credwatch/credwatch/api/v1alpha1"
	cwmetrics "github.com/credwatch/credwatch/internal/metrics"
	"github.com/credwatch/credwatch/internal/pullauth"
	"github.com/credwatch/credwatch/internal/target/tenantscan"
)

const chartDir = "../../charts/credwatch"

// everything turns every optional part of the chart on.
const everything = `
defaultAlerts:
  slack:
    channel: "#platform-alerts"
    tokenSecretRef: {name: credwatch-slack, key: token}
alertDestinations:
  allow: [10.20.0.0/16]
  deny: [10.0.0.0/16, 10.244.0.0/16]
serviceAccount:
  annotations:
    azure.workload.identity/client-id: 11111111-2222-3333-4444-555555555555
watchNamespace: team-a
metrics:
  serviceMonitor: {enabled: true}
  prometheusRule: {enabled: true}
grafanaDashboard: {enabled: true}
defaultIdentity:
  tenants: [72f988bf-86f1-41af-91ab-2d7cd011db47]
  subscriptions: [{subscriptionID: 8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918, resourceGroups: [rg-prod]}]
  namespaces: [team-a]
workloadIdentityNamespaces: [team-a]
rotation:
  secretNamespaces: [team-a]
extraEnv:
- {name: KUBE_FEATURE_WatchListClient, value: "false"}
networkPolicy:
  enabled: true
  apiServerCIDRs: [10.0.0.1/32]
  egressCIDRs: [20.190.128.0/18, 40.126.0.0/18]
  metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
`

// helm runs helm with args, which must succeed, and returns what it printed.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := runHelm(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}

// helmRefuses runs helm with args, which must fail, and returns what it said.
func helmRefuses(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := runHelm(t, args...)
	if err == nil {
		t.Fatalf("helm %s succeeded; want it refused\n%s", strings.Join(args, " "), out)
	}
	return out + stderr
}

// runHelm runs the helm make test built, and returns its output, apart from its errors.
func runHelm(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs helm, built by make test: skipped under -short")
	}
	bin := os.Getenv("HELM_BIN")
	if bin == "" {
		t.Fatal("HELM_BIN is not set: run `make test`, which builds helm into bin/")
	}
	var out, errs bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errs
	err = cmd.Run()
	return out.String(), errs.String(), err
}

func valuesFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, []byte(everything), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// render returns the chart's objects as the release "credwatch" in credwatch-system would have them.
func render(t *testing.T, values ...string) []*unstructured.Unstructured {
	t.Helper()
	// The version of the API server the tests run; helm assumes an old one when it has no cluster.
	args := []string{"template", "credwatch", chartDir, "--namespace", "credwatch-system", "--include-crds", "--kube-version", "1.34.4"}
	for _, v := range values {
		args = append(args, "--values", v)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(helm(t, args...), "\n---") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
		}
		if len(m) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	return objs
}

func TestLint(t *testing.T) {
	helm(t, "lint", "--strict", chartDir)
	helm(t, "lint", "--strict", chartDir, "--values", valuesFile(t))
}

// apiServer starts a kube-apiserver of the test's own, so that what one test creates for real
// cannot collide with another's.
func apiServer(t *testing.T, crdPaths ...string) client.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the envtest API server: skipped under -short")
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`")
	}
	env := &envtest.Environment{CRDDirectoryPaths: crdPaths}
	t.Cleanup(func() { _ = env.Stop() }) // also what a failed Start started
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRenderedObjectsAreAcceptedByTheAPIServer(t *testing.T) {
	// The chart's CRDs are installed, as helm installs them first, so that the objects of its
	// kinds it renders (the default identity) are validated by them.
	c := apiServer(t, filepath.Join(chartDir, "crds"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, ns := range []string{"credwatch-system", "team-a"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	for name, values := range map[string][]string{"defaults": nil, "everything": {valuesFile(t)}} {
		t.Run(name, func(t *testing.T) {
			kinds := map[string]bool{}
			for _, obj := range render(t, values...) {
				kinds[obj.GetKind()] = true
				if obj.GroupVersionKind().Group == "monitoring.coreos.com" {
					continue // the Prometheus operator's CRDs are not part of this API server
				}
				if obj.GetKind() == "CustomResourceDefinition" {
					continue // installed above
				}
				if err := c.Create(ctx, obj, client.DryRunAll); err != nil {
					t.Errorf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
				}
			}
			want := []string{"CustomResourceDefinition", "Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service"}
			if name == "everything" {
				want = append(want, "ConfigMap", "ServiceMonitor", "PrometheusRule", "ClusterAzureIdentity", "NetworkPolicy")
			} else if kinds["NetworkPolicy"] {
				t.Error("a NetworkPolicy by default: it is opt-in")
			}
			for _, k := range want {
				if !kinds[k] {
					t.Errorf("no %s rendered", k)
				}
			}
		})
	}
}

// TestDefaultIdentityAllowsWatchOnly: the identity the chart creates signs in as the operator and
// allows reading the listed scope, in the namespaces listed, and nothing more; the operator may
// mint ServiceAccount tokens only in the namespaces listed for workload identity.
func TestDefaultIdentityAllowsWatchOnly(t *testing.T) {
	tenantOnly := filepath.Join(t.TempDir(), "tenant.yaml")
	if err := os.WriteFile(tenantOnly, []byte("defaultIdentity: {tenants: [72f988bf-86f1-41af-91ab-2d7cd011db47]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		values         []string
		wantIdentity   bool
		wantNamespaces []any
		wantTokenRoles []string
	}{
		"no tenants: none created":                {values: nil},
		"tenants: the release namespace":          {values: []string{tenantOnly}, wantIdentity: true, wantNamespaces: []any{"credwatch-system"}},
		"namespaces and workload identity listed": {values: []string{valuesFile(t)}, wantIdentity: true, wantNamespaces: []any{"team-a"}, wantTokenRoles: []string{"team-a"}},
	} {
		t.Run(name, func(t *testing.T) {
			var identities int
			var tokenRoles []string
			var args string
			for _, obj := range render(t, tc.values...) {
				switch obj.GetKind() {
				case "ClusterAzureIdentity":
					identities++
					spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
					if _, op := spec["operator"]; !op || obj.GetName() != "credwatch-default" {
						t.Errorf("identity %s %v, want credwatch-default signing in as the operator", obj.GetName(), spec)
					}
					if ops, found, _ := unstructured.NestedSlice(obj.Object, "spec", "allow", "operations"); found {
						t.Errorf("the default identity allows %v beyond Watch", ops)
					}
					conds, _, _ := unstructured.NestedSlice(obj.Object, "spec", "conditions")
					if len(conds) != 1 || !slices.Equal(conds[0].(map[string]any)["namespaces"].([]any), tc.wantNamespaces) {
						t.Errorf("conditions %v, want namespaces %v", conds, tc.wantNamespaces)
					}
				case "Role", "ClusterRole":
					rules, _, _ := unstructured.NestedSlice(obj.Object, "rules")
					for _, r := range rules {
						if res, _ := json.Marshal(r); strings.Contains(string(res), "serviceaccounts/token") && !strings.Contains(string(res), "credwatch-canary") {
							if obj.GetKind() == "ClusterRole" {
								t.Errorf("ClusterRole %s grants ServiceAccount tokens cluster-wide", obj.GetName())
							}
							tokenRoles = append(tokenRoles, obj.GetNamespace())
						}
					}
				case "Deployment":
					a, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
					b, _ := json.Marshal(a)
					args = string(b)
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tc.wantIdentity]; identities != want {
				t.Errorf("%d identities rendered, want %d", identities, want)
			}
			if !slices.Equal(tokenRoles, tc.wantTokenRoles) {
				t.Errorf("ServiceAccount tokens granted in %v, want %v", tokenRoles, tc.wantTokenRoles)
			}
			if !strings.Contains(args, "--default-identity=credwatch-default") {
				t.Errorf("the manager is not told its default identity: %s", args)
			}
		})
	}
}

// TestTokenMintingBoundToListedServiceAccounts: an entry of workloadIdentityNamespaces that lists
// its ServiceAccounts lets the operator mint their tokens only, by resourceNames.
func TestTokenMintingBoundToListedServiceAccounts(t *testing.T) {
	values := filepath.Join(t.TempDir(), "wi.yaml")
	if err := os.WriteFile(values, []byte("workloadIdentityNamespaces: [team-b, {namespace: team-a, serviceAccounts: [credwatch]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, obj := range render(t, values) {
		if obj.GetKind() != "Role" || obj.GetName() != "credwatch-workload-identity" {
			continue
		}
		var role rbacv1.Role
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &role); err != nil {
			t.Fatal(err)
		}
		got[role.Namespace] = ruleSet(role.Namespace, role.Rules)
	}
	want := map[string][]string{
		"team-a": {"team-a /serviceaccounts/token:create@credwatch", "team-a /serviceaccounts:get@credwatch"},
		"team-b": {"team-b /serviceaccounts/token:create", "team-b /serviceaccounts:get"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("workload-identity roles %v, want %v", got, want)
	}
	// An entry that would silently allow every ServiceAccount is refused.
	for _, entry := range []string{"{namespace: team-a, serviceAccounts: []}", "{namespace: team-a, serviceAccount: [credwatch]}"} {
		bad := filepath.Join(t.TempDir(), "bad.yaml")
		if err := os.WriteFile(bad, []byte("workloadIdentityNamespaces: ["+entry+"]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if out := helmRefuses(t, "template", "credwatch", chartDir, "--kube-version", "1.34.4", "--values", bad); !strings.Contains(out, "workloadIdentityNamespaces") {
			t.Errorf("helm template with %s: want refused saying why\n%s", entry, out)
		}
	}
}

// TestSecretWritesOnlyWhereListed: rotations may write Secrets in the namespaces an admin lists,
// everywhere only when asked, and by default nowhere.
func TestSecretWritesOnlyWhereListed(t *testing.T) {
	clusterWide := filepath.Join(t.TempDir(), "cluster-wide.yaml")
	if err := os.WriteFile(clusterWide, []byte("rotation: {secretsClusterWide: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		values []string
		want   []string // where Secret writes are granted: namespaces, or "cluster"
	}{
		"by default":          {},
		"namespaces listed":   {values: []string{valuesFile(t)}, want: []string{"team-a"}},
		"cluster-wide, asked": {values: []string{clusterWide}, want: []string{"cluster"}},
	} {
		t.Run(name, func(t *testing.T) {
			got := writesGranted(t, "secrets", render(t, tc.values...))
			if !slices.Equal(got, tc.want) {
				t.Errorf("Secret writes granted in %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLedgerWritesOnlyWhereListed: ConfigMaps are written in the release's namespace (rotation
// pacing), and for ledgers only in the namespaces an admin lists, everywhere only when asked, or
// in the one namespace watched.
func TestLedgerWritesOnlyWhereListed(t *testing.T) {
	file := func(name, content string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name, tc := range map[string]struct {
		values []string
		want   []string // where ConfigMap writes are granted: namespaces, or "cluster"
	}{
		"by default":          {want: []string{"credwatch-system"}},
		"namespaces listed":   {values: []string{file("ns.yaml", "ledgerNamespaces: [team-a, team-b]\n")}, want: []string{"credwatch-system", "team-a", "team-b"}},
		"cluster-wide, asked": {values: []string{file("all.yaml", "ledgersClusterWide: true\n")}, want: []string{"cluster", "credwatch-system"}},
		"one namespace watched": {values: []string{file("one.yaml", "watchNamespace: team-a\nledgerNamespaces: [team-b]\n")},
			want: []string{"credwatch-system", "team-a"}},
	} {
		t.Run(name, func(t *testing.T) {
			got := writesGranted(t, "configmaps", render(t, tc.values...))
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("ConfigMap writes granted in %v, want %v", got, tc.want)
			}
		})
	}
}

// TestKustomizeIsAcceptedToo renders config/default, the kustomize install the chart mirrors, and
// has the API server dry-run it.
func TestKustomizeIsAcceptedToo(t *testing.T) {
	out, err := exec.Command("kubectl", "kustomize", "../../config/default").Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	c := apiServer(t)
	ctx := context.Background()
	kinds := map[string]bool{}
	accounts := map[string]bool{}     // namespace/name
	bindings := map[string][]string{} // namespace/name of each RoleBinding: its subjects
	var canaryRole []string           // the names the token Role limits to
	for _, doc := range strings.Split(string(out), "\n---") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil || len(m) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{Object: m}
		kinds[obj.GetKind()] = true
		key := obj.GetNamespace() + "/" + obj.GetName()
		switch obj.GetKind() {
		case "ServiceAccount":
			accounts[key] = true
		case "RoleBinding", "ClusterRoleBinding":
			var b rbacv1.RoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &b); err != nil {
				t.Fatal(err)
			}
			for _, s := range b.Subjects {
				bindings[obj.GetKind()+" "+key] = append(bindings[obj.GetKind()+" "+key], s.Namespace+"/"+s.Name)
			}
		case "Role":
			var r rbacv1.Role
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &r); err != nil {
				t.Fatal(err)
			}
			for _, rule := range r.Rules {
				if slices.Contains(rule.Resources, "serviceaccounts/token") {
					canaryRole = append(canaryRole, rule.ResourceNames...)
				}
			}
		}
		if obj.GetKind() == "ClusterRole" {
			// The issuer checks' rights hold in one namespace each, as in the chart.
			rules, _ := json.Marshal(obj.Object["rules"])
			for _, narrow := range []string{"serviceaccounts/token", "endpointslices"} {
				if strings.Contains(string(rules), narrow) {
					t.Errorf("ClusterRole %s grants %s cluster-wide", obj.GetName(), narrow)
				}
			}
		}
		var opts []client.CreateOption
		if obj.GetKind() != "Namespace" { // created for real, so the rest can be dry-run inside it
			opts = append(opts, client.DryRunAll)
		}
		if err := c.Create(ctx, obj, opts...); err != nil {
			t.Errorf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	for _, k := range []string{"Namespace", "CustomResourceDefinition", "Deployment", "ServiceAccount", "ClusterRole", "Service"} {
		if !kinds[k] {
			t.Errorf("config/default renders no %s", k)
		}
	}
	// Dry runs do not check that a binding's subjects exist.
	for _, b := range []string{"RoleBinding credwatch-system/credwatch-manager-rolebinding", "RoleBinding default/credwatch-manager-rolebinding"} {
		if _, ok := bindings[b]; !ok {
			t.Errorf("config/default renders no %s", b)
		}
	}
	for b, subjects := range bindings {
		for _, s := range subjects {
			if !accounts[s] {
				t.Errorf("%s binds %s, which config/default does not create", b, s)
			}
		}
	}
	if len(canaryRole) != 1 || !accounts["credwatch-system/"+canaryRole[0]] {
		t.Errorf("the token Role limits to %v, want the canary ServiceAccount config/default creates", canaryRole)
	}
}

func TestDeploymentIsLockedDown(t *testing.T) {
	found := false
	for _, obj := range render(t, valuesFile(t)) {
		if obj.GetKind() != "Deployment" {
			continue
		}
		found = true
		pod, _, _ := unstructured.NestedMap(obj.Object, "spec", "template", "spec")
		containers, _, _ := unstructured.NestedSlice(pod, "containers")
		sc := containers[0].(map[string]any)["securityContext"].(map[string]any)
		if sc["readOnlyRootFilesystem"] != true || sc["allowPrivilegeEscalation"] != false {
			t.Errorf("container securityContext = %v", sc)
		}
		if caps := sc["capabilities"].(map[string]any)["drop"].([]any); len(caps) != 1 || caps[0] != "ALL" {
			t.Errorf("capabilities dropped = %v, want ALL", caps)
		}
		if nonRoot, _, _ := unstructured.NestedBool(pod, "securityContext", "runAsNonRoot"); !nonRoot {
			t.Error("the pod may run as root")
		}
		args, _ := json.Marshal(containers[0].(map[string]any)["args"])
		for _, want := range []string{"--default-alerts=/etc/credwatch/default-alerts.yaml", "--watch-namespace=team-a", "--leader-elect=true", "--operator-namespace=$(POD_NAMESPACE)",
			"--alert-destinations-allow=10.20.0.0/16", "--alert-destinations-deny=10.0.0.0/16,10.244.0.0/16"} {
			if !strings.Contains(string(args), want) {
				t.Errorf("args %s lack %s", args, want)
			}
		}
		if l, _, _ := unstructured.NestedString(obj.Object, "spec", "template", "metadata", "labels", "azure.workload.identity/use"); l != "true" {
			t.Error("the pod lacks the workload identity label")
		}
	}
	if !found {
		t.Fatal("no Deployment rendered")
	}
}

// extraEnv reaches the operator beside the environment the chart sets: it is how GOGC, GOMEMLIMIT
// or client-go's feature switches are given.
func TestExtraEnvReachesTheOperator(t *testing.T) {
	for _, obj := range render(t, valuesFile(t)) {
		if obj.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		env, _ := json.Marshal(containers[0].(map[string]any)["env"])
		for _, want := range []string{`"name":"POD_NAMESPACE"`, `{"name":"KUBE_FEATURE_WatchListClient","value":"false"}`} {
			if !strings.Contains(string(env), want) {
				t.Errorf("env %s lacks %s", env, want)
			}
		}
		return
	}
	t.Fatal("no Deployment rendered")
}

// A private cloud's settings reach the operator: a private CA's certificates, from a ConfigMap,
// are mounted beside the default alerts and added to the image's CAs through SSL_CERT_DIR, not put
// in their place (SSL_CERT_FILE would), and GovSlack's API root is passed on.
func TestPrivateCloudSettings(t *testing.T) {
	values := filepath.Join(t.TempDir(), "ca.yaml")
	if err := os.WriteFile(values, []byte("azure: {caBundleConfigMap: corp-ca}\nslackAPIURL: https://slack-gov.com/api/\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, obj := range render(t, valuesFile(t), values) {
		if obj.GetKind() != "Deployment" {
			continue
		}
		pod, _, _ := unstructured.NestedMap(obj.Object, "spec", "template", "spec")
		rendered, _ := json.Marshal(pod)
		for _, want := range []string{`{"name":"SSL_CERT_DIR","value":"/etc/credwatch-ca"}`, `{"mountPath":"/etc/credwatch-ca","name":"ca-bundle","readOnly":true}`,
			`{"configMap":{"name":"corp-ca"},"name":"ca-bundle"}`, `"mountPath":"/etc/credwatch","name":"default-alerts"`,
			`"--slack-api-url=https://slack-gov.com/api/"`} {
			if !strings.Contains(string(rendered), want) {
				t.Errorf("the pod lacks %s: %s", want, rendered)
			}
		}
		if strings.Contains(string(rendered), "SSL_CERT_FILE") {
			t.Error("SSL_CERT_FILE would replace the image's CAs")
		}
		return
	}
	t.Fatal("no Deployment rendered")
}

// Features turned off grant nothing, and the operator is told not to use them: it would otherwise
// try, and fail for want of rights.
func TestDisabledFeaturesGrantNothing(t *testing.T) {
	off := filepath.Join(t.TempDir(), "off.yaml")
	if err := os.WriteFile(off, []byte("serviceAccountIssuer: {enabled: false}\nimagePulls: {enabled: false}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var args string
	for _, obj := range render(t, off) {
		switch name := obj.GetName(); {
		case obj.GetKind() == "Deployment":
			containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
			a, _ := json.Marshal(containers[0].(map[string]any)["args"])
			args = string(a)
		case strings.Contains(name, "issuer") || strings.Contains(name, "canary") || strings.Contains(name, "image-pulls") || strings.Contains(name, "kubernetes-endpoints"):
			t.Errorf("%s %s rendered with its feature off", obj.GetKind(), name)
		}
	}
	for _, want := range []string{"--service-account-issuer=false", "--image-pulls=false"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %s lack %s", args, want)
		}
	}
}

// TestWatchingOneNamespaceGrantsRightsThereOnly: with watchNamespace the manager's rights are a
// Role in that namespace, plus reading Secrets in its own, and no ClusterRole grants Secrets.
func TestWatchingOneNamespaceGrantsRightsThereOnly(t *testing.T) {
	roles := map[string]string{}
	for _, obj := range render(t, valuesFile(t)) {
		switch obj.GetKind() {
		case "ClusterRole":
			rules, _, _ := unstructured.NestedSlice(obj.Object, "rules")
			for _, r := range rules {
				if res, _ := json.Marshal(r); strings.Contains(string(res), "secrets") {
					t.Errorf("ClusterRole %s grants Secrets while watching one namespace", obj.GetName())
				}
			}
		case "Role":
			roles[obj.GetName()] = obj.GetNamespace()
		}
	}
	if roles["credwatch-manager"] != "team-a" || roles["credwatch-default-channels"] != "credwatch-system" || roles["credwatch-pacing"] != "credwatch-system" {
		t.Errorf("Roles = %v, want the manager's in team-a, the default channels' and the rotation pacing's in credwatch-system", roles)
	}
}

// TestManagerRulesMatchControllerGen keeps the chart's hand-written roles (the manager's, the
// image-pull watcher's, the issuer checks') equal together to the one controller-gen makes from
// the markers.
func TestManagerRulesMatchControllerGen(t *testing.T) {
	data, err := os.ReadFile("../../config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// A ClusterRole, and a Role in each namespace markers name: rules compare with where they hold.
	var want []string
	for _, doc := range strings.Split(string(data), "\n---") {
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			t.Fatal(err)
		}
		want = append(want, ruleSet(where(role.Kind, role.Namespace), role.Rules)...)
	}
	var got []string
	roles := 0
	names := map[string]bool{"credwatch-manager": true, "credwatch-image-pulls": true, "credwatch-issuer": true, "credwatch-canary": true, "credwatch-kubernetes-endpoints": true}
	for _, obj := range render(t) {
		if (obj.GetKind() != "ClusterRole" && obj.GetKind() != "Role") || !names[obj.GetName()] {
			continue
		}
		var chart rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &chart); err != nil {
			t.Fatal(err)
		}
		got = append(got, ruleSet(where(obj.GetKind(), obj.GetNamespace()), chart.Rules)...)
		roles++
	}
	if roles != len(names) {
		t.Fatalf("rendered %d of the roles %v, want all", roles, names)
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("chart's manager and image-pull rules:\n%s\ncontroller-gen's:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// writesGranted lists where the roles among objs grant create or update of resource: namespaces,
// or "cluster".
func writesGranted(t *testing.T, resource string, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var got []string
	for _, obj := range objs {
		if obj.GetKind() != "Role" && obj.GetKind() != "ClusterRole" {
			continue
		}
		var role rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &role); err != nil {
			t.Fatal(err)
		}
		for _, r := range role.Rules {
			if slices.Contains(r.Resources, resource) && (slices.Contains(r.Verbs, "create") || slices.Contains(r.Verbs, "update")) {
				got = append(got, where(obj.GetKind(), obj.GetNamespace()))
			}
		}
	}
	return got
}

// where a role's rules hold: the cluster, or a namespace.
func where(kind, namespace string) string {
	if kind == "ClusterRole" {
		return "cluster"
	}
	return namespace
}

// ruleSet flattens rules to group/resource:verb (@names when they are limited to some) and
// url:verb, so that rules grouped differently compare equal, and a limit to names counts.
func ruleSet(where string, rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		names := ""
		if len(r.ResourceNames) > 0 {
			names = "@" + strings.Join(r.ResourceNames, ",")
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, where+" "+g+"/"+res+":"+v+names)
				}
			}
		}
		for _, u := range r.NonResourceURLs {
			for _, v := range r.Verbs {
				out = append(out, where+" "+u+":"+v)
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestQueriesUseMetricsThatExist reads every metric name in the dashboard and the alert rules and
// checks the operator exposes it.
func TestQueriesUseMetricsThatExist(t *testing.T) {
	exposed := exposedMetrics(t)
	var queries []string
	for _, obj := range render(t, valuesFile(t)) {
		switch obj.GetKind() {
		case "ConfigMap":
			if dash, ok, _ := unstructured.NestedString(obj.Object, "data", "credwatch.json"); ok {
				var d struct {
					Panels []struct {
						Targets []struct{ Expr string }
					}
				}
				if err := json.Unmarshal([]byte(dash), &d); err != nil {
					t.Fatalf("dashboard JSON: %v", err)
				}
				for _, p := range d.Panels {
					for _, tg := range p.Targets {
						queries = append(queries, tg.Expr)
					}
				}
			}
		case "PrometheusRule":
			groups, _, _ := unstructured.NestedSlice(obj.Object, "spec", "groups")
			for _, g := range groups {
				for _, r := range g.(map[string]any)["rules"].([]any) {
					queries = append(queries, r.(map[string]any)["expr"].(string))
				}
			}
		}
	}
	if len(queries) < 8 {
		t.Fatalf("found %d queries, want the dashboard's and the rules'", len(queries))
	}
	name := regexp.MustCompile(`credwatch_[a-z_]+`)
	for _, q := range queries {
		for _, m := range name.FindAllString(q, -1) {
			if !exposed[m] {
				t.Errorf("query %q uses %s, which the operator does not expose", q, m)
			}
		}
	}
}

func exposedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	now := metav1.Now()
	before, later := metav1.NewTime(now.Add(-2*time.Hour)), metav1.NewTime(now.Add(time.Hour))
	w := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "n"}, Status: v1alpha1.CredentialWatchStatus{
		// A secret renewed by another, as --append leaves them.
		Credentials: []v1alpha1.Credential{{KeyID: "k", StartTime: &before, EndTime: now}, {KeyID: "k2", StartTime: &now, EndTime: later}}, State: v1alpha1.StateValid,
		LastCheckTime: &now, LastRotation: &v1alpha1.LastRotation{Time: now}, Rotation: &v1alpha1.RotationStatus{Step: v1alpha1.StepRetiring},
		ConsecutiveFailures: 1, // shown only when there are some
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionSigningKeyDrift, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonCanaryRejected},
			{Type: v1alpha1.ConditionRotating, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonResetNeedsConfirmation}},
	}}
	w.Status.Findings = &v1alpha1.FindingsStatus{LongLived: 1}
	// Its sign-ins read: when each last signed in, and which is in use.
	w.Spec.Usage = &v1alpha1.Usage{SignIns: true}
	w.Status.SignInsReadTime, w.Status.Credentials[1].LastSignIn, w.Status.Credentials[1].InUse = &now, &now, true
	w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionSignInsRead, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSignInsRead})
	ready := []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue}}
	fleet := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: "n"},
		Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{AKSFleet: &v1alpha1.AKSFleetTarget{TenantID: "t"}}},
		Status: v1alpha1.CredentialWatchStatus{Conditions: ready, Fleet: &v1alpha1.FleetStatus{
			Attention: []v1alpha1.FleetCluster{{ID: "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c", AppID: "a", EarliestExpiry: &now}}}}}
	reg := prometheus.NewRegistry()
	g, err := cwmetrics.NewGraphRequests(reg)
	if err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(cwmetrics.NewImagePulls(onePullIncident{}, clock.RealClock{}))
	// A counter shows in a scrape once it has counted something.
	added, err := cwmetrics.NewCredentialsAdded(reg)
	if err != nil {
		t.Fatal(err)
	}
	added.Added("t", 1)
	req, _ := http.NewRequest(http.MethodGet, "https://graph.example/v1.0", nil)
	resp, err := g.RoundTripper(answer200{}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	watches := cwmetrics.NewWatches(func() ([]*v1alpha1.CredentialWatch, error) { return []*v1alpha1.CredentialWatch{w, fleet}, nil }, tenantscan.NewStore(), nil, clock.RealClock{})
	rec := httptest.NewRecorder()
	watches.Handler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, cwmetrics.MetricsPath, nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for name := range mfs {
		out[name] = true
	}
	return out
}

// onePullIncident is a tracker holding one registry refusing the cluster's pulls.
type onePullIncident struct{}

func (onePullIncident) Incidents(time.Time) []pullauth.Incident {
	return []pullauth.Incident{{Registry: "myacr.azurecr.io", Scope: v1alpha1.PullScopeClusterWide, Failing: []string{"node-1", "node-2", "node-3"}}}
}

func (onePullIncident) Refusals() map[string]map[v1alpha1.PullScope]uint64 {
	return map[string]map[v1alpha1.PullScope]uint64{"myacr.azurecr.io": {v1alpha1.PullScopeClusterWide: 3}}
}

func (onePullIncident) Ignored() map[pullauth.Reason]uint64 { return nil }

type answer200 struct{}

func (answer200) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
}
