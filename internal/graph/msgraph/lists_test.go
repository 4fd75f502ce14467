package msgraph

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/test/fakegraph"
)

// manyApps puts n applications in the tenant, each with its service principal, and returns their
// appIds in order.
func manyApps(fake *fakegraph.Server, n int) []string {
	var ids []string
	for i := range n {
		id := fmt.Sprintf("e0000000-0000-4000-8000-%012d", i)
		fake.PutApplication(tenant, fakegraph.Object{ID: fmt.Sprintf("e1000000-0000-4000-8000-%012d", i), AppID: id, DisplayName: fmt.Sprintf("app-%d", i),
			Passwords: []fakegraph.PasswordCredential{{KeyID: fmt.Sprintf("e2000000-0000-4000-8000-%012d", i), SecretText: "Abc~list-secret-text-00000000000000", Start: end1.AddDate(-1, 0, 0), End: end1}}})
		fake.PutServicePrincipal(tenant, fakegraph.Object{ID: fmt.Sprintf("e3000000-0000-4000-8000-%012d", i), AppID: id, DisplayName: fmt.Sprintf("app-%d", i)})
		ids = append(ids, id)
	}
	return ids
}

// TestListsReadWhatPointReadsDo: a batch of lists gives each appId what ReadCredentials gives it,
// in one HTTP request of two list requests per fifteen appIds; an appId no list holds is left to
// a point read to call missing.
func TestListsReadWhatPointReadsDo(t *testing.T) {
	fake, c, cred := setup(t)
	seed(fake, true, true)
	fake.PutApplication(tenant, fakegraph.Object{ID: "c0000000-0000-4000-8000-000000000001", AppID: appOnlyID, DisplayName: "app-only"})
	ids := append([]string{appID, appOnlyID, missingID}, manyApps(fake, 30)...)
	ctx := context.Background()

	fake.ResetRequests()
	reads := c.ReadCredentialLists(ctx, cred, ids)
	var http, sub int
	for _, r := range fake.Requests() {
		if r.Batched {
			sub++
			if !strings.Contains(r.RawQuery, "filter") {
				t.Errorf("a batched request without $filter: %s", r.RawQuery)
			}
		} else {
			http++
		}
	}
	if http != 1 || sub != 6 {
		t.Errorf("%d HTTP requests carrying %d, want 1 carrying 6 (two lists for each 15 of %d appIds)", http, sub, len(ids))
	}
	if len(reads) != len(ids) {
		t.Fatalf("%d results for %d appIds", len(reads), len(ids))
	}
	for i, id := range ids {
		want, wantErr := c.ReadCredentials(ctx, cred, id)
		if id == missingID {
			if !errors.Is(reads[i].Err, graph.ErrNotListed) || wantErr == nil {
				t.Errorf("%s: listed %v, want ErrNotListed (a point read says %v)", id, reads[i].Err, wantErr)
			}
			continue
		}
		if reads[i].Err != nil || !reflect.DeepEqual(reads[i].Snapshot, want) {
			t.Errorf("%s: listed %+v (%v), point read %+v", id, reads[i].Snapshot, reads[i].Err, want)
		}
	}
}

// TestListsFollowEveryPage: a list answered in pages shorter than asked is read to its end.
func TestListsFollowEveryPage(t *testing.T) {
	fake, c, cred := setup(t)
	ids := manyApps(fake, 15)
	fake.SetPageLimit(4)
	fake.ResetRequests()
	for i, r := range c.ReadCredentialLists(context.Background(), cred, ids) {
		if r.Err != nil || r.Snapshot.AppID != ids[i] || r.Snapshot.ApplicationObjectID == "" || r.Snapshot.ServicePrincipalObjectID == "" {
			t.Errorf("%s: %+v, %v", ids[i], r.Snapshot, r.Err)
		}
	}
	// Four pages of each list: the first in the batch, three more each.
	if got := len(fake.Requests()); got != 1+2+3+3 {
		t.Errorf("%d requests, want 9 (a batch of two lists, and three more pages of each)", got)
	}
}

// TestListThrottlingIsPerList: Graph throttles the lists of a batch one by one; only the appIds of
// a throttled list fail, as throttled, with its Retry-After.
func TestListThrottlingIsPerList(t *testing.T) {
	fake, c, cred := setup(t)
	ids := manyApps(fake, 20)
	// The first group's two lists, one unit each, and no more.
	fake.SetBudget(2, clocktesting.NewFakeClock(time.Now()))
	reads := c.ReadCredentialLists(context.Background(), cred, ids)
	for i, r := range reads {
		if i < graph.MaxInList {
			if r.Err != nil {
				t.Errorf("%s, in the first list: %v", ids[i], r.Err)
			}
			continue
		}
		if azerr.KindOf(r.Err) != azerr.KindThrottled || azerr.RetryAfterOf(r.Err) <= 0 {
			t.Errorf("%s, in the throttled list: %v, want throttled with a Retry-After", ids[i], r.Err)
		}
	}
}

// TestListsRefuseWhatIsNotAGUID: nothing but a GUID reaches a $filter.
func TestListsRefuseWhatIsNotAGUID(t *testing.T) {
	fake, c, cred := setup(t)
	fake.ResetRequests()
	for _, r := range c.ReadCredentialLists(context.Background(), cred, []string{appID, "x') or startswith(displayName,'"}) {
		if r.Err == nil || !strings.Contains(r.Err.Error(), "not a GUID") {
			t.Errorf("got %v, want a refusal of the appId", r.Err)
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}
