package pullauth

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Bounds of what corroboration keeps, whatever the cluster or someone forging events does.
const (
	// MaxPods bounds the pods kept to bear out events. Only pods that can are kept: a container
	// waiting on a pull, or one started within the window; beyond the bound, those that can for
	// the shortest time go first, and their events no longer count.
	MaxPods = 16384
	// MaxHeld bounds the events held for their pod's status; beyond it, the oldest is dropped.
	MaxHeld = 4096
	// HoldFor is how long an event is held for the pod status that bears it out. Kubelet reports
	// a pull twice, apart: an event, and the pod's status, which its status manager writes
	// within seconds (it syncs every 10 s at worst), in either order. A refusal is reported again
	// at each retry, and the pod keeps showing it; a successful pull only once, so it cannot be
	// dropped in the hope of a repeat.
	HoldFor = 2 * time.Minute
)

// evidence keeps what bears out pull events: the pods whose status can, from the watcher's
// watch of pods rather than a request per event, and the events whose pod has not shown the pull
// yet, until it does or HoldFor passes. Both are bounded. It is safe for concurrent use.
type evidence struct {
	// keep is how long a pod's status bears out events: the window and startSlack.
	keep time.Duration
	// nodeKnown says whether the API server knows a node.
	nodeKnown func(string) bool
	// ignore counts an event that does not count, by why.
	ignore func(Reason)

	mu    sync.Mutex
	pods  map[types.NamespacedName]podEntry
	held  map[types.NamespacedName]map[string]heldClaim // by pod, then by event
	nHeld int
	// expiry is the soonest any held claim expires; zero when none is held.
	expiry time.Time
}

type podEntry struct {
	PodPulls
	until time.Time
}

type heldClaim struct {
	claim  Claim
	reason Reason
	until  time.Time
}

func newEvidence(keep time.Duration, nodeKnown func(string) bool, ignore func(Reason)) *evidence {
	return &evidence{keep: keep, nodeKnown: nodeKnown, ignore: ignore,
		pods: map[types.NamespacedName]podEntry{}, held: map[types.NamespacedName]map[string]heldClaim{}}
}

// claim decides c at now: the observation it makes when the cluster bears it out. A claim a
// later pod status may bear out is held until then; any other is ignored.
func (e *evidence) claim(c Claim, now time.Time) (Observation, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.expire(now)
	r := e.decide(c, now)
	switch {
	case r == Corroborated:
		e.unhold(c)
		return c.Observation, true
	case r.mayChange():
		e.hold(c, r, now)
	default:
		e.unhold(c)
		e.ignore(r)
	}
	return Observation{}, false
}

// pod records what p's status can bear out, and gives the held events it now bears out.
func (e *evidence) pod(p *corev1.Pod, now time.Time) []Observation {
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	pulls, ok := PodPullsOf(p, now, now.Add(-e.keep))
	e.mu.Lock()
	defer e.mu.Unlock()
	e.expire(now)
	if ok {
		e.setPod(key, podEntry{pulls, pulls.until(now, e.keep)}, now)
	} else {
		delete(e.pods, key)
	}
	return e.recheck(key, now)
}

// forget drops a deleted pod. Events held for it wait out their time: it will not show them.
func (e *evidence) forget(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pods, key)
}

// replace records the pods of a whole list, forgetting those not in it, and gives the held events
// they now bear out.
func (e *evidence) replace(pods []*corev1.Pod, now time.Time) []Observation {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.expire(now)
	type keyed struct {
		key types.NamespacedName
		podEntry
	}
	var kept []keyed
	for _, p := range pods {
		if pulls, ok := PodPullsOf(p, now, now.Add(-e.keep)); ok {
			kept = append(kept, keyed{types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, podEntry{pulls, pulls.until(now, e.keep)}})
		}
	}
	if len(kept) > MaxPods {
		// As setPod would, at once: those that bear out events for the longest stay.
		slices.SortFunc(kept, func(a, b keyed) int { return b.until.Compare(a.until) })
		kept = kept[:MaxPods]
	}
	clear(e.pods)
	for _, k := range kept {
		e.pods[k.key] = k.podEntry
	}
	var out []Observation
	for key := range e.held {
		out = append(out, e.recheck(key, now)...)
	}
	return out
}

