package nodes

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	credwatchv1alpha1 "github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/test/fakegraph"
)

// rotator is the identity the platform admin grants aks-prod's watch to rotate the cluster's
// secret and reset the cluster onto the new one.
const rotator = "aks-prod-rotation"

// heal is the outage's end, as a platform team that sees it turns rotation on for aks-prod: a
// new secret is added and accepted by Entra, Resource Manager resets the cluster onto it, the
// nodes' agent rewrites each node's azure.json and restarts its kubelet as AKS does, the pods in
// ns pull, and the incident ends. The expired secret is not retired: not before the grace
// period, counted from when the new one is in use, is over.
func heal(ctx context.Context, tell story, ns string, expired fakegraph.PasswordCredential) {
	t := tell.t
	start := time.Now()
	posted0, mailed0 := pullAlerts(recovered)
	tell.say("The platform admin grants aks-prod's watch an identity that may rotate and reset the cluster; the team turns rotation on")
	kubectl(t, "apply", "-f", "-", fmt.Sprintf(`apiVersion: credwatch.dev/v1alpha1
kind: ClusterAzureIdentity
metadata: {name: %s}
spec:
  operator: {}
  allow:
    tenants: [%s]
    applications: [%s]
    subscriptions: [{subscriptionID: %s, resourceGroups: [rg-prod]}]
    operations: [Rotate, ResetCluster]
  conditions:
  - namespaces: [%s]
`, rotator, tenantID, clusterApp, subscriptionID, operatorNamespace))
	w := aksWatch(ctx, t, expired.End,
		"  identityRef: {kind: ClusterAzureIdentity, name: "+rotator+"}",
		"  rotation: {enabled: true, secretRef: {name: aks-prod-sp}}")

	tell.say("credwatch adds a secret, waits for Entra to accept it, and resets the cluster onto it; AKS gives it to the nodes")
	var steps []string
	eventually(ctx, t, "the rotation to put a new secret in use", func() (bool, string) {
		if err := env.crClient.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
			return false, err.Error()
		}
		r := w.Status.Rotation
		if r == nil {
			return false, "no rotation"
		}
		if len(steps) == 0 || steps[len(steps)-1] != string(r.Step) {
			steps = append(steps, string(r.Step))
		}
		return r.Step == credwatchv1alpha1.StepRetiring && r.RetireTime != nil, string(r.Step) + ": " + r.Message
	})
	r := w.Status.Rotation
	tell.detail("rotation steps %s: secret %s in use, old secrets go at %s", strings.Join(steps, ", "), r.KeyID, r.RetireTime.UTC().Format(time.RFC3339))

	// One reset, onto the new secret, which the nodes got, and which the watch's Secret holds.
	seen := resets()
	if len(seen) != 1 || seen[0].keyID != r.KeyID {
		t.Fatalf("the nodes' agent saw resets %+v, want one onto the new secret %s", seen, r.KeyID)
	}
	for _, n := range env.cluster.Nodes {
		var conf struct{ AADClientID, AADClientSecret string }
		data, err := os.ReadFile(filepath.Join(n.Dir(), "azure.json"))
		if err == nil {
			err = json.Unmarshal(data, &conf)
		}
		if err != nil || conf.AADClientID != clusterApp || sha256.Sum256([]byte(conf.AADClientSecret)) != seen[0].digest {
			t.Errorf("%s's azure.json does not hold the secret the cluster was reset onto (%v)", n.Name, err)
		}
	}
	held := &corev1.Secret{}
	if err := env.crClient.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "aks-prod-sp"}, held); err != nil {
		t.Fatal(err)
	}
	if string(held.Data["keyID"]) != r.KeyID || sha256.Sum256(held.Data["clientSecret"]) != seen[0].digest {
		t.Errorf("Secret aks-prod-sp holds keyID %q and another secret than the cluster was reset onto; want %s", held.Data["keyID"], r.KeyID)
	}

	// The pods pull, and the incident ends, in status, in an event, and in each channel.
	tell.say("The pods pull again, and the incident ends")
	for _, n := range env.cluster.Nodes {
		waitRunning(ctx, t, ns, "app-"+n.Name)
	}
	tell.show("get", "pods", "-n", ns, "-o", "wide")
	cond := waitCondition(ctx, t, w, "ImagePullsAuthorized", "True", "NoPullFailures")
	tell.detail("ImagePullsAuthorized True NoPullFailures: %s", cond.Message)
	tell.detail("event ImagePullsRecovered: %s", waitEvent(ctx, t, "ImagePullsRecovered", loginServer, start))
	eventually(ctx, t, "the incident's end in Slack and mail", func() (bool, string) {
		posted, mailed := pullAlerts(recovered)
		return len(posted) > len(posted0) && len(mailed) > len(mailed0), fmt.Sprintf("Slack %q, mail %q", posted, mailed)
	})
	posted, mailed := pullAlerts(recovered)
	tell.detail("Slack %s", strings.Join(posted[len(posted0):], "; "))
	tell.detail("mail: %s", strings.Join(mailed[len(mailed0):], "; "))

	// The expired secret stays, as every old secret does until the grace period after the new
	// one went into use is over: nothing was removed from Entra.
	app, _ := env.graph.Application(tenantID, clusterApp)
	var keys []string
	for _, p := range app.Passwords {
		keys = append(keys, p.KeyID)
	}
	if !strings.Contains(strings.Join(keys, " "), expired.KeyID) || len(keys) != 2 {
		t.Errorf("the application's secrets are %v, want the expired %s and the new %s", keys, expired.KeyID, r.KeyID)
	}
	for _, req := range env.graph.Requests() {
		if strings.HasSuffix(req.Path, "/removePassword") {
			t.Errorf("a secret was removed before the grace period: %s %s", req.Method, req.Path)
		}
	}
	if grace := 7 * 24 * time.Hour; r.RetireTime.Time.Before(seen[0].at.Truncate(time.Second).Add(grace)) {
		t.Errorf("old secrets go at %v, before the grace period after the reset at %v is over", r.RetireTime, seen[0].at)
	}
	tell.say("The expired secret stays until the grace period after the new one went into use is over")
	tell.show("get", "credentialwatches", "-n", operatorNamespace)
}

// restoreCluster puts back what the outage and its healing changed, for the stories after it:
// the watch of aks-prod, which may be rotating, and the identity that let it, are deleted, and
// the cluster's application and its nodes have the cluster's secret again.
func restoreCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := &credwatchv1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Name: "aks-prod", Namespace: operatorNamespace}}
	if err := env.crClient.Delete(ctx, w); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
	eventually(ctx, t, "the watch of aks-prod to go", func() (bool, string) {
		err := env.crClient.Get(ctx, client.ObjectKeyFromObject(w), w)
		return apierrors.IsNotFound(err), fmt.Sprintf("%v", err)
	})
	id := &credwatchv1alpha1.ClusterAzureIdentity{ObjectMeta: metav1.ObjectMeta{Name: rotator}}
	if err := env.crClient.Delete(ctx, id); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
	putClusterApp(env.secret)
	if len(resets()) > 0 {
		if err := moveNodes(clusterApp, env.secret.SecretText); err != nil {
			t.Error(err)
		}
	}
	agent.mu.Lock()
	agent.resets = nil
	agent.mu.Unlock()
}
