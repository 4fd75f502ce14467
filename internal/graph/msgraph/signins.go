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
	"golang.org/x/time/rate"

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
	// maxSignInsPage is the most entries Graph gives in a page of the report.
	maxSignInsPage = 999
	// maxTenantSignInPages bounds the pages of a tenant's report: a million credentials.
	maxTenantSignInPages = 1000
	// reportRetries is how often a page the reports service throttled is asked again, if it asks
	// to wait no longer than maxReportRetryAfter.
	reportRetries       = 3
	maxReportRetryAfter = 30 * time.Second
)

// signInPage is a page of the report. Fields are decoded leniently: Microsoft's own examples
// disagree with the schema (expirationDate, keyType secret, offsets such as -8:00).
type signInPage struct {
	Value []struct {
		AppID            string `json:"appId"`
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
	var out []graph.KeyUse
	query := "$filter=" + url.QueryEscape(fmt.Sprintf("appId eq '%s'", appID))
	want := strings.ToLower(appID)
	err := c.readReport(ctx, cred, query, maxSignInPages, nil, func(u graph.KeyUse) {
		// An entry of another application, however it came, says nothing of this one's.
		if u.AppID == "" || u.AppID == want {
			u.AppID = want
			out = append(out, u)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("reading the sign-in activity of %s: %w", appID, err)
	}
	return out, nil
}

// ReadTenantSignIns hands visit when each credential of the tenant cred signs in to last signed
// in, the whole report in pages of the most Graph gives, one entry at a time: a tenant of
// 100,000 applications is never held at once.
func (c *Client) ReadTenantSignIns(ctx context.Context, cred azcore.TokenCredential, visit func(graph.KeyUse)) error {
	// Paced under the reports service's own limit, which the budget of Graph's resource units
	// does not know: a tenant of 100,000 applications takes 111 pages.
	pace := rate.NewLimiter(rate.Every(10*time.Second/graph.ReportsPer10s), graph.ReportsPer10s)
	if err := c.readReport(ctx, cred, fmt.Sprintf("$top=%d", maxSignInsPage), maxTenantSignInPages, pace, visit); err != nil {
		return fmt.Errorf("reading the sign-in activity of the tenant: %w", err)
	}
	return nil
}

// readReport reads the report with query, following Graph's next links on the report for at most
// pages pages, and hands visit each entry. A page that cannot be read whole fails the read: an
// entry left out would look like a credential that never signed in. With pace, each page waits
// its turn, and one the reports service refused (429) is asked again after its Retry-After, a
// few times.
func (c *Client) readReport(ctx context.Context, cred azcore.TokenCredential, query string, pages int, pace *rate.Limiter, visit func(graph.KeyUse)) error {
	ctx = scoped(ctx, cred)
	svc, err := c.service(cred)
	if err != nil {
		return err
	}
	beta := strings.TrimSuffix(c.baseURL, "/v1.0") + "/beta"
	link := beta + signInsReport + "?" + query
	for range pages {
		ri := abstractions.NewRequestInformation()
		ri.Method = abstractions.GET
		u, err := url.Parse(link)
		if err != nil || u.Hostname() != c.host || u.Path != strings.TrimPrefix(beta, u.Scheme+"://"+u.Host)+signInsReport {
			return fmt.Errorf("the next link %q Graph gave leaves the report", link)
		}
		ri.SetUri(*u)
		ri.Headers.Add("Accept", "application/json")
		body, err := sendReport(ctx, svc.GetAdapter(), ri, pace)
		if err != nil {
			return err
		}
		var page signInPage
		if b, _ := body.([]byte); b == nil || json.Unmarshal(b, &page) != nil {
			return errors.New("the answer is not the report's")
		}
		uses := make([]graph.KeyUse, 0, len(page.Value))
		for _, v := range page.Value {
			use := graph.KeyUse{AppID: strings.ToLower(v.AppID), KeyID: strings.ToLower(v.KeyID), Source: graph.Application}
			if strings.EqualFold(v.CredentialOrigin, "servicePrincipal") {
				use.Source = graph.ServicePrincipal
			}
			if a := v.SignInActivity; a != nil && a.LastSignInDateTime != "" {
				if use.LastSignIn = reportTime(a.LastSignInDateTime); use.LastSignIn.IsZero() {
					// Unread, it would look like no sign-in, and the credential unused.
					return fmt.Errorf("the report has a time credwatch cannot read, %q", a.LastSignInDateTime)
				}
			}
			uses = append(uses, use)
		}
		for _, u := range uses {
			visit(u)
		}
		if page.NextLink == "" {
			return nil
		}
		link = page.NextLink
	}
	return fmt.Errorf("more than %d pages", pages)
}

// sendReport sends one request for a page of the report, paced by pace when set.
func sendReport(ctx context.Context, adapter abstractions.RequestAdapter, ri *abstractions.RequestInformation, pace *rate.Limiter) (any, error) {
	for attempt := 0; ; attempt++ {
		if pace != nil {
			if err := pace.Wait(ctx); err != nil {
				return nil, err
			}
		}
		body, err := adapter.SendPrimitive(ctx, ri, "[]byte", abstractions.ErrorMappings{"XXX": odataerrors.CreateODataErrorFromDiscriminatorValue})
		if err == nil {
			return body, nil
		}
		err = signInsError(err)
		wait := azerr.RetryAfterOf(err)
		if pace == nil || wait <= 0 || wait > maxReportRetryAfter || attempt == reportRetries {
			// A longer wait would hold the check's worker: the next check reads instead.
			return nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
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
