package msgraph

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/google/uuid"
	kiotaauth "github.com/microsoft/kiota-authentication-azure-go"
	khttp "github.com/microsoft/kiota-http-go"
	msgraphsdk "github.com/microsoftgraph/msgraph-sdk-go"
	msgraphcore "github.com/microsoftgraph/msgraph-sdk-go-core"
	"github.com/microsoftgraph/msgraph-sdk-go/applications"
	"github.com/microsoftgraph/msgraph-sdk-go/applicationswithappid"
	"github.com/microsoftgraph/msgraph-sdk-go/models"
	"github.com/microsoftgraph/msgraph-sdk-go/organization"
	"github.com/microsoftgraph/msgraph-sdk-go/serviceprincipalswithappid"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/graph/budget"
)

// applicationFields and servicePrincipalFields are all a watch reads: $select keeps responses
// small and costs Graph one resource unit less per request. A service principal's single-sign-on
// mode tells a SAML one, whose long-lived secret and certificate are there by design; its
// application's tenant tells, in a scan, an application of the tenant that the identity may not
// read from one registered elsewhere.
var (
	applicationFields      = []string{"id", "appId", "displayName", "passwordCredentials", "keyCredentials"}
	servicePrincipalFields = append(slices.Clip(applicationFields), "preferredSingleSignOnMode", "appOwnerOrganizationId")
	// A scan reads an application's tags too: one may opt it out of owner digests.
	scanApplicationFields = append(slices.Clip(applicationFields), "tags")
)

// applicationQuery and servicePrincipalQuery read an object's credentials and nothing else, alone
// or in a batch.
func applicationQuery() *applicationswithappid.ApplicationsWithAppIdRequestBuilderGetRequestConfiguration {
	return &applicationswithappid.ApplicationsWithAppIdRequestBuilderGetRequestConfiguration{
		QueryParameters: &applicationswithappid.ApplicationsWithAppIdRequestBuilderGetQueryParameters{Select: applicationFields},
	}
}

func servicePrincipalQuery() *serviceprincipalswithappid.ServicePrincipalsWithAppIdRequestBuilderGetRequestConfiguration {
	return &serviceprincipalswithappid.ServicePrincipalsWithAppIdRequestBuilderGetRequestConfiguration{
		QueryParameters: &serviceprincipalswithappid.ServicePrincipalsWithAppIdRequestBuilderGetQueryParameters{Select: servicePrincipalFields},
	}
}

// What a refused request needs, named in its error: for each API the least privileged application
// permission of Microsoft's Graph reference (see docs/identities.md, "Azure permissions").
const (
	// GET /applications(appId='…') and /servicePrincipals(appId='…'), alone or in a $batch.
	needsRead = "Application.Read.All (or Application.ReadWrite.OwnedBy as an owner of the application)"
	// POST /applications/{id}/addPassword and /applications/{id}/removePassword.
	needsWrite = "Application.ReadWrite.OwnedBy as an owner of the application, or Application.ReadWrite.All"
	// GET /applications/{id}/owners.
	needsOwners = "Application.Read.All to list the application's owners"
	// The users among the owners: without a permission to read users Graph lists them with
	// limited information, their type and id, and refuses nothing.
	needsOwnerAddresses = "User.ReadBasic.All (or User.Read.All) to read the owners' addresses"
	// GET /organization, its verifiedDomains.
	needsDomains = "Organization.Read.All (or Directory.Read.All) to read the tenant's verified domains, " +
		"which owners' mail is kept to unless --owner-mail-domains says otherwise"
	// GET /applications and /servicePrincipals: a tenant scan.
	needsList = "Application.Read.All to list the tenant's applications and service principals"
)

// Client reads application and service-principal credentials from one Graph endpoint.
type Client struct {
	baseURL    string
	scope      string
	host       string
	httpClient *http.Client
}

