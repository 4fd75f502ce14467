package pullauth

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// Thresholds say how failures are told apart.
type Thresholds struct {
	// Window is how far back pulls count.
	Window time.Duration
	// ClusterWideNodes is how many nodes must fail for the cluster's credential to be at fault;
	// in a smaller cluster, all its nodes.
	ClusterWideNodes int
	// NodeLocalMaxNodes is how many nodes at most may fail, while another pulls, for the fault
	// to be theirs.
	NodeLocalMaxNodes int
	// Settle is how long the refusals of an incident are gathered before it is told: events of
	// one failure arrive from every node within seconds, and are read one at a time.
	Settle time.Duration
}

// DefaultThresholds: a kubelet retries a refused pull within five minutes at most, so a
// ten-minute window sees every stuck pod twice; the nodes of a cluster-wide failure report it
// within seconds of each other.
var DefaultThresholds = Thresholds{Window: 10 * time.Minute, ClusterWideNodes: 3, NodeLocalMaxNodes: 2, Settle: 30 * time.Second}

// Memory is bounded whatever the event rate: a flood of failures updates the same entries. Beyond
// these counts, the registry or node seen least recently is forgotten first.
const (
	MaxRegistries       = 64
	MaxNodesPerRegistry = 1024
)

// Scope classifies the nodes whose latest pull from a registry was refused (failing) and those
// whose latest pull worked (pulling), in a cluster of nodes nodes (0 when unknown). Empty when
// nothing fails.
func Scope(failing, pulling, nodes int, th Thresholds) v1alpha1.PullScope {
	clusterWide := th.ClusterWideNodes
	if nodes > 0 {
		clusterWide = min(clusterWide, nodes)
	}
	switch {
	case failing == 0:
		return ""
	case failing >= clusterWide:
		return v1alpha1.PullScopeClusterWide
	case pulling > 0 && failing <= th.NodeLocalMaxNodes:
		return v1alpha1.PullScopeNodeLocal
	default:
		return v1alpha1.PullScopeUndetermined
	}
}

// Incident is a registry refusing pulls now.
type Incident struct {
	Registry string
	Scope    v1alpha1.PullScope
	// Failing are the nodes whose latest pull was refused, by name; Pulling counts the others
	// that pulled in the window.
	Failing []string
	Pulling int
	// Since is the incident's first refused pull.
	Since time.Time
	// Changes is when a refusal leaves the window, which may change the incident or end it.
	Changes time.Time
	// NodeCredential: the registry refused a pod that pulls with the node's credential.
	NodeCredential bool
	// Tell is when the incident may be told: once its refusals settled, for a scope decided; at
	// the end of the window, for one still Undetermined then.
	Tell time.Time
}

// Tracker keeps, per registry and node, the latest refused and successful pull. It is safe for
// concurrent use.
type Tracker struct {
	th    Thresholds
	nodes func() int

	mu         sync.Mutex
	registries map[string]*registry
	events     map[string]reported // by event UID
	ignored    map[Reason]uint64
}

type registry struct {
	nodes map[string]*pulls
	// since is the first refusal of the current incident.
	since time.Time
	// seen is the latest observation, to forget the quietest registry first.
	seen time.Time
	// last is what Observe last reported, to report only changes.
	last summary
	// nodeCredential: the current incident refused a pod pulling with the node's credential.
	nodeCredential bool
	// refusals counts refused pulls by the scope they fell in, once each.
	refusals map[v1alpha1.PullScope]uint64
}

type pulls struct{ refused, pulled time.Time }

// reported is how many times an event had reported a refused pull when last seen, and when.
type reported struct {
	times int32
	at    time.Time
}

// MaxEvents bounds the events remembered to count refusals once; beyond it, the ones out of the
// window go, or if none is, all.
const MaxEvents = 8192

type summary struct {
	scope            v1alpha1.PullScope
	failing, pulling int
	nodeCredential   bool // which brings the registry into the watches that cover pods' registries
}

