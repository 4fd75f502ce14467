package access

import (
	"errors"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

const (
	tenant  = "11111111-1111-1111-1111-111111111111"
	other   = "22222222-2222-2222-2222-222222222222"
	app     = "33333333-3333-3333-3333-333333333333"
	sub     = "44444444-4444-4444-4444-444444444444"
	client  = "55555555-5555-5555-5555-555555555555"
	teamA   = "team-a"
	teamB   = "team-b"
	granted = "ok"
)

func clientSecret() v1alpha1.IdentitySpec {
	return v1alpha1.IdentitySpec{
		ClientSecret: &v1alpha1.ClientSecretSignIn{TenantID: tenant, ClientID: client, SecretRef: v1alpha1.SecretKeyRef{Name: "s", Key: "clientSecret"}},
		Allow: v1alpha1.IdentityAllow{
			Applications:       []string{strings.ToUpper(app)},
			Subscriptions:      []v1alpha1.SubscriptionScope{{SubscriptionID: sub, ResourceGroups: []string{"rg-Prod"}}},
			Operations:         []v1alpha1.Operation{v1alpha1.OperationRotate, v1alpha1.OperationPublishKeyVault, v1alpha1.OperationPublishGitHub},
			KeyVaults:          []string{"https://payments-kv.vault.azure.net/"},
			GitHubRepositories: []string{"https://github.com/contoso/deploy", "https://ghe.contoso.com/platform/*"},
		},
	}
}

func namespaced(spec v1alpha1.IdentitySpec) Identity {
	return Of(&v1alpha1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Name: "id", Namespace: teamA}, Spec: v1alpha1.AzureIdentitySpec{IdentitySpec: spec}})
}

func cluster(conds ...v1alpha1.NamespaceCondition) Identity {
	spec := v1alpha1.IdentitySpec{Operator: &v1alpha1.OperatorSignIn{}, Allow: v1alpha1.IdentityAllow{Tenants: []string{tenant}, Applications: []string{v1alpha1.AllApplications}}}
	return OfCluster(&v1alpha1.ClusterAzureIdentity{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: v1alpha1.ClusterAzureIdentitySpec{IdentitySpec: spec, Conditions: conds}})
}

