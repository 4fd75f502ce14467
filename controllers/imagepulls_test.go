package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/imagepulls"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/webhook"
	"github.com/credwatch/credwatch/internal/pullauth"
	"github.com/credwatch/credwatch/internal/target"
)

// pulls runs a pullauth.Watcher against the real API server for one test, on the harness's clock.
type pulls struct {
	t       *testing.T
	watcher *pullauth.Watcher
	tracker *pullauth.Tracker
	changed chan event.TypedGenericEvent[string]
	stop    context.CancelFunc
	// registry is this test's own, so that the events of other tests, which every watcher sees,
	// do not count; nodes likewise.
	registry, ns string

	mu   sync.Mutex
	pods map[string]*corev1.Pod // by name, as last written
}

// newPulls gives the harness a watcher that has listed the cluster.
func newPulls(t *testing.T, h *harness) *pulls {
	t.Helper()
	p := &pulls{t: t, ns: h.key.Namespace, registry: h.key.Namespace + ".azurecr.io", pods: map[string]*corev1.Pod{}}
	p.restart(h)
	p.start()
	return p
}

// restart stops the watcher, as an operator that stops or loses its lease does, and gives the
// harness a new one, not started.
func (p *pulls) restart(h *harness) {
	p.t.Helper()
	if p.stop != nil {
		p.stop()
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		p.t.Fatal(err)
	}
	nodes := &pullauth.NodeSet{}
	p.tracker = pullauth.NewTracker(pullauth.DefaultThresholds, nodes.Count)
	p.changed = make(chan event.TypedGenericEvent[string], 1000)
	p.watcher = &pullauth.Watcher{Client: c, Tracker: p.tracker, Clock: h.clock, Changed: p.changed, Nodes: nodes}
	h.r.ImagePulls = p.watcher
}

// start runs the watcher until the test ends, and waits for its first lists.
func (p *pulls) start() {
	p.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	p.t.Cleanup(cancel)
	go func() { _ = p.watcher.Start(ctx) }()
	eventually(p.t, 20*time.Second, "the watcher's first lists", func() bool { ok, _ := p.watcher.Synced(); return ok })
}

func (p *pulls) node(name string) string { return p.ns + "-" + name }

// cover points the harness's watch at the test's own registry: the API server, and so every
// watcher, holds the pull events of the tests before.
func (p *pulls) cover(h *harness) {
	p.t.Helper()
	w := h.get()
	// Not the registries of pods: those of other tests' pods would count.
	w.Spec.ImagePulls = &v1alpha1.ImagePulls{Registries: []string{p.registry}, PodRegistries: ptr.To(false)}
	if err := k8s.Update(context.Background(), w); err != nil {
		p.t.Fatal(err)
	}
}

// createNodes registers nodes with the API server, which the watcher counts.
func (p *pulls) createNodes(names ...string) {
	p.t.Helper()
	for _, n := range names {
		if err := k8s.Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: p.node(n)}}); err != nil {
			p.t.Fatal(err)
		}
	}
}

// image is the test's image in its own registry.
func (p *pulls) image() string { return p.registry + "/shop/api:1.4" }

// event records what a kubelet on node reports about pulling image for pod at, as kubelet's
// recorder fills an event: component and node in source and reporting fields alike; unless
// forge says otherwise.
func (p *pulls) event(node string, pod *corev1.Pod, reason, message string, at time.Time, forge ...func(*corev1.Event)) {
	p.t.Helper()
	e := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: pod.Name + ".", Namespace: p.ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, APIVersion: "v1"},
		Reason:         reason, Message: message, Type: corev1.EventTypeWarning,
		Source:              corev1.EventSource{Component: "kubelet", Host: p.node(node)},
		ReportingController: "kubelet", ReportingInstance: p.node(node),
		FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at), Count: 1,
	}
	for _, f := range forge {
		f(e)
	}
	if err := k8s.Create(context.Background(), e); err != nil {
		p.t.Fatal(err)
	}
}

func refusedMessage(image string) string {
	return fmt.Sprintf(`Failed to pull image "%s": rpc error: code = Unknown desc = failed to pull and unpack image: `+
		`failed to resolve reference: failed to authorize: failed to fetch anonymous token: unexpected status: 401 Unauthorized`, image)
}

