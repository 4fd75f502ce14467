package serviceprincipal

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

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

// What every watch's checks found is the baseline of a watch that starts without one: a watch
// created again after a secret was added still tells of it, and of several watches of one
// application, the first check that finds an addition counts it; each marks it, at the time of
// that first check, and tells it in an event of its own.
func TestSeenAcrossWatches(t *testing.T) {
	events := &targettest.Events{}
	counted := 0
	seen := &Seen{}
	k := Kind{Events: events, MailsOwners: func(*v1alpha1.CredentialWatch, access.Identity) bool { return false },
		Added: func(_ string, n int) { counted += n }, Seen: seen}
	watch := func() *v1alpha1.CredentialWatch {
		next := metav1.NewTime(policytest.Now.Add(policytest.Day))
		return &v1alpha1.CredentialWatch{Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{
			ServicePrincipal: &v1alpha1.ServicePrincipalTarget{TenantID: "tenant-1", ClientID: "a"}}},
			Status: v1alpha1.CredentialWatchStatus{NextCheckTime: &next}}
	}
	with := func(keyIDs ...string) graph.Snapshot {
		s := snap
		s.Credentials = slices.Clone(snap.Credentials)
		for _, id := range keyIDs {
			s.Credentials = append(s.Credentials, graph.Credential{KeyID: id, Type: graph.Password, Source: graph.Application, End: policytest.Now.Add(700 * policytest.Day)})
		}
		return s
	}
	addedTime := func(obj *v1alpha1.CredentialWatch, keyID string) *metav1.Time {
		i := slices.IndexFunc(obj.Status.Credentials, func(c v1alpha1.Credential) bool { return c.KeyID == keyID })
		return obj.Status.Credentials[i].AddedTime
	}
	first, second := watch(), watch()
	k.Record(context.Background(), first, Found{AppID: "a", Snap: with()}, policytest.Now)
	k.Record(context.Background(), second, Found{AppID: "a", Snap: with()}, policytest.Now)

	// The first watch's check finds a secret added; the second's, a minute later, finds it too.
	later := policytest.Now.Add(time.Minute)
	k.Record(context.Background(), first, Found{AppID: "a", Snap: with("k2")}, policytest.Now)
	k.Record(context.Background(), second, Found{AppID: "a", Snap: with("k2")}, later)
	if got := events.Take(); counted != 1 || len(got) != 2 {
		t.Errorf("two watches of one application: counted %d, events %q; want it counted once and told twice", counted, got)
	}
	if a, b := addedTime(first, "k2"), addedTime(second, "k2"); a == nil || b == nil || !a.Equal(b) {
		t.Errorf("marked at %v and %v; want both, at the first check's time", a, b)
	}

	// Deleted and created again, after another secret was added: its first check tells of it.
	again := watch()
	k.Record(context.Background(), again, Found{AppID: "a", Snap: with("k2", "k3")}, later)
	if got := events.Take(); counted != 2 || len(got) != 1 || !strings.Contains(got[0], "keyId k3") {
		t.Errorf("a watch created again: counted %d, events %q; want k3 told", counted, got)
	}
	if addedTime(again, "k2") == nil || addedTime(again, "k3") == nil {
		t.Errorf("a watch created again marks %+v", again.Status.Credentials)
	}

	// Without a record of any watch, a first check marks nothing, as before.
	k.Seen = &Seen{}
	fresh := watch()
	k.Record(context.Background(), fresh, Found{AppID: "a", Snap: with("k2", "k3", "k4")}, later)
	if got := events.Take(); counted != 2 || len(got) != 0 {
		t.Errorf("a first check with nothing seen: counted %d, events %q", counted, got)
	}
	// That check, which had no baseline, silences no watch that had one: the first watch, whose
	// last check found k2 alone, tells of k3 and k4.
	k.Record(context.Background(), first, Found{AppID: "a", Snap: with("k2", "k3", "k4")}, later)
	if got := events.Take(); counted != 4 || len(got) != 2 || addedTime(first, "k3") == nil || addedTime(first, "k4") == nil {
		t.Errorf("a watch with a baseline after one without: counted %d, events %q", counted, got)
	}
}
