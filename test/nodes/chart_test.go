package nodes

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	credwatchv1alpha1 "github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/test/cluster"
	"github.com/credwatch/credwatch/test/fakegraph"
)

const (
	operatorNamespace = "credwatch-system"
	// operatorClient is the operator's own application, which signs in with a client secret from
	// the environment, as a cluster without the workload identity webhook gives it.
	operatorClient = "0b4e6f8a-2c1d-4e3f-9a5b-7c6d8e9f0a1b"
	operatorSecret = "nodes~operator-secret-0123456789"
	subscriptionID = "3f2e1d0c-9b8a-4765-8432-10fedcba9876"
	// teamClient is team A's application, federated with its ServiceAccount's tokens.
	teamClient = "6c7d8e9f-0a1b-4c2d-8e3f-4a5b6c7d8e9f"
)

// The chart installs as a platform team installs it: by helm, into a namespace that enforces the
// restricted Pod Security profile, with the cloud's endpoints and a private CA given as values.
// The operator's pod passes its probes and holds its Lease; its metrics answer only a scraper
// whose ServiceAccount has the chart's metrics-reader role; its default identity signs in; and
// team A's identity signs in through a token the pod minted for team A's ServiceAccount.
func TestChartInstalledAsUsersInstallIt(t *testing.T) {
	requireCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pod := installOperator(ctx, t)

	t.Run("holds its Lease", func(t *testing.T) { waitLease(ctx, t, pod.Name) })
	t.Run("metrics answer only an authorised scraper", func(t *testing.T) { checkMetrics(ctx, t, pod.Status.PodIP) })
	t.Run("the default identity signs in", func(t *testing.T) {
		waitReady(ctx, t, &credwatchv1alpha1.ClusterAzureIdentity{ObjectMeta: metav1.ObjectMeta{Name: "credwatch-default"}})
	})
	t.Run("team A's identity signs in with workload identity", func(t *testing.T) { teamIdentity(ctx, t) })
}

var installed struct {
	once sync.Once
	pod  corev1.Pod
	err  string
}

// installOperator installs the chart once for the package's tests, and returns the operator's
// Ready pod.
func installOperator(ctx context.Context, t *testing.T) corev1.Pod {
	t.Helper()
	installed.once.Do(func() {
		c := env.cluster
		restricted := map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}
		ca, err := os.ReadFile(c.CAFile())
		if err != nil {
			installed.err = err.Error()
			return
		}
		for _, obj := range []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace, Labels: restricted}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "private-cloud-ca", Namespace: operatorNamespace}, Data: map[string]string{"ca.crt": string(ca)}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "operator-identity", Namespace: operatorNamespace}, StringData: map[string]string{"secret": operatorSecret}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "slack", Namespace: operatorNamespace}, StringData: map[string]string{"token": "xoxb-nodes-test-token"}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: restricted}},
		} {
			if err := env.crClient.Create(ctx, obj); err != nil {
				installed.err = err.Error()
				return
			}
		}
		start := time.Now()
		if out, err := helmInstall(c); err != nil {
			installed.err = fmt.Sprintf("helm install: %v\n%s", err, out)
			return
		}
		t.Logf("helm install --wait returned in %v", time.Since(start).Round(time.Second))
		installed.pod, installed.err = operatorPod(ctx)
	})
	if installed.err != "" {
		t.Fatal(installed.err)
	}
	return installed.pod
}

// helmInstall installs the chart with the project's helm, and waits for the Deployment. The
// default identity may read the aks-prod cluster; image pulls are told 5 s after they are seen;
// rotations may write Secrets in the operator's namespace.
func helmInstall(c *cluster.Cluster) ([]byte, error) {
	values := fmt.Sprintf(`image: {repository: ghcr.io/credwatch/credwatch, tag: latest, pullPolicy: Never}
azure:
  authorityHost: %[1]s/
  graphEndpoint: %[1]s
  armEndpoint: %[4]s
  caBundleConfigMap: private-cloud-ca
  # No workload identity webhook runs here: the operator signs in with a secret.
  workloadIdentity: false
defaultIdentity:
  tenants: [%[2]s]
  subscriptions: [{subscriptionID: %[5]s, resourceGroups: [rg-prod]}]
workloadIdentityNamespaces: [team-a]
# The watch of aks-prod keeps the secrets it rotates in the operator's namespace.
rotation: {secretNamespaces: [%[8]s]}
imagePulls: {settle: 5s}
# Slack's test server, through a relay on the bridge; mail goes to mailpit there too, which the
# destination policy lets through only because it is allowed.
slackAPIURL: %[6]s
alertDestinations:
  allow: [%[7]s/32]
extraEnv:
  - {name: AZURE_TENANT_ID, value: %[2]s}
  - {name: AZURE_CLIENT_ID, value: %[3]s}
  - name: AZURE_CLIENT_SECRET
    valueFrom: {secretKeyRef: {name: operator-identity, key: secret}}
`, env.graph.URL(), tenantID, operatorClient, env.azure.ARMURL(), subscriptionID, env.slackAPI, cluster.HostIP, operatorNamespace)
	file := filepath.Join(cluster.Dir, "values.yaml")
	if err := os.WriteFile(file, []byte(values), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Getenv("HELM_BIN"), "install", "credwatch", "../../charts/credwatch", "--namespace", operatorNamespace,
		"--kubeconfig", c.Kubeconfig, "--values", file, "--wait", "--timeout", "3m")
	// helm's caches and configuration in the cluster's folder, removed with it, not in $HOME.
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(cluster.Dir, "helm", "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(cluster.Dir, "helm", "config"), "HELM_DATA_HOME="+filepath.Join(cluster.Dir, "helm", "data"))
	return cmd.CombinedOutput()
}

func operatorPod(ctx context.Context) (corev1.Pod, string) {
	pods, err := env.client.CoreV1().Pods(operatorNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=credwatch"})
	if err != nil || len(pods.Items) != 1 {
		return corev1.Pod{}, fmt.Sprintf("want the operator's one pod: %v %v", err, pods)
	}
	pod := pods.Items[0]
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
			return pod, ""
		}
	}
	return pod, fmt.Sprintf("the operator's pod is not Ready: %+v", pod.Status)
}