// decide corroborates c with the pod and nodes known at now.
func (e *evidence) decide(c Claim, now time.Time) Reason {
	var pod *PodPulls
	if p, ok := e.pods[c.Pod]; ok && now.Before(p.until) {
		pod = &p.PodPulls
	}
	return Corroborate(c, c.Node != "" && e.nodeKnown(c.Node), pod)
}

// recheck decides again the claims held for the pod of key.
func (e *evidence) recheck(key types.NamespacedName, now time.Time) []Observation {
	var out []Observation
	for id, h := range e.held[key] {
		switch r := e.decide(h.claim, now); {
		case r == Corroborated:
			out = append(out, h.claim.Observation)
			e.drop(key, id)
		case !r.mayChange():
			e.drop(key, id)
			e.ignore(r)
		default:
			h.reason = r
			e.held[key][id] = h
		}
	}
	return out
}

// setPod keeps a pod's entry; beyond MaxPods, the entries out of date go, or else the one that
// bears out events for the shortest time.
func (e *evidence) setPod(key types.NamespacedName, p podEntry, now time.Time) {
	if _, ok := e.pods[key]; !ok && len(e.pods) >= MaxPods {
		var first types.NamespacedName
		var firstUntil time.Time
		for k, q := range e.pods {
			if !now.Before(q.until) {
				delete(e.pods, k)
			} else if firstUntil.IsZero() || q.until.Before(firstUntil) {
				first, firstUntil = k, q.until
			}
		}
		if len(e.pods) >= MaxPods {
			delete(e.pods, first)
		}
	}
	e.pods[key] = p
}

// hold keeps c until a pod status bears it out or HoldFor passes. A held event that comes again
// (kubelet bumps its count) replaces itself and keeps its time: repeats do not hold it longer.
func (e *evidence) hold(c Claim, r Reason, now time.Time) {
	id := heldID(c)
	byPod := e.held[c.Pod]
	if h, ok := byPod[id]; ok {
		h.claim, h.reason = c, r
		byPod[id] = h
		return
	}
	if e.nHeld >= MaxHeld {
		e.dropOldest()
	}
	if byPod == nil {
		byPod = map[string]heldClaim{}
		e.held[c.Pod] = byPod
	}
	until := now.Add(HoldFor)
	byPod[id] = heldClaim{claim: c, reason: r, until: until}
	e.nHeld++
	if e.expiry.IsZero() || until.Before(e.expiry) {
		e.expiry = until
	}
}

// heldID names a held event: by its UID, as the API server gives every event.
func heldID(c Claim) string {
	if c.Event != "" {
		return c.Event
	}
	kind := "pulled"
	if c.Refused {
		kind = "refused"
	}
	return kind + " " + c.Node + " " + c.Image
}

func (e *evidence) unhold(c Claim) {
	if _, ok := e.held[c.Pod][heldID(c)]; ok {
		e.drop(c.Pod, heldID(c))
	}
}

func (e *evidence) drop(key types.NamespacedName, id string) {
	delete(e.held[key], id)
	if len(e.held[key]) == 0 {
		delete(e.held, key)
	}
	e.nHeld--
	if e.nHeld == 0 {
		e.expiry = time.Time{}
	}
}

// expire ignores the held claims whose time is up, looking only once one may be.
func (e *evidence) expire(now time.Time) {
	if e.nHeld == 0 || now.Before(e.expiry) {
		return
	}
	var next time.Time
	for key, byPod := range e.held {
		for id, h := range byPod {
			if !now.Before(h.until) {
				e.drop(key, id)
				e.ignore(h.reason)
			} else if next.IsZero() || h.until.Before(next) {
				next = h.until
			}
		}
	}
	e.expiry = next
}

// dropOldest ignores the claim held longest, to make room: events come in order, so a flood of
// forged ones pushes out the older ones, genuine or not, which a refusal's next retry reports again.
func (e *evidence) dropOldest() {
	var oldest heldClaim
	var key types.NamespacedName
	var id string
	for k, byPod := range e.held {
		for i, h := range byPod {
			if id == "" || h.until.Before(oldest.until) {
				oldest, key, id = h, k, i
			}
		}
	}
	if id != "" {
		e.drop(key, id)
		e.ignore(oldest.reason)
	}
}
