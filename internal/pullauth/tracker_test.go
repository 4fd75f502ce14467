package pullauth

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

const acr = "myacr.azurecr.io"

// refused is a kubelet's event, seen for the first time.
func refused(node string, at time.Duration) Observation {
	return Observation{Registry: acr, Node: node, Time: t0.Add(at), Refused: true, Event: fmt.Sprintf("%s@%v", node, at), Times: 1}
}

func pulled(node string, at time.Duration) Observation {
	return Observation{Registry: acr, Node: node, Time: t0.Add(at)}
}

func TestScope(t *testing.T) {
	th := DefaultThresholds
	for _, tc := range []struct {
		failing, pulling, nodes int
		want                    v1alpha1.PullScope
	}{
		{0, 5, 10, ""},
		{3, 0, 10, v1alpha1.PullScopeClusterWide},
		{3, 17, 20, v1alpha1.PullScopeClusterWide}, // spread over many nodes, whatever the others
		{2, 0, 2, v1alpha1.PullScopeClusterWide},   // every node of a small cluster
		{1, 0, 1, v1alpha1.PullScopeClusterWide},
		{1, 4, 5, v1alpha1.PullScopeNodeLocal},
		{2, 1, 10, v1alpha1.PullScopeNodeLocal},
		{1, 1, 0, v1alpha1.PullScopeNodeLocal}, // node count unknown
		{1, 0, 10, v1alpha1.PullScopeUndetermined},
		{2, 0, 10, v1alpha1.PullScopeUndetermined},
	} {
		if got := Scope(tc.failing, tc.pulling, tc.nodes, th); got != tc.want {
			t.Errorf("Scope(failing %d, pulling %d, nodes %d) = %q, want %q", tc.failing, tc.pulling, tc.nodes, got, tc.want)
		}
	}
}

func TestTrackerTellsTheIncidentsApartAndSaysWhenTheyChange(t *testing.T) {
	tr := NewTracker(DefaultThresholds, func() int { return 5 })
	now := t0.Add(time.Minute)
	observe := func(o Observation) bool { return tr.Observe(o, now) }

	// Three nodes pull fine; one is refused: its kubelet.
	for _, n := range []string{"n1", "n2", "n3"} {
		observe(pulled(n, 0))
	}
	if !observe(refused("n4", 10*time.Second)) {
		t.Error("the first refusal did not count as a change")
	}
	if observe(refused("n4", 20*time.Second)) {
		t.Error("the same node refused again counted as a change")
	}
	in := tr.Incidents(now)
	if len(in) != 1 || in[0].Scope != v1alpha1.PullScopeNodeLocal || !slices.Equal(in[0].Failing, []string{"n4"}) || in[0].Pulling != 3 ||
		!in[0].Since.Equal(t0.Add(10*time.Second)) || !in[0].Changes.Equal(t0.Add(20*time.Second+10*time.Minute)) {
		t.Fatalf("incidents = %+v, want n4 node-local since 00:10", in)
	}

	// The others start failing too: the cluster's credential. The incident keeps its start.
	observe(refused("n1", 30*time.Second))
	if !observe(refused("n2", 40*time.Second)) {
		t.Error("turning cluster-wide did not count as a change")
	}
	in = tr.Incidents(now)
	if len(in) != 1 || in[0].Scope != v1alpha1.PullScopeClusterWide || len(in[0].Failing) != 3 || !in[0].Since.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("incidents = %+v, want cluster-wide since 00:10", in)
	}

	// A node that pulls after being refused is no longer failing.
	observe(pulled("n1", 50*time.Second))
	if in = tr.Incidents(now); len(in) != 1 || in[0].Scope != v1alpha1.PullScopeNodeLocal || !slices.Equal(in[0].Failing, []string{"n2", "n4"}) {
		t.Fatalf("incidents = %+v, want n2 and n4 node-local", in)
	}

	// Ten minutes after the last refusal, the incident is over; an old event listed again does
	// not reopen it.
	later := t0.Add(40*time.Second + 10*time.Minute)
	if in = tr.Incidents(later); len(in) != 0 {
		t.Errorf("incidents ten minutes on = %+v, want none", in)
	}
	if tr.Observe(refused("n3", 0), later) || len(tr.Incidents(later)) != 0 {
		t.Error("a refusal older than the window opened an incident")
	}

	// A new refusal opens a new incident with its own start; with no other node pulling in the
	// window, there is no telling whose fault it is.
	much := t0.Add(20 * time.Minute)
	tr.Observe(refused("n3", 20*time.Minute), much)
	if in = tr.Incidents(much); len(in) != 1 || !in[0].Since.Equal(much) || in[0].Scope != v1alpha1.PullScopeUndetermined {
		t.Errorf("incidents = %+v, want a new undetermined one since 20:00", in)
	}

	// The same event listed again, and the stuck pod's status, are the same refused pull; the
	// event repeated twice more is two more.
	tr.Observe(refused("n3", 20*time.Minute), much)
	status := refused("n3", 20*time.Minute+time.Second)
	status.Event, status.Times = "", 0
	tr.Observe(status, much)
	repeated := refused("n3", 20*time.Minute)
	repeated.Times = 3
	tr.Observe(repeated, much)

	refusals := tr.Refusals()[acr]
	if refusals[v1alpha1.PullScopeNodeLocal] != 3 || refusals[v1alpha1.PullScopeClusterWide] != 1 || refusals[v1alpha1.PullScopeUndetermined] != 3 {
		t.Errorf("refusals by scope = %v", refusals)
	}
}

