package aksfleet

import (
	"reflect"
	"testing"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

func TestViewAt(t *testing.T) {
	pw := v1alpha1.CredentialTypePassword
	clusters := []Cluster{
		{ID: "msi", SubscriptionID: "s1"},
		{ID: "warning", SubscriptionID: "s1", AppID: "a", Credentials: []v1alpha1.Credential{credential("a", "k1", pw, -300*day, 20*day)}},
		// Renewed with --append, but the cluster may still sign in with the old secret.
		{ID: "renewed", SubscriptionID: "s2", AppID: "b", Credentials: []v1alpha1.Credential{
			credential("b", "old", pw, -400*day, -2*day), credential("b", "new", pw, -3*day, 360*day)}},
		{ID: "unread", SubscriptionID: "s2", AppID: "c", Reason: v1alpha1.ReasonIdentityNotAllowed},
		{ID: "none", SubscriptionID: "s2", AppID: "d"},
		{ID: "critical", SubscriptionID: "s1", AppID: "e", Credentials: []v1alpha1.Credential{credential("e", "k2", pw, -300*day, 3*day)}},
		{ID: "valid", SubscriptionID: "s1", AppID: "f", Credentials: []v1alpha1.Credential{credential("f", "k3", pw, -3*day, 300*day)}},
	}
	before := append([]Cluster(nil), clusters...)

	v := ViewAt(clusters, now, std, 4)
	var order []string
	for _, c := range v.Status.Attention {
		order = append(order, c.ID+"="+string(c.State))
	}
	// Unknown first, then nearest expiry, the past included; clusters with no credential last.
	if want := []string{"unread=", "renewed=Expired", "critical=Critical", "warning=Warning"}; !reflect.DeepEqual(order, want) {
		t.Errorf("attention = %q, want %q", order, want)
	}
	got := v.Status
	got.Attention = nil
	want := v1alpha1.FleetStatus{Clusters: 7, ServicePrincipal: 6, ManagedIdentity: 1, Warning: 1, Critical: 1, Expired: 1, Unlisted: 2}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("counts = %+v, want %+v", got, want)
	}
	if v.State != v1alpha1.StateExpired || v.Earliest == nil || !v.Earliest.Equal(&clusters[2].Credentials[0].EndTime) {
		t.Errorf("state %q, earliest %v; want Expired at the renewed cluster's old secret", v.State, v.Earliest)
	}
	if v.NextTransition != now.Add(3*day) {
		t.Errorf("next transition %v, want when the critical cluster's secret expires, %v", v.NextTransition, now.Add(3*day))
	}
	if !reflect.DeepEqual(clusters, before) {
		t.Error("ViewAt changed the clusters it was given: the metrics read them")
	}
	if e := EarliestEnd(clusters[2].Credentials); e == nil || !e.Equal(&clusters[2].Credentials[0].EndTime) {
		t.Errorf("EarliestEnd = %v, want the old secret's end", e)
	}
	if EarliestEnd(nil) != nil {
		t.Error("EarliestEnd of none is not nil")
	}
}
