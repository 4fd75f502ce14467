package aksfleet

import (
	"errors"
	"testing"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/targettest"
)

// With sign-ins read, a cluster whose service principal serves it alone shows the secret it signs
// in with, and that secret's end is the one that matters: an older secret beside it, expiring,
// does not make the cluster Critical. Clusters sharing a service principal count every credential,
// as do clusters whose secret has not signed in within activeWithin. A failed read keeps what the
// last check knew of the sign-ins, but narrows no cluster's expiry on it.
func TestUnitFleetSignInsSayWhichSecretEachClusterUses(t *testing.T) {
	pw := v1alpha1.CredentialTypePassword
	obj := fleetWatch()
	obj.Spec.Usage = &v1alpha1.Usage{SignIns: true, ActiveWithin: "7d"}
	found := func() Found {
		// "alone" renewed its secret with --append and moved to the new one; "shared-1" and
		// "shared-2" sign in with one service principal; "idle" signed in a month ago.
		both := []v1alpha1.Credential{credential("s", "s-old", pw, -360*day, 3*day), credential("s", "s-new", pw, -10*day, 355*day)}
		return Found{Subscriptions: 1, Clusters: []Cluster{
			{ID: clusterID("s1", "rg", "alone"), SubscriptionID: "s1", AppID: "a", Credentials: []v1alpha1.Credential{
				credential("a", "a-old", pw, -360*day, 3*day), credential("a", "a-new", pw, -10*day, 355*day)}},
			{ID: clusterID("s1", "rg", "shared-1"), SubscriptionID: "s1", AppID: "s", Credentials: both},
			{ID: clusterID("s1", "rg", "shared-2"), SubscriptionID: "s1", AppID: "s", Credentials: both},
			{ID: clusterID("s1", "rg", "idle"), SubscriptionID: "s1", AppID: "i", Credentials: []v1alpha1.Credential{
				credential("i", "i-old", pw, -360*day, 3*day), credential("i", "i-new", pw, -10*day, 355*day)}},
			// Moved to the new secret, while a pipeline still signs in with the old one.
			{ID: clusterID("s1", "rg", "b-both"), SubscriptionID: "s1", AppID: "b", Credentials: []v1alpha1.Credential{
				credential("b", "b-old", pw, -360*day, 3*day), credential("b", "b-new", pw, -10*day, 355*day)}},
		}}
	}
	last := target.LastSignIns{}
	for key, ago := range map[string]time.Duration{"a-new": time.Hour, "a-old": 20 * day, "s-new": time.Hour, "i-new": 30 * day,
		"b-new": time.Hour, "b-old": 2 * time.Hour} {
		last.Add(graph.KeyUse{AppID: key[:1], KeyID: key, Source: graph.Application, LastSignIn: now.Add(-ago)})
	}
	// Another application's certificate under the keyId of the idle cluster's old secret.
	last.Add(graph.KeyUse{AppID: "x", KeyID: "i-old", Source: graph.Application, LastSignIn: now.Add(-time.Hour)})
	ev := &targettest.Events{}
	f := Fleet{Events: ev, Store: NewStore()}
	f.Record(obj, found(), target.TenantSignIns{Asked: true, Read: true, Last: last}, now)
	check := func(when string, want map[string]string, critical int32) {
		t.Helper()
		_, _ = f.Evaluate(obj, nil, grantOf("s1"), std, now)
		got := map[string]string{}
		for _, c := range obj.Status.Fleet.Attention {
			got[c.ID[len(c.ID)-6:]] = c.KeyInUse + " " + string(c.State)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: cluster %s shows %q, want %q (all: %v)", when, k, got[k], v, got)
			}
		}
		if obj.Status.Fleet.Critical != critical {
			t.Errorf("%s: %d clusters critical, want %d", when, obj.Status.Fleet.Critical, critical)
		}
	}
	// Three clusters' secret in use is unknown; one's old secret is still used by a pipeline.
	check("read", map[string]string{"/alone": "a-new Valid", "ared-1": " Critical", "ared-2": " Critical", "s/idle": " Critical", "b-both": "b-new Critical"}, 4)
	// The next check cannot read the report: what was known stands.
	f.Record(obj, found(), target.TenantSignIns{Asked: true, Read: true, Reason: v1alpha1.ReasonGraphError, Message: "Reading sign-ins failed: " + errors.New("reset").Error()}, now)
	// What was known is shown, but narrows nothing until a read succeeds.
	check("after a failed read", map[string]string{"/alone": " Critical", "b-both": " Critical"}, 5)
	if c := target.Condition(obj, v1alpha1.ConditionSignInsRead); c.Status != "False" || c.Reason != v1alpha1.ReasonGraphError {
		t.Errorf("SignInsRead %+v, want the failure", c)
	}
	// A subscription unread: another cluster may share the service principal unseen.
	partial := found()
	partial.Unread = []v1alpha1.UnreadSubscription{{SubscriptionID: "s2", Reason: "Forbidden"}}
	f.Record(obj, partial, target.TenantSignIns{Asked: true, Read: true, Last: last}, now)
	shown, _ := f.Store.Get(target.KeyOf(obj))
	for _, c := range shown.Clusters {
		if c.KeyInUse != "" {
			t.Errorf("cluster %s shows key %s in use though the fleet's listing is incomplete", c.ID, c.KeyInUse)
		}
	}
}
