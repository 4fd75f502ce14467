package azure

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azcloud "github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/secret"
)

// Identity is who credwatch signs in to Azure as, in one tenant: the operator's own identity,
// or a client signing in with a secret, a certificate, or a ServiceAccount's token (workload
// identity). It is a description, not a credential: nothing signs in until Identities makes one.
// Its secret and certificate never print (see package secret).
type Identity struct {
	TenantID string
	// ClientID is empty for the operator's own identity; a client's has exactly one of Secret,
	// Certificate and ServiceAccount. Anything else is refused, never read as the operator's.
	ClientID string
	Secret   secret.Text
	// Certificate is a PEM certificate and its unencrypted private key.
	Certificate secret.Text
	// ServiceAccount is the ServiceAccount whose tokens the client is federated with.
	ServiceAccount *ServiceAccount
}

// ServiceAccount names a Kubernetes ServiceAccount.
type ServiceAccount struct{ Namespace, Name string }

// Operator is the operator's own identity in tenantID.
func Operator(tenantID string) Identity { return Identity{TenantID: tenantID} }

// ClientSecret is the identity of clientID in tenantID, signing in with text.
func ClientSecret(tenantID, clientID, text string) Identity {
	return Identity{TenantID: tenantID, ClientID: clientID, Secret: secret.New(text)}
}

// ClientCertificate is the identity of clientID in tenantID, signing in with a certificate and
// its key, pemData.
func ClientCertificate(tenantID, clientID string, pemData []byte) Identity {
	return Identity{TenantID: tenantID, ClientID: clientID, Certificate: secret.New(string(pemData))}
}

// WorkloadIdentity is the identity of clientID in tenantID, signing in with the tokens of
// ServiceAccount namespace/name, which the application trusts through a federated credential.
func WorkloadIdentity(tenantID, clientID, namespace, name string) Identity {
	return Identity{TenantID: tenantID, ClientID: clientID, ServiceAccount: &ServiceAccount{Namespace: namespace, Name: name}}
}

// IsOperator reports whether i is the operator's own identity.
func (i Identity) IsOperator() bool {
	return i.ClientID == "" && i.Secret.IsZero() && i.Certificate.IsZero() && i.ServiceAccount == nil
}

// errHalfAnIdentity: a client ID without a way to sign in, or one without a client. Reading it
// as the operator's own identity would hand a watch the operator's rights.
var errHalfAnIdentity = errors.New("an identity needs a client ID and exactly one of a secret, a certificate or a ServiceAccount, or none of them for the operator's own")

