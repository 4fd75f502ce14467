// Package fakekeyvault is one Azure Key Vault's secrets, in memory, behind the Key Vault SDK's own
// fake transport (azsecrets/fake): each set adds a version with its tags, expiry and content type,
// versions are listed by their properties (never their values), and updated; a test reads what
// was written, values included, and can have the vault refuse an identity as RBAC does (403
// Forbidden): every one, or all but those it admits.
package fakekeyvault

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets/fake"
)

// URL is the vault's URL, as a watch names it.
const URL = "https://credwatch-fake.vault.azure.net/"

// Version is one version of a secret, as the vault holds it.
type Version struct {
	ID, Value, ContentType string
	Tags                   map[string]string
	Enabled                bool
	// Expires is zero for a version that never expires.
	Expires, Created time.Time
}

// Vault is the fake vault.
type Vault struct {
	mu      sync.Mutex
	secrets map[string][]*Version // by lower-cased name: Key Vault's names are not case-sensitive
	refuse  bool
	// admit are the client IDs the vault's RBAC lets in, when set; others are refused.
	admit []string
	next  int
	sets  int
	// now is the vault's clock, for when versions are created.
	now func() time.Time
	// tenant and issued, when set, check the bearer token as Key Vault does (Authenticate).
	tenant string
	issued func(token string) (tenantID, clientID, audience string, ok bool)
}

// resource is Key Vault's audience in the global cloud.
const resource = "https://vault.azure.net"

// Authenticate has the vault challenge a request without a token as Key Vault does, naming
// tenantID and its resource, and accept only a token issued (as the Entra fake says: issued) in
// that tenant for that resource.
func (v *Vault) Authenticate(tenantID string, issued func(token string) (tenant, clientID, audience string, ok bool)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.tenant, v.issued = tenantID, issued
}

// New is an empty vault.
func New() *Vault { return &Vault{secrets: map[string][]*Version{}, now: time.Now} }

// SetClock sets the vault's clock, for when versions are created.
func (v *Vault) SetClock(now func() time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.now = now
}

// Plant adds a version to secret name as someone else would, with tags of their choosing.
func (v *Vault) Plant(name, value string, tags map[string]string, created time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.next++
	key := strings.ToLower(name)
	v.secrets[key] = append(v.secrets[key], &Version{ID: fmt.Sprintf("%ssecrets/%s/%032x", URL, name, v.next), Value: value, Tags: tags, Enabled: true, Created: created})
}

// Refuse makes the vault answer 403 Forbidden to everything, as to an identity without a role on it.
func (v *Vault) Refuse(refuse bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.refuse = refuse
}

// Admit has the vault let in only the identities with these client IDs, as its role assignments
// would, and refuse the others 403 Forbidden. It needs Authenticate, to know who calls.
func (v *Vault) Admit(clientIDs ...string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.admit = clientIDs
}

// Versions are the versions of secret name, oldest first, copies.
func (v *Vault) Versions(name string) []Version {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []Version
	for _, ver := range v.secrets[strings.ToLower(name)] {
		c := *ver
		out = append(out, c)
	}
	return out
}

// Sets is how many versions were written.
func (v *Vault) Sets() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.sets
}

// Transport is the SDK's fake transport, answering from the vault.
func (v *Vault) Transport() policy.Transporter {
	return transport{v: v, next: fake.NewServerTransport(&fake.Server{
		SetSecret:                            v.set,
		NewListSecretPropertiesVersionsPager: v.list,
		UpdateSecretProperties:               v.update,
	})}
}

// transport refuses every request while the vault refuses, before the SDK's fake sees it: the
// fake keeps a pager that failed, and would answer the next listing from it.
type transport struct {
	v    *Vault
	next policy.Transporter
}

func (t transport) Do(req *http.Request) (*http.Response, error) {
	t.v.mu.Lock()
	refuse, tenant, issued, admit := t.v.refuse, t.v.tenant, t.v.issued, t.v.admit
	t.v.mu.Unlock()
	var caller string
	if issued != nil {
		token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		if !ok {
			// The challenge Key Vault answers a request without a token with.
			resp := answer(req, http.StatusUnauthorized, `{"error":{"code":"Unauthorized","message":"AKV10000: Request is missing a Bearer or PoP token."}}`)
			resp.Header.Set("WWW-Authenticate", fmt.Sprintf(`Bearer authorization="https://login.microsoftonline.com/%s", resource="%s"`, tenant, resource))
			return resp, nil
		}
		got, clientID, audience, ok := issued(token)
		if !ok || !strings.EqualFold(got, tenant) || strings.TrimSuffix(audience, "/") != resource {
			return answer(req, http.StatusUnauthorized, `{"error":{"code":"Unauthorized","message":"AKV10032: Invalid issuer or audience."}}`), nil
		}
		caller = clientID
	}
	if refuse || admit != nil && !slices.ContainsFunc(admit, func(id string) bool { return strings.EqualFold(id, caller) }) {
		return answer(req, http.StatusForbidden, `{"error":{"code":"Forbidden","message":"Caller is not authorized to perform action on resource.","innererror":{"code":"ForbiddenByRbac"}}}`), nil
	}
	return t.next.Do(req)
}

