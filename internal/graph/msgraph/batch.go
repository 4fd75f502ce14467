package msgraph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	abstractions "github.com/microsoft/kiota-abstractions-go"
	"github.com/microsoft/kiota-abstractions-go/serialization"
	msgraphsdk "github.com/microsoftgraph/msgraph-sdk-go"
	msgraphcore "github.com/microsoftgraph/msgraph-sdk-go-core"
	"github.com/microsoftgraph/msgraph-sdk-go/models"
	"github.com/microsoftgraph/msgraph-sdk-go/models/odataerrors"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
)

// batchErrors registers, once for the process, how the SDK decodes a failed $batch: it keeps the
// mappings in a global registry.
var batchErrors sync.Once

// ReadCredentialsBatch reads the credentials of up to graph.MaxBatchAppIDs appIds in one $batch. Each
// result, in the order of appIDs, is what ReadCredentials would have returned for it: Graph
// answers, throttles and fails each request of a batch on its own.
func (c *Client) ReadCredentialsBatch(ctx context.Context, cred azcore.TokenCredential, appIDs []string) []graph.Read {
	fail := func(err error) []graph.Read { return graph.FailedReads(len(appIDs), err) }
	if len(appIDs) > graph.MaxBatchAppIDs {
		return fail(fmt.Errorf("%d appIds in one batch; Graph takes %d", len(appIDs), graph.MaxBatchAppIDs))
	}
	ctx = scoped(ctx, cred)
	svc, err := c.service(cred)
	if err != nil {
		return fail(err)
	}
	b := newBatch(svc)
	type step struct{ app, sp string }
	steps := make([]step, len(appIDs))
	for i, appID := range appIDs {
		if steps[i].app, err = b.add(svc.ApplicationsWithAppId(&appID).ToGetRequestInformation(ctx, applicationQuery())); err != nil {
			return fail(err)
		}
		if steps[i].sp, err = b.add(svc.ServicePrincipalsWithAppId(&appID).ToGetRequestInformation(ctx, servicePrincipalQuery())); err != nil {
			return fail(err)
		}
	}
	resp, err := b.send(ctx)
	if err != nil {
		return fail(fmt.Errorf("reading %d appIds in a batch: %w", len(appIDs), classify(err, needsRead)))
	}
	out := make([]graph.Read, len(appIDs))
	for i, appID := range appIDs {
		app, appErr := batchItem[models.Applicationable](resp, steps[i].app, "application", appID, models.CreateApplicationFromDiscriminatorValue)
		sp, spErr := batchItem[models.ServicePrincipalable](resp, steps[i].sp, "service principal", appID, models.CreateServicePrincipalFromDiscriminatorValue)
		out[i].Snapshot, out[i].Err = snapshot(appID, app, appErr, sp, spErr)
	}
	return out
}

// batch is one $batch being built: the one way requests are added to a batch and it is sent.
type batch struct {
	svc *msgraphsdk.GraphServiceClient
	req msgraphcore.BatchRequest
}

func newBatch(svc *msgraphsdk.GraphServiceClient) *batch {
	return &batch{svc: svc, req: msgraphcore.NewBatchRequest(svc.GetAdapter())}
}

// add adds the request a request builder made (or failed to make), and returns the id of its
// step in the batch's answer.
func (b *batch) add(info *abstractions.RequestInformation, err error) (string, error) {
	if err != nil {
		return "", err
	}
	item, err := b.req.AddBatchRequestStep(*info)
	if err != nil {
		return "", err
	}
	return *item.GetId(), nil
}

// send sends the batch, with the SDK told how to decode a batch refused whole.
func (b *batch) send(ctx context.Context) (msgraphcore.BatchResponse, error) {
	registerBatchErrors()
	return b.req.Send(ctx, b.svc.GetAdapter())
}

// registerBatchErrors registers, once for the process, how the SDK decodes a failed $batch:
// without a mapping it turns a refused batch into a bare ApiError, without Graph's code.
func registerBatchErrors() {
	batchErrors.Do(func() {
		_ = msgraphcore.RegisterError(msgraphcore.BatchRequestErrorRegistryKey,
			abstractions.ErrorMappings{"XXX": odataerrors.CreateODataErrorFromDiscriminatorValue})
	})
}

// batchStatus is nil for a request of a batch that succeeded, or the azerr.Error it would have
// failed with sent alone: Graph answers, throttles and fails each request of a batch on its own.
func batchStatus(resp msgraphcore.BatchResponse, id, needs string) error {
	item := resp.GetResponseById(id)
	if item == nil || item.GetStatus() == nil {
		return errors.New("the batch has no answer for it")
	}
	status := int(*item.GetStatus())
	if status >= 400 {
		ge := &azerr.Error{Kind: azerr.KindOfStatus(status), Status: status, Code: batchErrorCode(item.GetBody())}
		for k, v := range item.GetHeaders() {
			if strings.EqualFold(k, "Retry-After") {
				ge.RetryAfter = azerr.RetryAfterSeconds(v)
			}
		}
		ge.Err = fmt.Errorf("HTTP %d %s", status, ge.Code)
		return ge.Needing(needs)
	}
	if item.GetBody() == nil {
		// The SDK's decoder dereferences a missing body.
		return fmt.Errorf("the batch answered %d with no body", status)
	}
	return nil
}

// batchItem decodes one answer of a batch, or turns its failure into the azerr.Error the same
// request sent alone would have given; a missing object is (nil, a KindNotFound error).
func batchItem[T interface {
	credentialHolder
	serialization.Parsable
}](resp msgraphcore.BatchResponse, id, what, appID string, ctor serialization.ParsableFactory) (credentialHolder, error) {
	if err := batchStatus(resp, id, needsRead); err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", what, appID, err)
	}
	obj, err := msgraphcore.GetBatchResponseById[T](resp, id, ctor)
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", what, appID, classify(err, needsRead))
	}
	return obj, nil
}

// batchErrorCode is Graph's error code in a failed answer's body: {"error":{"code":...}}. The SDK
// hands the body over as a generic map whose strings are *string, Kiota's JSON nodes holding
// pointers (msgraph-sdk-go-core's deserializeValue passes them through), so the body is encoded
// again and read as Graph wrote it.
func batchErrorCode(body msgraphcore.RequestBody) string {
	raw, err := json.Marshal(body)
	if err != nil {
		return ""
	}
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return ""
	}
	return e.Error.Code
}
