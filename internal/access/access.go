// Package access decides whether a watch may use an identity for one request to Azure: whether
// the identity admits the watch's namespace, and covers the tenant, the application, the
// cluster's subscription and resource group, and the operation. It is a pure function of the
// identity object, the namespace and the request, so that every refusal can be table-tested,
// and it runs before anything is sent: a request the identity does not cover never leaves.
package access

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// Identity is an AzureIdentity or a ClusterAzureIdentity, as access needs it.
type Identity struct {
	// Kind is v1alpha1.KindAzureIdentity or v1alpha1.KindClusterAzureIdentity.
	Kind string
	Name string
	// Namespace is an AzureIdentity's; empty for a ClusterAzureIdentity.
	Namespace string
	Spec      v1alpha1.IdentitySpec
	// Conditions admit namespaces to a ClusterAzureIdentity.
	Conditions []v1alpha1.NamespaceCondition
	// DefaultOwnerMail: the admin let the default channels mail the owners of what this
	// ClusterAzureIdentity's watches check (v1alpha1.DefaultOwnerMailAnnotation).
	DefaultOwnerMail bool
}

// Of describes an AzureIdentity.
func Of(id *v1alpha1.AzureIdentity) Identity {
	return Identity{Kind: v1alpha1.KindAzureIdentity, Name: id.Name, Namespace: id.Namespace, Spec: id.Spec.IdentitySpec}
}

// OfCluster describes a ClusterAzureIdentity.
func OfCluster(id *v1alpha1.ClusterAzureIdentity) Identity {
	return Identity{Kind: v1alpha1.KindClusterAzureIdentity, Name: id.Name, Spec: id.Spec.IdentitySpec, Conditions: id.Spec.Conditions,
		DefaultOwnerMail: id.Annotations[v1alpha1.DefaultOwnerMailAnnotation] == "true"}
}

// String names the identity as a person would look it up.
func (i Identity) String() string {
	if i.Namespace != "" {
		return fmt.Sprintf("%s %s/%s", i.Kind, i.Namespace, i.Name)
	}
	return i.Kind + " " + i.Name
}

// Namespace is the namespace a watch lives in, with its labels, for namespaceSelector.
type Namespace struct {
	Name   string
	Labels map[string]string
}

// Cluster is where an AKS cluster is.
type Cluster struct {
	SubscriptionID string
	ResourceGroup  string
}

// Request is one use of an identity: an operation in a tenant, on an application or a cluster.
type Request struct {
	Operation v1alpha1.Operation
	TenantID  string
	// AppID is the application the operation reads or changes; empty when it concerns none (a
	// cluster read before its service principal is known, a tenant scan).
	AppID string
	// Cluster is the AKS cluster the operation reads or resets, nil when it concerns none.
	Cluster *Cluster
	// KeyVault is the URL of the Key Vault the operation writes to; empty when it concerns none.
	KeyVault string
	// GitHubRepository is the URL of the GitHub repository whose Actions secret the operation
	// sets (v1alpha1.GitHubActionsSink.RepositoryURL); empty when it concerns none.
	GitHubRepository string
}

// Refusal is an identity refusing a request: which identity, and the rule that refused.
type Refusal struct {
	Identity string
	Rule     string
}

func (r *Refusal) Error() string { return r.Identity + " does not allow this: " + r.Rule }

// Grant is an identity a watch uses, and the namespace it is used from: what every request of
// the watch is checked against.
type Grant struct {
	Identity  Identity
	Namespace Namespace
}

// Allow is nil when the identity serves req from the namespace, and the *Refusal otherwise.
func (g Grant) Allow(req Request) error { return Check(g.Identity, g.Namespace, req) }

// Check returns nil when id may serve req for a watch in ns, and a *Refusal naming the rule that
// refuses it otherwise.
func Check(id Identity, ns Namespace, req Request) error {
	refuse := func(format string, args ...any) error {
		return &Refusal{Identity: id.String(), Rule: fmt.Sprintf(format, args...)}
	}
	if rule := admits(id, ns); rule != "" {
		return refuse("%s", rule)
	}
	if !slices.ContainsFunc(id.Spec.AllowedTenants(), func(t string) bool { return strings.EqualFold(t, req.TenantID) }) {
		return refuse("allow.tenants does not list tenant %s", req.TenantID)
	}
	if req.Operation != v1alpha1.OperationWatch && !slices.Contains(id.Spec.Allow.Operations, req.Operation) {
		return refuse("allow.operations does not list %s", req.Operation)
	}
	if req.AppID != "" && !coversApp(id.Spec.Allow.Applications, req.AppID) {
		return refuse("allow.applications does not list appId %s", req.AppID)
	}
	if v := req.KeyVault; v != "" && !slices.ContainsFunc(id.Spec.Allow.KeyVaults, func(a string) bool { return SameVault(a, v) }) {
		return refuse("allow.keyVaults does not list %s", v)
	}
	if r := req.GitHubRepository; r != "" && !slices.ContainsFunc(id.Spec.Allow.GitHubRepositories, func(a string) bool { return CoversRepository(a, r) }) {
		return refuse("allow.githubRepositories does not list %s", r)
	}
	if c := req.Cluster; c != nil {
		groups, err := groupsOf(id, c.SubscriptionID)
		if err != nil {
			return err
		}
		if !InGroups(c.ResourceGroup, groups) {
			return refuse("allow.subscriptions[%s].resourceGroups does not list resource group %s", c.SubscriptionID, c.ResourceGroup)
		}
	}
	return nil
}

