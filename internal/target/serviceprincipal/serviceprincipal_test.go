package serviceprincipal

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/policy/policytest"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/targettest"
)

// app is an application in Graph; the methods a test leaves nil are not expected to be called.
type app struct {
	graph.AppClient
	CheckFunc   func(graph.Ask) (graph.Snapshot, error)
	OwnersFunc  func() ([]string, error)
	DomainsFunc func() ([]string, error)
	SignInsFunc func() ([]graph.KeyUse, error)
}

func (a app) Check(_ context.Context, ask graph.Ask) (graph.Snapshot, error) { return a.CheckFunc(ask) }
func (a app) ReadOwnerEmails(context.Context) ([]string, error)              { return a.OwnersFunc() }
func (a app) VerifiedDomains(context.Context) ([]string, error)              { return a.DomainsFunc() }
func (a app) ReadSignIns(context.Context) ([]graph.KeyUse, error)            { return a.SignInsFunc() }

type fakeAzure struct{ app app }

func (f fakeAzure) Application(azure.Identity, graph.AppRef) (graph.AppClient, error) {
	return f.app, nil
}

// grant allows watching every application of tenant t, with ops besides.
func grant(ops ...v1alpha1.Operation) access.Grant {
	return access.Grant{Namespace: access.Namespace{Name: "team"}, Identity: access.Identity{Kind: v1alpha1.KindAzureIdentity, Namespace: "team", Name: "id",
		Spec: v1alpha1.IdentitySpec{Allow: v1alpha1.IdentityAllow{Tenants: []string{"t"}, Applications: []string{v1alpha1.AllApplications}, Operations: ops}}}}
}

var snap = graph.Snapshot{AppID: "a", DisplayName: "payments", ApplicationObjectID: "obj", ServicePrincipalObjectID: "sp",
	Credentials: []graph.Credential{{KeyID: "k", Type: graph.Password, Source: graph.Application, End: policytest.Now.Add(5 * policytest.Day)}}}

// Only an identity that may scan the tenant lets the planner answer from a listing of it.
func TestReadMayList(t *testing.T) {
	for _, tc := range []struct {
		grant access.Grant
		want  bool
	}{{grant(), false}, {grant(v1alpha1.OperationTenantScan), true}} {
		var asked graph.Ask
		k := Kind{Azure: fakeAzure{app{CheckFunc: func(ask graph.Ask) (graph.Snapshot, error) { asked = ask; return snap, nil }}}}
		f, err := k.Read(context.Background(), tc.grant, azure.Identity{TenantID: "t"}, "t", "a", graph.Ask{Asker: "team/w"})
		if err != nil || f.Snap.DisplayName != "payments" || asked.Asker != "team/w" || asked.MayList != tc.want {
			t.Fatalf("Read = %+v, %v, asked %+v; want MayList %v", f, err, asked, tc.want)
		}
	}
}

