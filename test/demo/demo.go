package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/slack-go/slack/slacktest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/test/fakeazure"
	"github.com/credwatch/credwatch/test/fakegraph"
	"github.com/credwatch/credwatch/test/kubecfg"
	"github.com/credwatch/credwatch/test/mailpit"
	"github.com/credwatch/credwatch/test/slacklog"
)

// The samples' tenant (config/samples), and the identity the operator
// signs in with.
const (
	tenantID       = "72f988bf-86f1-41af-91ab-2d7cd011db47"
	operatorClient = "0e4d2c1b-9a8f-4e7d-b6c5-a4b3c2d1e0f9"
	operatorSecret = "demo~operator-secret-not-a-real-one"
	namespace      = "demo"
	operatorNS     = "credwatch-system"
	day            = 24 * time.Hour
)

// principal is a service principal the fake Graph holds for the demo, and the watch the demo
// makes for it (none for the one the samples watch).
type principal struct {
	watch, appID, name string
	obj                fakegraph.Object
}

func principals(now time.Time) []principal {
	start := now.Add(-360 * day)
	return []principal{
		// The service principal config/samples watches, as aks-prod-sp.
		{appID: "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c", name: "payments-api", obj: fakegraph.Object{Tags: []string{"aks"},
			Passwords: []fakegraph.PasswordCredential{{DisplayName: "ci-pipeline", SecretText: "pAy~demo-secret-expiring-in-five-days", Start: start, End: now.Add(5*day + time.Hour)}},
		}},
		{watch: "legacy-batch", appID: "5b6c7d8e-9f0a-4b1c-8d2e-3f4a5b6c7d8e", name: "legacy-batch", obj: fakegraph.Object{Tags: []string{"aks"},
			Passwords: []fakegraph.PasswordCredential{{DisplayName: "rbac", SecretText: "lEg~demo-secret-expired-three-days-ago", Start: start, End: now.Add(-3*day - time.Hour)}},
		}},
		{watch: "signing-service", appID: "6e7f8091-2b3c-4d4e-8f50-6b7c8d9e0f1a", name: "signing-service", obj: fakegraph.Object{
			Keys: []fakegraph.KeyCredential{{DisplayName: "CN=signing", Type: "AsymmetricX509Cert", Usage: "Verify", Start: start, End: now.Add(20*day + time.Hour)}},
		}},
	}
}

// run starts everything, shows what happened, and, unless once, waits for ctx to end.
func run(ctx context.Context, out io.Writer, once bool) error {
	say := func(format string, args ...any) { fmt.Fprintf(out, "==> "+format+"\n", args...) }
	ctrl.SetLogger(logr.Discard())
	work, err := os.MkdirTemp("", "credwatch-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	now := time.Now()

	say("Building the operator (the first build compiles the Azure SDKs and takes a few minutes)")
	bin := filepath.Join(work, "credwatch")
	if err := build(ctx, out, bin); err != nil {
		return err
	}

	say("Starting a local control plane (kube-apiserver and etcd from bin/k8s)")
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join(repoRoot(), "config", "crd", "bases")}, ErrorIfCRDPathMissing: true, Scheme: scheme}
	if _, err := env.Start(); err != nil {
		return fmt.Errorf("starting the control plane (run `make demo`, which builds it): %w", err)
	}
	defer func() { _ = env.Stop() }()
	k8s, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := kubecfg.Write(env.Config, "demo", kubeconfig); err != nil {
		return err
	}

	say("Starting the Microsoft Graph, Entra ID and Resource Manager fakes")
	azure, err := fakeazure.Start(work, tenantID, operatorClient, operatorSecret, func(rg, name string) (string, bool) {
		return "msi", rg == "rg-prod" && name == "aks-prod"
	})
	if err != nil {
		return err
	}
	defer azure.Close()
	// The AKS sample's cluster is the fleet sample's one cluster.
	azure.AddToFleet("8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918", "rg-prod", "aks-prod")
	for _, p := range principals(now) {
		p.obj.AppID, p.obj.DisplayName = p.appID, p.name
		azure.Graph.PutApplication(tenantID, p.obj)
		azure.Graph.PutServicePrincipal(tenantID, fakegraph.Object{AppID: p.appID, DisplayName: p.name})
	}

	say("Starting an SMTP server (mailpit) and Slack's test server")
	mail, err := mailpit.Run(work)
	if err != nil {
		return err
	}
	defer mail.Stop()
	slackSrv := slacktest.NewTestServer()
	slackSrv.Start()
	defer slackSrv.Stop()
	slackMessages := slacklog.Listen(ctx, slackSrv)
	if err := defaultChannelSecrets(ctx, k8s); err != nil {
		return err
	}
	defaults, err := yaml.Marshal(defaultChannels(mail.SMTPPort))
	if err != nil {
		return err
	}
	defaultsFile := filepath.Join(work, "default-alerts.yaml")
	if err := os.WriteFile(defaultsFile, defaults, 0o600); err != nil {
		return err
	}

	metricsAddr, err := freeAddr()
	if err != nil {
		return err
	}
	probeAddr, err := freeAddr()
	if err != nil {
		return err
	}
	// The demo's SMTP server and Slack listen on loopback: the default channels may reach them as
	// the admin's own, and a watch you apply that names them needs loopback allowed.
	args := append([]string{"--kubeconfig", kubeconfig, "--operator-namespace", operatorNS,
		"--metrics-bind-address", metricsAddr, "--metrics-secure=false", "--health-probe-bind-address", probeAddr,
		"--default-alerts", defaultsFile, "--slack-api-url", slackSrv.GetAPIURL(), "--default-identity", "credwatch-default", "--alert-destinations-allow=127.0.0.0/8"}, azure.Flags()...)
	say("Starting the operator: credwatch %s", strings.Join(args, " "))
	stopOperator, err := startOperator(bin, args, azure.Env(), filepath.Join(work, "operator.log"))
	if err != nil {
		return err
	}
	defer stopOperator()

	say("Applying config/samples and two more CredentialWatches in namespace %s", namespace)
	if err := applyWatches(ctx, k8s, kubeconfig, now); err != nil {
		return err
	}
	if err := waitReady(ctx, k8s, 6); err != nil { // four samples, two more
		return err
	}
	time.Sleep(2 * time.Second) // let the alerts and events land

	say("kubectl get cw -n %s -o wide", namespace)
	kubectl(out, kubeconfig, "get", "cw", "-n", namespace, "-o", "wide")
	say("kubectl get events -n %s", namespace)
	kubectl(out, kubeconfig, "get", "events", "-n", namespace, "--sort-by=.lastTimestamp", "-o", "custom-columns=TYPE:.type,REASON:.reason,OBJECT:.involvedObject.name,MESSAGE:.message")
	say("Mail that reached the SMTP server")
	msgs, err := mail.List()
	if err != nil {
		return err
	}
	for _, m := range msgs {
		var to []string
		for _, a := range m.To {
			to = append(to, a.Address)
		}
		fmt.Fprintf(out, "  to %s: %s\n", strings.Join(to, ", "), m.Subject)
	}
	say("Messages posted to Slack")
	for _, m := range slackMessages.All() {
		fmt.Fprintf(out, "  %s: %s\n", m.Channel, m.Title)
	}
	say("Metrics (http://%s/metrics)", metricsAddr)
	if err := printMetrics(out, "http://"+metricsAddr+"/metrics"); err != nil {
		return err
	}
	if once {
		return nil
	}
	say("Running. Try: KUBECONFIG=%s kubectl describe cw -n %s aks-prod-sp   (Ctrl-C stops everything)", kubeconfig, namespace)
	<-ctx.Done()
	say("Stopping")
	return nil
}

