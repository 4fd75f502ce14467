// Package delta keeps what Graph's delta rounds reported of one tenant, as one identity reads
// it, and answers a watch's read from what the watch knew and what changed since: in a tenant
// where little changes, a sweep of thousands of watches then costs a request or two, not a list
// for every fifteen of them.
//
// The base of an answer is what the watch knew as Graph was read at some moment. The log holds,
// for every watched object a round reported since Since, the properties reported, and when the
// page that last reported it came. An object reported after the read is answered with what the
// rounds reported of it; one reported before, by more than the slack of Graph's replicas, is in
// what the watch knew already; one reported around the read, when the order of the two is not
// known, is read again, and so is a removed object and a new one reported only in part. A log is
// kept in a form that survives a restart (Encode, Decode): its links go on from where they were.
package delta

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/credwatch/credwatch/internal/graph"
)

const (
	// Slack covers Graph's replicas: a change a round saw up to this long before a read may
	// not be in what the read returned.
	Slack = time.Minute
	// Keep is how long a change stays in the log: longer than the longest check interval (7d),
	// or a watch checked weekly would find the log younger than its last read, and be read.
	Keep = 8 * 24 * time.Hour
	// MaxObjects bounds the log, oldest out first.
	MaxObjects = 20000
	// TokenLifetime is how long Graph keeps the state behind a deltaLink of directory objects
	// (seven days, devblogs.microsoft.com/microsoft365dev, 2020), less a day: a link older than
	// that starts a new round without it rather than fail.
	TokenLifetime = 6 * 24 * time.Hour
)

// Entry is what rounds reported of one object, the later over the earlier, property by property.
type Entry struct {
	graph.Change
	// Seen is when the page that last reported the object came: the change was made before.
	Seen time.Time
}

// Log is one identity's rounds of one tenant.
type Log struct {
	// Links are the deltaLinks of the last round, by graph.Source.
	Links map[graph.Source]string
	// Round is when the last round ended: what the log holds is Graph as of then.
	Round time.Time
	// Since is when the log starts: every change Graph made since is in Objects, or in the
	// rounds its links will read.
	Since time.Time
	// Reported is how many objects the last round reported: what a round costs.
	Reported int
	// Objects are the objects reported since Since, by lower-case object ID.
	Objects map[string]*Entry

	// byApp indexes the objects whose appId a round reported: a new object, created since a
	// watch read, is known by its appId only.
	byApp map[string][]string
}

// New is an empty log that holds every change Graph made since since.
func New(since time.Time) *Log {
	return &Log{Links: map[graph.Source]string{}, Round: since, Since: since, Objects: map[string]*Entry{}, byApp: map[string][]string{}}
}

// Add records ch, reported by a page that came at seen.
func (l *Log) Add(ch graph.Change, seen time.Time) {
	ch.ObjectID = strings.ToLower(ch.ObjectID)
	e := l.Objects[ch.ObjectID]
	switch {
	case e == nil || ch.Removed || e.Removed:
		e = &Entry{Change: ch}
		l.Objects[ch.ObjectID] = e
	default:
		merge(&e.Change, ch)
	}
	e.Seen = seen
	if e.HasAppID && !slices.Contains(l.byApp[e.AppID], ch.ObjectID) {
		l.byApp[e.AppID] = append(l.byApp[e.AppID], ch.ObjectID)
	}
}

// merge sets on e what ch reports.
func merge(e *graph.Change, ch graph.Change) {
	if ch.HasAppID {
		e.HasAppID, e.AppID = true, ch.AppID
	}
	if ch.HasDisplayName {
		e.HasDisplayName, e.DisplayName = true, ch.DisplayName
	}
	if ch.HasPasswords {
		e.HasPasswords, e.Passwords = true, ch.Passwords
	}
	if ch.HasCertificates {
		e.HasCertificates, e.Certificates = true, ch.Certificates
	}
	if ch.HasSingleSignOn {
		e.HasSingleSignOn, e.SingleSignOnMode = true, ch.SingleSignOnMode
	}
}

// Covers reports whether the log holds every change a watch that read at knownAt may have
// missed: it started slack before the read.
func (l *Log) Covers(knownAt time.Time, slack time.Duration) bool {
	return !knownAt.IsZero() && !knownAt.Add(-slack).Before(l.Since)
}

