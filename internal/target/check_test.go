package target_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/targettest"
)

// A failing check is told once per reason, forgets a service principal that is gone, and its
// recovery is told too.
func TestCheckFailedAndSucceeded(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	obj := &v1alpha1.CredentialWatch{Status: v1alpha1.CredentialWatchStatus{Credentials: []v1alpha1.Credential{{KeyID: "k"}}}}
	events := &targettest.Events{}
	unreachable := &azerr.Error{Kind: azerr.KindUnavailable, Err: errors.New("dial tcp: i/o timeout")}

	for i := range 2 {
		before := target.Condition(obj, v1alpha1.ConditionReady)
		if r := target.CheckFailed(obj, before, events, "credentials", unreachable, now.Add(time.Minute), now); r != v1alpha1.ReasonGraphUnreachable {
			t.Fatalf("reason %s", r)
		}
		if obj.Status.ConsecutiveFailures != int32(i+1) || !obj.Status.NextCheckTime.Time.Equal(now.Add(time.Minute)) {
			t.Fatalf("status %+v", obj.Status)
		}
	}
	c := target.Condition(obj, v1alpha1.ConditionReady)
	if c.Status != metav1.ConditionFalse || c.Message != "unavailable: dial tcp: i/o timeout; retrying at 2026-12-02T12:01:00Z" || len(obj.Status.Credentials) != 1 {
		t.Fatalf("Ready %+v, credentials %v; want the failure, and the credentials kept", c, obj.Status.Credentials)
	}
	if got := events.Take(); len(got) != 1 || got[0] != "Warning GraphUnreachable Checking credentials failed: unavailable: dial tcp: i/o timeout" {
		t.Fatalf("events %q; want the failure told once", got)
	}

	gone := &azerr.Error{Kind: azerr.KindNotFound, Err: errors.New("Request_ResourceNotFound")}
	target.CheckFailed(obj, c, events, "credentials", gone, now.Add(time.Minute), now)
	if obj.Status.Credentials != nil || len(events.Take()) != 1 {
		t.Fatalf("credentials %v; want them gone with the service principal, and the new reason told", obj.Status.Credentials)
	}

	target.CheckSucceeded(obj, target.Condition(obj, v1alpha1.ConditionReady), events, "credentials", now.Add(time.Hour), now)
	if obj.Status.ConsecutiveFailures != 0 || !obj.Status.LastCheckTime.Time.Equal(now) || !obj.Status.NextCheckTime.Time.Equal(now.Add(time.Hour)) {
		t.Fatalf("status %+v", obj.Status)
	}
	if got := events.Take(); len(got) != 1 || !strings.HasPrefix(got[0], "Normal CheckRecovered Reading credentials works again") {
		t.Fatalf("events %q", got)
	}
}