// admits returns why id does not admit ns, or "" when it does.
func admits(id Identity, ns Namespace) string {
	if id.Kind == v1alpha1.KindAzureIdentity {
		if id.Namespace != ns.Name {
			// identityRef is local; only a bug could get here, and it must not pass.
			return fmt.Sprintf("an AzureIdentity serves only the watches of its own namespace, %s", id.Namespace)
		}
		return ""
	}
	for _, c := range id.Conditions {
		if slices.Contains(c.Namespaces, ns.Name) {
			return ""
		}
		if c.NamespaceSelector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(c.NamespaceSelector)
		if err != nil {
			return fmt.Sprintf("a namespaceSelector of its conditions is invalid (%v), and admits nothing", err)
		}
		if sel.Matches(labels.Set(ns.Labels)) {
			return ""
		}
	}
	if len(id.Conditions) == 0 {
		return fmt.Sprintf("its conditions admit no namespace, so not %s: a cluster admin lists namespaces, or namespaceSelector: {} for all", ns.Name)
	}
	return fmt.Sprintf("its conditions do not admit namespace %s", ns.Name)
}

func coversApp(allowed []string, appID string) bool {
	return slices.ContainsFunc(allowed, func(a string) bool {
		return a == v1alpha1.AllApplications || strings.EqualFold(a, appID)
	})
}

// ListedGroups is where id lets a watch in ns list the AKS clusters of subscription sub in
// tenant, narrowed to the resource groups wanted (none: any): nil for the whole subscription,
// or the resource groups to list one by one. An identity whose scope is some resource groups of
// the subscription cannot list all of it: Resource Manager would refuse, and the groups it
// could list would show more than the identity covers.
func ListedGroups(id Identity, ns Namespace, tenant, sub string, wanted []string) ([]string, error) {
	if err := Check(id, ns, Request{Operation: v1alpha1.OperationWatch, TenantID: tenant}); err != nil {
		return nil, err
	}
	scope, err := groupsOf(id, sub)
	if err != nil {
		return nil, err
	}
	switch {
	case len(scope) == 0:
		return wanted, nil
	case len(wanted) == 0:
		return scope, nil
	}
	var both []string
	for _, g := range wanted {
		if InGroups(g, scope) {
			both = append(both, g)
		}
	}
	if len(both) == 0 {
		return nil, &Refusal{Identity: id.String(), Rule: fmt.Sprintf("allow.subscriptions[%s].resourceGroups lists none of the resource groups the watch searches", sub)}
	}
	return both, nil
}

// InGroups reports whether resource group rg is one of groups, or groups is empty (a whole
// subscription). Resource group names are not case-sensitive in Azure: rg-A and rg-a are one group.
func InGroups(rg string, groups []string) bool {
	return len(groups) == 0 || slices.ContainsFunc(groups, func(g string) bool { return strings.EqualFold(g, rg) })
}

// groupsOf is the resource groups id's scope holds of subscription sub (none: all of it), or the
// refusal when it does not list sub.
func groupsOf(id Identity, sub string) ([]string, error) {
	i := slices.IndexFunc(id.Spec.Allow.Subscriptions, func(s v1alpha1.SubscriptionScope) bool { return strings.EqualFold(s.SubscriptionID, sub) })
	if i < 0 {
		return nil, &Refusal{Identity: id.String(), Rule: "allow.subscriptions does not list subscription " + sub}
	}
	return id.Spec.Allow.Subscriptions[i].ResourceGroups, nil
}

// SameVault reports whether two Key Vault URLs name one vault: host names are not case-sensitive,
// and the trailing slash is optional.
func SameVault(a, b string) bool {
	return strings.EqualFold(strings.TrimSuffix(a, "/"), strings.TrimSuffix(b, "/"))
}

// CoversRepository reports whether allowed, a repository URL or an owner's URL ending in /*,
// covers the repository URL repo: GitHub's hosts, owners and repositories are not
// case-sensitive, and the trailing slash is optional.
func CoversRepository(allowed, repo string) bool {
	allowed, repo = strings.TrimSuffix(allowed, "/"), strings.TrimSuffix(repo, "/")
	if owner, ok := strings.CutSuffix(allowed, "/*"); ok {
		prefix := owner + "/"
		return len(repo) > len(prefix) && strings.EqualFold(repo[:len(prefix)], prefix) && !strings.Contains(repo[len(prefix):], "/")
	}
	return strings.EqualFold(allowed, repo)
}
