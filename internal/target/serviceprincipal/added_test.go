package serviceprincipal

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/policy/policytest"
	"github.com/credwatch/credwatch/internal/target/targettest"
)

// A secret added to the service principal between two checks is marked, told in an event and
// counted; one the rotation added is not, and the next check keeps the mark without telling again.
func TestRecordMarksWhatWasAdded(t *testing.T) {
	events := &targettest.Events{}
	var counted []string
	calls := 0
	k := Kind{Events: events, MailsOwners: func(*v1alpha1.CredentialWatch, access.Identity) bool { return false },
		Added: func(tenant string, n int) {
			calls++
			for range n {
				counted = append(counted, tenant)
			}
		}}
	obj := &v1alpha1.CredentialWatch{Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{
		ServicePrincipal: &v1alpha1.ServicePrincipalTarget{TenantID: "tenant-1", ClientID: "a"}}}}
	next := metav1.NewTime(policytest.Now.Add(policytest.Day))
	obj.Status.NextCheckTime = &next
	record := func(s graph.Snapshot) {
		t.Helper()
		k.Record(context.Background(), obj, Found{AppID: "a", Snap: s}, policytest.Now)
	}
	record(snap)
	if got := events.Take(); len(got) != 0 {
		t.Fatalf("the first check told %v", got)
	}

	added := snap
	added.Credentials = append(append([]graph.Credential{}, snap.Credentials...),
		graph.Credential{KeyID: "k2", Type: graph.Password, Source: graph.ServicePrincipal, DisplayName: "keep-access", Hint: "Q7x",
			Start: policytest.Now.Add(-policytest.Day), End: policytest.Now.Add(700 * policytest.Day)},
		graph.Credential{KeyID: "k3", Type: graph.Password, Source: graph.Application, DisplayName: "credwatch-x", End: policytest.Now.Add(90 * policytest.Day)})
	obj.Status.Rotation = &v1alpha1.RotationStatus{Step: v1alpha1.StepStarted, DisplayName: "credwatch-x"}
	record(added)
	got := events.Take()
	if len(got) != 1 || !strings.Contains(got[0], "Warning "+EventCredentialAdded) ||
		!strings.Contains(got[0], `Secret "keep-access" (keyId k2, hint Q7x, on the ServicePrincipal object) appeared on "payments" (appId a)`) ||
		!strings.Contains(got[0], "az ad sp credential delete --id a --key-id k2") || !strings.Contains(got[0], "Added by: "+auditNotAllowed) {
		t.Fatalf("events %q", got)
	}
	if len(counted) != 1 || counted[0] != "tenant-1" {
		t.Errorf("counted %v", counted)
	}
	marked := 0
	for _, c := range obj.Status.Credentials {
		if c.AddedTime != nil {
			marked++
			if c.KeyID != "k2" || !c.AddedTime.Time.Equal(policytest.Now) {
				t.Errorf("marked %s at %v", c.KeyID, c.AddedTime)
			}
		}
	}
	if marked != 1 {
		t.Errorf("%d marked", marked)
	}

	record(added)
	if got := events.Take(); len(got) != 0 || len(counted) != 1 || calls != 3 {
		t.Errorf("the next check told %v, counted %v in %d calls; want each check counted, none added", got, counted, calls)
	}
	if i := slices.IndexFunc(obj.Status.Credentials, func(c v1alpha1.Credential) bool { return c.KeyID == "k2" }); obj.Status.Credentials[i].AddedTime == nil {
		t.Error("the mark was lost")
	}
}
