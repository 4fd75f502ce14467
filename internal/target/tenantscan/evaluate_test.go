package tenantscan

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/targettest"
)

func scanWatch() *v1alpha1.CredentialWatch {
	checked := metav1.NewTime(now.Add(-time.Hour))
	return &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "tenant"},
		Spec:   v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{}}},
		Status: v1alpha1.CredentialWatchStatus{LastCheckTime: &checked, TenantScan: &v1alpha1.TenantScanStatus{Credentials: 3}}}
}

// What this process scanned is counted by state and listed, most urgent first; a first view
// raises an event for each credential in a state worth telling.
func TestEvaluateScanned(t *testing.T) {
	events := &targettest.Events{}
	s := Scan{Events: events, Store: NewStore()}
	obj := scanWatch()
	found := Found{Credentials: []v1alpha1.Credential{
		scanned("a", "expired", v1alpha1.CredentialTypePassword, -400*day, -day),
		scanned("b", "critical", v1alpha1.CredentialTypePassword, -300*day, 3*day),
		scanned("c", "fine", v1alpha1.CredentialTypePassword, -10*day, 300*day)}}
	s.Store.Put(target.KeyOf(obj), found)
	next := s.Evaluate(obj, obj.DeepCopy(), std, policy.Hygiene{}, now)

	ts := obj.Status.TenantScan
	if ts.Expired != 1 || ts.Critical != 1 || ts.Warning != 0 || len(obj.Status.Credentials) == 0 || obj.Status.Credentials[0].KeyID != "expired" {
		t.Fatalf("counts %+v, listed %d first %s", ts, len(obj.Status.Credentials), obj.Status.Credentials[0].KeyID)
	}
	if obj.Status.State != v1alpha1.StateExpired || next.IsZero() {
		t.Fatalf("state %s, next %s", obj.Status.State, next)
	}
	if c := target.Condition(obj, v1alpha1.ConditionExpired); c.Status != metav1.ConditionTrue {
		t.Fatalf("Expired %+v", c)
	}
	got := events.Take()
	if len(got) != 2 || !strings.Contains(strings.Join(got, "\n"), "CredentialCritical") {
		t.Fatalf("events %q; want one for each credential worth telling", got)
	}
	// Evaluated again an hour later, nothing changed state: no event again.
	s.Evaluate(obj, obj.DeepCopy(), std, policy.Hygiene{}, now.Add(time.Hour))
	if got := events.Take(); len(got) != 0 {
		t.Fatalf("events %q on a second look", got)
	}
}

// A scan this process has not run keeps the counts and findings its status holds.
func TestEvaluateNotScannedHere(t *testing.T) {
	obj := scanWatch()
	obj.Status.TenantScan.Expired = 2
	listed := scanned("a", "expired", v1alpha1.CredentialTypePassword, -400*day, -day)
	listed.State = v1alpha1.StateExpired
	obj.Status.Credentials = []v1alpha1.Credential{listed}
	obj.Status.Findings = &v1alpha1.FindingsStatus{Unlisted: 4}
	Scan{Events: &targettest.Events{}, Store: NewStore()}.Evaluate(obj, obj.DeepCopy(), std, policy.Hygiene{}, now)
	if c := target.Condition(obj, v1alpha1.ConditionExpired); !strings.HasPrefix(c.Message, "2 of 3 credentials expired") || obj.Status.Findings == nil || obj.Status.TenantScan.Expired != 2 {
		t.Fatalf("Expired %+v, findings %+v, counts %+v; want what status held", c, obj.Status.Findings, obj.Status.TenantScan)
	}
}
