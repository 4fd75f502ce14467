package planner

// A Go map keeps the room of the most entries it ever held. A sweep of 100,000 watches fills the
// planner's per-ask maps to that many at its start, and the status writes empty them over the
// following minutes; kept at their most, they would hold megabytes through the sweep's peak,
// which comes at its end. So they are made anew, with what they hold, once they hold a quarter of
// their most. Each copy follows at least three times as many deletions, so it costs the planner
// a constant per ask.

// shrinkFrom is the fewest entries a map must have held to be made anew: below it the room is
// a few kilobytes, and copying it would churn.
const shrinkFrom = 1024

// most is the most entries each per-ask map held since it was last made anew.
type most struct{ asked, askers, answers int }

// unlock shrinks the per-ask maps, if they emptied enough, and unlocks: every change to them
// ends there.
func (p *Planner) unlock() {
	p.asked = shrink(p.asked, &p.most.asked)
	p.askers = shrink(p.askers, &p.most.askers)
	p.answers = shrink(p.answers, &p.most.answers)
	p.mu.Unlock()
}

// shrink is m, or a copy of it with no more room than it needs once it holds a quarter of most,
// which it keeps up to date.
func shrink[K comparable, V any](m map[K]V, most *int) map[K]V {
	*most = max(*most, len(m))
	if *most < shrinkFrom || len(m) > *most/4 {
		return m
	}
	*most = len(m)
	// Not maps.Clone: it copies the room too.
	n := make(map[K]V, len(m))
	for k, v := range m {
		n[k] = v
	}
	return n
}
