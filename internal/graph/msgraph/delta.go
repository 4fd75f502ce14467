package msgraph

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/microsoftgraph/msgraph-sdk-go/applications"
	"github.com/microsoftgraph/msgraph-sdk-go/serviceprincipals"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
)

// needsDelta is what a refused delta round needs.
const needsDelta = "Application.Read.All to read the changes to the tenant's applications and service principals"

// ReadDelta reads one round of changes to the tenant's applications (src graph.Application) or
// service principals, from link, the @odata.deltaLink of the round before, or from start when
// link is empty. It hands each object reported to visit, one at a time, and returns the round's
// deltaLink. A link that is not one of this client's delta URLs is refused before anything is
// sent: links are kept where a restarted operator finds them, and must never point credwatch,
// and its token, elsewhere. A link Graph no longer keeps fails with graph.ErrResync.
func (c *Client) ReadDelta(ctx context.Context, cred azcore.TokenCredential, src graph.Source, link string, start graph.DeltaStart, visit func(graph.Change)) (string, error) {
	ctx = scoped(ctx, cred)
	svc, err := c.service(cred)
	if err != nil {
		return "", err
	}
	if link == "" {
		link = c.firstDeltaURL(src, start)
	} else if err := c.ownDeltaLink(src, link); err != nil {
		// A kept link this client will not follow (the endpoint changed) is as good as lost.
		return "", fmt.Errorf("%w: %w", graph.ErrResync, err)
	}
	if src == graph.Application {
		apps := svc.Applications().Delta()
		return deltaRound(ctx, "changes to applications", link, func(l string) (applications.DeltaGetResponseable, error) {
			return apps.WithUrl(l).GetAsDeltaGetResponse(ctx, nil)
		}, func(l string) error { return c.ownDeltaLink(src, l) }, src, visit)
	}
	sps := svc.ServicePrincipals().Delta()
	return deltaRound(ctx, "changes to service principals", link, func(l string) (serviceprincipals.DeltaGetResponseable, error) {
		return sps.WithUrl(l).GetAsDeltaGetResponse(ctx, nil)
	}, func(l string) error { return c.ownDeltaLink(src, l) }, src, visit)
}

// deltaPageOf is one page of a delta round, as the SDK's responses give it.
type deltaPageOf[T any] interface {
	page[T]
	GetOdataDeltaLink() *string
}

// deltaRound follows a round from link to its deltaLink, checking each link with own before it
// is sent and the deltaLink before it is kept.
func deltaRound[P deltaPageOf[T], T deltaObject](ctx context.Context, what, link string, get func(string) (P, error), own func(string) error, src graph.Source, visit func(graph.Change)) (string, error) {
	for {
		p, err := get(link)
		if err != nil {
			return "", deltaError(what, err)
		}
		for _, o := range p.GetValue() {
			visit(changeOf(src, o))
		}
		next, delta := p.GetOdataNextLink(), p.GetOdataDeltaLink()
		switch {
		case next != nil && *next != "":
			link = *next
		case delta != nil && *delta != "":
			if err := own(*delta); err != nil {
				return "", err
			}
			return *delta, nil
		default:
			return "", fmt.Errorf("reading %s: a page with neither @odata.nextLink nor @odata.deltaLink", what)
		}
		if err := own(link); err != nil {
			return "", err
		}
		if err := ctx.Err(); err != nil {
			return "", err
		}
	}
}

// firstDeltaURL is the first request of a round with no link: the properties a watch reads,
// carried by Graph in the links that follow.
func (c *Client) firstDeltaURL(src graph.Source, start graph.DeltaStart) string {
	set, fields := "applications", scanApplicationFields
	if src == graph.ServicePrincipal {
		set, fields = "servicePrincipals", servicePrincipalFields
	}
	q := "$select=" + url.QueryEscape(strings.Join(fields, ","))
	if start == graph.DeltaLatest {
		q = "$deltatoken=latest&" + q
	}
	return c.baseURL + "/" + set + "/delta?" + q
}

// ownDeltaLink accepts a link to this client's endpoint and the delta of src's collection only.
func (c *Client) ownDeltaLink(src graph.Source, link string) error {
	set := "applications"
	if src == graph.ServicePrincipal {
		set = "servicePrincipals"
	}
	u, err := url.Parse(link)
	base, _ := url.Parse(c.baseURL)
	if err != nil || u.Scheme != base.Scheme || !strings.EqualFold(u.Host, base.Host) || u.User != nil ||
		(u.Path != base.Path+"/"+set+"/delta" && u.Path != base.Path+"/"+set+"/microsoft.graph.delta") {
		return fmt.Errorf("a delta link to %s is not one of %s/%s/delta: refused", redactQuery(link), c.baseURL, set)
	}
	return nil
}

// redactQuery leaves a link's state token out of messages: it is no secret, but it is long and
// says nothing to a reader.
func redactQuery(link string) string {
	before, _, _ := strings.Cut(link, "?")
	return before
}

// deltaError sorts a failed round: a link Graph no longer keeps is graph.ErrResync.
func deltaError(what string, err error) error {
	if err == nil {
		return nil
	}
	err = classify(err, needsDelta)
	var ge *azerr.Error
	if errors.As(err, &ge) && (ge.Status == http.StatusGone || ge.Code == "syncStateNotFound" || ge.Code == "resyncRequired") {
		return fmt.Errorf("reading %s: %w (%w)", what, graph.ErrResync, err)
	}
	return fmt.Errorf("reading %s: %w", what, err)
}

// deltaObject is what a round reports of an application or a service principal.
type deltaObject interface {
	scanned
	GetAdditionalData() map[string]any
}

func changeOf(src graph.Source, o deltaObject) graph.Change {
	ch := graph.Change{Source: src, ObjectID: strings.ToLower(deref(o.GetId()))}
	if _, removed := o.GetAdditionalData()["@removed"]; removed {
		ch.Removed = true
		return ch
	}
	if id := o.GetAppId(); id != nil {
		ch.HasAppID, ch.AppID = true, strings.ToLower(*id)
	}
	if n := o.GetDisplayName(); n != nil {
		ch.HasDisplayName, ch.DisplayName = true, *n
	}
	creds := convert(src, o)
	if o.GetPasswordCredentials() != nil {
		ch.HasPasswords = true
		for _, cr := range creds {
			if cr.Type == graph.Password {
				ch.Passwords = append(ch.Passwords, cr)
			}
		}
	}
	if o.GetKeyCredentials() != nil {
		ch.HasCertificates = true
		for _, cr := range creds {
			if cr.Type == graph.Certificate {
				ch.Certificates = append(ch.Certificates, cr)
			}
		}
	}
	if app, ok := o.(interface{ GetTags() []string }); ok && src == graph.Application && app.GetTags() != nil {
		ch.HasTags, ch.Tags = true, app.GetTags()
	}
	if sp, ok := o.(interface{ GetPreferredSingleSignOnMode() *string }); ok {
		if m := sp.GetPreferredSingleSignOnMode(); m != nil {
			ch.HasSingleSignOn, ch.SingleSignOnMode = true, *m
		}
	}
	ch.AppOwnerTenantID, ch.HasAppOwner = appOwnerOf(o)
	return ch
}
