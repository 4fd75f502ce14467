package pullauth

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/credwatch/credwatch/api/v1alpha1"
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

// fakeCluster drives a watcher's stores as its reflectors would, without an API server.
type fakeCluster struct {
	t      *testing.T
	clock  *clocktesting.FakePassiveClock
	w      *Watcher
	pods   podStore
	events eventStore
}

func newFakeCluster(t *testing.T, nodes ...string) *fakeCluster {
	t.Helper()
	clock := clocktesting.NewFakePassiveClock(t0)
	set := &NodeSet{}
	var listed []any
	for _, n := range nodes {
		listed = append(listed, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	if err := set.Replace(listed, ""); err != nil {
		t.Fatal(err)
	}
	w := &Watcher{Tracker: NewTracker(DefaultThresholds, set.Count), Clock: clock, Nodes: set}
	f := feeder{context.Background(), w}
	return &fakeCluster{t: t, clock: clock, w: w, pods: podStore{f}, events: eventStore{f}}
}

// kubeletEvent is a pull event as kubelet on node writes it about the pod shop/name: refused for
// want of credentials, or pulled.
func kubeletEvent(name, node string, refused bool, at time.Time) *corev1.Event {
	e := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name + "." + node, Namespace: "shop", UID: types.UID("event-" + name + "-" + node)},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: name, UID: types.UID("uid-" + name), APIVersion: "v1", FieldPath: "spec.containers{api}"},
		Reason:         "Pulled", Message: `Successfully pulled image "` + shopImage + `" in 1.2s (1.2s including waiting). Image size: 1234 bytes.`,
		Type:                corev1.EventTypeNormal,
		Source:              corev1.EventSource{Component: "kubelet", Host: node},
		ReportingController: "kubelet", ReportingInstance: node,
		FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at), Count: 1,
	}
	if refused {
		e.Reason, e.Message, e.Type = "Failed", docker401, corev1.EventTypeWarning
	}
	return e
}

// pod is the pod shop/name on node, whose container api has state.
func pod(name, node string, state corev1.ContainerState) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "api", Image: shopImage}}},
		Status:     corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "api", Image: shopImage, State: state}}},
	}
}

