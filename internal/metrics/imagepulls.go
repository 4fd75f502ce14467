package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/pullauth"
)

var (
	refusalsDesc = prometheus.NewDesc(
		"credwatch_image_pull_refusals_total",
		"Image pulls registries refused for want of credentials, as kubelets' events report them and their pods' statuses bear out, each once, by registry and by the scope the refusals had when each was seen (ClusterWide, NodeLocal, Undetermined).",
		[]string{"registry", "scope"}, nil)
	ignoredDesc = prometheus.NewDesc(
		"credwatch_image_pull_events_ignored_total",
		"Pull events that did not count, each time one was decided, by reason: NotKubelet (not as a kubelet writes it), UnknownNode, NoPod, OtherNode (the pod is on another node), NoContainer (the pod's status does not show the pull).",
		[]string{"reason"}, nil)
	refusingNodesDesc = prometheus.NewDesc(
		"credwatch_image_pull_refused_nodes",
		"Nodes whose latest pull from the registry was refused for want of credentials, in the sliding window; absent when none.",
		[]string{"registry", "scope"}, nil)
)

// PullTracker is what the image-pull metrics read.
type PullTracker interface {
	Incidents(now time.Time) []pullauth.Incident
	Refusals() map[string]map[v1alpha1.PullScope]uint64
	Ignored() map[pullauth.Reason]uint64
}

// ImagePulls reports the image-pull tracker at scrape time. Its series are few (at most
// pullauth.MaxRegistries registries, three scopes; five reasons), so a registry can gather them.
type ImagePulls struct {
	tracker PullTracker
	clock   clock.PassiveClock
}

// NewImagePulls returns the collector of tracker's refusals and incidents.
func NewImagePulls(tracker PullTracker, clk clock.PassiveClock) *ImagePulls {
	return &ImagePulls{tracker: tracker, clock: clk}
}

// Describe implements prometheus.Collector.
func (c *ImagePulls) Describe(ch chan<- *prometheus.Desc) {
	ch <- refusalsDesc
	ch <- refusingNodesDesc
	ch <- ignoredDesc
}

// Collect implements prometheus.Collector.
func (c *ImagePulls) Collect(ch chan<- prometheus.Metric) {
	for registry, byScope := range c.tracker.Refusals() {
		for scope, n := range byScope {
			ch <- prometheus.MustNewConstMetric(refusalsDesc, prometheus.CounterValue, float64(n), registry, string(scope))
		}
	}
	ignored := c.tracker.Ignored()
	for _, r := range pullauth.Reasons {
		ch <- prometheus.MustNewConstMetric(ignoredDesc, prometheus.CounterValue, float64(ignored[r]), string(r))
	}
	for _, in := range c.tracker.Incidents(c.clock.Now()) {
		ch <- prometheus.MustNewConstMetric(refusingNodesDesc, prometheus.GaugeValue, float64(len(in.Failing)), in.Registry, string(in.Scope))
	}
}