// New returns a Client for the Graph endpoint (https://graph.microsoft.com, or a sovereign
// cloud's, or a test server's). transport carries the requests; nil means http.DefaultTransport.
func New(endpoint string, transport http.RoundTripper) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(endpoint, "/"))
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("graph endpoint %q: want an https URL such as https://graph.microsoft.com", endpoint)
	}
	if transport == nil {
		transport = http.DefaultTransport
	}
	return &Client{
		baseURL: u.String() + "/v1.0",
		scope:   u.String() + "/.default",
		host:    u.Hostname(),
		httpClient: &http.Client{
			Transport: khttp.NewCustomTransportWithParentTransport(transport, middlewares()...),
			// A Graph that accepts a connection and never answers must not hold a worker forever.
			Timeout: requestTimeout,
			// As Kiota's own client: redirects are its redirect handler's to follow.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// SetScope makes the client ask for tokens of scope (such as https://graph.microsoft.com/.default)
// rather than its endpoint's, for a Graph whose audience is not its URL.
func (c *Client) SetScope(scope string) { c.scope = scope }

// requestTimeout bounds one Graph request, well above Graph's own latency.
const requestTimeout = 30 * time.Second

// middlewares is the SDK's default pipeline without its retry and compression handlers. The
// retry handler sleeps inside the request for up to three Retry-After periods; the controller
// instead records the failure in status and requeues, so a throttled watch is visible and holds
// no worker. The compression handler gzips every request body with a new writer of about 1 MiB,
// to shrink bodies of a few KiB at most (a $batch of 20 GETs): at 10,000 watches it was a third
// of everything the operator allocated.
func middlewares() []khttp.Middleware {
	opts := msgraphsdk.GetDefaultClientOptions()
	var kept []khttp.Middleware
	for _, m := range msgraphcore.GetDefaultMiddlewaresWithOptions(&opts) {
		switch m.(type) {
		case *khttp.RetryHandler, *khttp.CompressionHandler:
			continue
		}
		kept = append(kept, m)
	}
	return kept
}

// scoped marks ctx with the throttling scope cred signs in as, when it names one, so that its
// requests spend that scope's budget (see graph/budget).
func scoped(ctx context.Context, cred azcore.TokenCredential) context.Context {
	if s, ok := cred.(interface{ Scope() string }); ok {
		return budget.WithScope(ctx, s.Scope())
	}
	return ctx
}

func (c *Client) service(cred azcore.TokenCredential) (*msgraphsdk.GraphServiceClient, error) {
	// Kiota attaches tokens only for the hosts it is told of; without this a sovereign or test
	// endpoint gets no token and Graph answers 401 "Access token is empty".
	auth, err := kiotaauth.NewAzureIdentityAuthenticationProviderWithScopesAndValidHosts(azerr.Credential{TokenCredential: cred}, []string{c.scope}, []string{c.host})
	if err != nil {
		return nil, err
	}
	adapter, err := msgraphsdk.NewGraphRequestAdapterWithParseNodeFactoryAndSerializationWriterFactoryAndHttpClient(auth, nil, nil, c.httpClient)
	if err != nil {
		return nil, err
	}
	adapter.SetBaseUrl(c.baseURL)
	return msgraphsdk.NewGraphServiceClient(adapter), nil
}

// ReadCredentials returns the credentials of the application and the service principal with
// appID, in the tenant cred signs in to. It fails with a azerr.Error of KindNotFound only when
// neither object exists.
func (c *Client) ReadCredentials(ctx context.Context, cred azcore.TokenCredential, appID string) (graph.Snapshot, error) {
	ctx = scoped(ctx, cred)
	svc, err := c.service(cred)
	if err != nil {
		return graph.Snapshot{}, err
	}
	app, appErr := fetch("application", appID, func() (credentialHolder, error) {
		return svc.ApplicationsWithAppId(&appID).Get(ctx, applicationQuery())
	})
	if appErr != nil && azerr.KindOf(appErr) != azerr.KindNotFound {
		return graph.Snapshot{}, appErr
	}
	sp, spErr := fetch("service principal", appID, func() (credentialHolder, error) {
		return svc.ServicePrincipalsWithAppId(&appID).Get(ctx, servicePrincipalQuery())
	})
	return snapshot(appID, app, appErr, sp, spErr)
}

// snapshot joins what was read of an appId's application and service principal; either may be
// missing, not both.
func snapshot(appID string, app credentialHolder, appErr error, sp credentialHolder, spErr error) (graph.Snapshot, error) {
	if appErr != nil && azerr.KindOf(appErr) != azerr.KindNotFound {
		return graph.Snapshot{}, appErr
	}
	if spErr != nil && azerr.KindOf(spErr) != azerr.KindNotFound {
		return graph.Snapshot{}, spErr
	}
	if app == nil && sp == nil {
		return graph.Snapshot{}, fmt.Errorf("no application or service principal has appId %s: %w", appID, spErr)
	}

	snap := graph.Snapshot{AppID: strings.ToLower(appID)}
	if app != nil {
		snap.Add(objectOf(graph.Application, appID, app))
	}
	if sp != nil {
		snap.Add(objectOf(graph.ServicePrincipal, appID, sp))
	}
	return snap, nil
}

// objectOf is what the operator keeps of an application or a service principal Graph returned.
func objectOf(src graph.Source, appID string, o credentialHolder) graph.Object {
	obj := graph.Object{Source: src, AppID: strings.ToLower(appID), ObjectID: deref(o.GetId()),
		DisplayName: deref(o.GetDisplayName()), Credentials: convert(src, o)}
	if sp, ok := o.(interface{ GetPreferredSingleSignOnMode() *string }); ok {
		obj.SingleSignOnMode = deref(sp.GetPreferredSingleSignOnMode())
	}
	if app, ok := o.(models.Applicationable); ok {
		obj.Tags = app.GetTags()
	}
	obj.AppOwnerTenantID, _ = appOwnerOf(o)
	return obj
}

// ReadOwnerEmails returns the mail addresses of the owners of the application with object ID
// applicationID: a user's mail, or its user principal name when it has none. Owners that are
// service principals have neither and are skipped, and so are guests (userType Guest): whoever
// may add owners can add a guest, whose mail is an outside address. Every user has a user principal name, so a
// user with neither is one Graph would not show: that fails as a refusal.
func (c *Client) ReadOwnerEmails(ctx context.Context, cred azcore.TokenCredential, applicationID string) ([]string, error) {
	ctx = scoped(ctx, cred)
	svc, err := c.service(cred)
	if err != nil {
		return nil, err
	}
	owners := svc.Applications().ByApplicationId(applicationID).Owners()
	var out []string
	hidden := 0
	selected := &applications.ItemOwnersRequestBuilderGetRequestConfiguration{QueryParameters: &applications.ItemOwnersRequestBuilderGetQueryParameters{
		Select: []string{"id", "displayName", "mail", "userPrincipalName", "userType"}}}
	err = pages(ctx, "the owners of application "+applicationID, needsOwners,
		func() (models.DirectoryObjectCollectionResponseable, error) { return owners.Get(ctx, selected) },
		func(next string) (models.DirectoryObjectCollectionResponseable, error) {
			return owners.WithUrl(next).Get(ctx, nil)
		},
		func(o models.DirectoryObjectable) {
			if u, ok := o.(models.Userable); ok {
				if strings.EqualFold(deref(u.GetUserType()), "Guest") {
					return
				}
				if mail := deref(u.GetMail()); mail != "" {
					out = append(out, mail)
				} else if upn := deref(u.GetUserPrincipalName()); upn != "" {
					out = append(out, upn)
				} else {
					hidden++
				}
			}
		})
	if err != nil {
		return nil, err
	}
	if hidden > 0 {
		ge := &azerr.Error{Kind: azerr.KindForbidden, Err: fmt.Errorf("%d of the users among them listed without their properties", hidden)}
		return nil, fmt.Errorf("reading the owners of application %s: %w", applicationID, ge.Needing(needsOwnerAddresses))
	}
	return out, nil
}

// VerifiedDomains returns the names of the verified domains of the tenant cred signs in to.
func (c *Client) VerifiedDomains(ctx context.Context, cred azcore.TokenCredential) ([]string, error) {
	ctx = scoped(ctx, cred)
	svc, err := c.service(cred)
	if err != nil {
		return nil, err
	}
	resp, err := svc.Organization().Get(ctx, &organization.OrganizationRequestBuilderGetRequestConfiguration{
		QueryParameters: &organization.OrganizationRequestBuilderGetQueryParameters{Select: []string{"verifiedDomains"}}})
	if err != nil {
		return nil, fmt.Errorf("reading the tenant's verified domains: %w", classify(err, needsDomains))
	}
	var out []string
	for _, org := range resp.GetValue() {
		for _, d := range org.GetVerifiedDomains() {
			if name := deref(d.GetName()); name != "" {
				out = append(out, name)
			}
		}
	}
	return out, nil
}

// credentialHolder is what applications and service principals share that a watch reads.
type credentialHolder interface {
	GetId() *string
	GetDisplayName() *string
	GetPasswordCredentials() []models.PasswordCredentialable
	GetKeyCredentials() []models.KeyCredentialable
}

// fetch runs get and classifies its error; a missing object is (nil, a KindNotFound error).
func fetch(what, appID string, get func() (credentialHolder, error)) (credentialHolder, error) {
	obj, err := get()
	if err := classify(err, needsRead); err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", what, appID, err)
	}
	return obj, nil
}

func convert(src graph.Source, obj credentialHolder) []graph.Credential {
	passwords, keys := obj.GetPasswordCredentials(), obj.GetKeyCredentials()
	out := make([]graph.Credential, 0, len(passwords)+len(keys))
	for _, p := range passwords {
		out = append(out, graph.Credential{
			KeyID:       uuidString(p.GetKeyId()),
			Type:        graph.Password,
			Source:      src,
			DisplayName: deref(p.GetDisplayName()),
			Hint:        deref(p.GetHint()),
			Start:       derefTime(p.GetStartDateTime()),
			End:         derefTime(p.GetEndDateTime()),
		})
	}
	for _, k := range keys {
		out = append(out, graph.Credential{
			KeyID:       uuidString(k.GetKeyId()),
			Type:        graph.Certificate,
			Source:      src,
			DisplayName: deref(k.GetDisplayName()),
			Start:       derefTime(k.GetStartDateTime()),
			End:         derefTime(k.GetEndDateTime()),
		})
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

func uuidString(id *uuid.UUID) string {
	if id == nil {
		return ""
	}
	return id.String()
}

// appOwnerOf is a service principal's appOwnerOrganizationId (a UUID's text is lower case), and
// whether Graph gave one.
func appOwnerOf(o any) (string, bool) {
	sp, ok := o.(interface{ GetAppOwnerOrganizationId() *uuid.UUID })
	if !ok || sp.GetAppOwnerOrganizationId() == nil {
		return "", false
	}
	return uuidString(sp.GetAppOwnerOrganizationId()), true
}
