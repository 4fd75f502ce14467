package imagepulls

import (
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/pullauth"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/targettest"
)

// source is the cluster's pulls as the operator reads them.
type source struct {
	SyncedFunc    func() (bool, error)
	IncidentsFunc func(now time.Time) []pullauth.Incident
}

func (f source) Synced() (bool, error)                       { return f.SyncedFunc() }
func (f source) Incidents(now time.Time) []pullauth.Incident { return f.IncidentsFunc(now) }

var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func watching(registries ...string) *v1alpha1.CredentialWatch {
	return &v1alpha1.CredentialWatch{Spec: v1alpha1.CredentialWatchSpec{ImagePulls: &v1alpha1.ImagePulls{Registries: registries}}}
}

func synced(err error) func() (bool, error) { return func() (bool, error) { return err == nil, err } }

func TestShowWhileNotListed(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "", errors.New("no"))
	for _, tc := range []struct {
		name   string
		src    Incidents
		reason string
		text   string
		next   time.Duration
	}{
		{"not watched", nil, v1alpha1.ReasonPullsNotWatched, "--image-pulls=false", 0},
		{"listing", source{SyncedFunc: synced(errors.New(""))}, v1alpha1.ReasonPullsListFailed, "", ListFailedRetry},
		{"forbidden", source{SyncedFunc: synced(forbidden)}, v1alpha1.ReasonPullsListFailed, "it needs list and watch on them cluster-wide", ListFailedRetry},
		{"not synced yet", source{SyncedFunc: func() (bool, error) { return false, nil }}, v1alpha1.ReasonPullsListing, "is listing", ListingRetry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := watching("*.azurecr.io")
			next := Show(obj, tc.src, &targettest.Events{}, now)
			c := target.Condition(obj, v1alpha1.ConditionImagePullsAuthorized)
			if c.Status != metav1.ConditionUnknown || c.Reason != tc.reason || !strings.Contains(c.Message, tc.text) || (tc.next != 0 && !next.Equal(now.Add(tc.next))) {
				t.Fatalf("ImagePullsAuthorized %s %q, next %s", c.Reason, c.Message, next)
			}
		})
	}
}

// An incident is shown at once, told once its scope settled, and its end is told too; a registry
// the watch does not cover is not its concern.
func TestShowTellsAnIncidentOnceSettled(t *testing.T) {
	refused := []pullauth.Incident{
		{Registry: "prod.azurecr.io", Scope: v1alpha1.PullScopeClusterWide, Failing: []string{"n1", "n2"}, Since: now.Add(-time.Minute), Tell: now.Add(time.Minute)},
		{Registry: "docker.io", Scope: v1alpha1.PullScopeClusterWide, Failing: []string{"n1"}, Since: now},
	}
	src := source{SyncedFunc: synced(nil), IncidentsFunc: func(time.Time) []pullauth.Incident { return refused }}
	obj, events := watching("*.azurecr.io"), &targettest.Events{}

	next := Show(obj, src, events, now)
	if len(obj.Status.ImagePulls) != 1 || obj.Status.ImagePulls[0].FailingNodes != 2 || !next.Equal(now.Add(time.Minute)) || len(events.Take()) != 0 {
		t.Fatalf("status %+v, next %s; want the covered incident shown, and told in a minute", obj.Status.ImagePulls, next)
	}
	if c := target.Condition(obj, v1alpha1.ConditionImagePullsAuthorized); c.Reason != v1alpha1.ReasonClusterWidePullFailures {
		t.Fatalf("ImagePullsAuthorized %+v", c)
	}
	Show(obj, src, events, now.Add(time.Minute))
	Show(obj, src, events, now.Add(2*time.Minute))
	if got := events.Take(); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+EventRefused) {
		t.Fatalf("events %q; want the incident told once", got)
	}
	refused = nil
	Show(obj, src, events, now.Add(3*time.Minute))
	got := events.Take()
	if len(got) != 1 || got[0] != "Normal "+EventRecovered+" prod.azurecr.io refuses no image pull any more" || obj.Status.ImagePulls != nil {
		t.Fatalf("events %q, status %+v; want the end told", got, obj.Status.ImagePulls)
	}
	if c := target.Condition(obj, v1alpha1.ConditionImagePullsAuthorized); c.Status != metav1.ConditionTrue {
		t.Fatalf("ImagePullsAuthorized %+v", c)
	}
}

func TestShowWithoutSpecRemovesTheCondition(t *testing.T) {
	obj := watching("*.azurecr.io")
	Show(obj, nil, &targettest.Events{}, now)
	obj.Spec.ImagePulls = nil
	Show(obj, nil, &targettest.Events{}, now)
	if len(obj.Status.Conditions) != 0 {
		t.Fatalf("conditions %+v", obj.Status.Conditions)
	}
}