// refused records that node's kubelet was refused the test's image for the pod api-<node>, which
// shows it: its container waits on the pull, with the message of kubelets before 1.30, which
// names no error, so that the event alone tells of the refusal.
func (p *pulls) refused(node string, at time.Time) {
	p.t.Helper()
	pod := p.pod("api-"+node, node, p.image(), false, backingOff(p.image()))
	p.event(node, pod, "Failed", refusedMessage(p.image()), at)
}

// pulled records that node's kubelet pulled the test's image for the pod web-<node>, whose
// container started then.
func (p *pulls) pulled(node string, at time.Time) {
	p.t.Helper()
	pod := p.pod("web-"+node, node, p.image(), false, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}})
	p.event(node, pod, "Pulled", fmt.Sprintf(`Successfully pulled image "%s" in 1.2s (1.2s including waiting)`, p.image()), at)
}

func backingOff(image string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: fmt.Sprintf(`Back-off pulling image "%s"`, image)}}
}

// stuckPod creates a pod on node whose image registry refuses, with a pull secret of its own or
// not, as kubelets since 1.30 word it: the pod's status alone tells of the refusal.
func (p *pulls) stuckPod(name, node, image string, pullSecret bool) {
	p.t.Helper()
	p.pod(name, node, image, pullSecret, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff",
		Message: fmt.Sprintf(`Back-off pulling image "%s": ErrImagePull: unauthorized: authentication required`, image)}})
}

// pod creates the pod name on node, or finds it, and gives its container the state, as its
// kubelet would; it is deleted when the test ends: every watcher after lists it.
func (p *pulls) pod(name, node, image string, pullSecret bool, state corev1.ContainerState) *corev1.Pod {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	ctx := context.Background()
	pod := p.pods[name]
	if pod == nil {
		pod = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns},
			Spec:       corev1.PodSpec{NodeName: p.node(node), Containers: []corev1.Container{{Name: "api", Image: image}}},
		}
		if pullSecret {
			pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
		}
		if err := k8s.Create(ctx, pod); err != nil {
			p.t.Fatal(err)
		}
		p.t.Cleanup(func() { _ = k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)) })
	} else if equality.Semantic.DeepEqual(pod.Status.ContainerStatuses[0].State, state) {
		return pod
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "api", Image: image, State: state}}}
	if state.Running != nil {
		pod.Status.Phase = corev1.PodRunning
	}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		p.t.Fatal(err)
	}
	p.pods[name] = pod
	return pod
}

// waitFor waits until the tracker's incident of the test's registry is as want says.
func (p *pulls) waitFor(h *harness, what string, want func(*pullauth.Incident) bool) {
	p.t.Helper()
	eventually(p.t, 20*time.Second, what, func() bool {
		for _, in := range p.tracker.Incidents(h.clock.Now()) {
			if in.Registry == p.registry {
				return want(&in)
			}
		}
		return want(nil)
	})
}

// pullStory is a watch of a service principal whose secret has left before it expires (negative:
// expired since), alerting to a webhook, and a pull watcher of a cluster of the nodes named.
func pullStory(t *testing.T, left time.Duration, nodes ...string) (*harness, seeded, *receiver, *pulls) {
	t.Helper()
	h := newHarness(t)
	s := seed(t, h.clock.Now(), left, 400*day, 200*day)
	h.create(s.appID, nil)
	rc := newReceiver(t, nil)
	h.withWebhook(rc)
	p := newPulls(t, h)
	p.cover(h)
	p.createNodes(nodes...)
	return h, s, rc, p
}

func pullAlerts(rc *receiver) []webhook.Payload {
	var out []webhook.Payload
	for _, a := range rc.received() {
		if a.Kind == alertkind.PullsRefused || a.Kind == alertkind.PullsRecovered {
			out = append(out, a)
		}
	}
	return out
}

func countEvents(events []string, reason string) int {
	n := 0
	for _, e := range events {
		if strings.Contains(e, " "+reason+" ") {
			n++
		}
	}
	return n
}

