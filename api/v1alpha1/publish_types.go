package v1alpha1

import (
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PublishSink is one place a new secret is written to: set exactly one field.
// +kubebuilder:validation:XValidation:rule="has(self.keyVault) != has(self.githubActions)",message="a publish sink names exactly one place it writes: keyVault: {vaultURL, secretName} or githubActions: {owner, repo, secretName, tokenSecretRef}"
type PublishSink struct {
	// KeyVault writes the secret as a new version of a Key Vault secret, as the rotation's
	// identity or the sink's identityRef, which must allow PublishKeyVault and list the vault in
	// allow.keyVaults.
	// +optional
	KeyVault *KeyVaultSink `json:"keyVault,omitempty"`

	// GitHubActions sets a GitHub Actions secret of a repository, or of one of its deployment
	// environments, sealed with its public key, with a token from a Secret of the watch's
	// namespace, on an API host the operator may publish to (--publish-hosts). The rotation's
	// identity must allow PublishGitHub and list the repository in allow.githubRepositories.
	// +optional
	GitHubActions *GitHubActionsSink `json:"githubActions,omitempty"`
}

// GitHubActionsSink is an Actions secret of a GitHub repository or environment.
type GitHubActionsSink struct {
	// APIURL is the API's URL: https://api.github.com/ (the default), or a GitHub Enterprise
	// Server's https://<host>/api/v3/.
	// +kubebuilder:default="https://api.github.com/"
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^https://[a-z0-9][-a-z0-9.]*[a-z0-9](:[0-9]{1,5})?(/api/v3)?/?$')",message="githubActions.apiURL must be https://api.github.com/ or a GitHub Enterprise Server's https://<host>/api/v3/"
	// +optional
	APIURL string `json:"apiURL,omitempty"`

	// Owner is the repository's owner, a user or an organization.
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9]([A-Za-z0-9-]{0,38})$')",message="githubActions.owner must be a GitHub user or organization name"
	// +kubebuilder:validation:MaxLength=39
	Owner string `json:"owner"`

	// Repo is the repository's name.
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9._-]{1,100}$') && self != '.' && self != '..'",message="githubActions.repo must be a repository name: letters, digits, '.', '_' and '-'"
	// +kubebuilder:validation:MaxLength=100
	Repo string `json:"repo"`

	// Environment is the deployment environment whose secret is set; empty for the repository's.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="self.matches('^[^/?#%]+$') && self != '.' && self != '..'",message="githubActions.environment must be an environment's name, without '/', '?', '#' or '%'"
	// +optional
	Environment string `json:"environment,omitempty"`

	// SecretName is the Actions secret's name: letters, digits and '_', not starting with a digit
	// or GITHUB_.
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z_][A-Za-z0-9_]{0,254}$') && !self.upperAscii().startsWith('GITHUB_')",message="githubActions.secretName must be letters, digits and '_', not starting with a digit or GITHUB_, such as AZURE_CLIENT_SECRET"
	// +kubebuilder:validation:MaxLength=255
	SecretName string `json:"secretName"`

	// TokenSecretRef names the key of a Secret in the watch's namespace that holds a GitHub token
	// with the "Secrets" repository permission (read and write) on the repository (fine-grained),
	// or the repo scope (classic).
	TokenSecretRef SecretKeyRef `json:"tokenSecretRef"`
}

// Name is how status names a GitHub Actions sink: by its repository, with its host unless
// github.com.
func (g GitHubActionsSink) Name() string {
	where := g.Owner + "/" + g.Repo
	if h := g.host(); h != "github.com" {
		where = h + "/" + where
	}
	if g.Environment != "" {
		where += " environment " + g.Environment
	}
	return "githubActions " + where + " " + g.SecretName
}

// RepositoryURL is the repository's URL as people see it, such as https://github.com/contoso/deploy:
// what an identity's allow.githubRepositories lists.
func (g GitHubActionsSink) RepositoryURL() string {
	return "https://" + g.host() + "/" + g.Owner + "/" + g.Repo
}

// host is the GitHub the sink's API URL belongs to: github.com for api.github.com (or none),
// a GitHub Enterprise Server's host (and port) otherwise.
func (g GitHubActionsSink) host() string {
	if g.APIURL == "" {
		return "github.com"
	}
	u, err := url.Parse(g.APIURL)
	switch {
	case err != nil:
		return "" // matches no repository an identity allows
	case strings.EqualFold(u.Host, "api.github.com"):
		return "github.com"
	}
	return strings.ToLower(u.Host)
}

// KeyVaultSink is a secret of an Azure Key Vault. Each version written holds one client secret,
// expires with it, and is tagged with its appId and keyId; the previous versions stay, and the
// one holding an old secret is disabled once that secret is retired.
type KeyVaultSink struct {
	// VaultURL is the vault's URL, such as https://payments-kv.vault.azure.net/.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^https://[a-z0-9][-a-z0-9]*[.](vault[.]azure[.]net|vault[.]azure[.]cn|vault[.]usgovcloudapi[.]net|managedhsm[.]azure[.]net)/?$')",message="keyVault.vaultURL must be the vault's URL, such as https://payments-kv.vault.azure.net/ (or under vault.azure.cn, vault.usgovcloudapi.net, managedhsm.azure.net)"
	VaultURL string `json:"vaultURL"`

	// SecretName is the Key Vault secret's name: 1 to 127 letters, digits and '-'.
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9a-zA-Z-]{1,127}$')",message="keyVault.secretName must be 1 to 127 letters, digits and '-', as Key Vault names secrets, such as payments-sp-secret"
	// +kubebuilder:validation:MaxLength=127
	SecretName string `json:"secretName"`

	// IdentityRef names the identity that writes to the vault, when it is not the rotation's:
	// one granted to the watch's namespace, as spec.identityRef is, that allows PublishKeyVault
	// for the application and lists the vault in allow.keyVaults. It signs in to the
	// application's tenant. Unset, the rotation's identity writes.
	// +optional
	IdentityRef *IdentityRef `json:"identityRef,omitempty"`
}

// PublishedSink is a sink a rotation wrote its new secret to.
type PublishedSink struct {
	// Sink names it: "keyVault <vaultURL> <secretName>".
	Sink string `json:"sink"`
	// Version is the sink's name for what was written: a Key Vault secret's version.
	// +optional
	Version string `json:"version,omitempty"`
	// Time is when it was written, or found written by the rotation before a restart.
	Time metav1.Time `json:"time"`
}

// Name is how status names a Key Vault sink.
func (k KeyVaultSink) Name() string { return "keyVault " + k.VaultURL + " " + k.SecretName }
