package pullauth

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Whoever may create Events in a namespace writes their source, reporter, node and message, so an
// event alone proves nothing: "Failed to pull image" forged on three nodes would raise a critical
// cluster-wide alert. A pod's status is another matter. The API server clears it when a pod is
// created and keeps it when a pod is updated; only pods/status writes it, which a namespace's
// users do not hold (the edit and admin roles lack it) and each node's kubelet holds for the pods
// bound to that node (NodeRestriction). So a pull event counts only when the status of the pod it
// names bears it out, on the node it names.

// kubelet is the component kubelet's event recorder names (server.ComponentKubelet). client-go's
// legacy recorder, which kubelet uses, writes it to source.component and to reportingComponent
// (which the events.k8s.io API reads as reportingController), and the node's name to source.host
// and to reportingInstance.
const kubelet = "kubelet"

// startSlack is how long before the pull its event reports a container may have started: never
// by kubelet's order (pull, create, start), both times being the node's own; the slack allows for
// the recorder stamping the event a little late.
const startSlack = time.Minute

// Reason says why a pull event does not count; Corroborated when it does. They are few, as the
// label of a metric.
type Reason string

const (
	// Corroborated: the pod's status bears the event out.
	Corroborated Reason = ""
	// NotKubelet: the event is not as a kubelet writes it: another component, no node or two,
	// or a namespace other than its pod's.
	NotKubelet Reason = "NotKubelet"
	// UnknownNode: the node the event names is not one the API server knows.
	UnknownNode Reason = "UnknownNode"
	// NoPod: no pod of that name (and UID, when the event gives it) is known to pull: none exists,
	// or none of its containers waits on a pull or started lately.
	NoPod Reason = "NoPod"
	// OtherNode: the pod is bound to another node.
	OtherNode Reason = "OtherNode"
	// NoContainer: no container of the pod waits on a pull of the image, for a refusal, or
	// started with it since, for a pull.
	NoContainer Reason = "NoContainer"
)

// Reasons are every reason an event may not count.
var Reasons = []Reason{NotKubelet, UnknownNode, NoPod, OtherNode, NoContainer}

// mayChange says whether a later status of the pod may yet bear out an event: kubelet may write
// the status after the event. Who reports an event, and the node it and its pod name, do not
// change.
func (r Reason) mayChange() bool { return r == NoPod || r == NoContainer }

// PodPulls is what a pod's status says of its images, as corroboration reads it.
type PodPulls struct {
	UID  types.UID
	Node string
	// Waiting are the repositories of containers waiting on a pull: ErrImagePull, ImagePullBackOff.
	Waiting []string
	// Pulled are the repositories of containers that have their image, each with its latest start.
	Pulled []Pulled
}

// Pulled is a container that has its image: the runtime names it (imageID), or it has run.
type Pulled struct {
	Image string
	At    time.Time
}

// PodPullsOf reads a scheduled pod's status: its containers that wait on a pull, and those that
// started since since. A container that has its image but no start (created, not yet started) is
// taken to have it at now. It is false when nothing is left to bear out an event.
func PodPullsOf(p *corev1.Pod, now, since time.Time) (PodPulls, bool) {
	if p.Spec.NodeName == "" {
		return PodPulls{}, false
	}
	out := PodPulls{UID: p.UID, Node: p.Spec.NodeName}
	if static, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		// A static pod's mirror: kubelet's events name the static pod, whose UID this is.
		out.UID = types.UID(static)
	}
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses} {
		for _, cs := range statuses {
			if w := cs.State.Waiting; w != nil && (w.Reason == reasonErrImagePull || w.Reason == reasonImagePullBackOff) {
				if (w.Reason == reasonErrImagePull || strings.Contains(w.Message, reasonErrImagePull+":")) && !Refused(w.Message) {
					// The pull failed for another reason (not found, DNS): it bears out no
					// refusal, whatever an event claims. A back-off says why since Kubernetes
					// 1.32 ("Back-off pulling image …: ErrImagePull: <why>"); before, it does not.
					continue
				}
				if repo, ok := repositoryOf(cs.Image); ok && !slices.Contains(out.Waiting, repo) {
					out.Waiting = append(out.Waiting, repo)
				}
				continue
			}
			at, ok := startOf(cs, now)
			if !ok || at.Before(since) {
				continue
			}
			// A runtime may report the image by ID alone; the imageID then names the repository.
			for _, ref := range []string{cs.Image, cs.ImageID} {
				if repo, ok := repositoryOf(ref); ok && !slices.Contains(out.Pulled, Pulled{repo, at}) {
					out.Pulled = append(out.Pulled, Pulled{repo, at})
				}
			}
		}
	}
	return out, len(out.Waiting) > 0 || len(out.Pulled) > 0
}