// An expired secret: every node is refused by the registry. The watch of the cluster's service
// principal says so, with the expiry as the cause, alerts once however many events follow, and
// says once when it is over; a watch of another registry hears nothing.
func TestImagePullsRefusedAcrossTheClusterAreTiedToTheExpiredSecret(t *testing.T) {
	needsAPIServer(t)
	h, s, rc, p := pullStory(t, -2*time.Hour, "a", "b", "c", "d")
	t0 := h.clock.Now()

	other := &v1alpha1.CredentialWatch{
		ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: h.key.Namespace},
		Spec: v1alpha1.CredentialWatchSpec{
			Target:     v1alpha1.Target{ServicePrincipal: &v1alpha1.ServicePrincipalTarget{TenantID: tenantID, ClientID: s.appID}},
			ImagePulls: &v1alpha1.ImagePulls{Registries: []string{"registry.internal.example"}, PodRegistries: ptr.To(false)},
		},
	}
	if err := k8s.Create(context.Background(), other); err != nil {
		t.Fatal(err)
	}

	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionTrue, v1alpha1.ReasonNoPullFailures)

	for _, n := range []string{"a", "b", "c"} {
		p.refused(n, t0)
	}
	p.waitFor(h, "a cluster-wide incident", func(in *pullauth.Incident) bool { return in != nil && in.Scope == v1alpha1.PullScopeClusterWide })
	if len(p.changed) == 0 {
		t.Error("the watcher named no changed registry")
	}
	var mapped []types.NamespacedName
	for _, req := range watchesOfRegistry(k8s)(context.Background(), p.registry) {
		if req.Namespace == h.key.Namespace {
			mapped = append(mapped, req.NamespacedName)
		}
	}
	if len(mapped) != 1 || mapped[0] != h.key {
		t.Errorf("the registry maps to %v in the test's namespace, want only %v", mapped, h.key)
	}

	h.step(pullauth.DefaultThresholds.Settle) // the refusals settle before the incident is told
	w, res := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionFalse, v1alpha1.ReasonClusterWidePullFailures)
	msg := target.Condition(w, v1alpha1.ConditionImagePullsAuthorized).Message
	for _, want := range []string{p.registry, "on 3 nodes", p.node("a"), "expired 2h ago: this is why"} {
		if !strings.Contains(msg, want) {
			t.Errorf("condition message %q does not say %q", msg, want)
		}
	}
	if len(w.Status.ImagePulls) != 1 || w.Status.ImagePulls[0].Scope != v1alpha1.PullScopeClusterWide || w.Status.ImagePulls[0].FailingNodes != 3 ||
		!w.Status.ImagePulls[0].Since.Time.Equal(t0) {
		t.Errorf("status.imagePulls = %+v", w.Status.ImagePulls)
	}
	if res.RequeueAfter > 10*time.Minute {
		t.Errorf("requeued after %v, want by the time the refusals leave the window", res.RequeueAfter)
	}
	if got := pullAlerts(rc); len(got) != 1 || got[0].ImagePulls == nil || got[0].ImagePulls.Scope != "ClusterWide" ||
		!strings.Contains(got[0].Fix, "az ad app credential reset --id "+s.appID) {
		t.Fatalf("alerts = %+v, want one cluster-wide PullsRefused with the renewal as fix", got)
	}
	if n := countEvents(h.takeEvents(), imagepulls.EventRefused); n != 1 {
		t.Errorf("%d ImagePullsRefused events, want 1", n)
	}

	// The other watch covers another registry.
	ctx := ctrl.LoggerInto(context.Background(), h.logs.logger())
	otherKey := types.NamespacedName{Namespace: other.Namespace, Name: other.Name}
	if _, err := reconcileFully(ctx, t, h.r, otherKey); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, otherKey, other); err != nil {
		t.Fatal(err)
	}
	assertCondition(t, other, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionTrue, v1alpha1.ReasonNoPullFailures)
	h.drainEvents()
	h.takeEvents()

	// A flood: kubelets retry, pods multiply. Nothing new to say, nothing said. Reported a minute
	// on: an event dated ahead of the operator's clock counts as of now.
	h.step(time.Minute)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				p.refused([]string{"a", "b", "c"}[(g+i)%3], t0.Add(time.Duration(i)*100*time.Millisecond))
			}
		}()
	}
	wg.Wait()
	// Event times have whole seconds: the last of the flood is at 14 s.
	p.waitFor(h, "the flood to be read", func(in *pullauth.Incident) bool {
		return in != nil && !in.Changes.Before(t0.Add(10*time.Minute+14*time.Second))
	})
	h.reconcile()
	if got := pullAlerts(rc); len(got) != 1 {
		t.Errorf("%d pull alerts after the flood, want still 1", len(got))
	}
	if events := h.takeEvents(); countEvents(events, imagepulls.EventRefused)+countEvents(events, imagepulls.EventRecovered) != 0 {
		t.Errorf("image-pull events after the flood %q, want none", events)
	}

	// The operator restarts, or another replica takes the lease. Until the new watcher has listed
	// the cluster, the watch keeps what it knew; then it finds the same incident, and says nothing.
	p.restart(h)
	w, res = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionFalse, v1alpha1.ReasonClusterWidePullFailures)
	if len(w.Status.ImagePulls) != 1 || res.RequeueAfter > imagepulls.ListingRetry {
		t.Errorf("before the first lists: status.imagePulls = %+v, requeued after %v", w.Status.ImagePulls, res.RequeueAfter)
	}
	p.start()
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionFalse, v1alpha1.ReasonClusterWidePullFailures)
	if len(w.Status.ImagePulls) != 1 || !w.Status.ImagePulls[0].Since.Time.Equal(t0) {
		t.Errorf("after the restart: status.imagePulls = %+v", w.Status.ImagePulls)
	}
	if got := pullAlerts(rc); len(got) != 1 {
		t.Errorf("%d pull alerts after the restart, want still 1", len(got))
	}
	if events := h.takeEvents(); countEvents(events, imagepulls.EventRefused)+countEvents(events, imagepulls.EventRecovered) != 0 {
		t.Errorf("image-pull events after the restart %q, want none", events)
	}

	// Renewed and the cluster moved onto the new secret: nothing is refused any more, and once the
	// window has passed the incident is over.
	h.step(10 * time.Minute)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionTrue, v1alpha1.ReasonNoPullFailures)
	if w.Status.ImagePulls != nil {
		t.Errorf("status.imagePulls = %+v after the incident", w.Status.ImagePulls)
	}
	got := pullAlerts(rc)
	if len(got) != 2 || got[1].Kind != alertkind.PullsRecovered || got[1].ImagePulls == nil || got[1].ImagePulls.Registry != p.registry {
		t.Errorf("alerts = %+v, want the incident and its end", got)
	}
	if n := countEvents(h.takeEvents(), imagepulls.EventRecovered); n != 1 {
		t.Errorf("%d ImagePullsRecovered events, want 1", n)
	}
	h.step(time.Hour)
	h.reconcile()
	if n := len(pullAlerts(rc)); n != 2 {
		t.Errorf("%d pull alerts an hour later, want still 2", n)
	}
	assertNoSecrets(t, h, s.appSecret)
}

