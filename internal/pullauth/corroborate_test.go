package pullauth

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	shopAPI   = "myacr.azurecr.io/shop/api"
	shopImage = shopAPI + ":1.4"
	digest    = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// kubeletClaim is what a kubelet on node writes of a pull of shopImage for shop/api-0, refused
// or not, as client-go's legacy recorder fills an event.
func kubeletClaim(node string, refused bool) Claim {
	return Claim{
		Observation: Observation{Registry: "myacr.azurecr.io", Node: node, Time: t0, Refused: refused, Event: "e-1", Times: 1},
		Components:  [2]string{"kubelet", "kubelet"},
		Hosts:       [2]string{node, node},
		Namespace:   "shop",
		Pod:         types.NamespacedName{Namespace: "shop", Name: "api-0"},
		PodUID:      "pod-1",
		Image:       shopAPI,
	}
}

func TestCorroborate(t *testing.T) {
	stuck := &PodPulls{UID: "pod-1", Node: "aks-1", Waiting: []string{shopAPI}}
	started := &PodPulls{UID: "pod-1", Node: "aks-1", Pulled: []Pulled{{shopAPI, t0.Add(2 * time.Second)}}}

	for name, tc := range map[string]struct {
		claim     func(*Claim)
		nodeKnown bool
		pod       *PodPulls
		want      Reason
	}{
		"a refusal kubelet reports of a pod stuck on the image": {nil, true, stuck, Corroborated},
		"a pull kubelet reports of a pod that then started":     {func(c *Claim) { c.Refused = false }, true, started, Corroborated},
		"events.k8s.io's reportingController alone": {func(c *Claim) {
			c.Components, c.Hosts = [2]string{"", "kubelet"}, [2]string{"", "aks-1"}
		}, true, stuck, Corroborated},
		"the legacy source alone": {func(c *Claim) {
			c.Components, c.Hosts = [2]string{"kubelet", ""}, [2]string{"aks-1", ""}
		}, true, stuck, Corroborated},
		"a pull by a container restarted since": {func(c *Claim) { c.Refused, c.Time = false, t0.Add(-time.Hour) }, true, started, Corroborated},
		"an event the recorder stamped late":    {func(c *Claim) { c.Refused, c.Time = false, t0.Add(30*time.Second) }, true, started, Corroborated},

		"another component":                     {func(c *Claim) { c.Components = [2]string{"kubectl", ""} }, true, stuck, NotKubelet},
		"kubelet in source, another reporter":   {func(c *Claim) { c.Components[1] = "my-operator" }, true, stuck, NotKubelet},
		"no component":                          {func(c *Claim) { c.Components = [2]string{} }, true, stuck, NotKubelet},
		"two nodes":                             {func(c *Claim) { c.Hosts[1] = "aks-2" }, true, stuck, NotKubelet},
		"no node":                               {func(c *Claim) { c.Node, c.Hosts = "", [2]string{} }, true, stuck, NotKubelet},
		"in another namespace than its pod":     {func(c *Claim) { c.Namespace = "attacker" }, true, stuck, NotKubelet},
		"a node the API server does not know":   {nil, false, stuck, UnknownNode},
		"no such pod":                           {nil, true, nil, NoPod},
		"a pod of that name, but another":       {func(c *Claim) { c.PodUID = "pod-0" }, true, stuck, NoPod},
		"the pod is on another node":            {func(c *Claim) { c.Node, c.Hosts = "aks-2", [2]string{"aks-2", "aks-2"} }, true, stuck, OtherNode},
		"the pod waits on another image":        {func(c *Claim) { c.Image = "myacr.azurecr.io/shop/web" }, true, stuck, NoContainer},
		"a refusal of a pod that runs":          {nil, true, started, NoContainer},
		"a pull of a pod stuck on it":           {func(c *Claim) { c.Refused = false }, true, stuck, NoContainer},
		"a pull of a pod that started long ago": {func(c *Claim) { c.Refused, c.Time = false, t0.Add(time.Hour) }, true, started, NoContainer},
		"a pull of another image":               {func(c *Claim) { c.Refused, c.Image = false, "docker.io/library/nginx" }, true, started, NoContainer},
	} {
		t.Run(name, func(t *testing.T) {
			c := kubeletClaim("aks-1", true)
			if tc.claim != nil {
				tc.claim(&c)
			}
			if got := Corroborate(c, tc.nodeKnown, tc.pod); got != tc.want {
				t.Errorf("Corroborate = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPodPullsOf(t *testing.T) {
	since := t0.Add(-10 * time.Minute)
	waiting := func(image, reason string) corev1.ContainerStatus {
		w := &corev1.ContainerStateWaiting{Reason: reason}
		if reason == "ErrImagePull" {
			w.Message = "failed to pull and unpack image: failed to authorize: failed to fetch anonymous token: unexpected status: 401 Unauthorized"
		}
		return corev1.ContainerStatus{Image: image, State: corev1.ContainerState{Waiting: w}}
	}
	running := func(image, imageID string, at time.Time) corev1.ContainerStatus {
		return corev1.ContainerStatus{Image: image, ImageID: imageID, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}}
	}
	crashing := corev1.ContainerStatus{Image: "nginx:1.27", ImageID: "docker.io/library/nginx@" + digest,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{StartedAt: metav1.NewTime(t0.Add(-time.Minute))}}}

	for name, tc := range map[string]struct {
		init, containers []corev1.ContainerStatus
		want             PodPulls
		wantOK           bool
	}{
		"waiting on pulls": {
			[]corev1.ContainerStatus{waiting(shopImage, "ErrImagePull")},
			[]corev1.ContainerStatus{waiting("nginx", "ImagePullBackOff"), waiting("myacr.azurecr.io/shop/api:2", "ImagePullBackOff")},
			PodPulls{Waiting: []string{shopAPI, "docker.io/library/nginx"}}, true,
		},
		"a pull that failed for another reason bears out no refusal": {
			nil, []corev1.ContainerStatus{{Image: shopImage, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull",
				Message: `rpc error: code = NotFound desc = failed to pull and unpack image "myacr.azurecr.io/shop/api:1.4": not found`}}}},
			PodPulls{}, false,
		},
		"a back-off that says the pull failed for another reason bears out no refusal either": {
			nil, []corev1.ContainerStatus{{Image: shopImage, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff",
				Message: `Back-off pulling image "myacr.azurecr.io/shop/api:1.4": ErrImagePull: failed to resolve reference: not found`}}}},
			PodPulls{}, false,
		},
		"creating, or stuck otherwise, says nothing": {
			nil, []corev1.ContainerStatus{waiting(shopImage, "ContainerCreating"), waiting(shopImage, "CreateContainerConfigError")},
			PodPulls{}, false,
		},
		"started, by image and by the imageID a runtime names it by": {
			nil, []corev1.ContainerStatus{running(digest, shopAPI+"@"+digest, t0), running("docker.io/library/nginx:1.27", "", t0)},
			PodPulls{Pulled: []Pulled{{shopAPI, t0}, {"docker.io/library/nginx", t0}}}, true,
		},
		"crashing, at its last start": {
			nil, []corev1.ContainerStatus{crashing},
			PodPulls{Pulled: []Pulled{{"docker.io/library/nginx", t0.Add(-time.Minute)}}}, true,
		},
		"an image present, not yet started: now": {
			nil, []corev1.ContainerStatus{{Image: "nginx", ImageID: "docker-pullable://nginx@" + digest, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}},
			PodPulls{Pulled: []Pulled{{"docker.io/library/nginx", t0}}}, true,
		},
		"started before the window": {
			nil, []corev1.ContainerStatus{running(shopImage, "", since.Add(-time.Second))},
			PodPulls{}, false,
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "pod-1"}, Spec: corev1.PodSpec{NodeName: "aks-1"},
				Status: corev1.PodStatus{InitContainerStatuses: tc.init, ContainerStatuses: tc.containers}}
			got, ok := PodPullsOf(p, t0, since)
			if ok != tc.wantOK {
				t.Fatalf("PodPullsOf ok = %v, want %v (%+v)", ok, tc.wantOK, got)
			}
			if !ok {
				return
			}
			if got.UID != "pod-1" || got.Node != "aks-1" || !slices.Equal(got.Waiting, tc.want.Waiting) || !slices.Equal(got.Pulled, tc.want.Pulled) {
				t.Errorf("PodPullsOf = %+v, want %+v", got, tc.want)
			}
		})
	}

	mirror := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "mirror-uid", Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "static-uid"}},
		Spec: corev1.PodSpec{NodeName: "aks-1"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting(shopImage, "ErrImagePull")}}}
	if got, _ := PodPullsOf(mirror, t0, since); got.UID != "static-uid" {
		t.Errorf("a mirror pod has UID %q, want its static pod's, which kubelet's events name", got.UID)
	}

	unscheduled := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting(shopImage, "ErrImagePull")}}}
	if got, ok := PodPullsOf(unscheduled, t0, since); ok {
		t.Errorf("an unscheduled pod gave %+v", got)
	}
}
