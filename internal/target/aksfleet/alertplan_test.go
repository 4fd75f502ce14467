package aksfleet

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

func TestPlanAlerts(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	const sub = "a1c2e3f4-0000-4000-8000-00000000000a"
	id := func(name string) string {
		return "/subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/" + name
	}
	end := metav1.NewTime(now.Add(5 * day))
	found := []Cluster{{ID: id("crit"), SubscriptionID: sub, AppID: "a"}, {ID: id("mi"), SubscriptionID: sub}}
	view := ClusterView{Cluster: &found[0], Earliest: &end, State: v1alpha1.StateCritical}
	note := func(s v1alpha1.CredentialState) string { return Note{State: s, End: end.Time}.String() }
	for _, tc := range []struct {
		name        string
		ledger      map[string]string
		complete    bool
		wantSend    []AlertKind
		wantRecords []string
	}{
		{name: "a channel's first plan records, tells nothing",
			ledger: map[string]string{}, complete: true, wantRecords: []string{"email.baseline", LedgerKey("email", id("crit"))}},
		{name: "worse than told",
			ledger: map[string]string{"email.baseline": "x", LedgerKey("email", id("crit")): note(v1alpha1.StateWarning)}, complete: true,
			wantSend: []AlertKind{StateWorsened}},
		{name: "as told",
			ledger: map[string]string{"email.baseline": "x", LedgerKey("email", id("crit")): note(v1alpha1.StateCritical)}, complete: true},
		{name: "better than told: recorded, so that a later decline is told",
			ledger: map[string]string{"email.baseline": "x", LedgerKey("email", id("crit")): note(v1alpha1.StateExpired)}, complete: true,
			wantRecords: []string{LedgerKey("email", id("crit"))}},
		{name: "new since the channel began",
			ledger: map[string]string{"email.baseline": "x"}, complete: true, wantSend: []AlertKind{StateWorsened}},
		{name: "told of, now on a managed identity",
			ledger:   map[string]string{"email.baseline": "x", LedgerKey("email", id("crit")): note(v1alpha1.StateCritical), LedgerKey("email", id("mi")): note(v1alpha1.StateWarning)},
			complete: true, wantSend: []AlertKind{MovedToManagedIdentity}},
		{name: "on a managed identity, its subscription not listed whole",
			ledger: map[string]string{"email.baseline": "x", LedgerKey("email", id("crit")): note(v1alpha1.StateCritical), LedgerKey("email", id("mi")): note(v1alpha1.StateWarning)}},
		{name: "gone, everything listed whole: forgotten",
			ledger:   map[string]string{"email.baseline": "x", LedgerKey("email", id("crit")): note(v1alpha1.StateCritical), LedgerKey("email", id("gone")): note(v1alpha1.StateWarning)},
			complete: true, wantRecords: []string{LedgerKey("email", id("gone"))}},
		{name: "a channel no longer configured: forgotten",
			ledger:      map[string]string{"email.baseline": "x", LedgerKey("email", id("crit")): note(v1alpha1.StateCritical), "slack.baseline": "x", LedgerKey("slack", id("crit")): note(v1alpha1.StateCritical)},
			wantRecords: []string{"slack.baseline", LedgerKey("slack", id("crit"))}},
		{name: "gone, not everything listed whole: kept",
			ledger: map[string]string{"email.baseline": "x", LedgerKey("email", id("crit")): note(v1alpha1.StateCritical), LedgerKey("email", id("gone")): note(v1alpha1.StateWarning)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := PlanAlerts(AlertInputs{Channels: []string{"email"}, Views: []ClusterView{view}, Found: found, Known: found,
				Complete: map[string]bool{sub: tc.complete}, AllComplete: tc.complete, Now: now,
				Ledger: func(k string) (string, bool) { v, ok := tc.ledger[k]; return v, ok },
				Entries: func(f func(k, v string)) {
					for k, v := range tc.ledger {
						f(k, v)
					}
				}})
			var kinds []AlertKind
			for _, a := range plan.Send {
				kinds = append(kinds, a.Kind)
			}
			if len(kinds) != len(tc.wantSend) || (len(kinds) > 0 && kinds[0] != tc.wantSend[0]) {
				t.Errorf("sends %v, want %v", kinds, tc.wantSend)
			}
			if len(plan.Record) != len(tc.wantRecords) {
				t.Errorf("records %v, want %v", plan.Record, tc.wantRecords)
			}
			for _, k := range tc.wantRecords {
				if _, ok := plan.Record[k]; !ok {
					t.Errorf("records %v, want %s among them", plan.Record, k)
				}
			}
		})
	}
}

func TestNoteRoundTrips(t *testing.T) {
	n := Note{State: v1alpha1.StateCritical, End: time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)}
	if got, ok := ParseNote(n.String()); !ok || got != n {
		t.Errorf("%q read back as %+v, %v", n.String(), got, ok)
	}
	for _, bad := range []string{"", "Critical", "Soon 12", "Critical x"} {
		if _, ok := ParseNote(bad); ok {
			t.Errorf("%q read as a note", bad)
		}
	}
}
