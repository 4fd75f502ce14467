package fakegraph

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// Delta queries as Graph serves them for applications and service principals
// (learn.microsoft.com/graph/delta-query-overview): a first round lists every object and ends
// with an @odata.deltaLink; a round from that link returns what changed since, created objects
// whole, updated ones as their id and the properties that changed, removed ones as their id and
// @removed. Query options are given once, in the first request, and carried in the links.
// $deltatoken=latest starts from now, with no objects. A token older than seven days answers
// 400 syncStateNotFound; one from before ResetDeltaState answers 410 Gone.

const (
	// deltaTokenLifetime is how long Graph keeps the state behind a delta link of directory
	// objects (devblogs.microsoft.com/microsoft365dev, "Duration of change tracking tokens for
	// identity and education resources", 2020).
	deltaTokenLifetime = 7 * 24 * time.Hour
	// deltaPageSize is how many objects a page of a delta round holds.
	deltaPageSize = 100
)

// change is one write to an object, as a delta round reports it.
type change struct {
	seq     int64
	at      time.Time
	sps     bool
	id      string   // the object's ID
	props   []string // the properties written; nil when the object was created
	removed bool
}

// deltaState is a position in a tenant's changes, carried in a link's token.
type deltaState struct {
	Tenant   string   `json:"t"`
	Epoch    int      `json:"e"`
	From     int64    `json:"f"`           // changes after From
	To       int64    `json:"u"`           // up to To, fixed when the round started
	Initial  bool     `json:"i,omitempty"` // a first round: every object, not the changes
	Offset   int      `json:"o,omitempty"`
	Selected []string `json:"s,omitempty"` // nil without $select
	Issued   int64    `json:"a"`           // unix seconds, by the delta clock
}

// SetDeltaLag makes a write show in delta rounds only that long after it was made: Graph's
// change tracking trails its writes.
func (s *Server) SetDeltaLag(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deltaLag = d
}

// SetDeltaClock sets the clock that ages delta tokens and the lag; tests pass their fake clock.
func (s *Server) SetDeltaClock(c clock.PassiveClock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deltaClock = c
}

// ResetDeltaState makes every delta link given so far for the tenant answer 410 Gone, as Graph
// does when it lost the state behind them.
func (s *Server) ResetDeltaState(tenantID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tenantLocked(tenantID, false); t != nil {
		t.deltaEpoch++
	}
}

func (s *Server) deltaNowLocked() time.Time {
	if s.deltaClock != nil {
		return s.deltaClock.Now()
	}
	return time.Now()
}

// recordLocked notes a write to an object of t for delta rounds.
func (s *Server) recordLocked(t *tenant, sps bool, id string, props []string, removed bool) {
	s.changeSeq++
	t.changes = append(t.changes, change{seq: s.changeSeq, at: s.deltaNowLocked(), sps: sps, id: strings.ToLower(id), props: props, removed: removed})
	// Graph keeps a week of changes; so does the fake, dropping the rest now and then.
	if cut := s.deltaNowLocked().Add(-deltaTokenLifetime - time.Hour); len(t.changes) > 0 && t.changes[0].at.Before(cut) {
		i := sort.Search(len(t.changes), func(i int) bool { return !t.changes[i].at.Before(cut) })
		t.changes = slices.Clone(t.changes[i:])
	}
}

// changedProps names what differs between two versions of an object.
func changedProps(sps bool, old, o Object) []string {
	var props []string
	if old.AppID != o.AppID {
		props = append(props, "appId")
	}
	if old.DisplayName != o.DisplayName {
		props = append(props, "displayName")
		if sps {
			props = append(props, "appDisplayName")
		}
	}
	if !slices.EqualFunc(old.Passwords, o.Passwords, func(a, b PasswordCredential) bool {
		return a.KeyID == b.KeyID && a.DisplayName == b.DisplayName && a.Hint == b.Hint && a.Start.Equal(b.Start) && a.End.Equal(b.End)
	}) {
		props = append(props, "passwordCredentials")
	}
	if !slices.EqualFunc(old.Keys, o.Keys, func(a, b KeyCredential) bool {
		return a.KeyID == b.KeyID && a.DisplayName == b.DisplayName && a.Start.Equal(b.Start) && a.End.Equal(b.End)
	}) {
		props = append(props, "keyCredentials")
	}
	if !slices.Equal(old.Tags, o.Tags) {
		props = append(props, "tags")
	}
	if old.PreferredSingleSignOnMode != o.PreferredSingleSignOnMode {
		props = append(props, "preferredSingleSignOnMode")
	}
	return props
}