// NewTracker returns a Tracker; nodes counts the cluster's nodes, 0 when unknown.
func NewTracker(th Thresholds, nodes func() int) *Tracker {
	return &Tracker{th: th, nodes: nodes, registries: map[string]*registry{}, events: map[string]reported{}, ignored: map[Reason]uint64{}}
}

// current says whether a pull at at still counts at now; an older one is history.
func (t *Tracker) current(at, now time.Time) bool { return at.After(now.Add(-t.th.Window)) }

// Ignore counts a pull event that does not count, by why.
func (t *Tracker) Ignore(r Reason) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ignored[r]++
}

// Ignored counts the pull events ignored so far by why, for metrics: each time one is decided,
// so an event listed again counts again.
func (t *Tracker) Ignored() map[Reason]uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[Reason]uint64, len(t.ignored))
	for r, n := range t.ignored {
		out[r] = n
	}
	return out
}

// Observe records o, as of now, and reports whether its registry's incident opened, closed,
// changed scope, or gained or lost nodes: what people would want to hear about again.
func (t *Tracker) Observe(o Observation, now time.Time) bool {
	if !t.current(o.Time, now) {
		return false // history listed again: it says nothing about now
	}
	cutoff := now.Add(-t.th.Window)
	nodes := t.nodes()
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.registries[o.Registry]
	if r == nil {
		if len(t.registries) >= MaxRegistries {
			t.forgetQuietestRegistry()
		}
		r = &registry{nodes: map[string]*pulls{}, refusals: map[v1alpha1.PullScope]uint64{}}
		t.registries[o.Registry] = r
	}
	r.seen = laterOf(r.seen, o.Time)
	p := r.nodes[o.Node]
	if p == nil {
		if len(r.nodes) >= MaxNodesPerRegistry {
			r.forgetQuietestNode(cutoff)
		}
		p = &pulls{}
		r.nodes[o.Node] = p
	}
	if o.Refused {
		if failing, _ := r.count(cutoff); failing == 0 {
			r.since, r.nodeCredential = o.Time, false
		} else if o.Time.Before(r.since) {
			r.since = o.Time
		}
		r.nodeCredential = r.nodeCredential || o.NodeCredential
		p.refused = laterOf(p.refused, o.Time)
	} else {
		p.pulled = laterOf(p.pulled, o.Time)
	}
	failing, pulling := r.count(cutoff)
	current := summary{Scope(failing, pulling, nodes, t.th), failing, pulling, r.nodeCredential}
	if o.Refused && o.Event != "" {
		if n := o.Times - t.events[o.Event].times; n > 0 {
			r.refusals[current.scope] += uint64(n)
			t.remember(o.Event, reported{o.Times, o.Time}, cutoff)
		}
	}
	changed := current != r.last
	r.last = current
	return changed
}

// remember keeps how many times an event has reported its refusal.
func (t *Tracker) remember(uid string, r reported, cutoff time.Time) {
	if _, ok := t.events[uid]; !ok && len(t.events) >= MaxEvents {
		maps.DeleteFunc(t.events, func(_ string, e reported) bool { return !e.at.After(cutoff) })
		if len(t.events) >= MaxEvents {
			// A flood within the window: what is forgotten may be counted again once.
			clear(t.events)
		}
	}
	t.events[uid] = r
}

// Incidents are the registries refusing pulls at now, by registry name.
func (t *Tracker) Incidents(now time.Time) []Incident {
	nodes := t.nodes()
	cutoff := now.Add(-t.th.Window)
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Incident
	for name, r := range t.registries {
		failing := r.failing(cutoff)
		if len(failing) == 0 {
			continue
		}
		_, pulling := r.count(cutoff)
		in := Incident{Registry: name, Scope: Scope(len(failing), pulling, nodes, t.th), Failing: failing, Pulling: pulling, Since: r.since,
			NodeCredential: r.nodeCredential}
		in.Tell = in.Since.Add(t.th.Settle)
		if in.Scope == v1alpha1.PullScopeUndetermined {
			in.Tell = in.Since.Add(t.th.Window)
		}
		for _, n := range failing {
			if c := r.nodes[n].refused.Add(t.th.Window); in.Changes.IsZero() || c.Before(in.Changes) {
				in.Changes = c
			}
		}
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, b Incident) int { return cmp.Compare(a.Registry, b.Registry) })
	return out
}

