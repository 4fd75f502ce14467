package nodes

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	credwatchv1alpha1 "github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/test/cluster"
)

// The seed's outage and its healing. The cluster's service-principal secret expires, and every
// node's pulls are refused by the registry. The operator, installed by the chart, reads the
// kubelets' real events and pods, and the aksCluster watch with imagePulls says the cluster's
// credential is refused cluster-wide and why: the secret it watches has expired. Rotation then
// heals it. `make demo-cluster` plays this story for a person to watch, and keeps the cluster up.
func TestExpiredClusterSecretIsTheOutage(t *testing.T) {
	requireCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	tell := story{t: t, demo: os.Getenv(demoEnv) != ""}
	tell.say("Two nodes, each a network namespace with its own containerd, kubelet and kube-proxy")
	tell.show("get", "nodes", "-o", "wide")
	tell.say("The chart, installed with helm into %s (restricted Pod Security)", operatorNamespace)
	installOperator(ctx, t)
	tell.show("get", "pods", "-n", operatorNamespace, "-o", "wide")
	started := time.Now()
	// The secret has 20 s left when the watch reads it, and the nodes pull with it until then: it
	// expires as secrets do, by time, which the operator learns from its own clock. The operator
	// and the kubelets run on the real clock, so the test waits for it.
	shortLived := env.secret
	shortLived.End = time.Now().Add(20 * time.Second).Truncate(time.Second)
	putClusterApp(shortLived)
	t.Cleanup(func() { restoreCluster(t) })
	tell.say("The platform team's watch of aks-prod; its service principal's secret ends in 20 s")
	watch := aksWatch(ctx, t, shortLived.End)
	tell.show("get", "credentialwatches", "-n", operatorNamespace)

	time.Sleep(time.Until(shortLived.End.Add(time.Second)))
	ns := namespace(ctx, t, "outage")
	for _, n := range env.cluster.Nodes {
		createPod(ctx, t, ns, "app-"+n.Name, n.Name)
	}
	tell.say("The team's pods on both nodes: the registry refuses the expired secret")
	for _, n := range env.cluster.Nodes {
		tell.detail("%s's kubelet: %s", n.Name, waitPullFailure(ctx, t, ns, "app-"+n.Name))
	}
	cond := waitCondition(ctx, t, watch, "ImagePullsAuthorized", "False", "ClusterWidePullFailures")
	tell.say("What credwatch says")
	tell.detail("ImagePullsAuthorized False ClusterWidePullFailures: %s", cond.Message)
	if !strings.Contains(cond.Message, "expired") {
		t.Errorf("the condition does not name the expired secret as the cause: %s", cond.Message)
	}
	tell.detail("event ImagePullsRefused: %s", waitEvent(ctx, t, "ImagePullsRefused", "2 nodes", started))
	// One alert per channel, critical: the Slack message and the mail that tell the incident.
	eventually(ctx, t, "the incident's Slack message and mail", func() (bool, string) {
		posted, mailed := pullAlerts(refusedOnBoth)
		return len(posted) >= 1 && len(mailed) >= 1, fmt.Sprintf("Slack %q, mail %q", posted, mailed)
	})
	time.Sleep(3 * time.Second) // a second alert of the same incident would come now, if at all
	posted, mailed := pullAlerts(refusedOnBoth)
	if len(posted) != 1 || len(mailed) != 1 {
		t.Errorf("want one alert per channel, got Slack %q, mail %q", posted, mailed)
	}
	tell.detail("Slack %s", strings.Join(posted, "; "))
	tell.detail("mail: %s", strings.Join(mailed, "; "))
	tell.show("get", "credentialwatches", "-n", operatorNamespace)

	t.Run("rotation heals it", func(t *testing.T) { heal(ctx, story{t: t, demo: tell.demo}, ns, shortLived) })
	if tell.demo {
		tell.say("The cluster stays up until Ctrl-C, which removes it; meanwhile:")
		tell.detail("KUBECONFIG=%s kubectl get credentialwatches -A", env.cluster.Kubeconfig)
		cancel()
		select {} // the cluster's own handler of Ctrl-C removes it and ends the process
	}
}

