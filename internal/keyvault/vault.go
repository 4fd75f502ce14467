// Package keyvault writes a rotated client secret to Azure Key Vault, where the consumers outside
// the cluster read it (External Secrets, the CSI driver, App Service, Functions): a new version of
// a named secret, its expiry the credential's end, tagged with the application and keyId it holds.
// Its versions are listed by their properties, so a restarted rotation finds what it wrote by
// those tags, and no secret value is ever read back; a version is disabled once the
// credential it holds is retired. It is the one package that speaks the Key Vault SDK.
package keyvault

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/secret"
)

// Tags on each version credwatch writes: what it holds, never the value.
const (
	TagAppID = "credwatch-app-id"
	TagKeyID = "credwatch-key-id"
	// ContentType says what the value is, for people reading the vault.
	ContentType = "application/x-azure-client-secret"
)

// What a refusal names: the data action each call needs, for a vault whose permission model is
// Azure RBAC.
const (
	needsSet    = "Microsoft.KeyVault/vaults/secrets/setSecret/action"
	needsList   = "Microsoft.KeyVault/vaults/secrets/readMetadata/action"
	needsUpdate = "Microsoft.KeyVault/vaults/secrets/update/action"
)

// Vaults reaches Key Vaults as one identity.
type Vaults struct {
	cred azcore.TokenCredential
	// transport carries the requests; nil for the SDK's default (tests give the SDK's fake).
	transport policy.Transporter
}

// New reaches Key Vaults as cred, through transport (nil for the default).
func New(cred azcore.TokenCredential, transport policy.Transporter) *Vaults {
	return &Vaults{cred: cred, transport: transport}
}

func (v *Vaults) client(vaultURL string) (*azsecrets.Client, error) {
	if err := CheckURL(vaultURL); err != nil {
		return nil, err
	}
	opts := &azsecrets.ClientOptions{}
	if v.transport != nil {
		opts.Transport = v.transport
	}
	return azsecrets.NewClient(vaultURL, v.cred, opts)
}

// Version is one version of a secret, by its properties: never its value.
type Version struct {
	Version string
	// AppID and KeyID are its tags: what credwatch wrote it for, or empty.
	AppID, KeyID string
	Enabled      bool
	// Created is when the vault made it; zero when it does not say.
	Created time.Time
}

// List is the versions of secret name in the vault at vaultURL; none when the secret does not
// exist. Only their properties are read.
func (v *Vaults) List(ctx context.Context, vaultURL, name string) ([]Version, error) {
	c, err := v.client(vaultURL)
	if err != nil {
		return nil, err
	}
	var out []Version
	pager := c.NewListSecretPropertiesVersionsPager(name, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if notFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, refused(err, vaultURL, name, needsList)
		}
		for _, p := range page.Value {
			if p == nil || p.ID == nil {
				continue
			}
			ver := Version{Version: p.ID.Version(), AppID: tag(p.Tags, TagAppID), KeyID: tag(p.Tags, TagKeyID), Enabled: true}
			if a := p.Attributes; a != nil {
				ver.Enabled = a.Enabled == nil || *a.Enabled
				if a.Created != nil {
					ver.Created = *a.Created
				}
			}
			out = append(out, ver)
		}
	}
	return out, nil
}

// Set writes value as a new version of secret name, expiring at expires (never when zero),
// tagged with appID and keyID, and returns the version. The versions before it stay as they are.
func (v *Vaults) Set(ctx context.Context, vaultURL, name string, value secret.Text, appID, keyID string, expires time.Time) (string, error) {
	c, err := v.client(vaultURL)
	if err != nil {
		return "", err
	}
	text, contentType, enabled := value.Reveal(), ContentType, true
	attrs := &azsecrets.SecretAttributes{Enabled: &enabled}
	if !expires.IsZero() {
		attrs.Expires = &expires
	}
	resp, err := c.SetSecret(ctx, name, azsecrets.SetSecretParameters{
		Value:            &text,
		ContentType:      &contentType,
		SecretAttributes: attrs,
		Tags:             map[string]*string{TagAppID: &appID, TagKeyID: &keyID},
	}, nil)
	if err != nil {
		return "", refused(err, vaultURL, name, needsSet)
	}
	if resp.ID == nil {
		return "", fmt.Errorf("the Key Vault %s set secret %s and named no version", vaultURL, name)
	}
	return resp.ID.Version(), nil
}

