package nodes

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/credwatch/credwatch/test/cluster"
)

// One node's kubelet starts with its credential provider failing: its azure.json asks a
// managed-identity endpoint that does not answer, so it pulls with no credential and is refused,
// while the other node pulls. The watch says NodeLocalPullFailures, names that node and the
// kubelet fix, and blames nothing on the cluster's secret, which is valid. Restarting that
// kubelet with a working azure.json, as the fix says, ends it.
func TestOneKubeletWithoutItsCredential(t *testing.T) {
	requireCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	installOperator(ctx, t)
	putClusterApp(env.secret)
	watch := aksWatch(ctx, t, env.secret.End)
	healthy, broken := env.cluster.Nodes[0], env.cluster.Nodes[1]
	breakCredentialProvider(t, broken)
	t.Cleanup(func() { repairCredentialProvider(t, broken) })

	ns := namespace(ctx, t, "node-local")
	createPod(ctx, t, ns, "app-"+healthy.Name, healthy.Name)
	createPod(ctx, t, ns, "app-"+broken.Name, broken.Name)
	waitRunning(ctx, t, ns, "app-"+healthy.Name)
	t.Logf("%s's kubelet: %s", broken.Name, waitPullFailure(ctx, t, ns, "app-"+broken.Name))
	cond := waitCondition(ctx, t, watch, "ImagePullsAuthorized", "False", "NodeLocalPullFailures")
	t.Logf("ImagePullsAuthorized False NodeLocalPullFailures: %s", cond.Message)
	if !strings.Contains(cond.Message, broken.Name) || strings.Contains(cond.Message, healthy.Name) {
		t.Errorf("the condition does not name %s alone: %s", broken.Name, cond.Message)
	}
	if strings.Contains(cond.Message, "expired") || strings.Contains(cond.Message, "secret") {
		t.Errorf("the condition blames the cluster's secret: %s", cond.Message)
	}
}

// breakCredentialProvider restarts the node's kubelet with a credential provider that signs in
// with a managed identity at an endpoint where nothing listens, as a node whose kubelet started
// before the identity endpoint was reachable.
func breakCredentialProvider(t *testing.T, n *cluster.Node) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(cluster.HostIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	// The managed-identity endpoint, moved from 169.254.169.254 to a closed port here (the
	// App Service variables MSAL honours), so that no address beyond the cluster is asked.
	writeProviderEnv(t, n, "IDENTITY_ENDPOINT", "http://"+closed+"/msi/token", "IDENTITY_HEADER", "unused")
	conf := fmt.Sprintf(`{"cloud": "AzurePublicCloud", "tenantId": %q, "subscriptionId": %q, "useManagedIdentityExtension": true, "userAssignedIdentityID": %q}
`, tenantID, subscriptionID, clusterApp)
	if err := os.WriteFile(filepath.Join(n.Dir(), "azure.json"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := env.cluster.RestartKubelet(n); err != nil {
		t.Fatal(err)
	}
}

func repairCredentialProvider(t *testing.T, n *cluster.Node) {
	writeProviderEnv(t, n)
	if err := env.cluster.RestartKubelet(n); err != nil {
		t.Error(err)
	}
}

// writeProviderEnv rewrites the node's credential provider configuration with the environment
// given as name, value pairs.
func writeProviderEnv(t *testing.T, n *cluster.Node, nameValues ...string) {
	t.Helper()
	file := writeProviderConfig(n)
	if len(nameValues) == 0 {
		return
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	extra := "    env:\n"
	for i := 0; i+1 < len(nameValues); i += 2 {
		extra += fmt.Sprintf("      - {name: %s, value: %q}\n", nameValues[i], nameValues[i+1])
	}
	if err := os.WriteFile(file, append(data, extra...), 0o600); err != nil {
		t.Fatal(err)
	}
}
