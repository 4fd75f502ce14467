package pullauth

import (
	"strings"
	"time"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Observation is one pull by a node's kubelet from a registry: refused for want of credentials,
// or successful.
type Observation struct {
	Registry string
	Node     string
	Time     time.Time
	Refused  bool
	// Event and Times identify a kubelet's event and how many times it has reported the pull so
	// far, to count each refused pull once however often the event is listed again. A pod's
	// status, which repeats what the event reports, has neither.
	Event string
	Times int32
	// NodeCredential: the pod has no imagePullSecrets, so its kubelet pulled with the node's
	// credential. Known of pods' statuses only: an event does not say.
	NodeCredential bool
}

// Messages of kubelet's pull events (pkg/kubelet/images): "Failed to pull image "x": <error>" and
// "Successfully pulled image "x" in 1.2s ...".
const (
	failedPrefix = `Failed to pull image "`
	pulledPrefix = `Successfully pulled image "`
)

// Kubelet's waiting reasons for a container whose image cannot be pulled.
const (
	reasonErrImagePull     = "ErrImagePull"
	reasonImagePullBackOff = "ImagePullBackOff"
)

// refusedMarkers are how registries and container runtimes word a pull refused for want of
// credentials: containerd ("failed to authorize: ... 401 Unauthorized"), the Docker API
// ("unauthorized: authentication required"), credential helpers ("no basic auth credentials").
var refusedMarkers = []string{"401 unauthorized", "unauthorized:", "authentication required", "failed to authorize", "no basic auth credentials"}

// otherMarkers are failures that can carry an auth word but are not about credentials: an image
// or tag that does not exist, a rate limit, a registry firewall (ACR answers 403 to a client IP
// it does not allow). A credential would not fix them.
var otherMarkers = []string{"not found", "manifest unknown", "toomanyrequests", "429 too many requests", "rate limit", "403 forbidden", "is not allowed access"}

// Refused reports whether a pull error message says the registry refused the pull for want of
// credentials.
func Refused(message string) bool {
	m := strings.ToLower(message)
	for _, o := range otherMarkers {
		if strings.Contains(m, o) {
			return false
		}
	}
	for _, r := range refusedMarkers {
		if strings.Contains(m, r) {
			return true
		}
	}
	return false
}

// Claim is what a pull event says: that a node's kubelet pulled an image for a pod, or was
// refused it. Anyone who may create events in a namespace writes every field of one, so nothing in
// a claim is taken on trust: Corroborate checks it against the cluster.
type Claim struct {
	Observation
	// Components are who reports the event, as source.component and reportingComponent give it;
	// Hosts the node, as source.host and reportingInstance do. Empty when unset.
	Components, Hosts [2]string
	// Namespace is the event's own.
	Namespace string
	// Pod is the pod the event is about (involvedObject), and PodUID its UID when the event gives it.
	Pod    types.NamespacedName
	PodUID types.UID
	// Image is the image's repository, normalized as runtimes resolve it: "nginx:1.27" is
	// "docker.io/library/nginx".
	Image string
}

// FromEvent reads a pull event about a pod. Events without an image, or a refusal or success, are
// none. The event's own time is used, so that old events listed again after a restart fall
// outside the window; now stands in for an event without one, or with one to come.
func FromEvent(e *corev1.Event, now time.Time) (Claim, bool) {
	if e.InvolvedObject.Kind != "Pod" {
		return Claim{}, false
	}
	var refused bool
	var image string
	switch {
	case e.Reason == "Failed" && strings.HasPrefix(e.Message, failedPrefix):
		image, _, _ = strings.Cut(e.Message[len(failedPrefix):], `"`)
		if !Refused(e.Message[len(failedPrefix)+len(image):]) {
			return Claim{}, false
		}
		refused = true
	case e.Reason == "Pulled" && strings.HasPrefix(e.Message, pulledPrefix):
		image, _, _ = strings.Cut(e.Message[len(pulledPrefix):], `"`)
	default:
		return Claim{}, false
	}
	registry, repository, ok := parseImage(image)
	if !ok {
		return Claim{}, false
	}
	node := e.Source.Host
	if node == "" {
		node = e.ReportingInstance
	}
	return Claim{
		Observation: Observation{Registry: registry, Node: node, Time: eventTime(e, now), Refused: refused, Event: string(e.UID), Times: eventCount(e)},
		Components:  [2]string{e.Source.Component, e.ReportingController},
		Hosts:       [2]string{e.Source.Host, e.ReportingInstance},
		Namespace:   e.Namespace,
		Pod:         types.NamespacedName{Namespace: e.InvolvedObject.Namespace, Name: e.InvolvedObject.Name},
		PodUID:      e.InvolvedObject.UID,
		Image:       repository,
	}, true
}

// eventCount is how many times an event has happened: kubelets repeat one by bumping its count.
func eventCount(e *corev1.Event) int32 {
	n := max(e.Count, 1)
	if e.Series != nil {
		n = max(n, e.Series.Count)
	}
	return n
}

// eventTime is when the event last happened: events repeat by bumping a count and a timestamp.
// A time to come is now: an event dated ahead would keep its node failing for as long.
func eventTime(e *corev1.Event, now time.Time) time.Time {
	var t time.Time
	for _, c := range []time.Time{e.FirstTimestamp.Time, e.LastTimestamp.Time, e.EventTime.Time} {
		if c.After(t) {
			t = c
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	if t.IsZero() || t.After(now) {
		return now
	}
	return t
}

// FromPod reads the containers of a scheduled pod that wait on an image its registry refused.
// Pod statuses carry no time, so they are observed at now: kubelet rewrites the waiting reason at
// every retry of the pull, so a pod still stuck keeps being observed. Unlike an event, a pod's
// status is the node's kubelet's word (see Corroborate), and needs no corroboration.
func FromPod(p *corev1.Pod, now time.Time) []Observation {
	if p.Spec.NodeName == "" {
		return nil
	}
	var out []Observation
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range statuses {
			w := cs.State.Waiting
			if w == nil || (w.Reason != reasonErrImagePull && w.Reason != reasonImagePullBackOff) || !Refused(w.Message) {
				continue
			}
			if registry, ok := registryOf(cs.Image); ok {
				out = append(out, Observation{Registry: registry, Node: p.Spec.NodeName, Time: now, Refused: true,
					NodeCredential: len(p.Spec.ImagePullSecrets) == 0})
			}
		}
	}
	return out
}

// registryOf is the registry host of an image reference, as container runtimes resolve it:
// "nginx" is docker.io's.
func registryOf(image string) (string, bool) {
	registry, _, ok := parseImage(image)
	return registry, ok
}

// parseImage gives an image reference's registry host and repository, as container runtimes
// resolve them, lower-case: "nginx:1.27" is docker.io's "docker.io/library/nginx".
func parseImage(image string) (registry, repository string, ok bool) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", "", false
	}
	return strings.ToLower(reference.Domain(named)), strings.ToLower(named.Name()), true
}