// aksWatch applies the platform team's watch of aks-prod with imagePulls, as the docs show
// it, and the spec's further lines, asks it to check now, and waits until it has read the
// cluster's secret ending at end.
func aksWatch(ctx context.Context, t *testing.T, end time.Time, spec ...string) *credwatchv1alpha1.CredentialWatch {
	t.Helper()
	smtpHost, smtpPort, _ := net.SplitHostPort(env.smtpAddr)
	kubectl(t, "apply", "-f", "-", fmt.Sprintf(`apiVersion: credwatch.dev/v1alpha1
kind: CredentialWatch
metadata: {name: aks-prod, namespace: %s}
spec:
  target:
    aksCluster: {tenantID: %s, subscriptionID: %s, resourceGroup: rg-prod, name: aks-prod}
  imagePulls:
    registries: ["*.azurecr.io"]
  alerts:
    slack: {channel: "#platform", tokenSecretRef: {name: slack, key: token}}
    email:
      to: [platform@example.com]
      smtp: {host: %s, port: %s, tls: None, from: credwatch@example.com}
%s`, operatorNamespace, tenantID, subscriptionID, smtpHost, smtpPort, strings.Join(append(spec, ""), "\n")))
	kubectl(t, "annotate", "--overwrite", "-n", operatorNamespace, "credentialwatch/aks-prod", credwatchv1alpha1.CheckAnnotation+"="+time.Now().Format(time.RFC3339Nano))
	w := &credwatchv1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Name: "aks-prod", Namespace: operatorNamespace}}
	eventually(ctx, t, "aks-prod to read the cluster's secret", func() (bool, string) {
		if err := env.crClient.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
			return false, err.Error()
		}
		for _, c := range w.Status.Credentials {
			if c.KeyID == env.secret.KeyID && c.EndTime.Time.Equal(end) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("credentials %+v", w.Status.Credentials)
	})
	return w
}

// waitCondition waits until the watch's condition has the status and, unless empty, the reason.
func waitCondition(ctx context.Context, t *testing.T, w *credwatchv1alpha1.CredentialWatch, typ, status, reason string) metav1.Condition {
	t.Helper()
	var found metav1.Condition
	eventually(ctx, t, fmt.Sprintf("%s %s %s %s", w.Name, typ, status, reason), func() (bool, string) {
		if err := env.crClient.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
			return false, err.Error()
		}
		for _, c := range w.Status.Conditions {
			if c.Type == typ {
				found = c
				return string(c.Status) == status && (reason == "" || c.Reason == reason), c.Reason + ": " + c.Message
			}
		}
		return false, fmt.Sprintf("no %s condition", typ)
	})
	return found
}

// waitEvent waits for an event of the reason on a watch of the operator's namespace, last seen
// since since and saying what, and returns its message.
func waitEvent(ctx context.Context, t *testing.T, reason, what string, since time.Time) string {
	t.Helper()
	msg := ""
	eventually(ctx, t, "event "+reason, func() (bool, string) {
		list, err := env.client.CoreV1().Events(operatorNamespace).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", reason).String()})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			last := e.LastTimestamp.Time
			if e.Series != nil {
				last = e.Series.LastObservedTime.Time
			}
			if !e.EventTime.IsZero() && e.EventTime.After(last) {
				last = e.EventTime.Time
			}
			if !last.Before(since.Truncate(time.Second)) && strings.Contains(e.Message, what) {
				msg = e.Message
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d %s events, none since %v saying %q", len(list.Items), reason, since, what)
	})
	return msg
}

// kubectl runs kubectl as the cluster's admin (or whom --as names), with the last argument as
// stdin after "-f -", fails the test if it fails, and logs what it printed.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectlErr(args...)
	shown := args
	if len(args) > 2 && args[len(args)-2] == "-" {
		shown = args[:len(args)-1] // what is applied may hold a secret's text
	}
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(shown, " "), err, out)
	}
	t.Logf("kubectl %s\n%s", strings.Join(shown, " "), out)
	return out
}

func kubectlErr(args ...string) (string, error) {
	var stdin string
	if len(args) > 2 && args[len(args)-2] == "-" {
		stdin, args = args[len(args)-1], args[:len(args)-1]
	}
	// kubectl's discovery cache in the cluster's folder, removed with it, not in $HOME.
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", env.cluster.Kubeconfig, "--cache-dir", filepath.Join(cluster.Dir, "kube-cache")}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// What the alerts of the seed's outage say: it is the only incident on both nodes.
const (
	refusedOnBoth = "refuses image pulls on 2 nodes"
	recovered     = "refuses no image pull any more"
)

// pullAlerts are the Slack titles and mail subjects that say what.
func pullAlerts(what string) (posted, mailed []string) {
	for _, m := range env.slack.All() {
		if strings.Contains(m.Title, what) {
			posted = append(posted, m.Channel+": "+m.Title)
		}
	}
	msgs, _ := env.mail.List()
	for _, m := range msgs {
		if strings.Contains(m.Subject, what) {
			mailed = append(mailed, m.Subject)
		}
	}
	return posted, mailed
}