func TestRecordOwners(t *testing.T) {
	known := []string{"old@example.com"}
	for _, tc := range []struct {
		name       string
		mailed     bool
		grant      access.Grant
		owners     func() ([]string, error)
		domains    []string // the admin's; none: the tenant's verified ones
		domainsErr error
		want       []string
		event      string
	}{
		{name: "not mailed: not read", grant: grant(v1alpha1.OperationReadOwners), want: nil},
		{name: "read", mailed: true, grant: grant(v1alpha1.OperationReadOwners), owners: func() ([]string, error) { return []string{"new@contoso.com"}, nil },
			want: []string{"new@contoso.com"}},
		{name: "not allowed any more: what was read goes", mailed: true, grant: grant(), want: nil, event: "are not read"},
		{name: "unreadable: what was read stays", mailed: true, grant: grant(v1alpha1.OperationReadOwners),
			owners: func() ([]string, error) { return nil, errors.New("throttled") }, want: known, event: "Reading the application's owners failed"},
		{name: "a guest and an outside address are not mailed", mailed: true, grant: grant(v1alpha1.OperationReadOwners),
			owners: func() ([]string, error) {
				return []string{"ada@contoso.com", "mallory@evil.example", "eve_evil.example#EXT#@contoso.onmicrosoft.com"}, nil
			},
			want: []string{"ada@contoso.com"}, event: "2 of the application's 3 owners are not mailed: a guest, or an address outside the tenant's verified domains"},
		{name: "the tenant's domains unreadable: nobody", mailed: true, grant: grant(v1alpha1.OperationReadOwners),
			owners:     func() ([]string, error) { return []string{"ada@contoso.com"}, nil },
			domainsErr: errors.New("Organization.Read.All"), want: nil, event: "are not mailed: Organization.Read.All"},
		{name: "the admin's domains", mailed: true, grant: grant(v1alpha1.OperationReadOwners), domains: []string{"evil.example"},
			owners: func() ([]string, error) { return []string{"ada@contoso.com", "mallory@evil.example"}, nil },
			want:   []string{"mallory@evil.example"}, event: "outside --owner-mail-domains"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := &targettest.Events{}
			verified := func() ([]string, error) { return []string{"contoso.com", "contoso.onmicrosoft.com"}, tc.domainsErr }
			k := Kind{Azure: fakeAzure{app{OwnersFunc: tc.owners, DomainsFunc: verified}}, Events: events, OwnerDomains: tc.domains,
				MailsOwners: func(*v1alpha1.CredentialWatch, access.Identity) bool { return tc.mailed }}
			next := metav1.NewTime(policytest.Now.Add(time.Hour))
			obj := &v1alpha1.CredentialWatch{Status: v1alpha1.CredentialWatchStatus{NextCheckTime: &next,
				ServicePrincipal: &v1alpha1.ServicePrincipalStatus{OwnerEmails: known}, TenantScan: &v1alpha1.TenantScanStatus{}}}
			k.Record(context.Background(), obj, Found{AppID: "a", Snap: snap, Grant: tc.grant, ID: azure.Identity{TenantID: "t"}}, policytest.Now)
			sp := obj.Status.ServicePrincipal
			if strings.Join(sp.OwnerEmails, ",") != strings.Join(tc.want, ",") || sp.DisplayName != "payments" || len(obj.Status.Credentials) != 1 || obj.Status.TenantScan != nil {
				t.Fatalf("status %+v; want owners %v, the application and its credential, and the tenant scan's counts gone", sp, tc.want)
			}
			got := events.Take()
			if (tc.event == "") != (len(got) == 0) || (tc.event != "" && !strings.Contains(got[0], tc.event)) {
				t.Fatalf("events %q; want %q", got, tc.event)
			}
		})
	}
}

func TestReadyMessage(t *testing.T) {
	for _, tc := range []struct {
		app, sp string
		want    string
	}{
		{"obj", "sp", `Read 1 credentials of "payments" from the application and its service principal`},
		{"obj", "", `Read 1 credentials of "payments" from the application; the tenant has no service principal for it`},
		{"", "sp", `Read 1 credentials of "payments" from the service principal; the application object is not in this tenant, so credentials on it are not seen`},
	} {
		s := snap
		s.ApplicationObjectID, s.ServicePrincipalObjectID = tc.app, tc.sp
		next := metav1.NewTime(policytest.Now.Add(time.Hour)) // set by the check before it records
		obj := &v1alpha1.CredentialWatch{Status: v1alpha1.CredentialWatchStatus{NextCheckTime: &next}}
		Kind{MailsOwners: func(*v1alpha1.CredentialWatch, access.Identity) bool { return false }}.Record(context.Background(), obj, Found{Snap: s}, policytest.Now)
		if c := target.Condition(obj, v1alpha1.ConditionReady); c.Reason != v1alpha1.ReasonChecked || c.Message != tc.want {
			t.Errorf("Ready = %s %q; want %q", c.Reason, c.Message, tc.want)
		}
	}
}