// defaultChannels are the operator's default channels: a team mailbox and a Slack channel.
func defaultChannels(smtpPort int) *v1alpha1.Alerts {
	return &v1alpha1.Alerts{
		Email: &v1alpha1.EmailAlerts{To: []string{"platform-team@example.com"}, SMTP: v1alpha1.SMTPServer{
			Host: "127.0.0.1", Port: int32(smtpPort), TLS: v1alpha1.SMTPNoTLS, From: "credwatch@example.com"}},
		Slack: &v1alpha1.SlackAlerts{Channel: "#platform-alerts", TokenSecretRef: &v1alpha1.SecretKeyRef{Name: "slack-bot", Key: "token"}},
	}
}

func defaultChannelSecrets(ctx context.Context, k8s client.Client) error {
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNS}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "slack-bot", Namespace: operatorNS}, StringData: map[string]string{"token": "xoxb-demo-token"}},
	} {
		if err := k8s.Create(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}

// applyWatches applies the samples' identity, as a cluster admin would, config/samples, as a user
// would, and watches for the demo's other service principals.
func applyWatches(ctx context.Context, k8s client.Client, kubeconfig string, now time.Time) error {
	identity := exec.Command("kubectl", "--kubeconfig", kubeconfig, "apply", "-f", filepath.Join(repoRoot(), "config", "samples", "credwatch_v1alpha1_clusterazureidentity.yaml"))
	if out, err := identity.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl apply the samples' identity: %w\n%s", err, out)
	}
	apply := exec.Command("kubectl", "--kubeconfig", kubeconfig, "apply", "-n", namespace, "-k", filepath.Join(repoRoot(), "config", "samples"))
	if out, err := apply.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl apply -k config/samples: %w\n%s", err, out)
	}
	for _, p := range principals(now) {
		if p.watch == "" {
			continue
		}
		w := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Name: p.watch, Namespace: namespace},
			Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{ServicePrincipal: &v1alpha1.ServicePrincipalTarget{TenantID: tenantID, ClientID: p.appID}}}}
		if err := k8s.Create(ctx, w); err != nil {
			return err
		}
	}
	return nil
}

func waitReady(ctx context.Context, k8s client.Client, n int) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		var list v1alpha1.CredentialWatchList
		if err := k8s.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return err
		}
		ready := 0
		for _, w := range list.Items {
			for _, c := range w.Status.Conditions {
				if c.Type == v1alpha1.ConditionReady && c.Status == metav1.ConditionTrue {
					ready++
				}
			}
		}
		if ready == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d watches became Ready within a minute", ready, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
