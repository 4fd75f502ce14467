package pullauth

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

// Messages as kubelets with containerd and with Docker word them.
const (
	containerd401 = `Failed to pull image "myacr.azurecr.io/shop/api:1.4": rpc error: code = Unknown desc = failed to pull and unpack image "myacr.azurecr.io/shop/api:1.4": failed to resolve reference "myacr.azurecr.io/shop/api:1.4": failed to authorize: failed to fetch anonymous token: unexpected status from GET request to https://myacr.azurecr.io/oauth2/token?scope=repository%3Ashop%2Fapi%3Apull&service=myacr.azurecr.io: 401 Unauthorized`
	docker401     = `Failed to pull image "myacr.azurecr.io/shop/api:1.4": rpc error: code = Unknown desc = Error response from daemon: Get https://myacr.azurecr.io/v2/shop/api/manifests/1.4: unauthorized: authentication required`
	notFound      = `Failed to pull image "myacr.azurecr.io/shop/api:9.9": rpc error: code = NotFound desc = failed to pull and unpack image "myacr.azurecr.io/shop/api:9.9": failed to resolve reference "myacr.azurecr.io/shop/api:9.9": myacr.azurecr.io/shop/api:9.9: not found`
	rateLimited   = `Failed to pull image "nginx:1.27": rpc error: code = Unknown desc = failed to pull and unpack image "docker.io/library/nginx:1.27": failed to copy: httpReadSeeker: failed open: unexpected status code https://registry-1.docker.io/v2/library/nginx/manifests/sha256:abc: 429 Too Many Requests - Server message: toomanyrequests: You have reached your pull rate limit.`
	firewall      = `Failed to pull image "myacr.azurecr.io/shop/api:1.4": rpc error: code = Unknown desc = failed to pull and unpack image "myacr.azurecr.io/shop/api:1.4": failed to resolve reference "myacr.azurecr.io/shop/api:1.4": failed to authorize: failed to fetch oauth token: unexpected status: 403 Forbidden: denied: client with IP '20.1.2.3' is not allowed access`
)

func pullEvent(reason, message, node string, at time.Time) *corev1.Event {
	return &corev1.Event{
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "api-0"},
		Reason:         reason, Message: message, Type: corev1.EventTypeWarning,
		Source:        corev1.EventSource{Component: "kubelet", Host: node},
		LastTimestamp: metav1.NewTime(at),
	}
}

func TestFromEvent(t *testing.T) {
	series := pullEvent("Failed", docker401, "", time.Time{})
	series.ReportingInstance = "aks-pool-2"
	series.Series = &corev1.EventSeries{Count: 40, LastObservedTime: metav1.NewMicroTime(t0.Add(time.Minute))}
	notPod := pullEvent("Failed", containerd401, "aks-pool-1", t0)
	notPod.InvolvedObject.Kind = "Node"

	for _, tc := range []struct {
		name string
		e    *corev1.Event
		want Observation
		ok   bool
	}{
		{"containerd refusal", pullEvent("Failed", containerd401, "aks-pool-1", t0), Observation{Registry: "myacr.azurecr.io", Node: "aks-pool-1", Time: t0, Refused: true, Times: 1}, true},
		{"docker refusal", pullEvent("Failed", docker401, "aks-pool-1", t0), Observation{Registry: "myacr.azurecr.io", Node: "aks-pool-1", Time: t0, Refused: true, Times: 1}, true},
		{"events.k8s.io series, node from the reporting instance", series, Observation{Registry: "myacr.azurecr.io", Node: "aks-pool-2", Time: t0.Add(time.Minute), Refused: true, Times: 40}, true},
		{"successful pull", pullEvent("Pulled", `Successfully pulled image "myacr.azurecr.io/shop/api:1.4" in 1.2s (1.2s including waiting). Image size: 1234 bytes.`, "aks-pool-3", t0),
			Observation{Registry: "myacr.azurecr.io", Node: "aks-pool-3", Time: t0, Refused: false, Times: 1}, true},
		{"docker hub image", pullEvent("Failed", `Failed to pull image "nginx": no basic auth credentials`, "n", t0), Observation{Registry: "docker.io", Node: "n", Time: t0, Refused: true, Times: 1}, true},
		{"no time: now", pullEvent("Failed", docker401, "n", time.Time{}), Observation{Registry: "myacr.azurecr.io", Node: "n", Time: t0.Add(time.Hour), Refused: true, Times: 1}, true},
		{"image not found", pullEvent("Failed", notFound, "aks-pool-1", t0), Observation{}, false},
		{"rate limited", pullEvent("Failed", rateLimited, "aks-pool-1", t0), Observation{}, false},
		{"registry firewall", pullEvent("Failed", firewall, "aks-pool-1", t0), Observation{}, false},
		{"kubelet's summary event names no image", pullEvent("Failed", "Error: ErrImagePull", "aks-pool-1", t0), Observation{}, false},
		{"back-off names no error", pullEvent("BackOff", `Back-off pulling image "myacr.azurecr.io/shop/api:1.4"`, "aks-pool-1", t0), Observation{}, false},
		{"image already on the node proves nothing", pullEvent("Pulled", `Container image "myacr.azurecr.io/shop/api:1.4" already present on machine`, "n", t0), Observation{}, false},
		{"dated ahead: now", pullEvent("Failed", docker401, "n", t0.Add(48*time.Hour)), Observation{Registry: "myacr.azurecr.io", Node: "n", Time: t0.Add(time.Hour), Refused: true, Times: 1}, true},
		{"no node: a claim Corroborate refuses", pullEvent("Failed", docker401, "", t0), Observation{Registry: "myacr.azurecr.io", Time: t0, Refused: true, Times: 1}, true},
		{"not about a pod", notPod, Observation{}, false},
		{"unparsable image", pullEvent("Failed", `Failed to pull image "UPPER/Case": unauthorized: authentication required`, "n", t0), Observation{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := FromEvent(tc.e, t0.Add(time.Hour))
			if ok != tc.ok || got.Observation != tc.want {
				t.Errorf("FromEvent = %+v, %v; want %+v, %v", got.Observation, ok, tc.want, tc.ok)
			}
		})
	}
}

