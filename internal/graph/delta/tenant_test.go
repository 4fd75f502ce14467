package delta

import (
	"strings"
	"testing"
	"time"

	"github.com/credwatch/credwatch/internal/graph"
)

func TestUnitTenantApply(t *testing.T) {
	secret := graph.Credential{KeyID: "s", Type: graph.Password, Source: graph.Application}
	cert := graph.Credential{KeyID: "c", Type: graph.Certificate, Source: graph.Application}
	app := graph.Object{Source: graph.Application, ObjectID: "a", AppID: "x", DisplayName: "one", Tags: []string{"t"}, Credentials: []graph.Credential{secret, cert}}
	for _, tc := range []struct {
		name   string
		ch     graph.Change
		ok     bool
		want   *graph.Object
		absent bool
	}{
		{name: "a new secret keeps the certificate and the rest",
			ch: graph.Change{Source: graph.Application, ObjectID: "A", HasPasswords: true}, ok: true,
			want: &graph.Object{Source: graph.Application, ObjectID: "a", AppID: "x", DisplayName: "one", Tags: []string{"t"}, Credentials: []graph.Credential{cert}}},
		{name: "a new name and tags",
			ch: graph.Change{Source: graph.Application, ObjectID: "a", HasDisplayName: true, DisplayName: "two", HasTags: true}, ok: true,
			want: &graph.Object{Source: graph.Application, ObjectID: "a", AppID: "x", DisplayName: "two", Credentials: []graph.Credential{secret, cert}}},
		{name: "removed", ch: graph.Change{Source: graph.Application, ObjectID: "a", Removed: true}, ok: true, absent: true},
		{name: "an unknown object reported in part", ch: graph.Change{Source: graph.ServicePrincipal, ObjectID: "b", HasPasswords: true}},
		{name: "an unknown object reported whole",
			ch: graph.Change{Source: graph.ServicePrincipal, ObjectID: "b", HasAppID: true, AppID: "Y", HasPasswords: true, HasCertificates: true, HasSingleSignOn: true, SingleSignOnMode: "saml",
				HasAppOwner: true, AppOwnerTenantID: "t"}, ok: true,
			want: &graph.Object{Source: graph.ServicePrincipal, ObjectID: "b", AppID: "y", SingleSignOnMode: "saml", AppOwnerTenantID: "t"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := NewTenant(nil, time.Time{})
			tn.Put(app)
			if ok := tn.Apply(tc.ch); ok != tc.ok {
				t.Fatalf("Apply = %v, want %v", ok, tc.ok)
			}
			got, held := tn.get(strings.ToLower(tc.ch.ObjectID))
			switch {
			case tc.absent && held:
				t.Errorf("still holds %+v", got)
			case tc.want != nil && (!held || !sameObject(got, *tc.want) || got.ObjectID != tc.want.ObjectID):
				t.Errorf("holds %+v, want %+v", got, *tc.want)
			}
		})
	}
}

func TestUnitTenantDiffers(t *testing.T) {
	at := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	a := graph.Credential{KeyID: "a", Type: graph.Password, End: at}
	b := graph.Credential{KeyID: "b", Type: graph.Certificate, End: at}
	rounds, listed := NewTenant(nil, at), NewTenant(nil, at)
	rounds.Put(graph.Object{ObjectID: "same", AppID: "1", Credentials: []graph.Credential{a, b}})
	// The same credentials in another order, and an end in another zone, are the same.
	bLocal := b
	bLocal.End = at.In(time.FixedZone("x", 3600))
	listed.Put(graph.Object{ObjectID: "same", AppID: "1", Credentials: []graph.Credential{bLocal, a}})
	rounds.Put(graph.Object{ObjectID: "gone", AppID: "2"})
	listed.Put(graph.Object{ObjectID: "new", AppID: "3"})
	rounds.Put(graph.Object{ObjectID: "changed", AppID: "4", Credentials: []graph.Credential{a}})
	listed.Put(graph.Object{ObjectID: "changed", AppID: "4", Credentials: []graph.Credential{b}})
	got := rounds.Differs(listed)
	want := map[string]string{"gone": "2", "new": "3", "changed": "4"}
	if len(got) != len(want) {
		t.Fatalf("Differs = %v, want %v", got, want)
	}
	for id, appID := range want {
		if got[id] != appID {
			t.Errorf("Differs = %v, want %v", got, want)
		}
	}
}

func TestUnitPackRoundTrips(t *testing.T) {
	end := time.Date(2027, 1, 2, 3, 4, 5, 6789, time.UTC)
	for _, o := range []graph.Object{
		{Source: graph.Application, ObjectID: "0b1e4c2a-9d3f-4a5b-8c6d-0e2f4a6b8c1d", AppID: "7b1e4c2a-9d3f-4a5b-8c6d-0e2f4a6b8c1d", DisplayName: "payments ✓",
			Tags: []string{"a", ""}, Credentials: []graph.Credential{
				{KeyID: "1b1e4c2a-9d3f-4a5b-8c6d-0e2f4a6b8c1d", Type: graph.Password, Source: graph.Application, DisplayName: "ci", Hint: "Q7x", Start: end.AddDate(-1, 0, 0), End: end},
				{KeyID: "NOT-A-GUID", Type: graph.Certificate, Source: graph.Application, End: end},
			}},
		{Source: graph.ServicePrincipal, ObjectID: "s1", AppID: "7B1E4C2A-9D3F-4A5B-8C6D-0E2F4A6B8C1D", SingleSignOnMode: "saml",
			AppOwnerTenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47"},
	} {
		got := unpack(o.ObjectID, pack(o))
		if !sameObject(got, o) || got.ObjectID != o.ObjectID || got.Credentials != nil && got.Credentials[0].Source != o.Source ||
			len(o.Credentials) > 0 && (!got.Credentials[0].Start.Equal(o.Credentials[0].Start) || !got.Credentials[1].Start.IsZero()) {
			t.Errorf("unpack(pack(%+v)) = %+v", o, got)
		}
	}
}