// Refusals counts the refused pulls seen per registry and the scope each fell in, for metrics:
// those of kubelets' events that their pods' statuses bore out.
func (t *Tracker) Refusals() map[string]map[v1alpha1.PullScope]uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]map[v1alpha1.PullScope]uint64, len(t.registries))
	for name, r := range t.registries {
		out[name] = make(map[v1alpha1.PullScope]uint64, len(r.refusals))
		for s, n := range r.refusals {
			out[name][s] = n
		}
	}
	return out
}

// count counts the nodes whose latest pull in the window was refused, and the others that pulled
// in it. It runs at every observation, so it allocates nothing.
func (r *registry) count(cutoff time.Time) (failing, pulling int) {
	for _, p := range r.nodes {
		switch p.state(cutoff) {
		case nodeFailing:
			failing++
		case nodePulling:
			pulling++
		}
	}
	return failing, pulling
}

// failing are the nodes whose latest pull in the window was refused, by name.
func (r *registry) failing(cutoff time.Time) []string {
	var out []string
	for name, p := range r.nodes {
		if p.state(cutoff) == nodeFailing {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

type nodeState int

const (
	nodeQuiet nodeState = iota
	nodeFailing
	nodePulling
)

func (p *pulls) state(cutoff time.Time) nodeState {
	refused, pulled := p.refused.After(cutoff), p.pulled.After(cutoff)
	switch {
	case refused && (!pulled || !p.pulled.After(p.refused)):
		return nodeFailing
	case pulled:
		return nodePulling
	}
	return nodeQuiet
}

func (t *Tracker) forgetQuietestRegistry() {
	var quietest string
	for name, r := range t.registries {
		if quietest == "" || r.seen.Before(t.registries[quietest].seen) {
			quietest = name
		}
	}
	delete(t.registries, quietest)
}

// forgetQuietestNode drops every node with nothing in the window, or else the one seen least
// recently.
func (r *registry) forgetQuietestNode(cutoff time.Time) {
	var quietest string
	var quietestSeen time.Time
	for name, p := range r.nodes {
		seen := laterOf(p.refused, p.pulled)
		if !seen.After(cutoff) {
			delete(r.nodes, name)
			continue
		}
		if quietest == "" || seen.Before(quietestSeen) {
			quietest, quietestSeen = name, seen
		}
	}
	if len(r.nodes) >= MaxNodesPerRegistry {
		delete(r.nodes, quietest)
	}
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Validate says what is wrong with thresholds a person set.
func (th Thresholds) Validate() error {
	switch {
	case th.Window < time.Minute:
		return fmt.Errorf("the image-pull window must be at least 1m, not %v: kubelets retry a refused pull every few minutes", th.Window)
	case th.ClusterWideNodes < 1 || th.NodeLocalMaxNodes < 1:
		return fmt.Errorf("image-pull node thresholds must be at least 1 (cluster-wide %d, node-local %d)", th.ClusterWideNodes, th.NodeLocalMaxNodes)
	case th.NodeLocalMaxNodes >= th.ClusterWideNodes:
		return fmt.Errorf("the node-local maximum (%d) must be below the cluster-wide threshold (%d)", th.NodeLocalMaxNodes, th.ClusterWideNodes)
	case th.Settle < 0 || th.Settle >= th.Window:
		return fmt.Errorf("the image-pull settle delay (%v) must be at least 0 and shorter than the window (%v)", th.Settle, th.Window)
	}
	return nil
}