// The clock alone turns a credential Critical: the summary, the conditions and an event say so,
// and the evaluation returns when the clock next changes something.
func TestEvaluate(t *testing.T) {
	checked := metav1.NewTime(policytest.Now.Add(-time.Hour))
	cred := policytest.Credential("a", "k", v1alpha1.CredentialTypePassword, -300*policytest.Day, 5*policytest.Day)
	before := &v1alpha1.CredentialWatch{Status: v1alpha1.CredentialWatchStatus{LastCheckTime: &checked, Credentials: []v1alpha1.Credential{cred}}}
	before.Status.Credentials[0].State = v1alpha1.StateWarning
	obj := before.DeepCopy()
	events := &targettest.Events{}
	next := Evaluate(obj, before, events, target.Settings{Thresholds: policytest.Std}, policytest.Now)

	st := obj.Status
	if st.State != v1alpha1.StateCritical || st.ExpiresIn != "5d" || st.EarliestExpiry == nil || next.IsZero() || !next.After(policytest.Now) {
		t.Fatalf("state %s, expires in %q, next %s; want Critical in 5d, and a next change ahead", st.State, st.ExpiresIn, next)
	}
	if c := target.Condition(obj, v1alpha1.ConditionExpiring); c.Status != metav1.ConditionTrue {
		t.Errorf("Expiring = %+v", c)
	}
	if got := events.Take(); len(got) != 1 || !strings.HasPrefix(got[0], "Warning CredentialCritical ") {
		t.Errorf("events %q; want one CredentialCritical", got)
	}

	never := &v1alpha1.CredentialWatch{Status: v1alpha1.CredentialWatchStatus{Credentials: []v1alpha1.Credential{cred}}}
	Evaluate(never, never.DeepCopy(), events, target.Settings{Thresholds: policytest.Std}, policytest.Now)
	if never.Status.State != "" || len(never.Status.Conditions) != 0 || len(events.Take()) != 0 {
		t.Errorf("a watch never checked shows %+v; want nothing", never.Status)
	}
}

func TestWithKnownCarriesWhatStatusKnows(t *testing.T) {
	at := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	checked := func() *v1alpha1.CredentialWatch {
		obj := &v1alpha1.CredentialWatch{Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{
			ServicePrincipal: &v1alpha1.ServicePrincipalTarget{TenantID: "t", ClientID: "APP-1"}}}}
		last := metav1.NewTime(at)
		obj.Status.LastCheckTime = &last
		obj.Status.ServicePrincipal = &v1alpha1.ServicePrincipalStatus{AppID: "app-1", ApplicationObjectID: "obj", DisplayName: "payments"}
		obj.Status.Credentials = target.Credentials(graph.Snapshot{Credentials: []graph.Credential{
			{KeyID: "k1", Type: graph.Password, Source: graph.Application, Hint: "abc", Start: at.AddDate(-1, 0, 0), End: at.AddDate(1, 0, 0)}}})
		return obj
	}
	ask := WithKnown(graph.Ask{Asker: "ns/w"}, checked())
	if ask.Known == nil || !ask.KnownAt.Equal(at) || ask.Known.ApplicationObjectID != "obj" || ask.Known.AppID != "app-1" ||
		len(ask.Known.Credentials) != 1 || ask.Known.Credentials[0].Hint != "abc" || !ask.Known.Credentials[0].End.Equal(at.AddDate(1, 0, 0)) {
		t.Errorf("a checked watch: %+v at %v", ask.Known, ask.KnownAt)
	}
	for name, edit := range map[string]func(*v1alpha1.CredentialWatch){
		"never checked":               func(o *v1alpha1.CredentialWatch) { o.Status.LastCheckTime = nil },
		"no application recorded":     func(o *v1alpha1.CredentialWatch) { o.Status.ServicePrincipal = nil },
		"another application checked": func(o *v1alpha1.CredentialWatch) { o.Spec.Target.ServicePrincipal.ClientID = "app-2" },
	} {
		obj := checked()
		edit(obj)
		if ask := WithKnown(graph.Ask{Asker: "ns/w"}, obj); ask.Known != nil {
			t.Errorf("%s: carries %+v", name, ask.Known)
		}
	}
}
