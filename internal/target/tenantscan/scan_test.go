package tenantscan

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/azure/azurefake"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/targettest"
)

func TestUnitReadFoldsTheTenantAndSaysWhichFilterGraphRefused(t *testing.T) {
	end := now.Add(10 * day)
	tenant := &azurefake.Tenant{ScanFunc: func(_ context.Context, filter string, visit func(graph.Object)) error {
		if filter == "bad" {
			return &azerr.Error{Kind: azerr.KindOther, Status: http.StatusBadRequest, Code: "BadRequest", Err: errors.New("Invalid filter clause")}
		}
		visit(graph.Object{Source: graph.Application, AppID: "a", ObjectID: "obj-a", DisplayName: "alpha", Tags: []string{"no-digest"},
			Credentials: []graph.Credential{{KeyID: "k", Type: graph.Password, End: end}}})
		visit(graph.Object{Source: graph.ServicePrincipal, AppID: "a", SingleSignOnMode: target.SAML})
		return nil
	}}
	spec := &v1alpha1.TenantScanTarget{TenantID: "t", OwnerDigests: &v1alpha1.OwnerDigests{OptOutTag: "no-digest"}}
	found, err := Read(context.Background(), tenant, spec, 0)
	if err != nil || found.Applications != 1 || found.ServicePrincipals != 1 || len(found.Credentials) != 1 || !found.SAML["a"] || !found.OptedOut["a"] {
		t.Fatalf("found %+v, %v: want alpha's one credential, its SAML service principal, opted out", found, err)
	}
	spec.Filter = "bad"
	_, err = Read(context.Background(), tenant, spec, 1)
	if target.ReasonFor(err) != v1alpha1.ReasonFilterRejected || !strings.Contains(err.Error(), `Graph refused to list with the filter "bad"`) ||
		!strings.Contains(err.Error(), "check spec.target.tenantScan.filter") {
		t.Errorf("a refused filter: %s %v", target.ReasonFor(err), err)
	}
}

func TestUnitRecordCountsTheScanAndKeepsItForTheMetrics(t *testing.T) {
	s := Scan{Events: &targettest.Events{}, Store: NewStore()}
	obj := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "scan"}}
	obj.Status.TenantScan = &v1alpha1.TenantScanStatus{Warning: 3}
	obj.Status.ServicePrincipal = &v1alpha1.ServicePrincipalStatus{AppID: "left over from another target"}
	s.Record(context.Background(), obj, Found{Applications: 4, ServicePrincipals: 5, Credentials: make([]v1alpha1.Credential, 6)}, target.TenantSignIns{}, now)
	ready := target.Condition(obj, v1alpha1.ConditionReady)
	if want := "Scanned 4 applications and 5 service principals of the tenant: 6 credentials"; ready.Message != want || ready.Reason != v1alpha1.ReasonChecked {
		t.Errorf("Ready %s %q, want Checked %q", ready.Reason, ready.Message, want)
	}
	if st := obj.Status.TenantScan; st.Credentials != 6 || st.Warning != 3 || obj.Status.ServicePrincipal != nil {
		t.Errorf("status %+v: want six credentials counted, the states kept until they are counted again, no service principal", obj.Status)
	}
	if found, ok := s.Store.Get(target.KeyOf(obj)); !ok || len(found.Credentials) != 6 {
		t.Errorf("the store holds %d credentials, want 6", len(found.Credentials))
	}
}

// Applications of the tenant the identity may not read are counted and named, with what the
// identity needs, in status, the Ready message and, when they first appear, an event.
func TestUnitRecordSaysWhichApplicationsCouldNotBeRead(t *testing.T) {
	ev := &targettest.Events{}
	s := Scan{Events: ev, Store: NewStore()}
	obj := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "scan"}}
	found := Found{Applications: 4, ServicePrincipals: 6, Unreadable: 2, UnreadableApp: "d"}
	s.Record(context.Background(), obj, found, target.TenantSignIns{}, now)
	want := "2 applications registered in the tenant could not be read, such as appId d: their service principals were listed and they were not, " +
		"so their credentials are not counted: the identity needs Application.Read.All, unless they were deleted a moment ago"
	if msg := target.Condition(obj, v1alpha1.ConditionReady).Message; !strings.HasSuffix(msg, "; "+want) || obj.Status.TenantScan.UnreadableApplications != 2 {
		t.Errorf("Ready %q, unreadable %d", msg, obj.Status.TenantScan.UnreadableApplications)
	}
	if got := ev.Take(); len(got) != 1 || got[0] != "Warning ApplicationsUnreadable "+want {
		t.Errorf("events %q", got)
	}
	s.Record(context.Background(), obj, found, target.TenantSignIns{}, now)
	if got := ev.Take(); len(got) != 0 {
		t.Errorf("the second scan told %q again", got)
	}
}
