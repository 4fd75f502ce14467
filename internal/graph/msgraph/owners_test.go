package msgraph

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/test/fakegraph"
)

// TestReadOwnersBatch: the owners of many applications come in one HTTP request, each
// application's on its own: a missing one fails alone, and users that the identity may not read
// fail theirs as a refusal naming the permission.
func TestReadOwnersBatch(t *testing.T) {
	fake, c, cred := setup(t)
	alice := fakegraph.Owner{ID: "a1000000-0000-4000-8000-000000000001", DisplayName: "Alice", Mail: "alice@contoso.example", UserPrincipalName: "alice@contoso.example"}
	bob := fakegraph.Owner{ID: "b1000000-0000-4000-8000-000000000001", DisplayName: "Bob", UserPrincipalName: "bob@contoso.example"}
	robot := fakegraph.Owner{ID: "e1000000-0000-4000-8000-000000000001", DisplayName: "deployer", ServicePrincipal: true}
	apps := []fakegraph.Object{
		{ID: "10000000-0000-4000-8000-000000000001", DisplayName: "two owners", Owners: []fakegraph.Owner{alice, bob}},
		{ID: "10000000-0000-4000-8000-000000000002", DisplayName: "no owner"},
		{ID: "10000000-0000-4000-8000-000000000003", DisplayName: "owned by a service principal", Owners: []fakegraph.Owner{robot}},
	}
	ids := []string{}
	for _, a := range apps {
		fake.PutApplication(tenant, a)
		ids = append(ids, a.ID)
	}
	ids = append(ids, "10000000-0000-4000-8000-0000000000ff") // gone
	fake.ResetRequests()
	reads := c.ReadOwnersBatch(context.Background(), cred, ids)
	if n := len(fake.Requests()); n != 1+len(ids) {
		t.Errorf("%d requests logged, want one $batch carrying %d", n, len(ids))
	}
	want := [][]graph.Owner{
		{{ID: alice.ID, DisplayName: "Alice", Mail: alice.Mail, UserPrincipalName: alice.UserPrincipalName}, {ID: bob.ID, DisplayName: "Bob", UserPrincipalName: bob.UserPrincipalName}},
		nil,
		{{ID: robot.ID, DisplayName: "deployer", ServicePrincipal: true}},
	}
	for i, w := range want {
		if reads[i].Err != nil || !reflect.DeepEqual(reads[i].Owners, w) {
			t.Errorf("%s: %+v, %v; want %+v", apps[i].DisplayName, reads[i].Owners, reads[i].Err, w)
		}
	}
	if err := reads[3].Err; azerr.KindOf(err) != azerr.KindNotFound {
		t.Errorf("a gone application: %v, want not found", err)
	}

	fake.HideUsers(client, true)
	reads = c.ReadOwnersBatch(context.Background(), cred, ids[:3])
	if err := reads[0].Err; azerr.KindOf(err) != azerr.KindForbidden || !strings.Contains(err.Error(), "User.ReadBasic.All") {
		t.Errorf("users hidden: %v; want a refusal naming User.ReadBasic.All", err)
	}
	if reads[1].Err != nil || reads[2].Err != nil {
		t.Errorf("applications without users among their owners: %v, %v; want them read", reads[1].Err, reads[2].Err)
	}

	if reads := c.ReadOwnersBatch(context.Background(), cred, []string{"not-a-guid"}); reads[0].Err == nil {
		t.Error("an object ID that is not a GUID was sent")
	}
}