// Answer is what a watch that knew known, as Graph was read at knownAt, knows now, as of the
// last round; false when the log cannot say and the watch must be read. slack is how long
// before knownAt a change may not be in what the read returned: Slack for a read of Graph,
// whose replicas trail its writes, and 0 for an answer of this log, which holds every change
// it reported up to knownAt. An object reported in that span is read again; one reported
// after it is answered with what the rounds reported of it, the latest value of each property.
func (l *Log) Answer(known graph.Snapshot, knownAt time.Time, slack time.Duration) (graph.Snapshot, bool) {
	if !l.Covers(knownAt, slack) || (known.ApplicationObjectID == "" && known.ServicePrincipalObjectID == "") {
		return graph.Snapshot{}, false
	}
	out := known
	out.Credentials = slices.Clone(known.Credentials)
	appID := strings.ToLower(known.AppID)
	for _, src := range []graph.Source{graph.Application, graph.ServicePrincipal} {
		id := known.ApplicationObjectID
		if src == graph.ServicePrincipal {
			id = known.ServicePrincipalObjectID
		}
		e := l.entryOf(src, strings.ToLower(id), appID)
		if e == nil || !e.Seen.After(knownAt.Add(-slack)) {
			continue // unchanged, or in what the watch knows already
		}
		if !e.Seen.After(knownAt) || e.Removed || (id == "" && (!e.HasPasswords || !e.HasCertificates)) {
			// Around the read, gone (a read confirms it), or new and reported in part.
			return graph.Snapshot{}, false
		}
		apply(&out, src, e)
	}
	out.ReadAt = l.Round
	return out, true
}

// entryOf is the entry of the object id of src, of appID, or, when the watch knew no such
// object, of a new one of appID. An entry of another collection, or whose appId is another's,
// is not the watch's.
func (l *Log) entryOf(src graph.Source, id, appID string) *Entry {
	if id != "" {
		if e := l.Objects[id]; e != nil && e.Source == src && (!e.HasAppID || e.AppID == appID) {
			return e
		}
		return nil
	}
	var newest *Entry
	for _, oid := range l.byApp[appID] {
		if e := l.Objects[oid]; e != nil && e.Source == src && (newest == nil || e.Seen.After(newest.Seen)) {
			newest = e
		}
	}
	return newest
}

// apply puts into s what e reports of s's object of src.
func apply(s *graph.Snapshot, src graph.Source, e *Entry) {
	if src == graph.Application {
		s.ApplicationObjectID = e.ObjectID
		if e.HasDisplayName {
			s.DisplayName = e.DisplayName
		}
	} else {
		s.ServicePrincipalObjectID = e.ObjectID
		if e.HasDisplayName && s.ApplicationObjectID == "" {
			s.DisplayName = e.DisplayName
		}
		if e.HasSingleSignOn {
			s.SingleSignOnMode = e.SingleSignOnMode
		}
	}
	replace := func(t graph.Type, with []graph.Credential) {
		s.Credentials = slices.DeleteFunc(s.Credentials, func(c graph.Credential) bool { return c.Source == src && c.Type == t })
		s.Credentials = append(s.Credentials, with...)
	}
	if e.HasPasswords {
		replace(graph.Password, e.Passwords)
	}
	if e.HasCertificates {
		replace(graph.Certificate, e.Certificates)
	}
}

// Prune drops what no watch needs any more, as of now: changes older than Keep, and the
// oldest beyond MaxObjects. The log then starts later.
func (l *Log) Prune(now time.Time) {
	l.dropBefore(now.Add(-Keep))
	if len(l.Objects) > MaxObjects {
		seen := make([]time.Time, 0, len(l.Objects))
		for _, e := range l.Objects {
			seen = append(seen, e.Seen)
		}
		slices.SortFunc(seen, time.Time.Compare)
		l.dropBefore(seen[len(seen)-MaxObjects].Add(time.Nanosecond))
	}
}

// dropBefore drops the objects last reported before cut, and starts the log at cut.
func (l *Log) dropBefore(cut time.Time) {
	if l.Since.Before(cut) {
		l.Since = cut
	}
	for id, e := range l.Objects {
		if e.Seen.Before(cut) {
			delete(l.Objects, id)
		}
	}
	l.index()
}

func (l *Log) index() {
	l.byApp = map[string][]string{}
	for id, e := range l.Objects {
		if e.HasAppID {
			l.byApp[e.AppID] = append(l.byApp[e.AppID], id)
		}
	}
}

// Encode is the log as it is kept, at most maxBytes long: the oldest changes go first.
func (l *Log) Encode(maxBytes int) ([]byte, error) {
	for {
		b, err := json.Marshal(l)
		if err != nil || len(b) <= maxBytes || len(l.Objects) == 0 {
			return b, err
		}
		var oldest time.Time
		for _, e := range l.Objects {
			if oldest.IsZero() || e.Seen.Before(oldest) {
				oldest = e.Seen
			}
		}
		l.dropBefore(oldest.Add(time.Nanosecond))
	}
}

// Decode reads a log Encode wrote, as of now: an entry that is not the object it is kept under,
// or that was seen later than now, is dropped, and a log that starts later than now is refused.
func Decode(b []byte, now time.Time) (*Log, error) {
	l := &Log{}
	if err := json.Unmarshal(b, l); err != nil {
		return nil, err
	}
	if l.Links == nil {
		l.Links = map[graph.Source]string{}
	}
	if l.Objects == nil {
		l.Objects = map[string]*Entry{}
	}
	for id, e := range l.Objects {
		if e == nil || e.ObjectID != id || e.Seen.After(now) {
			delete(l.Objects, id)
		}
	}
	if l.Since.After(now) || l.Round.After(now) {
		return nil, errors.New("the kept delta state is from the future")
	}
	l.index()
	return l, nil
}