// One node's kubelet presents no credential while the others pull: the watch names that node and
// the kubelet fix, ignores failures that are not about credentials, reads stuck pods too, and
// clears when the node pulls again.
func TestImagePullsRefusedOnOneNodeNameTheNode(t *testing.T) {
	needsAPIServer(t)
	h, _, rc, p := pullStory(t, 200*day, "a", "b", "c", "d", "e")
	t0 := h.clock.Now()

	for _, n := range []string{"a", "b", "c"} {
		p.pulled(n, t0)
	}
	// Not about credentials: an image that does not exist, a rate limit, of a pod whose status
	// bears out that it failed.
	stuck := p.pod("api-e", "e", p.image(), false, backingOff(p.image()))
	p.event("e", stuck, "Failed", fmt.Sprintf(`Failed to pull image "%s/shop/api:9.9": rpc error: code = NotFound desc = failed to resolve reference "%s/shop/api:9.9": not found`, p.registry, p.registry), t0)
	p.event("e", stuck, "Failed", fmt.Sprintf(`Failed to pull image "%s/shop/api:1.4": 429 Too Many Requests - Server message: toomanyrequests: retry later`, p.registry), t0)
	// A pod stuck on node d, whose kubelet reports the refusal in the pod's status.
	p.stuckPod("api-1", "d", p.registry+"/shop/api:1.4", false)
	p.waitFor(h, "a node-local incident on d", func(in *pullauth.Incident) bool {
		return in != nil && in.Scope == v1alpha1.PullScopeNodeLocal && len(in.Failing) == 1 && in.Failing[0] == p.node("d")
	})

	h.step(pullauth.DefaultThresholds.Settle) // the refusals settle before the incident is told
	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionFalse, v1alpha1.ReasonNodeLocalPullFailures)
	msg := target.Condition(w, v1alpha1.ConditionImagePullsAuthorized).Message
	for _, want := range []string{"on 1 node only (" + p.node("d") + ")", "while 3 other nodes pull", "credential provider was disabled at start-up"} {
		if !strings.Contains(msg, want) {
			t.Errorf("condition message %q does not say %q", msg, want)
		}
	}
	got := pullAlerts(rc)
	if len(got) != 1 || got[0].ImagePulls == nil || got[0].ImagePulls.Scope != "NodeLocal" || got[0].Severity != notify.SeverityWarning ||
		!strings.Contains(got[0].Fix, "Restart kubelet on "+p.node("d")) {
		t.Fatalf("alerts = %+v, want one node-local PullsRefused naming the kubelet fix", got)
	}

	// Kubelet restarted on d: it pulls again.
	h.step(time.Minute)
	p.pulled("d", h.clock.Now())
	p.waitFor(h, "the incident to end", func(in *pullauth.Incident) bool { return in == nil })
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionTrue, v1alpha1.ReasonNoPullFailures)
	if got := pullAlerts(rc); len(got) != 2 || got[1].Kind != alertkind.PullsRecovered {
		t.Errorf("alerts = %+v, want the incident and its end", got)
	}
}

