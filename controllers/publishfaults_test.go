package controllers

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/azure/clients"
	"github.com/credwatch/credwatch/internal/githubsecrets"
	"github.com/credwatch/credwatch/internal/rotation"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/test/fakegithub"
	"github.com/credwatch/credwatch/test/fakekeyvault"
)

const githubToken = "github_pat_st0ry-t0ken"

// sinks are a Key Vault and a GitHub repository, contoso/deploy, that a story's rotations publish
// to, and the reconciler's way to each.
type sinks struct {
	vault *fakekeyvault.Vault
	gh    *fakegithub.Server
}

func newSinks(h *harness) sinks {
	h.t.Helper()
	s := sinks{vault: fakekeyvault.New(), gh: fakegithub.New()}
	h.t.Cleanup(s.gh.Close)
	s.vault.Authenticate(tenantID, fake.Issued)
	s.vault.SetClock(h.clock.Now)
	s.gh.SetClock(h.clock.Now)
	s.gh.AddRepo("contoso", "deploy")
	// The operator's identity allows contoso's repositories on this GitHub for the story alone.
	owner := strings.TrimSuffix(v1alpha1.GitHubActionsSink{APIURL: s.gh.URL(), Owner: "contoso", Repo: "x"}.RepositoryURL(), "x") + "*"
	allowRepos(h, owner)
	h.t.Cleanup(func() { allowRepos(h) })
	return s
}

// allowRepos sets the GitHub repositories the operator's identity allows.
func allowRepos(h *harness, repos ...string) {
	h.t.Helper()
	ctx := context.Background()
	var id v1alpha1.ClusterAzureIdentity
	if err := k8s.Get(ctx, client.ObjectKey{Name: testIdentity}, &id); err != nil {
		h.t.Fatal(err)
	}
	id.Spec.Allow.GitHubRepositories = repos
	if err := updateSignedIn(ctx, &id); err != nil {
		h.t.Fatal(err)
	}
}

// createWatch makes the watch of appID, rotating and publishing to sinks, and the Secret of its
// namespace that holds the GitHub token.
func (s sinks) createWatch(h *harness, appID string, sinks ...v1alpha1.PublishSink) {
	h.t.Helper()
	h.create(appID, rotationSpec(func(r *v1alpha1.Rotation) { r.Publish = sinks }))
	if err := k8s.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "github", Namespace: h.key.Namespace},
		StringData: map[string]string{"token": githubToken}}); err != nil {
		h.t.Fatal(err)
	}
}

// reach points the reconciler at the sinks, the vault through vt.
func (s sinks) reach(h *harness, vt policy.Transporter) {
	host, _ := url.Parse(s.gh.URL())
	h.r.Azure = clients.New(identities, graphAPI, nil).WithKeyVaultTransport(vt)
	h.r.GitHub = githubsecrets.New([]string{host.Host}, s.gh.Client()).WithClock(h.clock.Now)
}

func (s sinks) github() v1alpha1.GitHubActionsSink {
	return v1alpha1.GitHubActionsSink{APIURL: s.gh.URL(), Owner: "contoso", Repo: "deploy", SecretName: "AZURE_CLIENT_SECRET",
		TokenSecretRef: v1alpha1.SecretKeyRef{Name: "github", Key: "token"}}
}

// rotatedTo checks that the watch's rotation completed, and returns the new secret, as its Secret
// holds it.
func (h *harness) rotatedTo() string {
	h.t.Helper()
	w := h.get()
	if w.Status.LastRotation == nil || w.Status.Rotation != nil {
		h.t.Fatalf("rotation %+v, last %+v: want it completed", w.Status.Rotation, w.Status.LastRotation)
	}
	kept, err := h.targetSecret()
	if err != nil {
		h.t.Fatal(err)
	}
	return string(kept.Data["clientSecret"])
}

// puts counts the secrets GitHub was asked to set.
func (s sinks) puts() int {
	n := 0
	for _, r := range s.gh.Requests() {
		if r.Method == http.MethodPut {
			n++
		}
	}
	return n
}

// errDiedHere is errDied as the Azure SDK sees it: not a transport failure to retry.
type errDiedHere struct{}

func (errDiedHere) Error() string { return errDied.Error() }
func (errDiedHere) NonRetriable() {}

// dyingVault is a Key Vault the process dies at: the first secret set lands, and the process dies
// before it hears the answer.
type dyingVault struct {
	policy.Transporter
	dead *atomic.Bool
}

func (d dyingVault) Do(req *http.Request) (*http.Response, error) {
	if d.dead.Load() {
		return nil, errDiedHere{}
	}
	resp, err := d.Transporter.Do(req)
	// Not the challenge, the vault's first answer, which the SDK draws out with the same request unsigned.
	if req.Method == http.MethodPut && err == nil && resp.StatusCode == http.StatusOK {
		d.dead.Store(true)
		return nil, errDiedHere{}
	}
	return resp, err
}