// waitLease waits until the operator's pod holds the leader election Lease.
func waitLease(ctx context.Context, t *testing.T, pod string) {
	t.Helper()
	eventually(ctx, t, "the pod to hold the Lease", func() (bool, string) {
		lease, err := env.client.CoordinationV1().Leases(operatorNamespace).Get(ctx, "credwatch.credwatch.dev", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		return strings.HasPrefix(holder, pod+"_"), "held by " + holder
	})
}

// checkMetrics scrapes the pod over HTTPS as Prometheus would: refused without a token and with a
// token of a ServiceAccount that may not read metrics; served to one bound to metrics-reader.
func checkMetrics(ctx context.Context, t *testing.T, podIP string) {
	t.Helper()
	for _, sa := range []string{"prometheus", "nosy"} {
		create(ctx, t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: operatorNamespace}})
	}
	create(ctx, t, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-credwatch-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "credwatch-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus", Namespace: operatorNamespace}},
	})
	scrape := func(token string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+podIP+":8443/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		// The operator serves a self-signed certificate unless given one, as Prometheus is told.
		tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // see above
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := scrape(""); code != http.StatusUnauthorized {
		t.Errorf("without a token: %d %.200s, want 401", code, body)
	}
	if code, body := scrape(token(ctx, t, "nosy")); code != http.StatusForbidden {
		t.Errorf("as a ServiceAccount without metrics-reader: %d %.200s, want 403", code, body)
	}
	// RBAC takes a moment to reach the API server's authorizer cache.
	eventually(ctx, t, "metrics served to the scraper", func() (bool, string) {
		code, body := scrape(token(ctx, t, "prometheus"))
		return code == http.StatusOK && strings.Contains(body, "credwatch_"), fmt.Sprintf("%d %.200s", code, body)
	})
}

func token(ctx context.Context, t *testing.T, sa string) string {
	t.Helper()
	tr, err := env.client.CoreV1().ServiceAccounts(operatorNamespace).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// teamIdentity federates team A's application with its ServiceAccount's tokens, as docs/identities.md
// tells a team to, and waits until the identity the team created signs in: the operator's pod
// minted the token, in the cluster, and Entra's fake checked it against the API server's keys.
func teamIdentity(ctx context.Context, t *testing.T) {
	t.Helper()
	jwks, err := env.client.CoreV1().RESTClient().Get().AbsPath("/openid/v1/jwks").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env.graph.AddFederatedCredential(tenantID, teamClient, fakegraph.FederatedCredential{
		Issuer: env.cluster.Issuer, Subject: "system:serviceaccount:team-a:credwatch", Audiences: []string{"api://AzureADTokenExchange"},
		Keys: func() ([]byte, error) { return jwks, nil },
	})
	create(ctx, t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "credwatch", Namespace: "team-a",
		Annotations: map[string]string{credwatchv1alpha1.IdentityConsentAnnotation: "team-a/team-a-graph"}}})
	id := &credwatchv1alpha1.AzureIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a-graph", Namespace: "team-a"},
		Spec: credwatchv1alpha1.AzureIdentitySpec{IdentitySpec: credwatchv1alpha1.IdentitySpec{
			WorkloadIdentity: &credwatchv1alpha1.WorkloadIdentitySignIn{TenantID: tenantID, ClientID: teamClient, ServiceAccountRef: credwatchv1alpha1.LocalRef{Name: "credwatch"}},
			Allow:            credwatchv1alpha1.IdentityAllow{Applications: []string{clusterApp, teamApp}},
		}},
	}
	create(ctx, t, id)
	waitReady(ctx, t, id)
	signedIn := false
	for _, r := range env.graph.TokenRequests() {
		signedIn = signedIn || (r.ClientID == teamClient && r.Status == http.StatusOK)
	}
	if !signedIn {
		t.Errorf("Entra ID's fake issued team A's application no token: %+v", env.graph.TokenRequests())
	}
}

// waitReady waits until an identity reports Ready True.
func waitReady(ctx context.Context, t *testing.T, obj client.Object) {
	t.Helper()
	eventually(ctx, t, client.ObjectKeyFromObject(obj).String()+" to be Ready", func() (bool, string) {
		if err := env.crClient.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err.Error()
		}
		var conds []metav1.Condition
		switch o := obj.(type) {
		case *credwatchv1alpha1.AzureIdentity:
			conds = o.Status.Conditions
		case *credwatchv1alpha1.ClusterAzureIdentity:
			conds = o.Status.Conditions
		}
		for _, c := range conds {
			if c.Type == "Ready" {
				return c.Status == metav1.ConditionTrue, c.Reason + ": " + c.Message
			}
		}
		return false, "no Ready condition"
	})
}

// eventually polls until done says true, and fails with its last word when ctx ends.
func eventually(ctx context.Context, t *testing.T, what string, done func() (bool, string)) {
	t.Helper()
	last := ""
	for {
		ok, word := done()
		if ok {
			return
		}
		last = word
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %s", what, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// create creates obj with the admin's client; it may exist from an earlier test of the run.
func create(ctx context.Context, t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.crClient.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
