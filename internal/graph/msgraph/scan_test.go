package msgraph

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

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

	// The first object waits for the other list to be asked for: read one after the other, the
	// two lists would never meet here.
	waited := false
	objects, err := scanAll(c, cred, "", func() {
		if waited {
			return
		}
		waited = true
		for range 500 {
			for _, r := range fake.Requests() {
				if strings.HasSuffix(r.Path, "/servicePrincipals") {
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Error("the service principals were not asked for while the applications were read")
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(objects) != 2101+751 {
		t.Fatalf("%d objects, want %d: each application and service principal once", len(objects), 2101+751)
	}
	var lists int
	for _, r := range fake.Requests() {
		lists++
		q, _ := url.ParseQuery(r.RawQuery)
		want := "id,appId,displayName,passwordCredentials,keyCredentials"
		if strings.Contains(r.Path, "servicePrincipals") {
			want += ",preferredSingleSignOnMode,appOwnerOrganizationId" // tells a SAML service principal, and its application's tenant
		} else {
			want += ",tags" // may opt an application out of owner digests
		}
		if r.Status != 200 || q.Get("$top") != "999" || q.Get("$select") != want {
			t.Errorf("request %s?%s: status %d; want 999 objects a page, credential fields only", r.Path, r.RawQuery, r.Status)
		}
	}
	if lists != 3+1 {
		// 2,101 applications in three pages; 751 service principals in one.
		t.Errorf("%d requests, want 4", lists)
	}
	app1, sp1 := objects[string(graph.Application)+appID], objects[string(graph.ServicePrincipal)+appID]
	if app1.ObjectID == "" || sp1.ObjectID == "" || len(app1.Credentials)+len(sp1.Credentials) != 3 {
		t.Errorf("the appId with both objects: %+v and %+v; want both and their three credentials", app1, sp1)
	}
	if o := objects[string(graph.Application)+"c0000001-0000-4000-8000-000000000000"]; o.DisplayName != "app-1" || len(o.Credentials) != 1 || o.Credentials[0].Source != graph.Application {
		t.Errorf("an application: %+v; want its name and its secret", o)
	}
	third := objects[string(graph.ServicePrincipal)+"d0000049-0000-4000-8000-000000000000"]
	if len(third.Credentials) != 1 || third.Credentials[0].Type != graph.Certificate || third.Credentials[0].Source != graph.ServicePrincipal || third.AppOwnerTenantID != "" {
		t.Errorf("another tenant's application: %+v; want its service principal's certificate, and no tenant of its application", third)
	}
	if sp1.AppOwnerTenantID != strings.ToLower(tenant) {
		t.Errorf("the service principal of the tenant's application: its application's tenant %q, want %s", sp1.AppOwnerTenantID, tenant)
	}

	t.Run("filter", func(t *testing.T) {
		fake.ResetRequests()
		objects, err := scanAll(c, cred, "tags/any(t:t eq 'aks')", func() {})
		if err != nil {
			t.Fatal(err)
		}
		if len(objects) != 2 || objects[string(graph.Application)+appID].AppID != appID || objects[string(graph.ServicePrincipal)+appID].AppID != appID {
			t.Errorf("filtered scan = %+v; want only the tagged appId's two objects", objects)
		}
		for _, r := range fake.Requests() {
			if !strings.Contains(r.RawQuery, "filter=tags") {
				t.Errorf("request %s?%s lost the filter", r.Path, r.RawQuery)
			}
		}
	})
	t.Run("refused filter", func(t *testing.T) {
		_, err := scanAll(c, cred, "notes eq 'x'", func() {})
		var ae *azerr.Error
		if !errors.As(err, &ae) || ae.Status != 400 {
			t.Errorf("scan with a filter Graph refuses: %v; want an HTTP 400", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		fake.SetUnreachable(true)
		defer fake.SetUnreachable(false)
		if _, err := scanAll(c, cred, "", func() {}); azerr.KindOf(err) != azerr.KindUnavailable {
			t.Errorf("scan of an unreachable Graph: %v; want unavailable", err)
		}
	})
}

// scanAll scans the tenant, calling seen at each object, and returns the objects by source and
// appId; it fails on an object visited twice, or while another visit is under way.
func scanAll(c *Client, cred azcore.TokenCredential, filter string, seen func()) (map[string]graph.Object, error) {
	out := map[string]graph.Object{}
	var visiting atomic.Bool
	var dup error
	err := c.ScanTenant(context.Background(), cred, filter, func(o graph.Object) {
		if !visiting.CompareAndSwap(false, true) {
			dup = errors.New("two visits at once")
		}
		defer visiting.Store(false)
		key := string(o.Source) + o.AppID
		if _, ok := out[key]; ok {
			dup = fmt.Errorf("%s visited twice", key)
		}
		out[key] = o
		seen()
	})
	return out, errors.Join(err, dup)
}
