package pullauth

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clocktesting "k8s.io/utils/clock/testing"
)

// Failures are told once they last; a resource version too old is none, and a success ends one.
func TestWatcherSynced(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC))
	w := &Watcher{Clock: clock}
	w.reflectors.Store(2)
	check := func(what string, wantSynced bool, wantErr string) {
		t.Helper()
		synced, err := w.Synced()
		if synced != wantSynced || (err == nil) != (wantErr == "") || (err != nil && !strings.Contains(err.Error(), wantErr)) {
			t.Errorf("%s: Synced() = %v, %v; want %v, %q", what, synced, err, wantSynced, wantErr)
		}
	}
	check("before any list", false, "")
	forbidden := apierrors.NewForbidden(corev1.Resource("events"), "", errors.New("RBAC: no"))
	w.note("pull-failed-events", forbidden)
	check("a refusal just now", false, "")
	clock.SetTime(clock.Now().Add(FailureGrace))
	check("a refusal that lasted", false, "pull-failed-events: events is forbidden")
	w.listed.Store(2)
	check("listed, then refused again", true, "forbidden")
	w.note("pull-failed-events", nil)
	check("listed again", true, "")
	w.note("nodes", apierrors.NewResourceExpired("too old resource version"))
	clock.SetTime(clock.Now().Add(time.Hour))
	check("a resource version too old", true, "")
}
