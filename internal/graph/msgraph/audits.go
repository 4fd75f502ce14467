package msgraph

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/microsoftgraph/msgraph-sdk-go/auditlogs"
	"github.com/microsoftgraph/msgraph-sdk-go/models"

	"github.com/credwatch/credwatch/internal/graph"
)

// needsAudit is what a refused read of the directory audit log needs.
const needsAudit = "AuditLog.Read.All to read the directory audit log"

// keyIdentifier finds the keyIds a credential change's modified properties name:
// KeyDescription holds "[KeyIdentifier=<keyId>,KeyType=Password,KeyUsage=Verify,DisplayName=…]".
var keyIdentifier = regexp.MustCompile(`KeyIdentifier=([0-9a-fA-F-]{36})`)

// ReadCredentialAudits reads the directory audit log's entries about the object with objectID
// (an application's or a service principal's) since since, and keeps those that change its
// credentials: an object's credentials change a few times a year, so the pages are few.
func (c *Client) ReadCredentialAudits(ctx context.Context, cred azcore.TokenCredential, objectID string, since time.Time) ([]graph.Audit, error) {
	if !graph.IsGUID(objectID) {
		return nil, fmt.Errorf("object ID %q is not a GUID", objectID)
	}
	ctx = scoped(ctx, cred)
	svc, err := c.service(cred)
	if err != nil {
		return nil, err
	}
	filter := fmt.Sprintf("targetResources/any(t:t/id eq '%s') and activityDateTime ge %s", strings.ToLower(objectID), since.UTC().Format(time.RFC3339))
	top := int32(100)
	audits := svc.AuditLogs().DirectoryAudits()
	var out []graph.Audit
	err = pages(ctx, "the directory audit log", needsAudit,
		func() (models.DirectoryAuditCollectionResponseable, error) {
			return audits.Get(ctx, &auditlogs.DirectoryAuditsRequestBuilderGetRequestConfiguration{
				QueryParameters: &auditlogs.DirectoryAuditsRequestBuilderGetQueryParameters{Filter: &filter, Top: &top}})
		},
		func(next string) (models.DirectoryAuditCollectionResponseable, error) {
			return audits.WithUrl(next).Get(ctx, nil)
		},
		func(a models.DirectoryAuditable) {
			if au, ok := auditOf(a); ok {
				out = append(out, au)
			}
		})
	return out, err
}

// auditOf is a change to an object's credentials, ok false for any other entry: one whose
// modified properties hold the keys before and after it (KeyDescription), whatever the activity
// is named.
func auditOf(a models.DirectoryAuditable) (graph.Audit, bool) {
	au := graph.Audit{Activity: deref(a.GetActivityDisplayName()), Time: derefTime(a.GetActivityDateTime())}
	if by := a.GetInitiatedBy(); by != nil {
		if u := by.GetUser(); u != nil {
			au.User = deref(u.GetUserPrincipalName())
		}
		if app := by.GetApp(); app != nil {
			au.App = deref(app.GetDisplayName())
		}
	}
	keys := false
	for _, t := range a.GetTargetResources() {
		for _, p := range t.GetModifiedProperties() {
			if !strings.EqualFold(deref(p.GetDisplayName()), "KeyDescription") {
				continue
			}
			keys = true
			before := keyIDs(deref(p.GetOldValue()))
			for _, k := range keyIDs(deref(p.GetNewValue())) {
				if !slices.Contains(before, k) {
					au.KeyIDs = append(au.KeyIDs, k)
				}
			}
		}
	}
	return au, keys
}

// keyIDs are the keyIds a KeyDescription value names.
func keyIDs(value string) []string {
	var out []string
	for _, m := range keyIdentifier.FindAllStringSubmatch(value, -1) {
		out = append(out, strings.ToLower(m[1]))
	}
	return out
}