// Anyone who may create events in a namespace can write "Failed to pull image" as if from a
// kubelet. Forged on as many nodes as make a cluster-wide incident, they raise nothing: each is
// given away by the pod it names, or by who reports it. The kubelets' own, of the same pods, do.
func TestImagePullsForgedEventsRaiseNothing(t *testing.T) {
	needsAPIServer(t)
	h, _, rc, p := pullStory(t, -2*time.Hour, "a", "b", "c", "e", "f")
	t0 := h.clock.Now()

	image := p.image()
	stuckA := p.pod("api-a", "a", image, false, backingOff(image))
	stuckB := p.pod("api-b", "b", image, false, backingOff(image))
	onGhost := p.pod("api-ghost", "ghost", image, false, backingOff(image)) // bound to no node there is
	runningE := p.pod("web-e", "e", image, false, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0.Add(-5 * time.Minute))}})
	nobody := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nobody", Namespace: p.ns}}

	// Each forgery is given away by one thing; together they name a, ghost, c and e.
	p.event("a", stuckA, "Failed", refusedMessage(image), t0, func(e *corev1.Event) {
		e.Source.Component, e.ReportingController = "kubectl", "kubectl"
	})
	p.event("ghost", onGhost, "Failed", refusedMessage(image), t0) // not a node
	p.event("c", nobody, "Failed", refusedMessage(image), t0)      // no such pod
	p.event("c", stuckB, "Failed", refusedMessage(image), t0)      // the pod is on b
	p.event("e", runningE, "Failed", refusedMessage(image), t0)    // the pod runs

	// A refusal of another registry, reported after them, tells when they have been read.
	sentinel := "sentinel." + p.ns + ".example/api:1"
	p.event("f", p.pod("sentinel", "f", sentinel, false, backingOff(sentinel)), "Failed", refusedMessage(sentinel), t0)
	eventually(t, 20*time.Second, "the events to be read", func() bool {
		return slices.ContainsFunc(p.tracker.Incidents(h.clock.Now()), func(in pullauth.Incident) bool { return strings.HasPrefix(in.Registry, "sentinel.") })
	})
	for _, in := range p.tracker.Incidents(h.clock.Now()) {
		if in.Registry == p.registry {
			t.Fatalf("forged events made an incident: %+v", in)
		}
	}
	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionTrue, v1alpha1.ReasonNoPullFailures)
	if got := pullAlerts(rc); len(got) != 0 {
		t.Errorf("alerts = %+v after forged events, want none", got)
	}
	if n := countEvents(h.takeEvents(), imagepulls.EventRefused); n != 0 {
		t.Errorf("%d ImagePullsRefused events after forged ones, want none", n)
	}

	// The kubelets of a, b and c report the refusals their pods show.
	now := h.clock.Now()
	for _, n := range []string{"a", "b", "c"} {
		p.refused(n, now)
	}
	p.waitFor(h, "a cluster-wide incident", func(in *pullauth.Incident) bool { return in != nil && in.Scope == v1alpha1.PullScopeClusterWide })
	h.step(pullauth.DefaultThresholds.Settle) // the refusals settle before the incident is told
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionFalse, v1alpha1.ReasonClusterWidePullFailures)
	if got := w.Status.ImagePulls; len(got) != 1 || !slices.Equal(got[0].Nodes, []string{p.node("a"), p.node("b"), p.node("c")}) {
		t.Errorf("status.imagePulls = %+v, want a, b and c", got)
	}
	if got := pullAlerts(rc); len(got) != 1 {
		t.Errorf("%d alerts, want the cluster-wide one", len(got))
	}
}

// incidents stands in for the watcher, for what only the number of incidents tests.
type incidents []pullauth.Incident

