package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/credwatch/credwatch/internal/pullauth"
)

func TestImagePulls(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	tr := pullauth.NewTracker(pullauth.DefaultThresholds, func() int { return 10 })
	for _, o := range []pullauth.Observation{
		{Registry: "a.azurecr.io", Node: "n1", Time: t0, Refused: true, Event: "e0", Times: 1},
		{Registry: "a.azurecr.io", Node: "n2", Time: t0},
		{Registry: "b.azurecr.io", Node: "n1", Time: t0, Refused: true, Event: "e1", Times: 1},
		{Registry: "b.azurecr.io", Node: "n2", Time: t0, Refused: true, Event: "e2", Times: 1},
		{Registry: "b.azurecr.io", Node: "n3", Time: t0, Refused: true, Event: "e3", Times: 1},
	} {
		tr.Observe(o, t0)
	}
	tr.Ignore(pullauth.NotKubelet)
	tr.Ignore(pullauth.NotKubelet)
	tr.Ignore(pullauth.OtherNode)
	want := `
# HELP credwatch_image_pull_events_ignored_total Pull events that did not count, each time one was decided, by reason: NotKubelet (not as a kubelet writes it), UnknownNode, NoPod, OtherNode (the pod is on another node), NoContainer (the pod's status does not show the pull).
# TYPE credwatch_image_pull_events_ignored_total counter
credwatch_image_pull_events_ignored_total{reason="NoContainer"} 0
credwatch_image_pull_events_ignored_total{reason="NoPod"} 0
credwatch_image_pull_events_ignored_total{reason="NotKubelet"} 2
credwatch_image_pull_events_ignored_total{reason="OtherNode"} 1
credwatch_image_pull_events_ignored_total{reason="UnknownNode"} 0
# HELP credwatch_image_pull_refusals_total Image pulls registries refused for want of credentials, as kubelets' events report them and their pods' statuses bear out, each once, by registry and by the scope the refusals had when each was seen (ClusterWide, NodeLocal, Undetermined).
# TYPE credwatch_image_pull_refusals_total counter
credwatch_image_pull_refusals_total{registry="a.azurecr.io",scope="Undetermined"} 1
credwatch_image_pull_refusals_total{registry="b.azurecr.io",scope="ClusterWide"} 1
credwatch_image_pull_refusals_total{registry="b.azurecr.io",scope="Undetermined"} 2
# HELP credwatch_image_pull_refused_nodes Nodes whose latest pull from the registry was refused for want of credentials, in the sliding window; absent when none.
# TYPE credwatch_image_pull_refused_nodes gauge
credwatch_image_pull_refused_nodes{registry="a.azurecr.io",scope="NodeLocal"} 1
credwatch_image_pull_refused_nodes{registry="b.azurecr.io",scope="ClusterWide"} 3
`
	clk := clocktesting.NewFakeClock(t0)
	if err := testutil.CollectAndCompare(NewImagePulls(tr, clk), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	clk.Step(time.Hour)
	if n := testutil.CollectAndCount(NewImagePulls(tr, clk), "credwatch_image_pull_refused_nodes"); n != 0 {
		t.Errorf("%d refused-nodes series an hour later, want none", n)
	}
}