// A rotation publishing to a Key Vault and to GitHub dies between the two: the vault holds the new
// secret, status does not say so. The restarted operator finds the vault's version and writes it
// no second time, sets the GitHub secret, and retires the old secrets only once both hold the new
// one. Nothing secret reaches logs, events or status.
func TestRotationPublishesToBothSinksThroughACrash(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	t0 := h.clock.Now()
	s := seed(t, t0, 20*day, 400*day, 200*day)
	sk := newSinks(h)
	sk.gh.AddToken(githubToken, "contoso/deploy")
	kv := v1alpha1.KeyVaultSink{VaultURL: fakekeyvault.URL, SecretName: "payments-sp"}
	gh := sk.github()
	sk.createWatch(h, s.appID, v1alpha1.PublishSink{KeyVault: &kv}, v1alpha1.PublishSink{GitHubActions: &gh})
	old, _ := h.oldCredwatchSecrets(s.appID, t0)

	var dead atomic.Bool
	m := mortal{dead: &dead}
	sk.reach(h, dyingVault{Transporter: sk.vault.Transport(), dead: &dead})
	h.r.Client = crashingClient{Client: k8s, mortal: m}
	for i := 0; i < 200 && !dead.Load(); i++ {
		ctx := context.Background()
		res, err := reconcileFully(ctx, t, h.r, h.key)
		h.drainEvents()
		if err != nil && !dead.Load() {
			t.Fatalf("reconcile: %v", err)
		}
		h.step(max(res.RequeueAfter, time.Second))
	}
	if !dead.Load() {
		t.Fatal("the rotation never wrote to the vault")
	}
	if st := h.get().Status.Rotation; st == nil || len(st.Published) != 0 || sk.vault.Sets() != 1 || sk.puts() != 0 {
		t.Fatalf("as the process died: rotation %+v, %d vault writes, %d GitHub writes; want one vault write, not recorded", st, sk.vault.Sets(), sk.puts())
	}

	h.restart()
	sk.reach(h, sk.vault.Transport())
	h.run(day, nil)
	st := h.get().Status.Rotation
	if st == nil || len(st.Published) != 2 || st.Published[0].Sink != kv.Name() || st.Published[1].Sink != gh.Name() {
		t.Fatalf("in the grace period: rotation %+v; want both sinks recorded", st)
	}
	shown, _ := json.MarshalIndent(st, "", "  ")
	t.Logf("status.rotation in the grace period:\n%s", shown)
	if _, kept := h.credwatchSecrets(s.appID)[old]; !kept {
		t.Fatal("an old secret was retired in the grace period")
	}

	h.run(10*day, nil)
	text := h.rotatedTo()
	if versions := sk.vault.Versions("payments-sp"); sk.vault.Sets() != 1 || len(versions) != 1 || versions[0].Value != text {
		t.Errorf("the vault: %d writes, versions %d; want the new secret written once", sk.vault.Sets(), len(versions))
	}
	if v, _ := sk.gh.Secret("contoso", "deploy", "", "AZURE_CLIENT_SECRET"); v != text || sk.puts() != 2 {
		t.Errorf("GitHub: %d writes, holding the new secret: %v; want 2, as the grace period began and as the old secrets went", sk.puts(), v == text)
	}
	assertNoSecrets(t, h, githubToken)
}