func (in incidents) Synced() (bool, error)                   { return true, nil }
func (in incidents) Incidents(time.Time) []pullauth.Incident { return in }

// More registries refuse than status holds: the ones already told of stay until they end, with
// their start, and none seems to recover because others began; the condition tells the worst.
func TestImagePullIncidentsBeyondTheBoundDoNotRecover(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	t0 := h.clock.Now()
	s := seed(t, t0, 200*day, 400*day, 200*day)
	h.create(s.appID, func(spec *v1alpha1.CredentialWatchSpec) {
		spec.ImagePulls = &v1alpha1.ImagePulls{Registries: []string{"*.azurecr.io"}}
	})
	// refusing gives incidents that started now, as a tracker that has just listed them would.
	refusing := func(scope v1alpha1.PullScope, names ...string) incidents {
		var out incidents
		for _, n := range names {
			out = append(out, pullauth.Incident{Registry: n + ".azurecr.io", Scope: scope,
				Failing: []string{"a"}, Since: h.clock.Now(), Changes: h.clock.Now().Add(10 * time.Minute)})
		}
		return out
	}
	sorted := func(in incidents) incidents {
		slices.SortFunc(in, func(a, b pullauth.Incident) int { return strings.Compare(a.Registry, b.Registry) })
		return in
	}
	var names []string
	for i := range imagepulls.MaxIncidents {
		names = append(names, fmt.Sprintf("r%02d", i))
	}
	h.r.ImagePulls = refusing(v1alpha1.PullScopeNodeLocal, names...)
	w, _ := h.reconcile()
	if len(w.Status.ImagePulls) != imagepulls.MaxIncidents {
		t.Fatalf("%d incidents in status, want %d", len(w.Status.ImagePulls), imagepulls.MaxIncidents)
	}
	h.takeEvents()

	// Two more registries, first by name, one of them refusing every node.
	h.step(time.Minute)
	h.r.ImagePulls = sorted(append(refusing(v1alpha1.PullScopeNodeLocal, append(names, "a01")...), refusing(v1alpha1.PullScopeClusterWide, "a00")...))
	w, _ = h.reconcile()
	if first := w.Status.ImagePulls[0]; len(w.Status.ImagePulls) != imagepulls.MaxIncidents || first.Registry != "r00.azurecr.io" || !first.Since.Time.Equal(t0) {
		t.Errorf("status.imagePulls begins with %+v, want the incidents told of before, since %v", first, t0)
	}
	if events := h.takeEvents(); len(events) != 0 {
		t.Errorf("events %q, want none", events)
	}
	assertCondition(t, w, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionFalse, v1alpha1.ReasonClusterWidePullFailures)
	if msg := target.Condition(w, v1alpha1.ConditionImagePullsAuthorized).Message; !strings.HasPrefix(msg, "a00.azurecr.io") {
		t.Errorf("condition message %q, want the cluster-wide incident status has no room for", msg)
	}

	// One of them ends: the most serious of the others takes its place.
	h.step(time.Minute)
	h.r.ImagePulls = sorted(append(refusing(v1alpha1.PullScopeNodeLocal, append(names[1:], "a01")...), refusing(v1alpha1.PullScopeClusterWide, "a00")...))
	w, _ = h.reconcile()
	events := h.takeEvents()
	if countEvents(events, imagepulls.EventRecovered) != 1 || countEvents(events, imagepulls.EventRefused) != 1 || w.Status.ImagePulls[0].Registry != "a00.azurecr.io" {
		t.Errorf("events %q and status beginning with %s, want r00 over and a00 in its place", events, w.Status.ImagePulls[0].Registry)
	}
}

