package controllers

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/azure/clients"
	"github.com/credwatch/credwatch/internal/keyvault"
	"github.com/credwatch/credwatch/internal/rotation"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/test/fakekeyvault"
)

// A rotation that publishes to a Key Vault the identity may not write to holds its retirement,
// says which vault and what it needs, and tells of it; once the vault lets the identity in, the
// new secret is written there once, as a version tagged with its keyId and expiring with it,
// before any old secret goes, and the rotation completes.
func TestRotationPublishesToKeyVault(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	vault := fakekeyvault.New()
	vault.Authenticate(tenantID, fake.Issued)
	h.r.Azure = clients.New(identities, graphAPI, nil).WithKeyVaultTransport(vault.Transport())
	t0 := h.clock.Now()
	s := seed(t, t0, 20*day, 400*day, 200*day)
	sink := v1alpha1.KeyVaultSink{VaultURL: fakekeyvault.URL, SecretName: "payments-sp"}
	h.create(s.appID, rotationSpec(func(r *v1alpha1.Rotation) { r.Publish = []v1alpha1.PublishSink{{KeyVault: &sink}} }))
	old, _ := h.oldCredwatchSecrets(s.appID, t0)

	vault.Refuse(true)
	h.run(2*day, nil)
	w := h.get()
	if st := w.Status.Rotation; st == nil || st.Step != v1alpha1.StepRetiring || st.RetireTime != nil || len(st.Published) != 0 {
		t.Fatalf("with the vault refusing: rotation %+v; want it held before the grace period", st)
	}
	assertCondition(t, w, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonRotationBlocked)
	if msg := target.Condition(w, v1alpha1.ConditionRotating).Message; !strings.Contains(msg, sink.Name()) ||
		!strings.Contains(msg, "Microsoft.KeyVault/vaults/secrets/readMetadata/action") {
		t.Errorf("Rotating: %q; want the vault and the data action named", msg)
	}
	if countPrefix(h.all, "Warning "+rotation.EventPublishFailed) == 0 {
		t.Errorf("events %q; want %s", h.all, rotation.EventPublishFailed)
	}
	if _, kept := h.credwatchSecrets(s.appID)[old]; !kept {
		t.Fatal("an old secret was retired while the vault did not hold the new one")
	}

	vault.Refuse(false)
	h.run(10*day, nil)
	w = h.get()
	last := w.Status.LastRotation
	if last == nil || w.Status.Rotation != nil {
		t.Fatalf("rotation %+v, last %+v: want it completed", w.Status.Rotation, last)
	}
	versions := vault.Versions("payments-sp")
	kept, err := h.targetSecret()
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != 1 || versions[0].Value != string(kept.Data["clientSecret"]) || versions[0].Tags[keyvault.TagKeyID] != last.KeyID ||
		versions[0].Tags[keyvault.TagAppID] != s.appID || !versions[0].Enabled || versions[0].Expires.IsZero() {
		t.Errorf("the vault holds %+v; want one version of the new secret %s", versions, last.KeyID)
	}
	if countPrefix(h.all, "Normal "+rotation.EventPublished) != 1 {
		t.Errorf("events %q; want one %s", h.all, rotation.EventPublished)
	}
	for _, e := range h.all {
		if strings.Contains(e, string(kept.Data["clientSecret"])) {
			t.Errorf("an event holds the secret: %s", e)
		}
	}
}

// A dry run tries each sink as a write would, and says in its plan what it found: a Key Vault's
// versions listed as the identity, a GitHub repository's public key read with the sink's token.
// Nothing is written.
func TestDryRunTriesTheSinks(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	sk := newSinks(h)
	sk.reach(h, sk.vault.Transport())
	sk.gh.AddRepo("contoso", "other")
	sk.gh.AddToken(githubToken, "contoso/other")
	s := seed(t, h.clock.Now(), 20*day, 400*day, 200*day)
	kv := v1alpha1.KeyVaultSink{VaultURL: fakekeyvault.URL, SecretName: "payments-sp"}
	gh := sk.github()
	sk.vault.Refuse(true)
	sk.createWatch(h, s.appID, v1alpha1.PublishSink{KeyVault: &kv}, v1alpha1.PublishSink{GitHubActions: &gh})
	w := h.get()
	w.Spec.Rotation.Mode = v1alpha1.RotationDryRun
	if err := k8s.Update(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	w, _ = h.reconcile()
	msg := target.Condition(w, v1alpha1.ConditionRotating).Message
	if !strings.Contains(msg, "write it to "+kv.Name()+" as a new version") || !strings.Contains(msg, kv.Name()+" cannot be read") ||
		!strings.Contains(msg, "readMetadata/action") || !strings.Contains(msg, gh.Name()+" cannot be read") ||
		!strings.Contains(msg, `the sink's token needs the "Secrets" repository permission`) {
		t.Errorf("the plan with both sinks refusing: %q", msg)
	}
	sk.vault.Refuse(false)
	sk.gh.AddToken(githubToken, "contoso/deploy")
	h.step(2 * day)
	w, _ = h.reconcile()
	if msg := target.Condition(w, v1alpha1.ConditionRotating).Message; !strings.Contains(msg, kv.Name()+" can be read (0 versions)") ||
		!strings.Contains(msg, gh.Name()+" can be read (its public key)") {
		t.Errorf("the plan with both sinks letting the rotation in: %q", msg)
	}
	if sk.vault.Sets() != 0 || sk.puts() != 0 {
		t.Errorf("a dry run wrote %d versions and %d GitHub secrets", sk.vault.Sets(), sk.puts())
	}
	assertNoSecrets(t, h, githubToken)
}

// A rotation that publishes to a repository's Actions secret sets it, sealed with the repository's
// key, with the token of a Secret of the watch's namespace, before the grace period, and again as
// the old secrets go; the secret GitHub opens is the new client secret.
func TestRotationPublishesToGitHub(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	sk := newSinks(h)
	sk.gh.AddToken(githubToken, "contoso/deploy")
	sk.reach(h, sk.vault.Transport())
	s := seed(t, h.clock.Now(), 20*day, 400*day, 200*day)
	sink := sk.github()
	sk.createWatch(h, s.appID, v1alpha1.PublishSink{GitHubActions: &sink})
	h.run(10*day, nil)
	if v, ok := sk.gh.Secret("contoso", "deploy", "", "AZURE_CLIENT_SECRET"); !ok || v != h.rotatedTo() {
		t.Errorf("GitHub holds %q, want the new client secret", v)
	}
	if sk.puts() != 2 {
		t.Errorf("%d PUTs to GitHub, want 2: as the grace period began, and as the old secrets went", sk.puts())
	}
	assertNoSecrets(t, h, githubToken)
}
