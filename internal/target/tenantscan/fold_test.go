package tenantscan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/target"
)

func TestFold(t *testing.T) {
	soon := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	later := soon.AddDate(1, 0, 0)
	secret := func(keyID string, src graph.Source, end time.Time) graph.Credential {
		return graph.Credential{KeyID: keyID, Type: graph.Password, Source: src, Hint: "abc", End: end.Add(300 * time.Millisecond)}
	}
	// The service principal of "a" is listed before its application, and has its own name,
	// a copy that lags; "b" is another tenant's application, with a service principal only; "d"
	// and "e" are the tenant's own, whose applications the identity may not read.
	objects := []graph.Object{
		{Source: graph.ServicePrincipal, AppID: "a", ObjectID: "sp-a", DisplayName: "old name", AppOwnerTenantID: "t",
			Credentials: []graph.Credential{secret("k3", graph.ServicePrincipal, soon)}},
		{Source: graph.ServicePrincipal, AppID: "e", ObjectID: "sp-e", AppOwnerTenantID: "T"},
		{Source: graph.ServicePrincipal, AppID: "d", ObjectID: "sp-d", AppOwnerTenantID: "t"},
		{Source: graph.ServicePrincipal, AppID: "b", ObjectID: "sp-b", DisplayName: "theirs", SingleSignOnMode: "saml",
			Credentials: []graph.Credential{secret("k4", graph.ServicePrincipal, later)}},
		{Source: graph.Application, AppID: "a", ObjectID: "app-a", DisplayName: "payments",
			Credentials: []graph.Credential{secret("k1", graph.Application, later), secret("k2", graph.Application, soon)}},
		{Source: graph.Application, AppID: "c", ObjectID: "app-c", DisplayName: "no secrets"},
	}
	fold := Fold{TenantID: "t"}
	for _, o := range objects {
		fold.Add(o)
	}
	got := fold.Found()
	want := func(keyID, appID, name, appObject string, src v1alpha1.CredentialSource, end time.Time) v1alpha1.Credential {
		c := target.Credential(secret(keyID, graph.Source(src), end))
		c.AppID, c.AppDisplayName, c.AppObjectID = appID, name, appObject
		return c
	}
	wantFound := Found{Applications: 2, ServicePrincipals: 4, SAML: map[string]bool{"b": true}, Unreadable: 2, UnreadableApp: "d", Credentials: []v1alpha1.Credential{
		want("k2", "a", "payments", "app-a", v1alpha1.SourceApplication, soon),
		want("k3", "a", "payments", "app-a", v1alpha1.SourceServicePrincipal, soon),
		want("k1", "a", "payments", "app-a", v1alpha1.SourceApplication, later),
		want("k4", "b", "theirs", "", v1alpha1.SourceServicePrincipal, later),
	}}
	if diff := cmp.Diff(wantFound, got); diff != "" {
		t.Errorf("Found() (-want +got):\n%s", diff)
	}
	if end := got.Credentials[0].EndTime.Time; !end.Equal(soon) {
		t.Errorf("end %v kept its fraction of a second; status stores whole seconds", end)
	}
}
