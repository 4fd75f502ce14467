package msgraph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	abstractions "github.com/microsoft/kiota-abstractions-go"
	"github.com/microsoftgraph/msgraph-sdk-go/models/odataerrors"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
)

// The sign-in activity report of credentials is beta, and msgraph-sdk-go is v1.0 only: this
// file alone knows its shape, so that a change to it touches nothing else
// (https://learn.microsoft.com/graph/api/reportroot-list-appcredentialsigninactivities?view=graph-rest-beta).
const (
	signInsReport = "/reports/appCredentialSignInActivities"
	needsSignIns  = "AuditLog.Read.All to read the sign-in activity reports"
	// codeUnlicensed is Graph's refusal of a tenant without Entra ID P1 or P2.
	codeUnlicensed = "Authentication_RequestFromNonPremiumTenantOrB2CTenant"
	// maxSignInPages bounds the pages of one application's report, a few credentials each.
	maxSignInPages = 10
)

// signInPage is a page of the report. Fields are decoded leniently: Microsoft's own examples
// disagree with the schema (expirationDate, keyType secret, offsets such as -8:00).
type signInPage struct {
	Value []struct {
		KeyID            string `json:"keyId"`
		CredentialOrigin string `json:"credentialOrigin"`
		SignInActivity   *struct {
			LastSignInDateTime string `json:"lastSignInDateTime"`
		} `json:"signInActivity"`
	} `json:"value"`
	NextLink string `json:"@odata.nextLink"`
}

// ReadSignIns returns when each credential of the application appID and of its service principal
// last signed in, in the tenant cred signs in to, from Graph's beta report.
func (c *Client) ReadSignIns(ctx context.Context, cred azcore.TokenCredential, appID string) ([]graph.KeyUse, error) {
	ctx = scoped(ctx, cred)
	svc, err := c.service(cred)
	if err != nil {
		return nil, err
	}
	beta := strings.TrimSuffix(c.baseURL, "/v1.0") + "/beta"
	link := beta + signInsReport + "?$filter=" + url.QueryEscape(fmt.Sprintf("appId eq '%s'", appID))
	var out []graph.KeyUse
	for range maxSignInPages {
		ri := abstractions.NewRequestInformation()
		ri.Method = abstractions.GET
		u, err := url.Parse(link)
		if err != nil || u.Hostname() != c.host || u.Path != strings.TrimPrefix(beta, u.Scheme+"://"+u.Host)+signInsReport {
			return nil, fmt.Errorf("reading the sign-in activity of %s: Graph's next link %q leaves the report", appID, link)
		}
		ri.SetUri(*u)
		ri.Headers.Add("Accept", "application/json")
		body, err := svc.GetAdapter().SendPrimitive(ctx, ri, "[]byte", abstractions.ErrorMappings{"XXX": odataerrors.CreateODataErrorFromDiscriminatorValue})
		if err != nil {
			return nil, fmt.Errorf("reading the sign-in activity of %s: %w", appID, signInsError(err))
		}
		var page signInPage
		if b, _ := body.([]byte); b == nil || json.Unmarshal(b, &page) != nil {
			return nil, fmt.Errorf("reading the sign-in activity of %s: Graph's answer is not the report's", appID)
		}
		for _, v := range page.Value {
			use := graph.KeyUse{KeyID: strings.ToLower(v.KeyID), Source: graph.Application}
			if strings.EqualFold(v.CredentialOrigin, "servicePrincipal") {
				use.Source = graph.ServicePrincipal
			}
			if a := v.SignInActivity; a != nil && a.LastSignInDateTime != "" {
				if use.LastSignIn = reportTime(a.LastSignInDateTime); use.LastSignIn.IsZero() {
					// Unread, it would look like no sign-in, and the credential unused.
					return nil, fmt.Errorf("reading the sign-in activity of %s: Graph's report has a time credwatch cannot read, %q", appID, a.LastSignInDateTime)
				}
			}
			out = append(out, use)
		}
		if page.NextLink == "" {
			return out, nil
		}
		link = page.NextLink
	}
	return nil, fmt.Errorf("reading the sign-in activity of %s: more than %d pages", appID, maxSignInPages)
}

// signInsError classifies a failure of the report, telling the missing licence from a missing
// permission: both are 403s.
func signInsError(err error) error {
	err = classify(err, needsSignIns)
	var ge *azerr.Error
	if errors.As(err, &ge) && ge.Code == codeUnlicensed {
		return fmt.Errorf("%w (%w)", graph.ErrSignInsUnlicensed, &azerr.Error{Kind: ge.Kind, Status: ge.Status, Code: ge.Code, Err: ge.Err})
	}
	return err
}

// reportTime reads a report's time, RFC 3339 or with the short offsets of Microsoft's examples
// (-8:00); zero when absent or unreadable.
func reportTime(s string) time.Time {
	if n := len(s); n > 5 && (s[n-5] == '+' || s[n-5] == '-') && s[n-3] == ':' {
		s = s[:n-4] + "0" + s[n-4:] // -8:00 is -08:00
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}