// By default a watch hears of the registries it names only: anyone who may create pods can have
// kubelets pull from any registry. Told to, it also hears of any registry that refuses pods
// pulling with the node's credential, whatever its name; never of one refusing pods that bring
// their own pull secret.
func TestImagePullsOfPodsOnTheNodesCredentialAreCoveredWhenAsked(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 200*day, 400*day, 200*day)
	h.create(s.appID, func(spec *v1alpha1.CredentialWatchSpec) {
		spec.ImagePulls = &v1alpha1.ImagePulls{Registries: []string{"myacr.azurecr.io"}}
	})
	p := newPulls(t, h)
	p.createNodes("a", "b", "c")
	internal, private := "registry."+p.ns+".example", "private."+p.ns+".example"
	for _, n := range []string{"a", "b", "c"} {
		p.stuckPod("api-"+n, n, internal+"/shop/api:1.4", false)
		p.stuckPod("job-"+n, n, private+"/batch/job:2", true)
	}
	eventually(t, 20*time.Second, "both registries' incidents", func() bool {
		n := 0
		for _, in := range p.tracker.Incidents(h.clock.Now()) {
			if (in.Registry == internal || in.Registry == private) && in.Scope == v1alpha1.PullScopeClusterWide {
				n++
			}
		}
		return n == 2
	})
	// The default covers every *.azurecr.io, where other tests' pulls were refused too.
	ours := func(w *v1alpha1.CredentialWatch) []string {
		var out []string
		for _, in := range w.Status.ImagePulls {
			if strings.Contains(in.Registry, p.ns) {
				out = append(out, in.Registry)
			}
		}
		return out
	}
	w, _ := h.reconcile()
	if got := ours(w); len(got) != 0 {
		t.Errorf("incidents %v, want none of this test's registries", got)
	}
	if got := w.Spec.ImagePulls; got.PodRegistries == nil || got.CoversPodRegistries() {
		t.Errorf("spec.imagePulls defaulted to %+v, want podRegistries false", got)
	}

	// Told to take the pods' registries, it hears of the one refusing the node's credential.
	w.Spec.ImagePulls.PodRegistries = ptr.To(true)
	if err := k8s.Update(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	w, _ = h.reconcile()
	if got := ours(w); len(got) != 1 || got[0] != internal {
		t.Errorf("incidents %v, want %s's only", got, internal)
	}
}

// An operator that may not list pulls says so on the watch, and keeps the incidents it knew.
func TestImagePullsThatCannotBeListedSaySo(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 200*day, 400*day, 200*day)
	h.create(s.appID, func(spec *v1alpha1.CredentialWatchSpec) {
		spec.ImagePulls = &v1alpha1.ImagePulls{Registries: []string{"myacr.azurecr.io"}}
	})
	known := h.get()
	known.Status.ImagePulls = []v1alpha1.PullIncident{{Registry: "myacr.azurecr.io", Scope: v1alpha1.PullScopeClusterWide,
		Nodes: []string{"a", "b", "c"}, FailingNodes: 3, Since: metav1.NewTime(h.clock.Now().Add(-time.Hour))}}
	if err := k8s.Status().Update(context.Background(), known); err != nil {
		t.Fatal(err)
	}

	nobody := rest.CopyConfig(cfg)
	nobody.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + h.key.Namespace + ":nobody"}
	c, err := client.NewWithWatch(nobody, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	nodes := &pullauth.NodeSet{}
	watcher := &pullauth.Watcher{Client: c, Tracker: pullauth.NewTracker(pullauth.DefaultThresholds, nodes.Count), Clock: h.clock, Nodes: nodes}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.r.ImagePulls = watcher

	// Not started yet: listing.
	w, res := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionUnknown, v1alpha1.ReasonPullsListing)
	if len(w.Status.ImagePulls) != 1 || res.RequeueAfter > imagepulls.ListingRetry {
		t.Errorf("status.imagePulls = %+v, requeued after %v; want the incident as last seen, looked at again within %v", w.Status.ImagePulls, res.RequeueAfter, imagepulls.ListingRetry)
	}

	go func() { _ = watcher.Start(ctx) }()
	// A refusal counts once it has lasted: the clock moves on until the first one has.
	eventually(t, 20*time.Second, "a refused list that lasted", func() bool {
		h.step(pullauth.FailureGrace)
		_, err := watcher.Synced()
		return err != nil
	})

	w, res = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionUnknown, v1alpha1.ReasonPullsListFailed)
	if msg := target.Condition(w, v1alpha1.ConditionImagePullsAuthorized).Message; !strings.Contains(msg, "forbidden") {
		t.Errorf("condition message %q does not say why listing fails", msg)
	}
	if len(w.Status.ImagePulls) != 1 || res.RequeueAfter > imagepulls.ListFailedRetry {
		t.Errorf("status.imagePulls = %+v, requeued after %v; want the incident as last seen, looked at again within %v", w.Status.ImagePulls, res.RequeueAfter, imagepulls.ListFailedRetry)
	}
	if events := h.takeEvents(); countEvents(events, imagepulls.EventRecovered) != 0 {
		t.Errorf("events %q, want no recovery", events)
	}
}

// stale is a watcher that listed once and cannot list again.
type stale struct{ err error }

