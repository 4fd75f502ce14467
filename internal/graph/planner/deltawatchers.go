package planner

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/credwatch/credwatch/internal/graph"
)

// tookLocked notes the answer a asker took, of cred's identity: the base the next round may
// answer it from.
func (p *Planner) tookLocked(cred azcore.TokenCredential, asker string, a *answer) {
	if p.delta == nil || a.read.Err != nil || a.read.Snapshot.ReadAt.IsZero() {
		return
	}
	tr := p.delta.trackers[scopeOf(cred)]
	if tr == nil {
		return
	}
	w, ok := tr.watchers[asker]
	if !ok {
		return
	}
	s := a.read.Snapshot
	w.read, w.sum, w.fromLog = s.ReadAt, fingerprint(s), a.fromLog
	if !a.fromLog {
		w.realRead = s.ReadAt
	}
	tr.watchers[asker] = w
	p.watchLocked(tr, asker, s)
}

// pruneWatchersLocked forgets the askers silent for watcherTTL, at most once an hour: a watch
// withdraws after each check, so only silence says it is gone.
func (p *Planner) pruneWatchersLocked(tr *tracker, now time.Time) {
	if now.Sub(tr.pruned) < time.Hour {
		return
	}
	tr.pruned = now
	for asker, w := range tr.watchers {
		if now.Sub(w.asked) >= watcherTTL {
			p.unwatchLocked(tr, asker)
		}
	}
}

// fingerprint sums what a watch records of a snapshot: its objects and its credentials' key
// IDs and ends, to the second, in any order.
func fingerprint(s graph.Snapshot) uint64 {
	parts := []string{strings.ToLower(s.ApplicationObjectID), strings.ToLower(s.ServicePrincipalObjectID)}
	for _, c := range s.Credentials {
		parts = append(parts, fmt.Sprintf("%s/%s/%s/%d", c.Source, c.Type, strings.ToLower(c.KeyID), c.End.Unix()))
	}
	slices.Sort(parts[2:])
	h := fnv.New64a()
	for _, p := range parts {
		_, _ = h.Write([]byte(p + "\n"))
	}
	return h.Sum64()
}

// watchLocked notes what asker watches, for the rounds to keep: the objects and appId of s.
func (p *Planner) watchLocked(tr *tracker, asker string, s graph.Snapshot) {
	w := tr.watchers[asker]
	for _, id := range w.ids {
		if tr.watched[id]--; tr.watched[id] <= 0 {
			delete(tr.watched, id)
		}
	}
	w.ids = w.ids[:0]
	for _, id := range []string{s.ApplicationObjectID, s.ServicePrincipalObjectID, s.AppID} {
		if id != "" {
			id = strings.ToLower(id)
			w.ids = append(w.ids, id)
			tr.watched[id]++
		}
	}
	tr.watchers[asker] = w
}

// unwatchLocked forgets asker: deleted, or silent for watcherTTL.
func (p *Planner) unwatchLocked(tr *tracker, asker string) {
	for _, id := range tr.watchers[asker].ids {
		if tr.watched[id]--; tr.watched[id] <= 0 {
			delete(tr.watched, id)
		}
	}
	delete(tr.watchers, asker)
}