// startOf is when a container that has its image last started, and whether it has it.
func startOf(cs corev1.ContainerStatus, now time.Time) (time.Time, bool) {
	var at time.Time
	if r := cs.State.Running; r != nil {
		at = r.StartedAt.Time
	}
	if t := cs.State.Terminated; t != nil {
		at = laterOf(at, t.StartedAt.Time)
	}
	if t := cs.LastTerminationState.Terminated; t != nil {
		at = laterOf(at, t.StartedAt.Time)
	}
	switch {
	case !at.IsZero():
		return at, true
	case cs.ImageID != "" || cs.State.Running != nil || cs.State.Terminated != nil:
		return now, true
	}
	return time.Time{}, false
}

// until is when p can bear out no event any more, kept for keep: a refusal while a container
// still waits on a pull, which kubelet rewrites at every retry; a pull while its container's
// start is recent.
func (p PodPulls) until(now time.Time, keep time.Duration) time.Time {
	var u time.Time
	if len(p.Waiting) > 0 {
		u = now.Add(keep)
	}
	for _, c := range p.Pulled {
		u = laterOf(u, c.At.Add(keep))
	}
	return u
}

// repositoryOf is an image reference's repository, as in a container status's image or imageID
// ("docker.io/library/nginx@sha256:…", once "docker-pullable://nginx@sha256:…"). An image ID
// alone ("sha256:…") names none.
func repositoryOf(ref string) (string, bool) {
	ref = strings.TrimPrefix(ref, "docker-pullable://")
	if strings.HasPrefix(ref, "sha256:") {
		return "", false
	}
	_, repo, ok := parseImage(ref)
	return repo, ok
}

// Corroborate says whether the cluster bears out what a pull event claims, and if not, why. It
// counts when it is as kubelet writes it (component "kubelet", in its pod's namespace, one
// node), its node is one the API server knows (nodeKnown), and pod, the status of the pod it
// names (nil when none is known), is on that node and shows the pull: a container waiting on a
// pull of the image, for a refusal, or a container with the image that started at or after the
// pull, for a success. Each check is cheap, and none asks the API server.
func Corroborate(c Claim, nodeKnown bool, pod *PodPulls) Reason {
	switch {
	case !c.asKubelet():
		return NotKubelet
	case !nodeKnown:
		return UnknownNode
	case pod == nil || (c.PodUID != "" && c.PodUID != pod.UID):
		return NoPod
	case pod.Node != c.Node:
		return OtherNode
	case c.Refused && slices.Contains(pod.Waiting, c.Image):
		return Corroborated
	case !c.Refused && slices.ContainsFunc(pod.Pulled, func(p Pulled) bool {
		return p.Image == c.Image && !p.At.Before(c.Time.Add(-startSlack))
	}):
		return Corroborated
	}
	return NoContainer
}

// asKubelet says whether the claim is as a kubelet writes it: every component it gives is kubelet,
// every node the same, and the event lies in its pod's namespace.
func (c Claim) asKubelet() bool {
	if c.Node == "" || c.Namespace != c.Pod.Namespace {
		return false
	}
	named := false
	for _, comp := range c.Components {
		if comp != "" && comp != kubelet {
			return false
		}
		named = named || comp == kubelet
	}
	for _, h := range c.Hosts {
		if h != "" && h != c.Node {
			return false
		}
	}
	return named
}