// A registry becomes one of pods pulling with the node's credential when it refuses one of them,
// and stays so until its incident ends.
func TestTrackerTellsTheNodeCredentialsRegistries(t *testing.T) {
	tr := NewTracker(DefaultThresholds, func() int { return 5 })
	now := t0.Add(time.Minute)
	if !tr.Observe(refused("n1", 0), now) {
		t.Fatal("the first refusal did not count as a change")
	}
	if in := tr.Incidents(now); len(in) != 1 || in[0].NodeCredential {
		t.Fatalf("incidents = %+v, want one not known to concern the node's credential", in)
	}
	pod := refused("n1", 10*time.Second)
	pod.Event, pod.Times, pod.NodeCredential = "", 0, true
	if !tr.Observe(pod, now) {
		t.Error("a refusal of the node's credential did not count as a change")
	}
	if in := tr.Incidents(now); len(in) != 1 || !in[0].NodeCredential {
		t.Errorf("incidents = %+v, want one of the node's credential", in)
	}
	// Over, then a new incident of a pod with its own pull secret.
	later := t0.Add(time.Hour)
	tr.Observe(refused("n2", time.Hour), later)
	if in := tr.Incidents(later); len(in) != 1 || in[0].NodeCredential {
		t.Errorf("incidents = %+v, want a new one, not of the node's credential", in)
	}
}

// A flood of events, many registries and many nodes, keeps the tracker within its bounds.
func TestTrackerMemoryIsBounded(t *testing.T) {
	tr := NewTracker(DefaultThresholds, func() int { return 0 })
	for i := range 200_000 {
		// Each of 100 registries hears from 2,000 nodes, each event new.
		o := Observation{Registry: fmt.Sprintf("r%d.azurecr.io", i%100), Node: fmt.Sprintf("node-%d", i/100), Time: t0, Refused: i%2 == 0,
			Event: fmt.Sprintf("e%d", i), Times: 1}
		tr.Observe(o, t0)
	}
	if len(tr.registries) > MaxRegistries || len(tr.events) > MaxEvents {
		t.Errorf("tracker holds %d registries and %d events, beyond %d and %d", len(tr.registries), len(tr.events), MaxRegistries, MaxEvents)
	}
	for name, r := range tr.registries {
		if len(r.nodes) > MaxNodesPerRegistry {
			t.Errorf("registry %s holds %d nodes", name, len(r.nodes))
		}
	}
}

func BenchmarkObserveFlood(b *testing.B) {
	tr := NewTracker(DefaultThresholds, func() int { return 50 })
	obs := make([]Observation, 1000)
	for i := range obs {
		obs[i] = Observation{Registry: acr, Node: fmt.Sprintf("node-%d", i%50), Time: t0, Refused: true}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		tr.Observe(obs[i%len(obs)], t0)
	}
}

func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		patterns []string
		registry string
		want     bool
	}{
		{[]string{"*.azurecr.io"}, "myacr.azurecr.io", true},
		{[]string{"*.azurecr.io"}, "a.b.azurecr.io", true},
		{[]string{"*.azurecr.io"}, "azurecr.io", false},
		{[]string{"*.azurecr.io"}, "myacr.azurecr.io.evil.example", false},
		{[]string{"*.azurecr.cn", "registry.example.com:5000"}, "registry.example.com:5000", true},
		{[]string{"MyACR.AzureCR.io"}, "myacr.azurecr.io", true},
		{nil, "myacr.azurecr.io", false},
	} {
		if got := Matches(tc.patterns, tc.registry); got != tc.want {
			t.Errorf("Matches(%q, %q) = %v, want %v", tc.patterns, tc.registry, got, tc.want)
		}
	}
}

// An incident is told once its refusals settled when its scope is decided, and at the end of the
// window when it is still Undetermined.
func TestIncidentTellTime(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []string
		want  time.Duration
	}{
		{"cluster-wide", []string{"a", "b", "c"}, DefaultThresholds.Settle},
		{"undetermined", []string{"a"}, DefaultThresholds.Window},
	} {
		tr := NewTracker(DefaultThresholds, func() int { return 5 })
		for _, n := range tc.nodes {
			tr.Observe(refused(n, 0), t0.Add(time.Second))
		}
		in := tr.Incidents(t0.Add(time.Second))
		if len(in) != 1 || !in[0].Tell.Equal(t0.Add(tc.want)) {
			t.Errorf("%s: incidents %+v, want one told at +%v", tc.name, in, tc.want)
		}
	}
	if err := (Thresholds{Window: time.Minute, ClusterWideNodes: 3, NodeLocalMaxNodes: 2, Settle: time.Minute}).Validate(); err == nil {
		t.Error("a settle delay as long as the window was accepted")
	}
}
