package planner

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/credwatch/credwatch/internal/graph"
)

// Every DeltaOptions.FullEvery, a round's checks are read, not answered from the log, and each
// read is compared with what the log would have answered. A difference may be a change made
// between the round and the read: it is judged after the next round, which reports such a
// change, and only one nothing reported explains goes to the keeper.

// compareLocked compares a read of k, done in place of the log's answer, with that answer.
func (p *Planner) compareLocked(k key, r graph.Read) {
	if p.delta == nil {
		return
	}
	c, ok := p.delta.compare[k]
	if !ok {
		return
	}
	delete(p.delta.compare, k)
	if r.Err != nil {
		return
	}
	if what := differ(c.fromLog, r.Snapshot); what != "" {
		c.tr.suspects = append(c.tr.suspects, suspect{appID: k.appID, at: c.fromLog.ReadAt, what: what,
			objects: []string{strings.ToLower(r.Snapshot.ApplicationObjectID), strings.ToLower(r.Snapshot.ServicePrincipalObjectID)}})
	}
}

// judgeLocked tells the keeper of the differences the round just read does not explain: an
// object it reported changed around the read.
func (p *Planner) judgeLocked(tr *tracker) {
	for _, s := range tr.suspects {
		explained := false
		for _, id := range s.objects {
			if e := tr.log.Objects[id]; id != "" && e != nil && !e.Seen.Before(s.at) {
				explained = true
			}
		}
		if !explained {
			p.delta.Keeper.Missed(tr.scope, s.appID, s.what)
		}
	}
	tr.suspects = nil
}

// differ says how a read differs from the log's answer, by key ID and end; "" when it does not.
func differ(fromLog, read graph.Snapshot) string {
	ids := func(s graph.Snapshot) []string {
		out := make([]string, 0, len(s.Credentials))
		for _, c := range s.Credentials {
			out = append(out, fmt.Sprintf("%s %s %s ending %s", c.Source, c.Type, strings.ToLower(c.KeyID), c.End.UTC().Format(time.RFC3339)))
		}
		slices.Sort(out)
		return out
	}
	a, b := ids(fromLog), ids(read)
	var missing, extra []string
	for _, x := range b {
		if !slices.Contains(a, x) {
			missing = append(missing, x)
		}
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			extra = append(extra, x)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return ""
	}
	return fmt.Sprintf("the read holds %v the delta log did not, and lacks %v it held", missing, extra)
}
