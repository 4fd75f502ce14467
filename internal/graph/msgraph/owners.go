package msgraph

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	msgraphcore "github.com/microsoftgraph/msgraph-sdk-go-core"
	"github.com/microsoftgraph/msgraph-sdk-go/applications"
	"github.com/microsoftgraph/msgraph-sdk-go/models"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
)

// ReadOwnersBatch reads the owners of up to graph.MaxBatchOwners applications, by their object
// IDs, in one $batch, following further pages of any as requests of their own. Each result, in
// the order of applicationIDs, is what reading that application's owners alone would give: a
// request refused, throttled or failed fails its application only. Users listed without their
// properties (the identity may not read users) fail their application as a refusal naming the
// permission: they would otherwise look like users without a mailbox.
func (c *Client) ReadOwnersBatch(ctx context.Context, cred azcore.TokenCredential, applicationIDs []string) []graph.OwnersRead {
	fail := func(err error) []graph.OwnersRead {
		out := make([]graph.OwnersRead, len(applicationIDs))
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	if len(applicationIDs) > graph.MaxBatchOwners {
		return fail(fmt.Errorf("%d applications' owners in one batch; Graph takes %d", len(applicationIDs), graph.MaxBatchOwners))
	}
	for _, id := range applicationIDs {
		if !graph.IsGUID(id) {
			return fail(fmt.Errorf("application object ID %q is not a GUID", id))
		}
	}
	ctx = scoped(ctx, cred)
	svc, err := c.service(cred)
	if err != nil {
		return fail(err)
	}
	b := newBatch(svc)
	steps := make([]string, len(applicationIDs))
	for i, id := range applicationIDs {
		if steps[i], err = b.add(svc.Applications().ByApplicationId(id).Owners().ToGetRequestInformation(ctx, nil)); err != nil {
			return fail(err)
		}
	}
	resp, err := b.send(ctx)
	if err != nil {
		return fail(fmt.Errorf("reading the owners of %d applications in a batch: %w", len(applicationIDs), classify(err, needsOwners)))
	}
	out := make([]graph.OwnersRead, len(applicationIDs))
	for i, id := range applicationIDs {
		out[i] = ownersOf(ctx, svc.Applications().ByApplicationId(id).Owners(), resp, steps[i], id)
	}
	return out
}

// ownersOf reads one application's owners from the batch's answer and any further pages.
func ownersOf(ctx context.Context, owners *applications.ItemOwnersRequestBuilder, resp msgraphcore.BatchResponse, step, applicationID string) graph.OwnersRead {
	var out []graph.Owner
	hidden := 0
	what := "the owners of application " + applicationID
	err := listed(ctx, resp, step, what, needsOwners, models.CreateDirectoryObjectCollectionResponseFromDiscriminatorValue,
		func(next string) (models.DirectoryObjectCollectionResponseable, error) {
			return owners.WithUrl(next).Get(ctx, nil)
		},
		func(o models.DirectoryObjectable) {
			switch v := o.(type) {
			case models.Userable:
				u := graph.Owner{ID: deref(v.GetId()), DisplayName: deref(v.GetDisplayName()), Mail: deref(v.GetMail()), UserPrincipalName: deref(v.GetUserPrincipalName())}
				if u.Mail == "" && u.UserPrincipalName == "" {
					hidden++ // every user has a user principal name: this one was listed without its properties
				}
				out = append(out, u)
			case models.ServicePrincipalable:
				out = append(out, graph.Owner{ID: deref(v.GetId()), DisplayName: deref(v.GetDisplayName()), ServicePrincipal: true})
			}
		})
	if err != nil {
		return graph.OwnersRead{Err: err}
	}
	if hidden > 0 {
		ge := &azerr.Error{Kind: azerr.KindForbidden, Err: fmt.Errorf("%d of the users among them listed without their properties", hidden)}
		return graph.OwnersRead{Err: fmt.Errorf("reading %s: %w", what, ge.Needing(needsOwnerAddresses))}
	}
	return graph.OwnersRead{Owners: out}
}
