package azure

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azcloud "github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/secret"
)

// Identity is who credwatch signs in to Azure as, in one tenant: the operator's own identity, or
// a client with a secret (a watch's azureCredentialRef, or a new secret being verified). It is a
// description, not a credential: nothing signs in until Identities makes one. Its secret never
// prints (see package secret).
type Identity struct {
	TenantID string
	// ClientID and Secret are both empty for the operator's own identity, and both set for a
	// client's: one without the other is refused, never read as the operator's.
	ClientID string
	Secret   secret.Text
}

// Operator is the operator's own identity in tenantID.
func Operator(tenantID string) Identity { return Identity{TenantID: tenantID} }

// ClientSecret is the identity of clientID in tenantID, signing in with text.
func ClientSecret(tenantID, clientID, text string) Identity {
	return Identity{TenantID: tenantID, ClientID: clientID, Secret: secret.New(text)}
}

// IsOperator reports whether i is the operator's own identity.
func (i Identity) IsOperator() bool { return i.ClientID == "" && i.Secret.IsZero() }

// errHalfAnIdentity: a client ID without its secret, or a secret without its client. Reading it
// as the operator's own identity would hand a watch the operator's rights.
var errHalfAnIdentity = errors.New("an identity needs a client ID and its secret, or neither for the operator's own")

func (i Identity) valid() error {
	if i.IsOperator() || (i.ClientID != "" && !i.Secret.IsZero()) {
		return nil
	}
	return errHalfAnIdentity
}

func (i Identity) String() string {
	if i.IsOperator() {
		return "the operator's identity in tenant " + i.TenantID
	}
	return "client " + i.ClientID + " in tenant " + i.TenantID
}

// Identities hands out token credentials for the operator's own identity and for identities
// held in Kubernetes Secrets. Credentials are cached: each holds its token cache, and building
// one per reconcile would fetch a new token every time.
type Identities struct {
	cloud     Cloud
	transport policy.Transporter
	operator  func(tenantID string) (azcore.TokenCredential, error)

	mu    sync.Mutex
	cache map[string][]cachedCredential
}

// cachedCredential remembers which secret a credential was built from, by hash.
type cachedCredential struct {
	fingerprint string
	cred        azcore.TokenCredential
}

// secretsPerClient is how many secrets of one client stay cached: enough for a rotation in
// progress, where watches hold the old and the new secret, without letting every secret a
// client ever had pile up.
const secretsPerClient = 4

// NewIdentities returns Identities for cloud. transport carries token requests (nil: the
// default). operator builds the operator's own identity for a tenant; nil means azidentity's
// DefaultAzureCredential, whose chain begins with workload identity.
func NewIdentities(cloud Cloud, transport policy.Transporter, operator func(tenantID string) (azcore.TokenCredential, error)) *Identities {
	i := &Identities{cloud: cloud, transport: transport, operator: operator, cache: map[string][]cachedCredential{}}
	if i.operator == nil {
		i.operator = i.defaultCredential
	}
	return i
}

// Credential is the token credential of id.
func (i *Identities) Credential(id Identity) (azcore.TokenCredential, error) {
	if err := id.valid(); err != nil {
		return nil, err
	}
	if id.IsOperator() {
		return i.Operator(id.TenantID)
	}
	return i.ClientSecret(id.TenantID, id.ClientID, id.Secret.Reveal())
}

func (i *Identities) clientOptions() azcore.ClientOptions {
	return azcore.ClientOptions{
		Cloud:     azcloud.Configuration{ActiveDirectoryAuthorityHost: i.cloud.AuthorityHost},
		Transport: i.transport,
	}
}

func (i *Identities) defaultCredential(tenantID string) (azcore.TokenCredential, error) {
	return azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{
		ClientOptions:            i.clientOptions(),
		TenantID:                 tenantID,
		DisableInstanceDiscovery: !i.cloud.Known(),
	})
}

// Operator returns the operator's own identity, signing in to tenantID.
func (i *Identities) Operator(tenantID string) (azcore.TokenCredential, error) {
	return i.cached("operator/"+tenantID, "", func() (azcore.TokenCredential, error) {
		c, err := i.operator(tenantID)
		return scoped{c, "operator/" + tenantID}, err
	})
}

// scoped is a credential that names the Graph throttling scope its requests spend: Graph
// budgets per application and tenant, and so does graph/budget.
type scoped struct {
	azcore.TokenCredential
	scope string
}

// Scope names the application and tenant the credential signs in as.
func (s scoped) Scope() string { return s.scope }

// ClientSecret returns an identity that signs in to tenantID as clientID with secret. Each secret
// gets its own credential, so two watches holding different secrets of one client do not evict
// each other's tokens; the cache is keyed by a hash of the secret, never the secret.
func (i *Identities) ClientSecret(tenantID, clientID, secret string) (azcore.TokenCredential, error) {
	sum := sha256.Sum256([]byte(secret))
	return i.cached("secret/"+tenantID+"/"+clientID, hex.EncodeToString(sum[:]), func() (azcore.TokenCredential, error) {
		c, err := azidentity.NewClientSecretCredential(tenantID, clientID, secret, &azidentity.ClientSecretCredentialOptions{
			ClientOptions:            i.clientOptions(),
			DisableInstanceDiscovery: !i.cloud.Known(),
		})
		return scoped{c, clientID + "/" + tenantID}, err
	})
}

func (i *Identities) cached(key, fingerprint string, build func() (azcore.TokenCredential, error)) (azcore.TokenCredential, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	entries := i.cache[key]
	for _, c := range entries {
		if c.fingerprint == fingerprint {
			return c.cred, nil
		}
	}
	c, err := build()
	if err != nil {
		return nil, err
	}
	if len(entries) == secretsPerClient {
		entries = entries[1:] // the oldest secret is the likeliest to be gone
	}
	i.cache[key] = append(entries, cachedCredential{fingerprint: fingerprint, cred: c})
	return c, nil
}

// VerifySecret signs in as id, a client with a secret, and asks for a Graph token: whether Entra
// accepts the secret yet. A new secret takes seconds to replicate; until it has, this fails as a
// wrong secret would. The credential is not cached: it exists for this one question.
func (i *Identities) VerifySecret(ctx context.Context, id Identity) error {
	if id.IsOperator() {
		return errors.New("verifying a secret needs a client and its secret, not the operator's identity")
	}
	if err := id.valid(); err != nil {
		return err
	}
	cred, err := azidentity.NewClientSecretCredential(id.TenantID, id.ClientID, id.Secret.Reveal(), &azidentity.ClientSecretCredentialOptions{
		ClientOptions:            i.clientOptions(),
		DisableInstanceDiscovery: !i.cloud.Known(),
	})
	if err != nil {
		return err
	}
	_, err = azerr.Credential{TokenCredential: cred}.GetToken(ctx, policy.TokenRequestOptions{
		Scopes: []string{strings.TrimSuffix(i.cloud.GraphEndpoint, "/") + "/.default"},
	})
	return err
}