func (s stale) Synced() (bool, error)                   { return true, s.err }
func (s stale) Incidents(time.Time) []pullauth.Incident { return nil }

// A watcher whose relists fail knows less and less: the watch keeps its incidents as last seen
// rather than announcing their end.
func TestImagePullsKeptWhileRelistsFail(t *testing.T) {
	needsAPIServer(t)
	h := newHarness(t)
	s := seed(t, h.clock.Now(), 200*day, 400*day, 200*day)
	h.create(s.appID, func(spec *v1alpha1.CredentialWatchSpec) {
		spec.ImagePulls = &v1alpha1.ImagePulls{Registries: []string{"myacr.azurecr.io"}}
	})
	h.r.ImagePulls = incidents{{Registry: "myacr.azurecr.io", Scope: v1alpha1.PullScopeClusterWide, Failing: []string{"a", "b", "c"},
		Since: h.clock.Now(), Changes: h.clock.Now().Add(10 * time.Minute)}}
	h.reconcile()
	h.takeEvents()

	h.r.ImagePulls = stale{errors.New(`events is forbidden: User "system:serviceaccount:credwatch-system:credwatch" cannot list resource "events"`)}
	h.step(20 * time.Minute)
	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionImagePullsAuthorized, metav1.ConditionUnknown, v1alpha1.ReasonPullsListFailed)
	if len(w.Status.ImagePulls) != 1 {
		t.Errorf("status.imagePulls = %+v, want the incident as last seen", w.Status.ImagePulls)
	}
	if events := h.takeEvents(); len(events) != 0 {
		t.Errorf("events %q, want none", events)
	}
}

// One failure, reported by four kubelets at once with everything a kubelet says about it
// (Pulling, the runtime's refusal, ErrImagePull, BackOff, ImagePullBackOff), and read one event at
// a time while the watch reconciles: the incident is told once, when understood, with the counts
// status holds; not first as "Undetermined, 1 node", nor as 3 nodes out of 4.
func TestAPullIncidentIsToldOnceUnderstood(t *testing.T) {
	needsAPIServer(t)
	h, _, rc, p := pullStory(t, 200*day, "a", "b", "c", "d")
	t0 := h.clock.Now()
	h.reconcile()

	for i, n := range []string{"a", "b", "c", "d"} {
		pod := p.pod("api-"+n, n, p.image(), false, backingOff(p.image()))
		for _, e := range []struct{ reason, message string }{
			{"Pulling", fmt.Sprintf(`Pulling image "%s"`, p.image())},
			{"Failed", refusedMessage(p.image())},
			{"Failed", "Error: ErrImagePull"},
			{"BackOff", fmt.Sprintf(`Back-off pulling image "%s"`, p.image())},
			{"Failed", "Error: ImagePullBackOff"},
		} {
			p.event(n, pod, e.reason, e.message, t0)
		}
		p.waitFor(h, "node "+n+"'s refusal", func(in *pullauth.Incident) bool { return in != nil && len(in.Failing) == i+1 })
		h.reconcile() // as the watcher's PullsChanged makes the watch do
		h.step(time.Second)
	}
	if n := countEvents(h.takeEvents(), imagepulls.EventRefused); n != 0 || len(pullAlerts(rc)) != 0 {
		t.Fatalf("%d events and %d alerts while the refusals settle, want none yet", n, len(pullAlerts(rc)))
	}

	h.step(pullauth.DefaultThresholds.Settle)
	w, _ := h.reconcile()
	h.step(time.Minute)
	h.reconcile()
	st := w.Status.ImagePulls
	if len(st) != 1 || st[0].Scope != v1alpha1.PullScopeClusterWide || st[0].FailingNodes != 4 || st[0].ToldScope != v1alpha1.PullScopeClusterWide {
		t.Fatalf("status.imagePulls = %+v, want one cluster-wide incident on 4 nodes, told", st)
	}
	var told []string
	for _, e := range h.takeEvents() {
		if strings.Contains(e, imagepulls.EventRefused) {
			told = append(told, e)
		}
	}
	if len(told) != 1 || !strings.Contains(told[0], "on 4 nodes") {
		t.Errorf("events %q, want one, saying 4 nodes as status does", told)
	}
	if got := pullAlerts(rc); len(got) != 1 || got[0].ImagePulls == nil || got[0].ImagePulls.Scope != "ClusterWide" || got[0].ImagePulls.FailingNodes != 4 {
		t.Errorf("alerts = %+v, want one cluster-wide, on 4 nodes", got)
	}
}