// Disable disables version of secret name: what it holds may no longer be handed out.
func (v *Vaults) Disable(ctx context.Context, vaultURL, name, version string) error {
	c, err := v.client(vaultURL)
	if err != nil {
		return err
	}
	enabled := false
	_, err = c.UpdateSecretProperties(ctx, name, version, azsecrets.UpdateSecretPropertiesParameters{
		SecretAttributes: &azsecrets.SecretAttributes{Enabled: &enabled},
	}, nil)
	if notFound(err) {
		return nil // deleted by someone else: nothing left to hand out
	}
	return refused(err, vaultURL, name, needsUpdate)
}

// Suffixes are the domains of Key Vaults in Azure's clouds: the global one, China, US
// Government, and Managed HSM.
var Suffixes = []string{".vault.azure.net", ".vault.azure.cn", ".vault.usgovcloudapi.net", ".managedhsm.azure.net"}

// CheckURL accepts a vault URL only as Key Vault writes them, https://<name><suffix>/, with no
// user, port, path or query: the identity's token and the client secret go there.
func CheckURL(vaultURL string) error {
	u, err := url.Parse(vaultURL)
	host := ""
	if err == nil {
		host = strings.ToLower(u.Host)
	}
	ok := err == nil && u.Scheme == "https" && u.User == nil && u.Port() == "" && (u.Path == "" || u.Path == "/") && u.RawQuery == "" && u.Fragment == "" &&
		slices.ContainsFunc(Suffixes, func(s string) bool { return strings.HasSuffix(host, s) && len(host) > len(s) })
	if !ok {
		return fmt.Errorf("%w: %q is not a Key Vault URL such as https://payments-kv.vault.azure.net/ (a host under %s)", ErrNotAVault, vaultURL, strings.Join(Suffixes, ", "))
	}
	return nil
}

// ErrNotAVault: a sink names something that is not a Key Vault.
var ErrNotAVault = errors.New("not a Key Vault")

func tag(tags map[string]*string, key string) string {
	if v := tags[key]; v != nil {
		return *v
	}
	return ""
}

func notFound(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound
}

// refused sorts a failed call into an azerr.Error, whose message holds no response body; a
// refusal names the data action the call needs (the Key Vault Secrets Officer role holds all
// three). The vault and the secret's name say where.
func refused(err error, vaultURL, name, needs string) error {
	if err == nil {
		return nil
	}
	needs += " on Key Vault " + vaultURL + " (role Key Vault Secrets Officer, or an access policy allowing it)"
	var ae *azerr.Error
	if errors.As(err, &ae) {
		return fmt.Errorf("secret %s: %w", name, ae.Needing(needs))
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		var after time.Duration
		if re.RawResponse != nil {
			after = azerr.RetryAfterSeconds(re.RawResponse.Header.Get("Retry-After"))
		}
		ae := &azerr.Error{Kind: azerr.KindOfStatus(re.StatusCode), Status: re.StatusCode, Code: re.ErrorCode, RetryAfter: after, Err: err}
		return fmt.Errorf("secret %s of Key Vault %s: %w", name, vaultURL, ae.Needing(needs))
	}
	if ue := azerr.Unanswered(err); ue != nil {
		return fmt.Errorf("secret %s of Key Vault %s: %w", name, vaultURL, ue)
	}
	return fmt.Errorf("secret %s of Key Vault %s: %w", name, vaultURL, &azerr.Error{Kind: azerr.KindOther, Err: err})
}
