package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/azure/clients"
	"github.com/credwatch/credwatch/test/fakegraph"
)

// apiServerGet reads path from the suite's API server as its admin.
func apiServerGet(path string) ([]byte, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Get(strings.TrimSuffix(cfg.Host, "/") + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// TestWorkloadIdentityEndToEnd: a team's AzureIdentity signs in with the tokens the API server
// mints for the team's own ServiceAccount, which Entra accepts because the application federates
// with exactly that ServiceAccount (verified against the API server's JWKS); the team's watch
// reads Graph as that application. Another namespace naming a ServiceAccount of the same name
// gets nothing.
func TestWorkloadIdentityEndToEnd(t *testing.T) {
	needsAPIServer(t)
	const wiClient = "6c7d8e9f-0a1b-4c2d-8e3f-4a5b6c7d8e9f"
	discovery, err := apiServerGet("/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	var oidc struct{ Issuer string }
	if err := json.Unmarshal(discovery, &oidc); err != nil || oidc.Issuer == "" {
		t.Fatalf("the API server's discovery document %s: %v", discovery, err)
	}

	h := newHarness(t)
	s := seed(t, h.clock.Now(), 100*day, 100*day, 100*day)
	h.create(s.appID, func(spec *v1alpha1.CredentialWatchSpec) {
		spec.IdentityRef = &v1alpha1.IdentityRef{Kind: v1alpha1.KindAzureIdentity, Name: "team"}
	})
	team := h.key.Namespace
	fake.AddFederatedCredential(tenantID, wiClient, fakegraph.FederatedCredential{
		Issuer: oidc.Issuer, Subject: "system:serviceaccount:" + team + ":graph",
		Audiences: []string{azure.TokenExchangeAudience}, Keys: func() ([]byte, error) { return apiServerGet("/openid/v1/jwks") },
	})
	ctx := context.Background()
	other := newNamespace(t)
	for _, ns := range []string{team, other} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "graph",
			Annotations: map[string]string{v1alpha1.IdentityConsentAnnotation: ns + "/team"}}}
		if err := k8s.Create(ctx, sa); err != nil {
			t.Fatal(err)
		}
		id := &v1alpha1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"}}
		id.Spec.WorkloadIdentity = &v1alpha1.WorkloadIdentitySignIn{TenantID: tenantID, ClientID: wiClient, ServiceAccountRef: v1alpha1.LocalRef{Name: "graph"}}
		id.Spec.Allow.Applications = []string{s.appID}
		if err := k8s.Create(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	wi := azure.NewIdentities(azure.Cloud{AuthorityHost: fake.URL() + "/", GraphEndpoint: fake.URL()}, fake.Client(), nil)
	wi.Tokens = azure.KubeTokens{Client: k8s}
	az := clients.New(wi, graphAPI, nil)
	ids := &IdentityReconciler{Client: k8s, Secrets: k8s, Recorder: h.recorder, Clock: h.clock, Azure: az}
	ready := func(ns string) metav1.Condition {
		t.Helper()
		key := client.ObjectKey{Namespace: ns, Name: "team"}
		if _, err := ids.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
		var id v1alpha1.AzureIdentity
		if err := k8s.Get(ctx, key, &id); err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(id.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			return *c
		}
		return metav1.Condition{}
	}

	if c := ready(other); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "AADSTS700213") {
		t.Errorf("another namespace's ServiceAccount graph: Ready %+v, want refused with AADSTS700213 (no federated record for its subject)", c)
	}
	if c := ready(team); c.Status != metav1.ConditionTrue {
		t.Fatalf("the team's own ServiceAccount: Ready %+v, want signed in", c)
	}

	h.r.Azure = az
	fake.ResetRequests()
	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	reqs := fake.Requests()
	if len(reqs) == 0 {
		t.Fatal("the watch read nothing from Graph")
	}
	for _, r := range reqs {
		if r.ClientID != wiClient {
			t.Errorf("Graph request %s %s as %s, want the workload identity's client %s", r.Method, r.Path, r.ClientID, wiClient)
		}
	}

	fake.ResetRequests()
	// A ServiceAccount that does not name the identity in its consent has no token minted for
	// it, even with Azure Workload Identity's own annotation, which every ServiceAccount it serves
	// carries: whoever may create an identity may not borrow any ServiceAccount's tokens.
	var sa corev1.ServiceAccount
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: team, Name: "graph"}, &sa); err != nil {
		t.Fatal(err)
	}
	sa.Annotations = map[string]string{"azure.workload.identity/client-id": wiClient}
	if err := k8s.Update(ctx, &sa); err != nil {
		t.Fatal(err)
	}
	h.step(2 * time.Hour)
	if c := ready(team); c.Reason != v1alpha1.ReasonServiceAccountTokenFailed || !strings.Contains(c.Message, "annotate it credwatch.dev/identity="+team+"/team") {
		t.Errorf("a ServiceAccount without the consent: Ready %+v, want ServiceAccountTokenFailed saying what to annotate", c)
	}

	// Without its ServiceAccount, no token is minted, and the identity says what to fix.
	if err := k8s.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "graph"}}); err != nil {
		t.Fatal(err)
	}
	h.step(2 * time.Hour)
	if c := ready(team); c.Reason != v1alpha1.ReasonServiceAccountTokenFailed || !strings.Contains(c.Message, team+"/graph") {
		t.Errorf("a deleted ServiceAccount: Ready %+v, want ServiceAccountTokenFailed naming it", c)
	}
	if n := len(fake.TokenRequests()); n != 0 {
		t.Errorf("%d token requests for ServiceAccounts that may not be used", n)
	}
}
