package nodes

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/credwatch/credwatch/internal/pullauth"
)

// Both nodes pull the team's image with the cluster's service principal: the kubelet runs the
// real credential provider, which gives the client ID and secret of azure.json, and the
// registry's token server accepts them because Entra ID signs the service principal in.
func TestNodesPullWithTheClusterCredential(t *testing.T) {
	requireCluster(t)
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := namespace(ctx, t, "pull-ok")
	for _, n := range env.cluster.Nodes {
		createPod(ctx, t, ns, "app-"+n.Name, n.Name)
	}
	for _, n := range env.cluster.Nodes {
		waitRunning(ctx, t, ns, "app-"+n.Name)
	}
	pulled := false
	for _, g := range env.registry.Grants() {
		if g.Principal == clusterApp && g.Scope == "repository:team/app:pull" && !g.Refused && g.Time.After(started) {
			pulled = true
		}
	}
	if !pulled {
		t.Errorf("the registry gave the cluster's service principal no pull token: %+v", env.registry.Grants())
	}
}

// Once the cluster's secret has expired, Entra ID refuses the service principal, the registry
// refuses its pulls, and every node's kubelet reports the runtime's refusal, which credwatch
// recognises as a pull refused for want of credentials.
func TestExpiredSecretRefusedOnEveryNode(t *testing.T) {
	requireCluster(t)
	started := time.Now()
	expired := env.secret
	expired.End = time.Now().Add(-time.Minute)
	putClusterApp(expired)
	t.Cleanup(func() { putClusterApp(env.secret) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := namespace(ctx, t, "pull-expired")
	for _, n := range env.cluster.Nodes {
		createPod(ctx, t, ns, "app-"+n.Name, n.Name)
	}
	for _, n := range env.cluster.Nodes {
		msg := waitPullFailure(ctx, t, ns, "app-"+n.Name)
		t.Logf("%s's kubelet: %s", n.Name, msg)
		if !pullauth.Refused(msg) {
			t.Errorf("credwatch does not recognise %s's refusal as one for want of credentials: %s", n.Name, msg)
		}
	}
	refused := false
	for _, g := range env.registry.Grants() {
		if g.Principal == clusterApp && g.Refused && strings.Contains(g.Reason, "AADSTS7000222") && g.Time.After(started) {
			refused = true
		}
	}
	if !refused {
		t.Errorf("the registry did not refuse the expired secret as Entra ID does: %+v", env.registry.Grants())
	}
}

func requireCluster(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the stories on real nodes start a cluster")
	}
	if os.Getenv("CLUSTER_ASSETS") == "" {
		t.Fatal("CLUSTER_ASSETS is not set: run `make test`, which builds the cluster's binaries, registry and credential provider")
	}
}

// namespace makes a namespace that enforces the restricted Pod Security profile, as the teams'
// namespaces on a hardened cluster do.
func namespace(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if _, err := env.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// createPod runs the team's image on the node, pulled every time, with the node's credential
// (no imagePullSecrets), as most pods on AKS are.
func createPod(ctx context.Context, t *testing.T, ns, name, node string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			SecurityContext:               &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "app", Image: appImage, ImagePullPolicy: corev1.PullAlways,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	if _, err := env.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitRunning(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	eventually(ctx, t, "pod "+ns+"/"+name+" to run", func() (bool, string) {
		pod, err := env.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return pod.Status.Phase == corev1.PodRunning, fmt.Sprintf("%s; events: %v", pod.Status.Phase, events(ns, name))
	})
}

// waitPullFailure waits for the kubelet's event that it failed to pull the pod's image, and
// returns its message.
func waitPullFailure(ctx context.Context, t *testing.T, ns, name string) string {
	t.Helper()
	failure := ""
	eventually(ctx, t, "a pull failure reported for "+ns+"/"+name, func() (bool, string) {
		all := events(ns, name)
		for _, m := range all {
			if strings.HasPrefix(m, "Failed to pull image") {
				failure = m
				return true, ""
			}
		}
		return false, fmt.Sprintf("events: %v", all)
	})
	return failure
}

func events(ns, pod string) []string {
	list, err := env.client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", pod).String(),
	})
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Message)
	}
	return out
}