// A GitHub sink whose token may not write the repository's secrets holds the retirement: the
// watch says which sink and what the token needs, each failure is an event, and the channels hear
// of it once it keeps failing. Once the token may, the rotation completes. Neither the token nor
// the secret reaches the alerts.
func TestAGitHubSinkRefusingHoldsTheRetirementAndIsAlerted(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	t0 := h.clock.Now()
	s := seed(t, t0, 20*day, 400*day, 200*day)
	sk := newSinks(h)
	sk.gh.AddRepo("contoso", "other")
	sk.gh.AddToken(githubToken, "contoso/other")
	sk.reach(h, sk.vault.Transport())
	gh := sk.github()
	sk.createWatch(h, s.appID, v1alpha1.PublishSink{GitHubActions: &gh})
	rc := newReceiver(t, nil)
	h.withWebhook(rc)
	old, _ := h.oldCredwatchSecrets(s.appID, t0)

	h.run(2*day, nil)
	w := h.get()
	if st := w.Status.Rotation; st == nil || st.Step != v1alpha1.StepRetiring || st.RetireTime != nil {
		t.Fatalf("with the token refused: rotation %+v; want it held before the grace period", st)
	}
	assertCondition(t, w, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonRotationBlocked)
	if msg := target.Condition(w, v1alpha1.ConditionRotating).Message; !strings.Contains(msg, gh.Name()) ||
		!strings.Contains(msg, `the sink's token needs the "Secrets" repository permission (read and write) on contoso/deploy`) {
		t.Errorf("Rotating: %q; want the sink and what the token needs", msg)
	}
	if n := countPrefix(h.all, "Warning "+rotation.EventPublishFailed); n < 5 {
		t.Errorf("%d %s events in two days, want one per attempt", n, rotation.EventPublishFailed)
	}
	failing := 0
	for _, p := range rc.received() {
		if p.Kind == alertkind.RotationFailing {
			failing++
			t.Logf("the alert: %s\nproblem: %s\nfix: %s", p.Title, p.Problem, p.Fix)
			if !strings.Contains(p.Problem, gh.Name()) {
				t.Errorf("the alert's problem %q does not name the sink", p.Problem)
			}
		}
	}
	if failing != 1 {
		t.Errorf("%d RotationFailing alerts, want 1", failing)
	}
	if _, kept := h.credwatchSecrets(s.appID)[old]; !kept {
		t.Fatal("an old secret was retired while GitHub did not hold the new one")
	}

	sk.gh.AddToken(githubToken, "contoso/deploy")
	h.run(10*day, nil)
	if v, _ := sk.gh.Secret("contoso", "deploy", "", "AZURE_CLIENT_SECRET"); v != h.rotatedTo() {
		t.Error("GitHub does not hold the new secret")
	}
	rotated := 0
	for _, p := range rc.received() {
		if p.Kind == alertkind.Rotated && strings.Contains(p.Fix, "in each place spec.rotation.publish names") {
			rotated++
		}
	}
	if rotated != 1 {
		t.Errorf("%d Rotated alerts telling of the sinks, want 1", rotated)
	}
	delivered, _ := json.Marshal(rc.received())
	for _, secret := range append(fake.SecretTexts(), githubToken) {
		if strings.Contains(string(delivered), secret) {
			t.Errorf("an alert holds a secret (%s...)", secret[:3])
		}
	}
	assertNoSecrets(t, h, githubToken)
}

// A Key Vault whose role assignments admit only the team's writer: the sink names that identity,
// which the namespace may use and which allows nothing but PublishKeyVault, to this vault, for
// this application. The vault is written as the writer, never as the rotation's identity (the
// operator's, which the vault refuses), and the writer's secret reaches nothing it should not.
func TestAKeyVaultSinkWritesAsItsOwnIdentity(t *testing.T) {
	needsAPIServer(t)
	const writerClient, writerSecret = "0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f", "kv~WrItEr-SECRET-abcdefghijklmnopqrstuvwx0123"
	fake.AddClient(tenantID, writerClient, writerSecret)
	t.Cleanup(func() { fake.RemoveClient(tenantID, writerClient) })
	h := newHarness(t)
	t0 := h.clock.Now()
	s := seed(t, t0, 20*day, 400*day, 200*day)
	sk := newSinks(h)
	sk.vault.Admit(writerClient)
	kv := v1alpha1.KeyVaultSink{VaultURL: fakekeyvault.URL, SecretName: "payments-sp", IdentityRef: &v1alpha1.IdentityRef{Name: "kv-writer"}}
	sk.createWatch(h, s.appID, v1alpha1.PublishSink{KeyVault: &kv})
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kv-writer", Namespace: h.key.Namespace},
		StringData: map[string]string{"clientSecret": writerSecret}}); err != nil {
		t.Fatal(err)
	}
	writer := &v1alpha1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Name: "kv-writer", Namespace: h.key.Namespace}}
	writer.Spec.ClientSecret = &v1alpha1.ClientSecretSignIn{TenantID: tenantID, ClientID: writerClient, SecretRef: v1alpha1.SecretKeyRef{Name: "kv-writer", Key: "clientSecret"}}
	writer.Spec.Allow = v1alpha1.IdentityAllow{Tenants: []string{tenantID}, Applications: []string{s.appID},
		Operations: []v1alpha1.Operation{v1alpha1.OperationPublishKeyVault}, KeyVaults: []string{fakekeyvault.URL}}
	if err := k8s.Create(ctx, writer); err != nil {
		t.Fatal(err)
	}
	writer.Status = signedIn(writer.Generation)
	if err := k8s.Status().Update(ctx, writer); err != nil {
		t.Fatal(err)
	}
	sk.reach(h, sk.vault.Transport())

	h.run(day, nil)
	if st := h.get().Status.Rotation; st == nil || len(st.Published) != 1 || st.Published[0].Sink != kv.Name() {
		t.Fatalf("in the grace period: rotation %+v; want the vault written as kv-writer", st)
	}
	h.run(10*day, nil)
	text := h.rotatedTo()
	if versions := sk.vault.Versions("payments-sp"); sk.vault.Sets() != 1 || len(versions) != 1 || versions[0].Value != text {
		t.Errorf("the vault: %d writes, %d versions; want the new secret written once", sk.vault.Sets(), len(versions))
	}
	assertNoSecrets(t, h, writerSecret)
}