func answer(req *http.Request, status int, body string) *http.Response {
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Request: req,
		Header: http.Header{"Content-Type": []string{"application/json; charset=utf-8"}}, Body: io.NopCloser(strings.NewReader(body))}
}

func (v *Vault) set(_ context.Context, name string, p azsecrets.SetSecretParameters, _ *azsecrets.SetSecretOptions) (resp azfake.Responder[azsecrets.SetSecretResponse], errResp azfake.ErrorResponder) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.next++
	v.sets++
	ver := &Version{ID: fmt.Sprintf("%ssecrets/%s/%032x", URL, name, v.next), Enabled: true, Tags: map[string]string{}, Created: v.now()}
	if p.Value != nil {
		ver.Value = *p.Value
	}
	if p.ContentType != nil {
		ver.ContentType = *p.ContentType
	}
	for k, t := range p.Tags {
		if t != nil {
			ver.Tags[k] = *t
		}
	}
	if a := p.SecretAttributes; a != nil {
		if a.Enabled != nil {
			ver.Enabled = *a.Enabled
		}
		if a.Expires != nil {
			ver.Expires = *a.Expires
		}
	}
	key := strings.ToLower(name)
	v.secrets[key] = append(v.secrets[key], ver)
	resp.SetResponse(http.StatusOK, azsecrets.SetSecretResponse{Secret: secretOf(ver)}, nil)
	return resp, errResp
}

func (v *Vault) list(name string, _ *azsecrets.ListSecretPropertiesVersionsOptions) (resp azfake.PagerResponder[azsecrets.ListSecretPropertiesVersionsResponse]) {
	v.mu.Lock()
	defer v.mu.Unlock()
	// A secret with no version lists none.
	props := []*azsecrets.SecretProperties{}
	for _, ver := range v.secrets[strings.ToLower(name)] {
		s := secretOf(ver)
		props = append(props, &azsecrets.SecretProperties{ID: s.ID, Attributes: s.Attributes, ContentType: s.ContentType, Tags: s.Tags})
	}
	// Key Vault lists versions in no order a caller may rely on.
	sort.Slice(props, func(i, j int) bool { return string(*props[i].ID) > string(*props[j].ID) })
	resp.AddPage(http.StatusOK, azsecrets.ListSecretPropertiesVersionsResponse{SecretPropertiesListResult: azsecrets.SecretPropertiesListResult{Value: props}}, nil)
	return resp
}

func (v *Vault) update(_ context.Context, name, version string, p azsecrets.UpdateSecretPropertiesParameters, _ *azsecrets.UpdateSecretPropertiesOptions) (resp azfake.Responder[azsecrets.UpdateSecretPropertiesResponse], errResp azfake.ErrorResponder) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, ver := range v.secrets[strings.ToLower(name)] {
		if strings.HasSuffix(ver.ID, "/"+version) {
			if a := p.SecretAttributes; a != nil && a.Enabled != nil {
				ver.Enabled = *a.Enabled
			}
			resp.SetResponse(http.StatusOK, azsecrets.UpdateSecretPropertiesResponse{Secret: secretOf(ver)}, nil)
			return resp, errResp
		}
	}
	errResp.SetResponseError(http.StatusNotFound, "SecretNotFound")
	return resp, errResp
}

// secretOf is ver as the SDK returns it, without its value: nothing here reads values back.
func secretOf(ver *Version) azsecrets.Secret {
	id := azsecrets.ID(ver.ID)
	enabled, created, contentType := ver.Enabled, ver.Created, ver.ContentType
	tags := map[string]*string{}
	for k, t := range ver.Tags {
		tags[k] = &t
	}
	attrs := &azsecrets.SecretAttributes{Enabled: &enabled, Created: &created}
	if !ver.Expires.IsZero() {
		expires := ver.Expires
		attrs.Expires = &expires
	}
	return azsecrets.Secret{ID: &id, ContentType: &contentType, Tags: tags, Attributes: attrs}
}
