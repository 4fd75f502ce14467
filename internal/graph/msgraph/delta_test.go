package msgraph

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/test/fakegraph"
)

func TestReadDelta(t *testing.T) {
	fake, c, cred := setup(t)
	seed(fake, true, true)
	for i := range 120 {
		fake.PutApplication(tenant, fakegraph.Object{AppID: fmt.Sprintf("c%07d-0000-4000-8000-000000000000", i), DisplayName: "filler"})
	}
	ctx := context.Background()
	collect := func(src graph.Source, link string, start graph.DeltaStart) ([]graph.Change, string) {
		t.Helper()
		var got []graph.Change
		next, err := c.ReadDelta(ctx, cred, src, link, start, func(ch graph.Change) { got = append(got, ch) })
		if err != nil {
			t.Fatal(err)
		}
		return got, next
	}

	all, appLink := collect(graph.Application, "", graph.DeltaAll)
	if len(all) != 121 || !all[0].HasPasswords || !all[0].HasAppID || all[0].AppID != appID || len(all[0].Passwords) != 1 || len(all[0].Certificates) != 1 {
		t.Fatalf("first round of applications: %d, first %+v", len(all), all[0])
	}
	none, spLink := collect(graph.ServicePrincipal, "", graph.DeltaLatest)
	if len(none) != 0 || !strings.Contains(spLink, "/v1.0/servicePrincipals/delta?") {
		t.Fatalf("from latest: %v, link %s", none, spLink)
	}

	// An out-of-band secret on the application, and every secret gone from the service principal.
	app, _ := fake.Application(tenant, appID)
	app.Passwords = append(app.Passwords, fakegraph.PasswordCredential{DisplayName: "added", SecretText: "Abc~added-000000000000000000000000", Start: end1.AddDate(-1, 0, 0), End: end1})
	app.Tags = []string{"credwatch-no-digest"}
	fake.PutApplication(tenant, app)
	sp, _ := fake.ServicePrincipal(tenant, appID)
	sp.Passwords = nil
	fake.PutServicePrincipal(tenant, sp)
	fake.DeleteApplication(tenant, "c0000001-0000-4000-8000-000000000000")

	apps, _ := collect(graph.Application, appLink, "")
	if len(apps) != 2 {
		t.Fatalf("changed applications: %+v", apps)
	}
	if ch := apps[0]; ch.HasAppID || ch.HasCertificates || !ch.HasPasswords || len(ch.Passwords) != 2 || ch.Passwords[1].DisplayName != "added" || ch.Passwords[1].Source != graph.Application ||
		!ch.HasTags || len(ch.Tags) != 1 || ch.Tags[0] != "credwatch-no-digest" {
		t.Errorf("an updated application: %+v", ch)
	}
	if !apps[1].Removed || apps[1].ObjectID == "" {
		t.Errorf("a removed application: %+v", apps[1])
	}
	sps, _ := collect(graph.ServicePrincipal, spLink, "")
	if len(sps) != 1 || !sps[0].HasPasswords || len(sps[0].Passwords) != 0 || sps[0].ObjectID != "b0000000-0000-4000-8000-000000000002" {
		t.Errorf("a service principal whose secrets were all removed: %+v", sps)
	}

	fake.ResetDeltaState(tenant)
	if _, err := c.ReadDelta(ctx, cred, graph.Application, appLink, "", func(graph.Change) {}); !errors.Is(err, graph.ErrResync) {
		t.Errorf("a link Graph lost: %v", err)
	}
}

func TestReadDeltaRefusesForeignLinks(t *testing.T) {
	fake, c, cred := setup(t)
	for _, link := range []string{
		"https://attacker.example/v1.0/applications/delta?$deltatoken=x",
		fake.URL() + "/v1.0/servicePrincipals/delta?$deltatoken=x", // the other collection
		fake.URL() + "/v1.0/applications/x/addPassword",
		strings.Replace(fake.URL(), "https://", "https://user@", 1) + "/v1.0/applications/delta",
		strings.Replace(fake.URL(), "https://", "http://", 1) + "/v1.0/applications/delta",
	} {
		_, err := c.ReadDelta(context.Background(), cred, graph.Application, link, "", func(graph.Change) {})
		if err == nil || !strings.Contains(err.Error(), "refused") || strings.Contains(err.Error(), "deltatoken") {
			t.Errorf("%s: %v", link, err)
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("a refused link sent %d requests", n)
	}
}

func TestReadCredentialAudits(t *testing.T) {
	fake, c, cred := setup(t)
	seed(fake, true, true)
	fake.SetAuditActor("mallory@contoso.example", "198.51.100.23")
	sp, _ := fake.ServicePrincipal(tenant, appID)
	sp.Passwords = append(sp.Passwords, fakegraph.PasswordCredential{KeyID: "c9999999-9999-4999-8999-999999999999", SecretText: "x", Start: end1.AddDate(-1, 0, 0), End: end1})
	fake.PutServicePrincipal(tenant, sp)
	// A later change lists every key of the object after it, the first one's among them.
	fake.SetAuditActor("bob@contoso.example", "198.51.100.24")
	sp.Passwords = append(sp.Passwords, fakegraph.PasswordCredential{KeyID: "c8888888-8888-4888-8888-888888888888", SecretText: "y", Start: end1.AddDate(-1, 0, 0), End: end1})
	fake.PutServicePrincipal(tenant, sp)

	got, err := c.ReadCredentialAudits(context.Background(), cred, sp.ID, end1.AddDate(-10, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	var added []string
	for _, a := range got {
		if slices.Contains(a.KeyIDs, "c9999999-9999-4999-8999-999999999999") {
			added = append(added, a.User+" "+a.Activity)
		}
	}
	if len(added) != 1 || added[0] != "mallory@contoso.example Add service principal credentials" {
		t.Errorf("the changes that added the key: %q of %+v", added, got)
	}

	fake.DenyReports(client)
	_, err = c.ReadCredentialAudits(context.Background(), cred, sp.ID, time.Time{})
	if err == nil || !strings.Contains(err.Error(), "AuditLog.Read.All") {
		t.Errorf("refused: %v", err)
	}
}
