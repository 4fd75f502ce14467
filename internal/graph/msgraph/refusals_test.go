package msgraph

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/test/fakegraph"
)

// TestRefusalsNameWhatIsMissing: Graph refusing an identity (403 Authorization_RequestDenied)
// fails each operation with Graph's code and the permission that operation needs, so that the
// condition and the event say what to grant. The permissions are written out here, not taken
// from the package's constants, so that naming the wrong one for an operation fails.
func TestRefusalsNameWhatIsMissing(t *testing.T) {
	const (
		read   = "Application.Read.All (or Application.ReadWrite.OwnedBy as an owner of the application)"
		write  = "Application.ReadWrite.OwnedBy as an owner of the application, or Application.ReadWrite.All"
		owners = "Application.Read.All to list the application's owners"
		list   = "Application.Read.All to list the tenant's applications and service principals"
	)
	const appObjectID = "a0000000-0000-4000-8000-000000000001"
	tests := map[string]struct {
		do        func(context.Context, *Client, azcore.TokenCredential) []error
		wantNeeds string
	}{
		"read": {
			do: func(ctx context.Context, c *Client, cred azcore.TokenCredential) []error {
				_, err := c.ReadCredentials(ctx, cred, appID)
				return []error{err}
			},
			wantNeeds: read,
		},
		"batched read": {
			do: func(ctx context.Context, c *Client, cred azcore.TokenCredential) []error {
				var errs []error
				for _, r := range c.ReadCredentialsBatch(ctx, cred, []string{appID, appOnlyID}) {
					errs = append(errs, r.Err)
				}
				return errs
			},
			wantNeeds: read,
		},
		"owners": {
			do: func(ctx context.Context, c *Client, cred azcore.TokenCredential) []error {
				_, err := c.ReadOwnerEmails(ctx, cred, appObjectID)
				return []error{err}
			},
			wantNeeds: owners,
		},
		"addPassword": {
			do: func(ctx context.Context, c *Client, cred azcore.TokenCredential) []error {
				_, err := c.AddPassword(ctx, cred, appObjectID, "credwatch-x", time.Now().Add(24*time.Hour))
				return []error{err}
			},
			wantNeeds: write,
		},
		"removePassword": {
			do: func(ctx context.Context, c *Client, cred azcore.TokenCredential) []error {
				return []error{c.RemovePassword(ctx, cred, appObjectID, "a1111111-1111-4111-8111-111111111111")}
			},
			wantNeeds: write,
		},
		"tenant scan": {
			do: func(ctx context.Context, c *Client, cred azcore.TokenCredential) []error {
				return []error{c.ScanTenant(ctx, cred, "", func(graph.Object) {})}
			},
			wantNeeds: list,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake, c, cred := setup(t)
			seed(fake, true, true)
			fake.PutApplication(tenant, fakegraph.Object{ID: "c0000000-0000-4000-8000-000000000001", AppID: appOnlyID, DisplayName: "app-only"})
			fake.Deny(client, true)
			for _, err := range tc.do(context.Background(), c, cred) {
				var ae *azerr.Error
				if !errors.As(err, &ae) || ae.Kind != azerr.KindForbidden || ae.Code != "Authorization_RequestDenied" {
					t.Fatalf("error %v, want access denied with Graph's code Authorization_RequestDenied", err)
				}
				want := "access denied (HTTP 403, Authorization_RequestDenied); the identity needs " + tc.wantNeeds
				if !strings.HasSuffix(err.Error(), want) {
					t.Errorf("error %q\ndoes not end %q", err, want)
				}
				for _, s := range append(fake.SecretTexts(), secret) {
					if strings.Contains(err.Error(), s) {
						t.Errorf("error %q holds a secret", err)
					}
				}
			}
		})
	}
}

// TestOwnersGraphWouldNotShowNameWhatIsMissing: to an identity that may not read users Graph
// lists the owners without their properties, refusing nothing; reading no address from them
// must not pass for an application without owners to mail.
func TestOwnersGraphWouldNotShowNameWhatIsMissing(t *testing.T) {
	fake, c, cred := setup(t)
	seed(fake, true, true)
	app, _ := fake.Application(tenant, appID)
	app.Owners = []fakegraph.Owner{{ID: "u1", DisplayName: "Ada", Mail: "ada@example.com", UserPrincipalName: "ada@contoso.onmicrosoft.com"},
		{ID: "s1", DisplayName: "deploy-bot", ServicePrincipal: true}}
	fake.PutApplication(tenant, app)
	fake.HideUsers(client, true)

	got, err := c.ReadOwnerEmails(context.Background(), cred, app.ID)
	want := "access denied: 1 of the users among them listed without their properties; the identity needs User.ReadBasic.All (or User.Read.All) to read the owners' addresses"
	if azerr.KindOf(err) != azerr.KindForbidden || !strings.HasSuffix(fmt.Sprint(err), want) || got != nil {
		t.Errorf("ReadOwnerEmails = %v, %v; want no owners and an error ending %q", got, err, want)
	}
	fake.HideUsers(client, false)
	if got, err := c.ReadOwnerEmails(context.Background(), cred, app.ID); err != nil || len(got) != 1 {
		t.Errorf("ReadOwnerEmails with users readable = %v, %v; want Ada's address", got, err)
	}
}

// TestOnlyRefusalsNameAPermission: a missing object or a throttled read names no permission.
func TestOnlyRefusalsNameAPermission(t *testing.T) {
	fake, c, cred := setup(t)
	_, err := c.ReadCredentials(context.Background(), cred, missingID)
	if azerr.KindOf(err) != azerr.KindNotFound || strings.Contains(err.Error(), "needs") {
		t.Errorf("a missing appId: %v, want not found naming no permission", err)
	}
	seed(fake, true, true)
	fake.Throttle(1, time.Second)
	reads := c.ReadCredentialsBatch(context.Background(), cred, []string{appID})
	if azerr.KindOf(reads[0].Err) != azerr.KindThrottled || strings.Contains(reads[0].Err.Error(), "needs") {
		t.Errorf("a throttled batch: %v, want throttled naming no permission", reads[0].Err)
	}
}