// visibleLocked is the last change of t a round may report now: the changes after it are not
// yet past the lag.
func (s *Server) visibleLocked(t *tenant) int64 {
	cut := s.deltaNowLocked().Add(-s.deltaLag)
	i := sort.Search(len(t.changes), func(i int) bool { return t.changes[i].at.After(cut) })
	if i < len(t.changes) {
		return t.changes[i].seq - 1
	}
	return s.changeSeq
}

// delta answers GET /{set}/delta (or /{set}/microsoft.graph.delta).
func (s *Server) delta(w http.ResponseWriter, r *http.Request, c graphCall, set *entitySet, tok issuedToken) {
	if !s.onlyGET(w, r, c) {
		return
	}
	st, msg, status := s.deltaStateOf(r.URL.RawQuery, set, tok)
	if msg != "" {
		code := "Request_BadRequest"
		switch status {
		case http.StatusGone:
			code = "resyncRequired"
		case http.StatusBadRequest + 1:
			status, code = http.StatusBadRequest, "syncStateNotFound"
		}
		c.graphError(w, status, code, msg)
		return
	}
	ru := set.baseRU
	if st.Selected != nil {
		ru--
	}
	ru = max(ru, 1)
	if !s.spend(w, c, tok, ru) {
		return
	}
	w.Header().Set("x-ms-resource-unit", strconv.Itoa(ru))
	values, more := s.deltaPage(set, &st)
	body := object{{"@odata.context", s.URL() + "/v1.0/$metadata#" + set.name + query{selected: st.Selected}.contextSelect()}}
	link := s.URL() + "/v1.0/" + set.name + "/delta?"
	if more {
		body = append(body, field{"@odata.nextLink", link + "$skiptoken=" + encodeDeltaState(st)})
	} else {
		next := deltaState{Tenant: st.Tenant, Epoch: st.Epoch, From: st.To, To: st.To, Selected: st.Selected, Issued: s.now().Unix()}
		body = append(body, field{"@odata.deltaLink", link + "$deltatoken=" + encodeDeltaState(next)})
	}
	body = append(body, field{"value", values})
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deltaNowLocked()
}

