package nodes

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// demoEnv runs TestDemoCluster, which `make demo-cluster` asks for: it is a demo, not a test,
// and waits for a Ctrl-C.
const demoEnv = "CREDWATCH_DEMO_CLUSTER"

// TestDemoCluster plays the seed's outage on the cluster for a person to watch: the chart
// installed, the cluster's secret ending, both nodes refused, and what credwatch says of it, in
// kubectl's words, Slack's and mail's. The cluster stays up until Ctrl-C.
func TestDemoCluster(t *testing.T) {
	if os.Getenv(demoEnv) == "" {
		t.Skip("make demo-cluster runs this demo")
	}
	requireCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	say := func(format string, args ...any) { fmt.Printf("\n==> "+format+"\n", args...) }
	show := func(args ...string) { fmt.Print(indent(kubectl(t, args...))) }

	say("Two nodes, each a network namespace with its own containerd, kubelet and kube-proxy")
	show("get", "nodes", "-o", "wide")
	say("Installing the chart with helm into credwatch-system (restricted Pod Security)")
	installOperator(ctx, t)
	show("get", "pods", "-n", operatorNamespace, "-o", "wide")

	secret := env.secret
	secret.End = time.Now().Add(30 * time.Second).Truncate(time.Second)
	putClusterApp(secret)
	say("The platform team's watch of aks-prod; its service principal's secret ends in 30 s")
	watch := aksWatch(ctx, t, secret.End)
	show("get", "credentialwatches", "-n", operatorNamespace)
	say("Waiting for the secret to end...")
	time.Sleep(time.Until(secret.End.Add(time.Second)))
	ns := namespace(ctx, t, "demo")
	for _, n := range env.cluster.Nodes {
		createPod(ctx, t, ns, "app-"+n.Name, n.Name)
	}
	say("The team's pods on both nodes: the registry refuses the expired secret")
	for _, n := range env.cluster.Nodes {
		fmt.Printf("  %s: %s\n", n.Name, waitPullFailure(ctx, t, ns, "app-"+n.Name))
	}
	say("What credwatch says")
	cond := waitCondition(ctx, t, watch, "ImagePullsAuthorized", "False", "ClusterWidePullFailures")
	fmt.Printf("  ImagePullsAuthorized False ClusterWidePullFailures: %s\n", cond.Message)
	eventually(ctx, t, "the alerts", func() (bool, string) {
		posted, mailed := pullAlerts()
		return len(posted) > 0 && len(mailed) > 0, ""
	})
	show("get", "events", "-n", operatorNamespace, "--field-selector", "reason=ImagePullsRefused")
	show("get", "pods", "-n", ns, "-o", "wide")
	posted, mailed := pullAlerts()
	say("Posted to Slack")
	fmt.Print(indent(strings.Join(posted, "\n") + "\n"))
	say("Mailed")
	fmt.Print(indent(strings.Join(mailed, "\n") + "\n"))

	say("The cluster stays up until Ctrl-C, which removes it; meanwhile:")
	fmt.Printf("  KUBECONFIG=%s kubectl get credentialwatches -A\n", env.cluster.Kubeconfig)
	cancel()
	select {} // the cluster's own handler of Ctrl-C removes it and ends the process
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "  " + strings.Join(lines, "\n  ") + "\n"
}