func (i Identity) valid() error {
	ways := 0
	for _, set := range []bool{!i.Secret.IsZero(), !i.Certificate.IsZero(), i.ServiceAccount != nil} {
		if set {
			ways++
		}
	}
	if i.IsOperator() || (i.ClientID != "" && ways == 1) {
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

// TokenExchangeAudience is the audience of the ServiceAccount tokens Entra ID exchanges for its
// own: the one a federated credential names by default.
const TokenExchangeAudience = "api://AzureADTokenExchange"

// TokenError is a ServiceAccount token that could not be minted for a workload identity: the
// ServiceAccount is missing, or the operator may not create its tokens.
type TokenError struct {
	ServiceAccount ServiceAccount
	Err            error
}

func (e *TokenError) Error() string {
	return fmt.Sprintf("minting a token of ServiceAccount %s/%s: %v", e.ServiceAccount.Namespace, e.ServiceAccount.Name, e.Err)
}

func (e *TokenError) Unwrap() error { return e.Err }

// ServiceAccountTokens mints ServiceAccount tokens (Kubernetes' TokenRequest).
type ServiceAccountTokens interface {
	Token(ctx context.Context, namespace, name, audience string) (string, error)
}

// Identities hands out token credentials for the operator's own identity and for the identities
// of AzureIdentity objects. Credentials are cached: each holds its token cache, and building one
// per reconcile would fetch a new token every time.
type Identities struct {
	cloud     Cloud
	transport policy.Transporter
	operator  func(tenantID string) (azcore.TokenCredential, error)
	// Tokens mints the ServiceAccount tokens workload identities sign in with; nil refuses them.
	Tokens ServiceAccountTokens

	mu    sync.Mutex
	cache map[string][]cachedCredential
}

// cachedCredential remembers which secret or certificate a credential was built from, by hash.
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

// Credential is the token credential of id, cached.
func (i *Identities) Credential(id Identity) (azcore.TokenCredential, error) {
	if err := id.valid(); err != nil {
		return nil, err
	}
	key, fingerprint := i.cacheKey(id)
	return i.cached(key, fingerprint, func() (azcore.TokenCredential, error) {
		c, err := i.build(id)
		return scoped{TokenCredential: c, scope: scopeOf(id), key: key + "#" + fingerprint}, err
	})
}

// cacheKey keys a credential by who it signs in as, and fingerprints what it signs in with by
// hash: each secret or certificate gets its own credential, so that two watches holding
// different secrets of one client do not evict each other's tokens.
func (i *Identities) cacheKey(id Identity) (key, fingerprint string) {
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return hex.EncodeToString(sum[:])
	}
	switch {
	case id.IsOperator():
		return "operator/" + id.TenantID, ""
	case !id.Secret.IsZero():
		return "secret/" + id.TenantID + "/" + id.ClientID, hash(id.Secret.Reveal())
	case !id.Certificate.IsZero():
		return "certificate/" + id.TenantID + "/" + id.ClientID, hash(id.Certificate.Reveal())
	default:
		return "workload/" + id.TenantID + "/" + id.ClientID, id.ServiceAccount.Namespace + "/" + id.ServiceAccount.Name
	}
}

// scopeOf names the Graph throttling scope a credential's requests spend: Graph budgets per
// application and tenant, and so does graph/budget.
func scopeOf(id Identity) string {
	if id.IsOperator() {
		return "operator/" + id.TenantID
	}
	return id.ClientID + "/" + id.TenantID
}

// build makes a new credential for id, which is valid.
func (i *Identities) build(id Identity) (azcore.TokenCredential, error) {
	opts := azcore.ClientOptions{
		Cloud:     azcloud.Configuration{ActiveDirectoryAuthorityHost: i.cloud.AuthorityHost},
		Transport: i.transport,
	}
	discovery := !i.cloud.Known()
	switch {
	case id.IsOperator():
		return i.operator(id.TenantID)
	case !id.Secret.IsZero():
		return azidentity.NewClientSecretCredential(id.TenantID, id.ClientID, id.Secret.Reveal(), &azidentity.ClientSecretCredentialOptions{
			ClientOptions: opts, DisableInstanceDiscovery: discovery,
		})
	case !id.Certificate.IsZero():
		certs, key, err := azidentity.ParseCertificates([]byte(id.Certificate.Reveal()), nil)
		if err != nil {
			// ParseCertificates' errors name what is missing, never the key.
			return nil, fmt.Errorf("reading the certificate: %w", err)
		}
		return azidentity.NewClientCertificateCredential(id.TenantID, id.ClientID, certs, key, &azidentity.ClientCertificateCredentialOptions{
			ClientOptions: opts, DisableInstanceDiscovery: discovery, SendCertificateChain: true,
		})
	default:
		if i.Tokens == nil {
			return nil, errors.New("workload identity needs ServiceAccount tokens, and this operator cannot mint them")
		}
		c := &assertionCredential{}
		sa := *id.ServiceAccount
		assertion := func(ctx context.Context) (string, error) {
			tok, err := i.Tokens.Token(ctx, sa.Namespace, sa.Name, TokenExchangeAudience)
			if err != nil {
				te := &TokenError{ServiceAccount: sa, Err: err}
				c.failed.Store(te)
				return "", te
			}
			return tok, nil
		}
		var err error
		c.TokenCredential, err = azidentity.NewClientAssertionCredential(id.TenantID, id.ClientID, assertion, &azidentity.ClientAssertionCredentialOptions{
			ClientOptions: opts, DisableInstanceDiscovery: discovery,
		})
		return c, err
	}
}

func (i *Identities) defaultCredential(tenantID string) (azcore.TokenCredential, error) {
	return azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{
		ClientOptions: azcore.ClientOptions{
			Cloud:     azcloud.Configuration{ActiveDirectoryAuthorityHost: i.cloud.AuthorityHost},
			Transport: i.transport,
		},
		TenantID:                 tenantID,
		DisableInstanceDiscovery: !i.cloud.Known(),
	})
}

// assertionCredential is a workload identity's credential that returns the TokenError of a
// ServiceAccount token it could not mint: azidentity keeps only its text, and a token the API
// server refuses needs another fix (the ServiceAccount, the operator's rights) than an
// assertion Entra refuses (the federated credential).
type assertionCredential struct {
	azcore.TokenCredential
	failed atomic.Pointer[TokenError]
}

func (c *assertionCredential) GetToken(ctx context.Context, opts policy.TokenRequestOptions) (azcore.AccessToken, error) {
	c.failed.Store(nil)
	tok, err := c.TokenCredential.GetToken(ctx, opts)
	if te := c.failed.Load(); err != nil && te != nil {
		return tok, te
	}
	return tok, err
}

// scoped is a credential that names the Graph throttling scope its requests spend.
type scoped struct {
	azcore.TokenCredential
	scope string
	// key is the cache's key and fingerprint: who signs in, with what.
	key string
}

// PlanKey names who the credential signs in as and with what, the same for every credential the
// cache builds for it: Graph's reads are planned by it, and a credential the cache dropped and
// built again is still the same identity.
func (s scoped) PlanKey() string { return s.key }

// Scope names the application and tenant the credential signs in as.
func (s scoped) Scope() string { return s.scope }

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

// SignIn signs in as id and asks for a Graph token, with a credential of its own, never a cached
// token: whether Entra ID accepts the identity now. A new secret takes seconds to replicate;
// until it has, this fails as a wrong secret would.
func (i *Identities) SignIn(ctx context.Context, id Identity) error {
	if err := id.valid(); err != nil {
		return err
	}
	cred, err := i.build(id)
	if err != nil {
		return err
	}
	_, err = azerr.Credential{TokenCredential: cred}.GetToken(ctx, policy.TokenRequestOptions{
		Scopes: []string{i.cloud.GraphScope()},
	})
	return err
}
