package pullauth

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// +kubebuilder:rbac:groups="",resources=events,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list;watch

// Watcher feeds kubelets' pull events and the statuses of scheduled pods to a tracker, and
// names on Changed the registries whose incident changed. It lists and watches through
// reflectors that keep no copy: an informer would hold every event and pod of the cluster, and
// events come by the thousand a minute when pulls fail. The API server filters events by reason
// and pods by being scheduled. An event counts only once a pod's status bears it out (see
// Corroborate): of the pods it keeps what can, within bounds (MaxPods), and of the nodes their
// names.
type Watcher struct {
	Client  client.WithWatch
	Tracker *Tracker
	Clock   clock.PassiveClock
	Changed chan<- event.TypedGenericEvent[string]
	// Nodes is kept to the cluster's nodes, which the tracker counts.
	Nodes *NodeSet

	reflectors atomic.Int32 // how many Start runs, known before any lists
	listed     atomic.Int32 // how many have listed once

	mu       sync.Mutex
	failures map[string]failure // by reflector, while it can neither list nor watch

	evidenceOnce sync.Once
	ev           *evidence
}

// evidence is what bears out the watcher's events, made on first use.
func (w *Watcher) evidence() *evidence {
	w.evidenceOnce.Do(func() {
		w.ev = newEvidence(w.Tracker.th.Window+startSlack, w.Nodes.Has, w.Tracker.Ignore)
	})
	return w.ev
}

// failure is why a reflector's lists or watches fail, since when.
type failure struct {
	err   error
	since time.Time
}

// FailureGrace is how long a reflector may fail before the watches say so: its own retries
// mend most failures (a timeout, an API server restarting) within seconds.
const FailureGrace = 30 * time.Second

// Synced says whether every reflector has listed once, and why one cannot list or watch, if it
// has not for FailureGrace. Before the first lists the tracker knows of no incident, which is not
// the same as there being none: a restarted operator would otherwise announce the end of every
// incident, then its start again. A reflector that can no longer list or watch hears nothing, and
// what it knew goes stale the same way.
func (w *Watcher) Synced() (bool, error) {
	n := w.reflectors.Load()
	synced := n > 0 && w.listed.Load() >= n
	now := w.Clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(w.failures)) {
		if f := w.failures[name]; now.Sub(f.since) >= FailureGrace {
			return synced, fmt.Errorf("%s: %w", name, f.err)
		}
	}
	return synced, nil
}

// Incidents are the tracker's incidents at now.
func (w *Watcher) Incidents(now time.Time) []Incident { return w.Tracker.Incidents(now) }

// reflected is what one reflector lists and watches.
type reflected struct {
	name     string
	list     client.ObjectList
	obj      runtime.Object
	selector fields.Selector
	store    toolscache.ReflectorStore
}

// Start runs the reflectors until ctx ends: those of pods and nodes first, and those of events
// once they have listed, so that the events listed at start find what bears them out rather
// than wait for it.
func (w *Watcher) Start(ctx context.Context) error {
	events := func(reason string) fields.Selector {
		return fields.Set{"involvedObject.kind": "Pod", "reason": reason}.AsSelector()
	}
	// Names only, through the metadata API: a Node lists every image it holds.
	nodes := &metav1.PartialObjectMetadataList{}
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	node := &metav1.PartialObjectMetadata{}
	node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	feed := feeder{ctx, w}
	cluster := []reflected{
		// Scheduled pods, not pending ones only: the status that bears out a successful pull is
		// often the one that makes its pod Running, and a watch filtered by phase tells of a pod
		// that leaves the filter as it was before, deleted.
		{"scheduled-pods", &corev1.PodList{}, &corev1.Pod{}, fields.OneTermNotEqualSelector("spec.nodeName", ""), podStore{feed}},
		{"nodes", nodes, node, fields.Everything(), w.Nodes},
	}
	pulls := []reflected{
		{"pull-failed-events", &corev1.EventList{}, &corev1.Event{}, events("Failed"), eventStore{feed}},
		{"pulled-events", &corev1.EventList{}, &corev1.Event{}, events("Pulled"), eventStore{feed}},
	}
	w.reflectors.Store(int32(len(cluster) + len(pulls)))
	listed := make(chan struct{})
	var unlisted atomic.Int32
	unlisted.Store(int32(len(cluster)))
	for _, r := range cluster {
		w.run(ctx, r, func() {
			if unlisted.Add(-1) == 0 {
				close(listed)
			}
		})
	}
	select {
	case <-listed:
		for _, r := range pulls {
			w.run(ctx, r, nil)
		}
	case <-ctx.Done():
	}
	<-ctx.Done()
	return nil
}

// note keeps why a reflector's list or watch failed, until one succeeds. A resource version or
// continue token too old is no failure: the reflector lists afresh at once.
func (w *Watcher) note(name string, err error) {
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return
	}
	now := w.Clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		delete(w.failures, name)
		return
	}
	if w.failures == nil {
		w.failures = map[string]failure{}
	}
	f, failing := w.failures[name]
	if !failing {
		f.since = now
	}
	f.err = err
	w.failures[name] = f
}

// NeedLeaderElection is true: only the leader alerts, so only it needs to know.
func (w *Watcher) NeedLeaderElection() bool { return true }

