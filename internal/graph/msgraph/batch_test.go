package msgraph

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/graph/budget"
	"github.com/credwatch/credwatch/test/fakegraph"
)

const (
	appOnlyID = "c0000000-0000-4000-8000-00000000000c"
	missingID = "d0000000-0000-4000-8000-00000000000d"
)

// TestBatchReadsAsSingleReadsDo: each appId of a batch gets what ReadCredentials gives it, from
// one HTTP request.
func TestBatchReadsAsSingleReadsDo(t *testing.T) {
	fake, c, cred := setup(t)
	seed(fake, true, true)
	fake.PutApplication(tenant, fakegraph.Object{ID: "c0000000-0000-4000-8000-000000000001", AppID: appOnlyID, DisplayName: "app-only"})
	ids := []string{appID, appOnlyID, missingID}
	ctx := context.Background()

	fake.ResetRequests()
	reads := c.ReadCredentialsBatch(ctx, cred, ids)
	var http, sub int
	for _, r := range fake.Requests() {
		if r.Batched {
			sub++
		} else {
			http++
		}
	}
	if http != 1 || sub != 2*len(ids) {
		t.Errorf("%d HTTP requests carrying %d, want 1 carrying %d", http, sub, 2*len(ids))
	}
	if len(reads) != len(ids) {
		t.Fatalf("%d results for %d appIds", len(reads), len(ids))
	}
	for i, id := range ids {
		want, wantErr := c.ReadCredentials(ctx, cred, id)
		if !reflect.DeepEqual(reads[i].Snapshot, want) {
			t.Errorf("%s: batch read %+v, single read %+v", id, reads[i].Snapshot, want)
		}
		// The same words: Graph's error code survives the batch's decoding.
		if fmt.Sprint(reads[i].Err) != fmt.Sprint(wantErr) || azerr.KindOf(reads[i].Err) != azerr.KindOf(wantErr) {
			t.Errorf("%s: batch error %v, single error %v", id, reads[i].Err, wantErr)
		}
	}
}

// TestBatchThrottlingIsPerAppID: Graph refuses the last request of a batch that overruns the
// budget; only that appId fails, as throttled, with Graph's Retry-After.
func TestBatchThrottlingIsPerAppID(t *testing.T) {
	fake, c, cred := setup(t)
	seed(fake, true, true)
	fake.PutApplication(tenant, fakegraph.Object{ID: "c0000000-0000-4000-8000-000000000001", AppID: appOnlyID, DisplayName: "app-only"})
	fake.SetBudget(3, clocktesting.NewFakeClock(time.Now()))

	reads := c.ReadCredentialsBatch(context.Background(), cred, []string{appID, appOnlyID})
	if reads[0].Err != nil {
		t.Errorf("the first appId, within budget: %v", reads[0].Err)
	}
	if azerr.KindOf(reads[1].Err) != azerr.KindThrottled || azerr.RetryAfterOf(reads[1].Err) <= 0 {
		t.Errorf("the appId over budget: %v, want throttled with a Retry-After", reads[1].Err)
	}
}

func TestBatchRefusesMoreThanGraphTakes(t *testing.T) {
	fake, c, cred := setup(t)
	ids := make([]string, graph.MaxBatchAppIDs+1)
	for i := range ids {
		ids[i] = appID
	}
	fake.ResetRequests()
	for _, r := range c.ReadCredentialsBatch(context.Background(), cred, ids) {
		if r.Err == nil {
			t.Fatal("an oversized batch was read")
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("%d requests sent for an oversized batch", n)
	}
}

// TestBudgetedBatchesStayUnderGraphsLimit: batches as the SDK sends them (gzipped) are charged
// what Graph charges, so reads worth two budgets wait instead of being refused.
func TestBudgetedBatchesStayUnderGraphsLimit(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	const units = 10
	fake, c, cred := budgeted(t, budget.New(clk, units))
	fake.PutApplication(tenant, fakegraph.Object{ID: "c0000000-0000-4000-8000-000000000001", AppID: appOnlyID, DisplayName: "app-only"})
	fake.SetBudget(units, clk)
	began := clk.Now()
	stepping(t, clk, func() error {
		for range 5 { // four requests of one unit each
			for _, r := range c.ReadCredentialsBatch(context.Background(), cred, []string{appID, appOnlyID}) {
				if r.Err != nil {
					return r.Err
				}
			}
		}
		return nil
	})
	if got := fake.Throttled(); got != 0 {
		t.Errorf("Graph refused %d requests", got)
	}
	if waited := clk.Since(began); waited < 9*time.Second {
		t.Errorf("20 units on a budget of %d per 10 s took %v: batches were undercharged", units, waited)
	}
}

type staticToken struct{}

func (staticToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: "t", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// TestBatchAnswerWithoutBodyIsAnError: the SDK's decoder panics on a 2xx answer with no body;
// the read must fail instead.
func TestBatchAnswerWithoutBodyIsAnError(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				t.Error(err)
				return
			}
			body = zr
		}
		var in struct{ Requests []struct{ ID string } }
		if err := json.NewDecoder(body).Decode(&in); err != nil {
			t.Error(err)
		}
		var answers []map[string]any
		for _, req := range in.Requests {
			answers = append(answers, map[string]any{"id": req.ID, "status": 200, "headers": map[string]string{"Content-Type": "application/json"}})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"responses": answers})
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, srv.Client().Transport)
	if err != nil {
		t.Fatal(err)
	}
	reads := c.ReadCredentialsBatch(context.Background(), staticToken{}, []string{appID})
	if reads[0].Err == nil || !strings.Contains(reads[0].Err.Error(), "no body") {
		t.Errorf("got %v, want an error naming the missing body", reads[0].Err)
	}
}

// TestRefusedBatchKeepsGraphsCode: when Graph refuses the $batch itself, as with a revoked
// token, its code survives as it does for a request sent alone.
func TestRefusedBatchKeepsGraphsCode(t *testing.T) {
	fake, c, cred := setup(t)
	seed(fake, true, true)
	if _, err := c.ReadCredentials(context.Background(), cred, appID); err != nil {
		t.Fatal(err) // signs in: the token is cached, and revoked below
	}
	fake.RevokeTokens()
	reads := c.ReadCredentialsBatch(context.Background(), cred, []string{appID})
	var ae *azerr.Error
	if !errors.As(reads[0].Err, &ae) || ae.Kind != azerr.KindUnauthenticated || ae.Code != "InvalidAuthenticationToken" {
		t.Errorf("a refused batch: %v, want authentication failed with Graph's code InvalidAuthenticationToken", reads[0].Err)
	}
}
