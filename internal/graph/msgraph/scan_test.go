package msgraph

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/test/fakegraph"
)

func TestScanTenant(t *testing.T) {
	fake, c, cred := setup(t)
	seed(fake, true, true) // the appId with both objects, tagged below
	app, _ := fake.Application(tenant, appID)
	app.Tags = []string{"aks"}
	fake.PutApplication(tenant, app)
	sp, _ := fake.ServicePrincipal(tenant, appID)
	sp.Tags = []string{"aks"}
	fake.PutServicePrincipal(tenant, sp)
	// 2,100 applications, so that each list takes three pages; every third has a service
	// principal too, and 50 service principals belong to applications of other tenants.
	for i := range 2100 {
		id := fmt.Sprintf("c%07d-0000-4000-8000-000000000000", i)
		o := fakegraph.Object{AppID: id, DisplayName: fmt.Sprintf("app-%d", i),
			Passwords: []fakegraph.PasswordCredential{{SecretText: "abc~secret", Start: end1.AddDate(-1, 0, 0), End: end1}}}
		fake.PutApplication(tenant, o)
		if i%3 == 0 {
			fake.PutServicePrincipal(tenant, fakegraph.Object{AppID: id, DisplayName: o.DisplayName})
		}
	}
	for i := range 50 {
		fake.PutServicePrincipal(tenant, fakegraph.Object{AppID: fmt.Sprintf("d%07d-0000-4000-8000-000000000000", i), DisplayName: "third-party",
			Keys: []fakegraph.KeyCredential{{Key: []byte("certificate bytes"), Start: end2.AddDate(-1, 0, 0), End: end2}}})
	}
	fake.ResetRequests()

	snaps, err := c.ScanTenant(context.Background(), cred, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 1+2100+50 {
		t.Fatalf("%d snapshots, want one per appId: %d", len(snaps), 1+2100+50)
	}
	var lists int
	for _, r := range fake.Requests() {
		lists++
		q, _ := url.ParseQuery(r.RawQuery)
		if r.Status != 200 || q.Get("$top") != "999" || q.Get("$select") != "id,appId,displayName,passwordCredentials,keyCredentials" {
			t.Errorf("request %s?%s: status %d; want 999 objects a page, credential fields only", r.Path, r.RawQuery, r.Status)
		}
	}
	if lists != 3+1 {
		// 2,101 applications in three pages; 751 service principals in one.
		t.Errorf("%d requests, want 4", lists)
	}
	byApp := map[string]graph.Snapshot{}
	for i, s := range snaps {
		byApp[s.AppID] = s
		if i > 0 && snaps[i-1].AppID >= s.AppID {
			t.Fatalf("snapshots not ordered by appId: %s before %s", snaps[i-1].AppID, s.AppID)
		}
	}
	both := byApp[appID]
	if both.ApplicationObjectID == "" || both.ServicePrincipalObjectID == "" || len(both.Credentials) != 3 {
		t.Errorf("the appId with both objects: %+v; want both objects and their three credentials", both)
	}
	if s := byApp["c0000003-0000-4000-8000-000000000000"]; s.ServicePrincipalObjectID == "" || s.ApplicationObjectID == "" || len(s.Credentials) != 1 {
		t.Errorf("application with a credential-less service principal: %+v", s)
	}
	if s := byApp["c0000001-0000-4000-8000-000000000000"]; s.ServicePrincipalObjectID != "" || s.DisplayName != "app-1" {
		t.Errorf("application without a service principal: %+v", s)
	}
	third := byApp["d0000049-0000-4000-8000-000000000000"]
	if third.ApplicationObjectID != "" || len(third.Credentials) != 1 || third.Credentials[0].Type != graph.Certificate || third.Credentials[0].Source != graph.ServicePrincipal {
		t.Errorf("another tenant's application: %+v; want its service principal's certificate only", third)
	}

	t.Run("filter", func(t *testing.T) {
		fake.ResetRequests()
		snaps, err := c.ScanTenant(context.Background(), cred, "tags/any(t:t eq 'aks')")
		if err != nil {
			t.Fatal(err)
		}
		if len(snaps) != 1 || snaps[0].AppID != appID || len(snaps[0].Credentials) != 3 {
			t.Errorf("filtered scan = %+v; want only the tagged appId", snaps)
		}
		for _, r := range fake.Requests() {
			if !strings.Contains(r.RawQuery, "filter=tags") {
				t.Errorf("request %s?%s lost the filter", r.Path, r.RawQuery)
			}
		}
	})
	t.Run("refused filter", func(t *testing.T) {
		_, err := c.ScanTenant(context.Background(), cred, "notes eq 'x'")
		var ae *azerr.Error
		if !errors.As(err, &ae) || ae.Status != 400 {
			t.Errorf("scan with a filter Graph refuses: %v; want an HTTP 400", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		fake.SetUnreachable(true)
		defer fake.SetUnreachable(false)
		if _, err := c.ScanTenant(context.Background(), cred, ""); azerr.KindOf(err) != azerr.KindUnavailable {
			t.Errorf("scan of an unreachable Graph: %v; want unavailable", err)
		}
	})
}
