package msgraph

import (
	"context"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/google/uuid"
	"github.com/microsoftgraph/msgraph-sdk-go/applications"
	"github.com/microsoftgraph/msgraph-sdk-go/models"

	"github.com/credwatch/credwatch/internal/graph"
)

// AddPassword adds a client secret named displayName, ending at end, to the application with
// object ID applicationID, and returns it with its text: Graph shows the text this once.
func (c *Client) AddPassword(ctx context.Context, cred azcore.TokenCredential, applicationID, displayName string, end time.Time) (graph.NewSecret, error) {
	ctx = scoped(ctx, cred)
	svc, err := c.service(cred)
	if err != nil {
		return graph.NewSecret{}, err
	}
	pc := models.NewPasswordCredential()
	pc.SetDisplayName(&displayName)
	pc.SetEndDateTime(&end)
	body := applications.NewItemAddPasswordPostRequestBody()
	body.SetPasswordCredential(pc)
	got, err := svc.Applications().ByApplicationId(applicationID).AddPassword().Post(ctx, body, nil)
	if err != nil {
		return graph.NewSecret{}, fmt.Errorf("adding a secret to application %s: %w", applicationID, classify(err, needsWrite))
	}
	secret := graph.NewSecret{KeyID: uuidString(got.GetKeyId()), Text: deref(got.GetSecretText()), Hint: deref(got.GetHint()),
		Start: derefTime(got.GetStartDateTime()), End: derefTime(got.GetEndDateTime())}
	if secret.KeyID == "" || secret.Text == "" {
		return graph.NewSecret{}, fmt.Errorf("adding a secret to application %s: Graph's answer holds no keyId or secretText", applicationID)
	}
	return secret, nil
}

// RemovePassword removes the client secret keyID from the application with object ID applicationID.
func (c *Client) RemovePassword(ctx context.Context, cred azcore.TokenCredential, applicationID, keyID string) error {
	ctx = scoped(ctx, cred)
	svc, err := c.service(cred)
	if err != nil {
		return err
	}
	id, err := uuid.Parse(keyID)
	if err != nil {
		return fmt.Errorf("removing secret %q: not a keyId: %w", keyID, err)
	}
	body := applications.NewItemRemovePasswordPostRequestBody()
	body.SetKeyId(&id)
	if err := svc.Applications().ByApplicationId(applicationID).RemovePassword().Post(ctx, body, nil); err != nil {
		return fmt.Errorf("removing secret %s from application %s: %w", keyID, applicationID, classify(err, needsWrite))
	}
	return nil
}