// backOff is a container waiting out a refused pull, as kubelets before 1.30 word it: without the
// error, so that the pod's status alone is no refusal and only the events tell of one.
var backOff = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "` + shopImage + `"`}}

func runningSince(at time.Time) corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}
}

func (c *fakeCluster) pod(p *corev1.Pod) {
	c.t.Helper()
	if err := c.pods.Update(p); err != nil {
		c.t.Fatal(err)
	}
}

func (c *fakeCluster) event(e *corev1.Event) {
	c.t.Helper()
	if err := c.events.Add(e); err != nil {
		c.t.Fatal(err)
	}
}

// failing are the nodes whose latest pull from myacr.azurecr.io was refused.
func (c *fakeCluster) failing() []string {
	for _, in := range c.w.Incidents(c.clock.Now()) {
		if in.Registry == "myacr.azurecr.io" {
			return in.Failing
		}
	}
	return nil
}

// Events forged by whoever may create events in a namespace count for nothing, however many
// nodes they name; kubelets' own, borne out by their pods, make a cluster-wide incident.
func TestWatcherCountsOnlyCorroboratedEvents(t *testing.T) {
	c := newFakeCluster(t, "aks-1", "aks-2", "aks-3", "aks-4", "aks-5", "aks-6")
	for i, n := range []string{"aks-1", "aks-2", "aks-3", "aks-4"} {
		c.pod(pod(fmt.Sprintf("stuck-%d", i+1), n, backOff))
	}
	c.pod(pod("running", "aks-5", runningSince(t0.Add(-5*time.Minute))))

	notKubelet := kubeletEvent("stuck-1", "aks-1", true, t0)
	notKubelet.Source.Component, notKubelet.ReportingController = "kubectl", ""
	notKubeletReporter := kubeletEvent("stuck-1", "aks-1", true, t0)
	notKubeletReporter.UID, notKubeletReporter.ReportingController = "event-2", "attacker"
	ghost := kubeletEvent("stuck-2", "ghost", true, t0)
	otherNode := kubeletEvent("stuck-3", "aks-2", true, t0)
	otherNamespace := kubeletEvent("stuck-4", "aks-4", true, t0)
	otherNamespace.Namespace = "attacker"
	missing := kubeletEvent("nobody", "aks-6", true, t0)
	notWaiting := kubeletEvent("running", "aks-5", true, t0)
	pulledBeforeItStarted := kubeletEvent("running", "aks-5", false, t0)
	pulledBeforeItStarted.UID = "event-3"
	for _, e := range []*corev1.Event{notKubelet, notKubeletReporter, ghost, otherNode, otherNamespace, missing, notWaiting, pulledBeforeItStarted} {
		c.event(e)
	}
	if got := c.failing(); got != nil {
		t.Errorf("forged refusals made nodes %v fail", got)
	}
	// Those a later status of their pod might bear out wait for it, then count for nothing.
	c.clock.SetTime(t0.Add(HoldFor))
	c.pod(pod("running", "aks-5", runningSince(t0.Add(-5*time.Minute))))
	want := map[Reason]uint64{NotKubelet: 3, UnknownNode: 1, OtherNode: 1, NoPod: 1, NoContainer: 2}
	if got := c.w.Tracker.Ignored(); !maps.Equal(got, want) {
		t.Errorf("ignored %v, want %v", got, want)
	}
	if got := c.failing(); got != nil {
		t.Errorf("forged refusals made nodes %v fail", got)
	}
	if n := c.w.Tracker.Refusals()["myacr.azurecr.io"]; len(n) != 0 {
		t.Errorf("refusals counted %v, want none", n)
	}

	// Kubelets report the refusals their pods show.
	now := c.clock.Now()
	for i, n := range []string{"aks-1", "aks-2", "aks-3"} {
		c.event(kubeletEvent(fmt.Sprintf("stuck-%d", i+1), n, true, now))
	}
	if got := c.failing(); !slices.Equal(got, []string{"aks-1", "aks-2", "aks-3"}) {
		t.Errorf("failing nodes %v, want aks-1, aks-2 and aks-3", got)
	}
	if in := c.w.Incidents(now); len(in) != 1 || in[0].Scope != v1alpha1.PullScopeClusterWide {
		t.Errorf("incidents %+v, want one cluster-wide", in)
	}
	if n := c.w.Tracker.Refusals()["myacr.azurecr.io"]; n[v1alpha1.PullScopeUndetermined]+n[v1alpha1.PullScopeClusterWide] != 3 {
		t.Errorf("refusals counted %v, want 3", n)
	}
}

// Kubelet writes the event and the pod's status apart: an event that comes first waits for the
// status that bears it out, for HoldFor at most.
func TestWatcherHoldsEventsForTheirPod(t *testing.T) {
	c := newFakeCluster(t, "aks-1", "aks-2")
	c.pod(pod("api-1", "aks-1", corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}))
	c.event(kubeletEvent("api-1", "aks-1", true, t0))
	c.event(kubeletEvent("api-2", "aks-2", false, t0))
	if got := c.failing(); got != nil || c.w.evidence().nHeld != 2 {
		t.Fatalf("failing %v with %d events held, want none failing, 2 held", got, c.w.evidence().nHeld)
	}

	// The pod on aks-1 shows the refusal; the one on aks-2 was created and started.
	c.clock.SetTime(t0.Add(10 * time.Second))
	c.pod(pod("api-1", "aks-1", backOff))
	if got := c.failing(); !slices.Equal(got, []string{"aks-1"}) {
		t.Errorf("failing %v, want aks-1", got)
	}
	c.pod(pod("api-2", "aks-2", runningSince(t0.Add(2*time.Second))))
	if in := c.w.Incidents(c.clock.Now()); len(in) != 1 || in[0].Scope != v1alpha1.PullScopeNodeLocal || in[0].Pulling != 1 {
		t.Errorf("incidents %+v, want aks-1's node-local, aks-2 pulling", in)
	}
	if n := c.w.evidence().nHeld; n != 0 {
		t.Errorf("%d events still held", n)
	}

	// An event whose pod shows nothing within HoldFor is let go, and its pod showing it later
	// changes nothing.
	c.event(kubeletEvent("api-3", "aks-2", true, c.clock.Now()))
	c.clock.SetTime(c.clock.Now().Add(HoldFor))
	c.pod(pod("api-3", "aks-2", backOff))
	if got := c.failing(); !slices.Equal(got, []string{"aks-1"}) {
		t.Errorf("failing %v after an event let go, want aks-1 only", got)
	}
	if got := c.w.Tracker.Ignored(); got[NoPod] != 1 {
		t.Errorf("ignored %v, want the event let go as NoPod", got)
	}
}

// A flood of forged events, or of pods, takes bounded memory.
func TestWatcherEvidenceIsBounded(t *testing.T) {
	c := newFakeCluster(t, "aks-1")
	for i := range MaxHeld + 10 {
		e := kubeletEvent(fmt.Sprintf("nobody-%d", i), "aks-1", true, t0)
		c.event(e)
		c.event(e) // listed again: held once
	}
	ev := c.w.evidence()
	if ev.nHeld != MaxHeld || c.w.Tracker.Ignored()[NoPod] != 10 {
		t.Errorf("%d events held, %d let go; want %d, 10", ev.nHeld, c.w.Tracker.Ignored()[NoPod], MaxHeld)
	}
	for i := range MaxPods + 10 {
		c.pod(pod(fmt.Sprintf("api-%d", i), "aks-1", backOff))
	}
	if n := len(ev.pods); n != MaxPods {
		t.Errorf("%d pods kept, want %d", n, MaxPods)
	}
	// A relist of more keeps as many.
	var many []any
	for i := range MaxPods + 10 {
		many = append(many, pod(fmt.Sprintf("api-%d", i), "aks-1", backOff))
	}
	if err := c.pods.Replace(many, ""); err != nil {
		t.Fatal(err)
	}
	if n := len(ev.pods); n != MaxPods {
		t.Errorf("%d pods kept after a relist, want %d", n, MaxPods)
	}
	// Pods with nothing to bear out are not kept, and a relist forgets those gone.
	if err := c.pods.Replace([]any{pod("api-0", "aks-1", runningSince(t0.Add(-time.Hour)))}, ""); err != nil {
		t.Fatal(err)
	}
	if n := len(ev.pods); n != 0 {
		t.Errorf("%d pods kept after a relist of none that can bear out an event", n)
	}
}