// deltaStateOf reads where a request stands: a first round, a round from a token, or a page of
// one. The status is http.StatusBadRequest+1 for a token Graph no longer keeps.
func (s *Server) deltaStateOf(rawQuery string, set *entitySet, tok issuedToken) (deltaState, string, int) {
	vals, err := url.ParseQuery(rawQuery)
	if err != nil {
		return deltaState{}, "Invalid query string.", http.StatusBadRequest
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenantLocked(tok.tenantID, true)
	var token string
	var rest []string
	for k, vs := range vals {
		switch strings.ToLower(k) {
		case "$deltatoken", "$skiptoken":
			token = vs[0]
		default:
			rest = append(rest, k+"="+url.QueryEscape(vs[0]))
		}
	}
	if token == "" || token == "latest" {
		q, msg := parseQuery(strings.Join(rest, "&"), set)
		switch {
		case msg != "":
			return deltaState{}, msg, http.StatusBadRequest
		case q.filter != nil || q.topGiven:
			return deltaState{}, "fakegraph does not implement $filter or $top on delta.", http.StatusBadRequest
		}
		to := s.visibleLocked(t)
		return deltaState{Tenant: strings.ToLower(tok.tenantID), Epoch: t.deltaEpoch, From: to, To: to, Initial: token == "",
			Selected: q.selected, Issued: s.deltaNowLocked().Unix()}, "", 0
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	var st deltaState
	if err != nil || json.Unmarshal(b, &st) != nil || st.Tenant != strings.ToLower(tok.tenantID) {
		return deltaState{}, "Unable to read the delta token.", http.StatusBadRequest
	}
	if st.Epoch != t.deltaEpoch {
		return deltaState{}, "Resync required: the state behind this delta link is gone. Start a new round of change tracking without a token.", http.StatusGone
	}
	if s.deltaNowLocked().Sub(time.Unix(st.Issued, 0)) > deltaTokenLifetime {
		return deltaState{}, "The sync state generation is not found. The delta token is expired and data must be synchronized again.", http.StatusBadRequest + 1
	}
	if !st.Initial && st.Offset == 0 && st.From == st.To {
		// The first request of a round from a delta link: it reports up to what is visible now.
		st.To = max(st.From, s.visibleLocked(t))
	}
	return st, "", 0
}

func encodeDeltaState(st deltaState) string {
	b, _ := json.Marshal(st)
	return base64.RawURLEncoding.EncodeToString(b)
}

// deltaPage renders the page of st's round at st.Offset and moves st.Offset past it; more is
// whether pages follow.
func (s *Server) deltaPage(set *entitySet, st *deltaState) (values []object, more bool) {
	s.mu.Lock()
	t := s.tenantLocked(st.Tenant, true)
	var items []deltaItem
	m := t.apps
	if set.sps {
		m = t.sps
	}
	if st.Initial {
		for _, o := range t.listedLocked(set.sps) {
			items = append(items, deltaItem{obj: o.obj.clone()})
		}
	} else {
		items = changedLocked(t, set.sps, m, st.From, st.To)
	}
	limit := deltaPageSize
	if s.pageLimit > 0 {
		limit = min(limit, s.pageLimit)
	}
	s.mu.Unlock()
	values = []object{}
	start := min(st.Offset, len(items))
	end := min(start+limit, len(items))
	for _, it := range items[start:end] {
		switch {
		case it.removed:
			values = append(values, object{{"id", it.obj.ID}, {"@removed", object{{"reason", "changed"}}}})
		case it.props == nil:
			values = append(values, render(set, it.obj, st.Selected, st.Selected != nil))
		default:
			values = append(values, render(set, it.obj, selectedOf(set, st.Selected, it.props), st.Selected != nil))
		}
	}
	st.Offset = end
	return values, end < len(items)
}

// deltaItem is an object as a round reports it.
type deltaItem struct {
	obj     Object
	props   []string // nil: all selected
	removed bool
}

// changedLocked lists the objects of one collection written after from and up to to, in the
// order of their first write, each as its current state with what was written to it.
func changedLocked(t *tenant, sps bool, m map[string]*stored, from, to int64) []deltaItem {
	i := sort.Search(len(t.changes), func(i int) bool { return t.changes[i].seq > from })
	type acc struct {
		props   []string
		created bool
		removed bool
	}
	var order []string
	seen := map[string]*acc{}
	for _, ch := range t.changes[i:] {
		if ch.seq > to {
			break
		}
		if ch.sps != sps {
			continue
		}
		a := seen[ch.id]
		if a == nil {
			a = &acc{}
			seen[ch.id] = a
			order = append(order, ch.id)
		}
		switch {
		case ch.removed:
			a.removed = true
		case ch.props == nil:
			a.created, a.removed = true, false
		default:
			for _, p := range ch.props {
				if !slices.Contains(a.props, p) {
					a.props = append(a.props, p)
				}
			}
		}
	}
	byID := map[string]*stored{}
	for _, st := range m {
		if seen[strings.ToLower(st.obj.ID)] != nil {
			byID[strings.ToLower(st.obj.ID)] = st
		}
	}
	out := make([]deltaItem, 0, len(order))
	for _, id := range order {
		a, st := seen[id], byID[id]
		switch {
		case st == nil:
			if !a.created || a.removed {
				out = append(out, deltaItem{obj: Object{ID: id}, removed: true})
			}
		case a.created:
			out = append(out, deltaItem{obj: st.obj.clone()})
		default:
			out = append(out, deltaItem{obj: st.obj.clone(), props: a.props})
		}
	}
	return out
}

// selectedOf is what an updated object shows: its id and the properties written, those the
// round selected.
func selectedOf(set *entitySet, selected, written []string) []string {
	if selected == nil {
		selected = defaultProps(set)
	}
	out := []string{"id"}
	for _, p := range selected {
		if p != "id" && slices.Contains(written, p) {
			out = append(out, p)
		}
	}
	return out
}