func TestCheck(t *testing.T) {
	inA := Namespace{Name: teamA, Labels: map[string]string{"team": "a"}}
	inB := Namespace{Name: teamB, Labels: map[string]string{"team": "b"}}
	watch := func(appID string) Request {
		return Request{Operation: v1alpha1.OperationWatch, TenantID: tenant, AppID: appID}
	}
	gh := func(repo string) Request {
		return Request{Operation: v1alpha1.OperationPublishGitHub, TenantID: tenant, AppID: app, GitHubRepository: repo}
	}
	clusterIn := func(op v1alpha1.Operation, rg string) Request {
		return Request{Operation: op, TenantID: tenant, Cluster: &Cluster{SubscriptionID: strings.ToUpper(sub), ResourceGroup: rg}}
	}
	for _, tc := range []struct {
		name string
		id   Identity
		ns   Namespace
		req  Request
		want string // granted, or a part of the refusal's rule
	}{
		{"its appId, in its home tenant", namespaced(clientSecret()), inA, watch(app), granted},
		{"another appId", namespaced(clientSecret()), inA, watch(other), "allow.applications does not list appId " + other},
		{"another tenant", namespaced(clientSecret()), inA, Request{Operation: v1alpha1.OperationWatch, TenantID: other, AppID: app}, "allow.tenants does not list tenant " + other},
		{"a listed operation", namespaced(clientSecret()), inA, Request{Operation: v1alpha1.OperationRotate, TenantID: tenant, AppID: app}, granted},
		{"a listed Key Vault, case and slash aside", namespaced(clientSecret()), inA, Request{Operation: v1alpha1.OperationPublishKeyVault, TenantID: tenant, AppID: app, KeyVault: "https://Payments-KV.vault.azure.net"}, granted},
		{"another Key Vault", namespaced(clientSecret()), inA, Request{Operation: v1alpha1.OperationPublishKeyVault, TenantID: tenant, AppID: app, KeyVault: "https://other.vault.azure.net/"}, "allow.keyVaults does not list https://other.vault.azure.net/"},
		{"a Key Vault without the operation", cluster(v1alpha1.NamespaceCondition{Namespaces: []string{teamA}}), inA, Request{Operation: v1alpha1.OperationPublishKeyVault, TenantID: tenant, AppID: app, KeyVault: "https://payments-kv.vault.azure.net/"}, "allow.operations does not list PublishKeyVault"},
		{"a listed repository, case aside", namespaced(clientSecret()), inA, gh("https://github.com/Contoso/Deploy"), granted},
		{"any repository of a listed owner", namespaced(clientSecret()), inA, gh("https://ghe.contoso.com/platform/infra"), granted},
		{"another repository", namespaced(clientSecret()), inA, gh("https://github.com/contoso/deploy-other"), "allow.githubRepositories does not list https://github.com/contoso/deploy-other"},
		{"the owner on another host", namespaced(clientSecret()), inA, gh("https://github.com/platform/infra"), "allow.githubRepositories does not list"},
		{"the owner itself", namespaced(clientSecret()), inA, gh("https://ghe.contoso.com/platform/"), "allow.githubRepositories does not list"},
		{"a repository without the operation", cluster(v1alpha1.NamespaceCondition{Namespaces: []string{teamA}}), inA, gh("https://github.com/contoso/deploy"), "allow.operations does not list PublishGitHub"},
		{"an operation not listed", namespaced(clientSecret()), inA, Request{Operation: v1alpha1.OperationReadOwners, TenantID: tenant, AppID: app}, "allow.operations does not list ReadOwners"},
		{"a tenant scan not listed", namespaced(clientSecret()), inA, Request{Operation: v1alpha1.OperationTenantScan, TenantID: tenant}, "allow.operations does not list TenantScan"},
		{"another namespace's AzureIdentity", namespaced(clientSecret()), inB, watch(app), "only the watches of its own namespace, team-a"},
		{"a cluster in its resource group, case aside", namespaced(clientSecret()), inA, clusterIn(v1alpha1.OperationWatch, "RG-prod"), granted},
		{"a cluster in another resource group", namespaced(clientSecret()), inA, clusterIn(v1alpha1.OperationWatch, "rg-dev"), "resourceGroups does not list resource group rg-dev"},
		{"a reset not listed", namespaced(clientSecret()), inA, clusterIn(v1alpha1.OperationResetCluster, "rg-prod"), "allow.operations does not list ResetCluster"},
		{"a cluster in another subscription", namespaced(clientSecret()), inA,
			Request{Operation: v1alpha1.OperationWatch, TenantID: tenant, Cluster: &Cluster{SubscriptionID: other, ResourceGroup: "rg-prod"}}, "allow.subscriptions does not list subscription " + other},
		{"every application", cluster(v1alpha1.NamespaceCondition{Namespaces: []string{teamA}}), inA, watch(other), granted},
		{"no subscription on an identity that lists none", cluster(v1alpha1.NamespaceCondition{Namespaces: []string{teamA}}), inA, clusterIn(v1alpha1.OperationWatch, "rg"), "allow.subscriptions does not list"},
		{"a namespace its conditions list", cluster(v1alpha1.NamespaceCondition{Namespaces: []string{teamB}}, v1alpha1.NamespaceCondition{Namespaces: []string{teamA}}), inA, watch(app), granted},
		{"a namespace they do not", cluster(v1alpha1.NamespaceCondition{Namespaces: []string{teamB}}), inA, watch(app), "do not admit namespace team-a"},
		{"a namespace its selector matches", cluster(v1alpha1.NamespaceCondition{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}), inA, watch(app), granted},
		{"one it does not", cluster(v1alpha1.NamespaceCondition{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}), inB, watch(app), "do not admit namespace team-b"},
		{"an empty selector admits all", cluster(v1alpha1.NamespaceCondition{NamespaceSelector: &metav1.LabelSelector{}}), inB, watch(app), granted},
		{"no conditions admit none", cluster(), inA, watch(app), "admit no namespace"},
		{"an invalid selector admits none", cluster(v1alpha1.NamespaceCondition{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}}}), inA, watch(app), "is invalid"},
		{"the operator's identity outside its tenants", cluster(v1alpha1.NamespaceCondition{Namespaces: []string{teamA}}), inA, Request{Operation: v1alpha1.OperationWatch, TenantID: other}, "allow.tenants does not list tenant " + other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.id, tc.ns, tc.req)
			if tc.want == granted {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var r *Refusal
			if !errors.As(err, &r) {
				t.Fatalf("err = %v, want a refusal", err)
			}
			if !strings.Contains(r.Rule, tc.want) || !strings.Contains(err.Error(), tc.id.String()) {
				t.Errorf("refusal %q, want its rule to say %q and the identity named", err, tc.want)
			}
		})
	}
}

