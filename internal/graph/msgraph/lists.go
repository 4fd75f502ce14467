package msgraph

import (
	"context"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/microsoft/kiota-abstractions-go/serialization"
	msgraphsdk "github.com/microsoftgraph/msgraph-sdk-go"
	msgraphcore "github.com/microsoftgraph/msgraph-sdk-go-core"
	"github.com/microsoftgraph/msgraph-sdk-go/applications"
	"github.com/microsoftgraph/msgraph-sdk-go/models"
	"github.com/microsoftgraph/msgraph-sdk-go/serviceprincipals"

	"github.com/credwatch/credwatch/internal/graph"
)

// ReadCredentialLists reads the credentials of up to graph.MaxListedAppIDs appIds in one $batch of list
// requests, `applications` and `servicePrincipals` each filtered by `appId in (…)` for up to
// graph.MaxInList appIds: about one resource unit per list where point reads cost one per object.
// Each result, in the order of appIDs, is what ReadCredentials would have returned, except that
// an appId neither list holds fails with graph.ErrNotListed: Graph's replicas lag, and only a
// point read may say it is gone. A list refused, throttled or failed fails the appIds it was to
// read, and only those.
func (c *Client) ReadCredentialLists(ctx context.Context, cred azcore.TokenCredential, appIDs []string) []graph.Read {
	fail := func(err error) []graph.Read { return graph.FailedReads(len(appIDs), err) }
	if len(appIDs) > graph.MaxListedAppIDs {
		return fail(fmt.Errorf("%d appIds in one batch of lists; it takes %d", len(appIDs), graph.MaxListedAppIDs))
	}
	for _, id := range appIDs {
		if !graph.IsGUID(id) {
			// Nothing else may reach the $filter.
			return fail(fmt.Errorf("appId %q is not a GUID", id))
		}
	}
	ctx = scoped(ctx, cred)
	svc, err := c.service(cred)
	if err != nil {
		return fail(err)
	}
	b := newBatch(svc)
	var groups []listGroup
	for start := 0; start < len(appIDs); start += graph.MaxInList {
		g := listGroup{appIDs: appIDs[start:min(start+graph.MaxInList, len(appIDs))]}
		filter := inFilter(g.appIDs)
		if g.app, err = b.add(svc.Applications().ToGetRequestInformation(ctx, &applications.ApplicationsRequestBuilderGetRequestConfiguration{
			QueryParameters: &applications.ApplicationsRequestBuilderGetQueryParameters{Select: applicationFields, Filter: &filter}})); err != nil {
			return fail(err)
		}
		if g.sp, err = b.add(svc.ServicePrincipals().ToGetRequestInformation(ctx, &serviceprincipals.ServicePrincipalsRequestBuilderGetRequestConfiguration{
			QueryParameters: &serviceprincipals.ServicePrincipalsRequestBuilderGetQueryParameters{Select: servicePrincipalFields, Filter: &filter}})); err != nil {
			return fail(err)
		}
		groups = append(groups, g)
	}
	resp, err := b.send(ctx)
	if err != nil {
		return fail(fmt.Errorf("listing %d appIds in a batch: %w", len(appIDs), classify(err, needsRead)))
	}

	out := make([]graph.Read, 0, len(appIDs))
	for _, g := range groups {
		out = append(out, listedGroup(ctx, svc, resp, g)...)
	}
	return out
}

// listGroup is up to graph.MaxInList appIds, listed by two requests of a batch.
type listGroup struct {
	appIDs  []string
	app, sp string // the ids of its two requests in the batch
}

// listedGroup reads what the batch answered for g, following the lists' further pages.
func listedGroup(ctx context.Context, svc *msgraphsdk.GraphServiceClient, resp msgraphcore.BatchResponse, g listGroup) []graph.Read {

	found := map[string]*graph.Snapshot{}
	add := func(src graph.Source, o scanned) {
		obj := objectOf(src, deref(o.GetAppId()), o)
		if found[obj.AppID] == nil {
			found[obj.AppID] = &graph.Snapshot{AppID: obj.AppID}
		}
		found[obj.AppID].Add(obj)
	}
	apps := svc.Applications()
	err := listed(ctx, resp, g.app, "applications", needsRead, models.CreateApplicationCollectionResponseFromDiscriminatorValue,
		func(next string) (models.ApplicationCollectionResponseable, error) {
			return apps.WithUrl(next).Get(ctx, nil)
		},
		func(o models.Applicationable) { add(graph.Application, o) })
	if err == nil {
		sps := svc.ServicePrincipals()
		err = listed(ctx, resp, g.sp, "service principals", needsRead, models.CreateServicePrincipalCollectionResponseFromDiscriminatorValue,
			func(next string) (models.ServicePrincipalCollectionResponseable, error) {
				return sps.WithUrl(next).Get(ctx, nil)
			},
			func(o models.ServicePrincipalable) { add(graph.ServicePrincipal, o) })
	}
	out := make([]graph.Read, 0, len(g.appIDs))
	for _, id := range g.appIDs {
		switch snap := found[strings.ToLower(id)]; {
		case err != nil:
			out = append(out, graph.Read{Err: err})
		case snap == nil:
			out = append(out, graph.Read{Err: fmt.Errorf("appId %s: %w", id, graph.ErrNotListed)})
		default:
			out = append(out, graph.Read{Snapshot: *snap})
		}
	}
	return out
}

// inFilter selects the objects of appIDs, which are GUIDs.
func inFilter(appIDs []string) string {
	return "appId in ('" + strings.Join(appIDs, "','") + "')"
}

// listed reads the list answered as request id of a batch, then its further pages, if any, as
// requests of their own, handing each object to visit. A refused or failed list is the
// azerr.Error the same request sent alone would give.
func listed[P interface {
	page[T]
	serialization.Parsable
}, T any](ctx context.Context, resp msgraphcore.BatchResponse, id, what, needs string, ctor serialization.ParsableFactory, next func(string) (P, error), visit func(T)) error {
	if err := batchStatus(resp, id, needs); err != nil {
		return fmt.Errorf("listing %s: %w", what, err)
	}
	first, err := msgraphcore.GetBatchResponseById[P](resp, id, ctor)
	if err != nil {
		return fmt.Errorf("listing %s: %w", what, classify(err, needs))
	}
	return pages(ctx, what, needs, func() (P, error) { return first, nil }, next, visit)
}
