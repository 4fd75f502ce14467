package msgraph

import (
	"context"
	"fmt"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/microsoftgraph/msgraph-sdk-go/applications"
	"github.com/microsoftgraph/msgraph-sdk-go/models"
	"github.com/microsoftgraph/msgraph-sdk-go/serviceprincipals"
	"golang.org/x/sync/errgroup"

	"github.com/credwatch/credwatch/internal/graph"
)

// scanPageSize is Graph's largest page of applications and service principals: 10,000 of each
// take eleven requests.
const scanPageSize = 999

// ScanTenant lists the applications and service principals of the tenant cred signs in to,
// those filter (an OData $filter, applied to each list) selects or all of them, and hands each to
// visit as its page arrives, one call at a time. The two lists are read side by side: a scan takes
// about as long as the longer, and holds no more than a page of each. A failure of either stops
// both.
func (c *Client) ScanTenant(ctx context.Context, cred azcore.TokenCredential, filter string, visit func(graph.Object)) error {
	ctx = scoped(ctx, cred)
	svc, err := c.service(cred)
	if err != nil {
		return err
	}
	top := int32(scanPageSize)
	var filterParam *string
	if filter != "" {
		filterParam = &filter
	}
	var mu sync.Mutex
	fold := func(src graph.Source, o scanned) {
		obj := objectOf(src, deref(o.GetAppId()), o)
		mu.Lock()
		defer mu.Unlock()
		visit(obj)
	}
	both, ctx := errgroup.WithContext(ctx)
	read := func(what string, list func() error) {
		both.Go(func() (err error) {
			// No reconcile's goroutine: controller-runtime's recovery does not reach it, and a
			// panic parsing one page would stop the operator.
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("reading %s: panic: %v", what, r)
				}
			}()
			return list()
		})
	}
	read("applications", func() error {
		apps := svc.Applications()
		return pages(ctx, "applications", needsList,
			func() (models.ApplicationCollectionResponseable, error) {
				return apps.Get(ctx, &applications.ApplicationsRequestBuilderGetRequestConfiguration{
					QueryParameters: &applications.ApplicationsRequestBuilderGetQueryParameters{Select: scanApplicationFields, Top: &top, Filter: filterParam}})
			},
			func(next string) (models.ApplicationCollectionResponseable, error) {
				return apps.WithUrl(next).Get(ctx, nil)
			},
			func(o models.Applicationable) { fold(graph.Application, o) })
	})
	read("service principals", func() error {
		sps := svc.ServicePrincipals()
		return pages(ctx, "service principals", needsList,
			func() (models.ServicePrincipalCollectionResponseable, error) {
				return sps.Get(ctx, &serviceprincipals.ServicePrincipalsRequestBuilderGetRequestConfiguration{
					QueryParameters: &serviceprincipals.ServicePrincipalsRequestBuilderGetQueryParameters{Select: servicePrincipalFields, Top: &top, Filter: filterParam}})
			},
			func(next string) (models.ServicePrincipalCollectionResponseable, error) {
				return sps.WithUrl(next).Get(ctx, nil)
			},
			func(o models.ServicePrincipalable) { fold(graph.ServicePrincipal, o) })
	})
	return both.Wait()
}

// scanned is what a scan reads of an application or a service principal.
type scanned interface {
	credentialHolder
	GetAppId() *string
}

// page is one page of a Graph list, as the SDK's collection responses give it.
type page[T any] interface {
	GetValue() []T
	GetOdataNextLink() *string
}

// pages reads a list to its end, following @odata.nextLink, and hands each item to visit; a
// refusal names needs.
func pages[P page[T], T any](ctx context.Context, what, needs string, first func() (P, error), next func(string) (P, error), visit func(T)) error {
	p, err := first()
	for err == nil {
		for _, v := range p.GetValue() {
			visit(v)
		}
		link := p.GetOdataNextLink()
		if link == nil || *link == "" {
			return nil
		}
		if err = ctx.Err(); err == nil {
			p, err = next(*link)
		}
	}
	return fmt.Errorf("reading %s: %w", what, classify(err, needs))
}