// TestExplicitTenantsReplaceTheHomeTenant: listing tenants is an admin saying exactly where; the
// home tenant is not added behind their back.
func TestExplicitTenantsReplaceTheHomeTenant(t *testing.T) {
	spec := clientSecret()
	spec.Allow.Tenants = []string{other}
	id := namespaced(spec)
	ns := Namespace{Name: teamA}
	if err := Check(id, ns, Request{Operation: v1alpha1.OperationWatch, TenantID: tenant, AppID: app}); err == nil {
		t.Error("the home tenant was allowed although allow.tenants names another")
	}
	if err := Check(id, ns, Request{Operation: v1alpha1.OperationWatch, TenantID: other, AppID: app}); err != nil {
		t.Errorf("a listed tenant was refused: %v", err)
	}
}

func TestListedGroups(t *testing.T) {
	inA := Namespace{Name: teamA}
	whole := clientSecret()
	whole.Allow.Subscriptions = []v1alpha1.SubscriptionScope{{SubscriptionID: sub}}
	for _, tc := range []struct {
		name   string
		spec   v1alpha1.IdentitySpec
		sub    string
		wanted []string
		want   []string
		refuse string // a part of the refusal's rule, or "" when granted
	}{
		{"a whole subscription", whole, strings.ToUpper(sub), nil, nil, ""},
		{"some groups of a whole subscription", whole, sub, []string{"a", "b"}, []string{"a", "b"}, ""},
		// Listing the whole subscription would show what the scope does not cover.
		{"a scope of some groups", clientSecret(), sub, nil, []string{"rg-Prod"}, ""},
		{"the groups wanted and covered", clientSecret(), sub, []string{"RG-PROD", "rg-dev"}, []string{"RG-PROD"}, ""},
		{"none covered", clientSecret(), sub, []string{"rg-dev"}, nil, "lists none of the resource groups"},
		{"a subscription the identity does not list", whole, other, nil, nil, "does not list subscription " + other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ListedGroups(namespaced(tc.spec), inA, tenant, tc.sub, tc.wanted)
			if tc.refuse != "" {
				var r *Refusal
				if !errors.As(err, &r) || !strings.Contains(r.Rule, tc.refuse) {
					t.Fatalf("ListedGroups = %v, %v; want a refusal saying %q", got, err, tc.refuse)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("ListedGroups = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := ListedGroups(namespaced(whole), Namespace{Name: teamB}, tenant, sub, nil); err == nil {
		t.Error("an AzureIdentity of another namespace lists clusters")
	}
	if _, err := ListedGroups(namespaced(whole), inA, other, sub, nil); err == nil {
		t.Error("a tenant the identity does not allow is listed")
	}
}
