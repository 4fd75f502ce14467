package aks

import (
	"context"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions"

	"github.com/credwatch/credwatch/internal/azerr"
)

// actionSubscriptions is what listing subscriptions needs. Every role assignment on a
// subscription, or on anything in it, grants it there, so the listing holds the subscriptions
// where the identity has some role.
const actionSubscriptions = "Microsoft.Resources/subscriptions/read"

// Subscription is a subscription an identity can see.
type Subscription struct {
	ID          string
	DisplayName string
	// State is Enabled, Warned, PastDue or Disabled; a disabled subscription is read-only, and its
	// clusters can still be read.
	State string
}

// ListSubscriptions lists the subscriptions of tenantID the identity sees, every page of them.
// Resource Manager lists those of every tenant the identity is a guest in too; they are left
// out, as are deleted subscriptions.
func (c *Client) ListSubscriptions(ctx context.Context, cred azcore.TokenCredential, tenantID string) ([]Subscription, error) {
	client, err := armsubscriptions.NewClient(azerr.Credential{TokenCredential: cred}, &c.options)
	if err != nil {
		return nil, err
	}
	var out []Subscription
	pager := client.NewListPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing subscriptions: %w", classify(err, actionSubscriptions))
		}
		for _, s := range page.Value {
			if s == nil || s.SubscriptionID == nil || s.TenantID == nil || !strings.EqualFold(*s.TenantID, tenantID) {
				continue
			}
			sub := Subscription{ID: strings.ToLower(*s.SubscriptionID)}
			if s.DisplayName != nil {
				sub.DisplayName = *s.DisplayName
			}
			if s.State != nil {
				sub.State = string(*s.State)
			}
			if sub.State == string(armsubscriptions.SubscriptionStateDeleted) {
				continue
			}
			out = append(out, sub)
		}
	}
	return out, nil
}