// run runs r's reflector until ctx ends; listed, if any, is called once it has listed.
func (w *Watcher) run(ctx context.Context, r reflected, listed func()) {
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = r.selector.String()
			l := r.list.DeepCopyObject().(client.ObjectList)
			err := w.Client.List(ctx, l, &client.ListOptions{Raw: &o})
			w.note(r.name, err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = r.selector.String()
			wi, err := w.Client.Watch(ctx, r.list.DeepCopyObject().(client.ObjectList), &client.ListOptions{Raw: &o})
			w.note(r.name, err)
			return wi, err
		},
	}
	store := listedOnce{ReflectorStore: r.store, once: &sync.Once{}, done: func() {
		w.listed.Add(1)
		if listed != nil {
			listed()
		}
	}}
	go toolscache.NewReflectorWithOptions(lw, r.obj, store, toolscache.ReflectorOptions{Name: r.name}).RunWithContext(ctx)
}

// feeder gives observations to the tracker, and names on Changed the registries whose incident
// they changed.
type feeder struct {
	ctx context.Context
	w   *Watcher
}

func (f feeder) feed(obs []Observation, now time.Time) {
	for _, ob := range obs {
		if !f.w.Tracker.Observe(ob, now) || f.w.Changed == nil {
			continue
		}
		select {
		case f.w.Changed <- event.TypedGenericEvent[string]{Object: ob.Registry}:
		case <-f.ctx.Done():
			return
		}
	}
}

// eventStore is a reflector's store of pull events that stores nothing: each event it is given
// counts if the cluster bears it out, waits if it may yet, and is dropped.
type eventStore struct{ feeder }

func (s eventStore) take(obj any) {
	e, ok := obj.(*corev1.Event)
	if !ok {
		return
	}
	now := s.w.Clock.Now()
	c, ok := FromEvent(e, now)
	if !ok || !s.w.Tracker.current(c.Time, now) {
		return // not a pull, or history listed again: it says nothing about now
	}
	if o, ok := s.w.evidence().claim(c, now); ok {
		s.feed([]Observation{o}, now)
	}
}

func (s eventStore) Add(obj any) error    { s.take(obj); return nil }
func (s eventStore) Update(obj any) error { s.take(obj); return nil }
func (s eventStore) Delete(any) error     { return nil }
func (s eventStore) Resync() error        { return nil }

func (s eventStore) Replace(list []any, _ string) error {
	for _, obj := range list {
		s.take(obj)
	}
	return nil
}

// podStore is a reflector's store of scheduled pods that keeps of each only what bears out
// events: a pod's refusals are observed, and the events held for it decided again.
type podStore struct{ feeder }

func (s podStore) take(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := s.w.Clock.Now()
	s.feed(append(FromPod(p, now), s.w.evidence().pod(p, now)...), now)
}

func (s podStore) Add(obj any) error    { s.take(obj); return nil }
func (s podStore) Update(obj any) error { s.take(obj); return nil }
func (s podStore) Resync() error        { return nil }

// Delete forgets a pod: its events no longer count.
func (s podStore) Delete(obj any) error {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if o, ok := obj.(metav1.Object); ok {
		s.w.evidence().forget(types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()})
	}
	return nil
}

// Replace swaps in the listed pods at once.
func (s podStore) Replace(list []any, _ string) error {
	now := s.w.Clock.Now()
	pods := make([]*corev1.Pod, 0, len(list))
	var obs []Observation
	for _, obj := range list {
		if p, ok := obj.(*corev1.Pod); ok {
			pods = append(pods, p)
			obs = append(obs, FromPod(p, now)...)
		}
	}
	s.feed(append(obs, s.w.evidence().replace(pods, now)...), now)
	return nil
}

// listedOnce tells done when its reflector has listed for the first time: a reflector hands its
// store every complete list through Replace.
type listedOnce struct {
	toolscache.ReflectorStore
	once *sync.Once
	done func()
}

func (l listedOnce) Replace(list []any, resourceVersion string) error {
	err := l.ReflectorStore.Replace(list, resourceVersion)
	l.once.Do(l.done)
	return err
}

// NodeSet is a reflector's store that keeps the names of the cluster's nodes, to count them.
type NodeSet struct {
	mu    sync.Mutex
	names map[string]struct{}
}

// Has says whether the cluster has a node of that name.
func (s *NodeSet) Has(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.names[name]
	return ok
}

// Count is how many nodes the cluster has; 0 before they are listed.
func (s *NodeSet) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.names)
}

func (s *NodeSet) set(obj any, present bool) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.names == nil {
		s.names = map[string]struct{}{}
	}
	if present {
		s.names[o.GetName()] = struct{}{}
	} else {
		delete(s.names, o.GetName())
	}
}

// Add counts a node the reflector lists or sees created.
func (s *NodeSet) Add(obj any) error { s.set(obj, true); return nil }

// Update counts a node the reflector sees changed: it is still there.
func (s *NodeSet) Update(obj any) error { s.set(obj, true); return nil }

// Delete stops counting a node the reflector sees deleted.
func (s *NodeSet) Delete(obj any) error { s.set(obj, false); return nil }

// Resync has nothing to do: the set holds no copies to refresh.
func (s *NodeSet) Resync() error { return nil }

// Replace swaps in the listed names at once: the tracker never counts a cluster half listed.
func (s *NodeSet) Replace(list []any, _ string) error {
	names := make(map[string]struct{}, len(list))
	for _, obj := range list {
		if o, ok := obj.(metav1.Object); ok {
			names[o.GetName()] = struct{}{}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.names = names
	return nil
}