// A claim carries what corroboration checks, as the event gives it.
func TestFromEventClaims(t *testing.T) {
	e := pullEvent("Pulled", `Successfully pulled image "nginx:1.27" in 1.2s (1.2s including waiting). Image size: 1234 bytes.`, "aks-pool-1", t0)
	e.Namespace, e.UID, e.InvolvedObject.UID = "shop", "e-1", "pod-1"
	e.ReportingController, e.ReportingInstance = "kubelet", "aks-pool-1"
	got, ok := FromEvent(e, t0)
	want := Claim{
		Observation: Observation{Registry: "docker.io", Node: "aks-pool-1", Time: t0, Event: "e-1", Times: 1},
		Components:  [2]string{"kubelet", "kubelet"}, Hosts: [2]string{"aks-pool-1", "aks-pool-1"},
		Namespace: "shop", Pod: types.NamespacedName{Namespace: "shop", Name: "api-0"}, PodUID: "pod-1", Image: "docker.io/library/nginx",
	}
	if !ok || got != want {
		t.Errorf("FromEvent = %+v, %v; want %+v", got, ok, want)
	}
}

func TestFromPod(t *testing.T) {
	waiting := func(image, reason, message string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Image: image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}
	}
	p := &corev1.Pod{
		Spec: corev1.PodSpec{NodeName: "aks-pool-1"},
		Status: corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{waiting("myacr.azurecr.io/init:1", "ErrImagePull", "failed to authorize: 401 Unauthorized")},
			ContainerStatuses: []corev1.ContainerStatus{
				waiting("other.azurecr.io/api:1", "ImagePullBackOff", `Back-off pulling image "other.azurecr.io/api:1": ErrImagePull: unauthorized: authentication required`),
				waiting("myacr.azurecr.io/api:9", "ImagePullBackOff", `Back-off pulling image "myacr.azurecr.io/api:9": ErrImagePull: not found`),
				waiting("myacr.azurecr.io/api:1", "CrashLoopBackOff", "unauthorized: authentication required"),
				{Image: "myacr.azurecr.io/api:1", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
			},
		},
	}
	got := FromPod(p, t0)
	want := []Observation{{Registry: "myacr.azurecr.io", Node: "aks-pool-1", Time: t0, Refused: true, NodeCredential: true},
		{Registry: "other.azurecr.io", Node: "aks-pool-1", Time: t0, Refused: true, NodeCredential: true}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("FromPod = %+v, want %+v", got, want)
	}
	// A pod with its own pull secret is refused for that secret, not the node's credential.
	p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
	if got := FromPod(p, t0); len(got) != 2 || got[0].NodeCredential || got[1].NodeCredential {
		t.Errorf("FromPod of a pod with a pull secret = %+v, want refusals not of the node's credential", got)
	}
	p.Spec.NodeName = ""
	if got := FromPod(p, t0); len(got) != 0 {
		t.Errorf("an unscheduled pod gave %+v", got)
	}
}
