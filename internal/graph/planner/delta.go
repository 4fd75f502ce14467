package planner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/graph/delta"
)

// Checks of watches that know their credentials (graph.Ask.Known), under an identity that may
// list its tenant and watches enough of it (ChooseDelta), are answered from Graph's changes to
// the tenant: a round of delta reads, one request per collection when little changed, answers
// every check that waits for it with the planner's last answer to that watch and what changed
// since (delta.Log). A watch whose status is not that answer is read: a status is anyone's to
// write who may write the watch's, and only what the planner answered is a base. Checks the log
// cannot answer are read as any other. A round answers the checks that asked before it ended, as
// a check may join a batch already sent; a rotation's reads, which must see its own write, never
// come here, and an application the operator wrote since shortly before the round is read. Once
// FullEvery has passed since a watch was read, its check is read and compared with the log's
// answer: a difference nothing reported since explains is a change the rounds missed, which the
// keeper hears of.

// DeltaReader is Graph's delta rounds.
type DeltaReader interface {
	ReadDelta(ctx context.Context, cred azcore.TokenCredential, src graph.Source, link string, start graph.DeltaStart, visit func(graph.Change)) (string, error)
}

// DeltaKeeper keeps each identity's log where a restarted operator, or a new leader, finds it,
// and hears what the rounds found.
type DeltaKeeper interface {
	// Load is what Save kept for scope (an identity: its client and tenant), nil when nothing.
	Load(ctx context.Context, scope string) ([]byte, error)
	// Save keeps state; a failure is the keeper's to tell of: the round read is good, and a
	// restart reads the watches again.
	Save(ctx context.Context, scope string, state []byte)
	// Resynced: the log of scope starts again from now, for why (Graph lost its state, or the
	// kept links are older than Graph keeps them).
	Resynced(scope string, why error)
	// Missed: a read of appID found what the rounds did not report.
	Missed(scope, appID, what string)
}

// DeltaOptions turn delta reads on.
type DeltaOptions struct {
	Keeper DeltaKeeper
	// FullEvery is how often a round's checks are read and compared with the log; 0, never.
	FullEvery time.Duration
}

// maxKept bounds a kept log, within a ConfigMap's megabyte.
const maxKept = 900 << 10

// maxRoundWait bounds how long a round waits for a sweep's checks to stop coming.
const maxRoundWait = 2 * time.Second

// watcherTTL is how long a watch that asked with what it knows counts as watched: longer than
// the longest check interval (7d), or a watch would be forgotten before its next check.
const watcherTTL = 8 * 24 * time.Hour

// saveEvery is how often a tracker's log is kept: each round has new links, and a restart that
// goes on from older ones reads the same changes again, which changes nothing.
const saveEvery = 5 * time.Minute

type deltas struct {
	DeltaOptions
	reader   DeltaReader
	trackers map[string]*tracker
	// compare holds, for checks read in place of the log's answer, what the log answered.
	compare map[key]comparison
	// scans are the tenants tenant scans read, by scope.
	scans map[string]*scanState
}

// tracker is one identity's rounds.
type tracker struct {
	scope string
	cred  azcore.TokenCredential
	// log is the round goroutine's alone, and nil until loaded.
	log    *delta.Log
	loaded bool
	// saved is when the log was last kept; pruned, when the watchers were.
	saved, pruned time.Time
	// reported is what the last round reported, for ChooseDelta.
	reported int
	waiting  []deltaWait
	// running: a round is read or waits for its window; started: one was read.
	running, started bool
	// lastAsk is when a check last asked for a round.
	lastAsk time.Time
	// failedUntil is until when checks are read, after a round failed.
	failedUntil time.Time
	// watchers are the askers that asked with what they know.
	watchers map[string]watcher
	// watched are the object IDs and appIds of the watchers' applications: the log keeps the
	// changes of these only.
	watched map[string]int
	// suspects are differences between reads and the log, judged after the next round.
	suspects []suspect
}

// watcher is what the planner remembers of an asker: when it last asked, and the answer it last
// took, which is the only base a round answers from. A watch's status says what it knows, but
// anyone who may write the status could say anything there: a status that is not what the
// planner answered is read.
type watcher struct {
	asked time.Time
	// read is when Graph was read for the answer, by a request or by the rounds; sum
	// fingerprints it; fromLog says the rounds answered it.
	read    time.Time
	sum     uint64
	fromLog bool
	// realRead is when Graph was last read for this asker by a request: once FullEvery has
	// passed, its check is read again and compared with the log.
	realRead time.Time
	// ids are the objects and appId it watches.
	ids []string
}

type deltaWait struct {
	k     key
	cred  azcore.TokenCredential
	asker string
	wake  func()
	waits bool
	known graph.Snapshot
	seen  watcher
}

type comparison struct {
	tr      *tracker
	fromLog graph.Snapshot
}

type suspect struct {
	appID   string
	objects []string
	at      time.Time
	what    string
}

// UseDelta answers checks from Graph's changes where it pays. next must read delta rounds.
func (p *Planner) UseDelta(o DeltaOptions) error {
	r, ok := p.next.(DeltaReader)
	if !ok || o.Keeper == nil {
		return errors.New("delta reads need a reader of delta rounds and a keeper of their state")
	}
	p.mu.Lock()
	defer p.unlock()
	p.delta = &deltas{DeltaOptions: o, reader: r, trackers: map[string]*tracker{}, compare: map[key]comparison{}, scans: map[string]*scanState{}}
	return nil
}

// scopeOf is who an identity signs in as, for the log and a scan's tenant: its client and
// tenant, the same however its secret changes, and whatever the case a spec wrote them in (each
// spelling would otherwise hold a tenant of its own).
func scopeOf(cred azcore.TokenCredential) string {
	if s, ok := cred.(interface{ Scope() string }); ok {
		return strings.ToLower(s.Scope())
	}
	return ""
}

// awaitChangesLocked queues k's check for the next round of its identity when delta reads
// answer it; false when it is to be read.
func (p *Planner) awaitChangesLocked(cred azcore.TokenCredential, k key, ask graph.Ask) bool {
	d := p.delta
	scope := scopeOf(cred)
	if d == nil || scope == "" || !ask.MayList {
		return false
	}
	tr := d.trackers[scope]
	if tr == nil {
		tr = &tracker{scope: scope, watchers: map[string]watcher{}, watched: map[string]int{}}
		d.trackers[scope] = tr
	}
	now := p.clock.Now()
	p.pruneWatchersLocked(tr, now)
	seen := tr.watchers[ask.Asker]
	seen.asked = now
	tr.watchers[ask.Asker] = seen
	if now.Before(tr.failedUntil) || !ChooseDelta(len(tr.watchers), tr.reported, true) {
		return false
	}
	tr.cred = cred
	if !tr.started {
		// The first checks are read; their sweep starts the log, for the next.
		p.roundLocked(tr)
	}
	if ask.Known == nil || seen.read.IsZero() || fingerprint(*ask.Known) != seen.sum {
		return false
	}
	w := deltaWait{k: k, cred: cred, asker: ask.Asker, wake: ask.Wake, waits: ask.Waits, known: *ask.Known, seen: seen}
	tr.lastAsk = now
	if i := slices.IndexFunc(tr.waiting, func(o deltaWait) bool { return o.asker == ask.Asker }); i >= 0 {
		tr.waiting[i] = w
	} else {
		tr.waiting = append(tr.waiting, w)
	}
	p.roundLocked(tr)
	return true
}

// roundLocked starts tr's next round unless one is read or waits for its window.
func (p *Planner) roundLocked(tr *tracker) {
	if !tr.running {
		tr.running = true
		go p.deltaRound(tr)
	}
}

// deltaRound reads a round of changes once a sweep's checks stop coming, answers the checks
// waiting by its end, and goes on when more come.
func (p *Planner) deltaRound(tr *tracker) {
	p.awaitQuiet(tr)
	p.mu.Lock()
	cred, start := tr.cred, p.clock.Now()
	watched := make(map[string]bool, len(tr.watched))
	for id := range tr.watched {
		watched[id] = true
	}
	// The operator's own writes from a little before now are kept until the round is answered:
	// Graph's change tracking trails them.
	mark := &batch{sentAt: start.Add(-delta.Slack)}
	p.sent[mark] = struct{}{}
	p.unlock()

	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	err := p.readChanges(ctx, tr, cred, start, watched)
	cancel()

	var wake []func()
	p.mu.Lock()
	delete(p.sent, mark)
	// The checks that asked while the round was read are answered by it too, as a check may
	// join a batch already sent: a sweep's checks come over seconds, and waiting for the next
	// round would cost a request pair each time.
	waits := tr.waiting
	tr.waiting = nil
	now := p.clock.Now()
	if err != nil {
		tr.failedUntil = now.Add(listingFailedFor)
	} else {
		tr.started, tr.reported = true, tr.log.Reported
		p.judgeLocked(tr)
	}
	for _, w := range waits {
		if f := p.answerChangesLocked(tr, w, mark.sentAt, err); f != nil {
			wake = append(wake, f)
		}
	}
	if len(tr.waiting) > 0 {
		go p.deltaRound(tr)
	} else {
		tr.running = false
	}
	p.unlock()
	for _, f := range wake {
		f()
	}
}

// awaitQuiet waits until no check has asked tr for a window, or maxRoundWait since the wait began:
// a sweep's checks come over seconds, and one round answers them all.
func (p *Planner) awaitQuiet(tr *tracker) {
	began := p.clock.Now()
	wait := p.window
	for {
		timer := p.clock.NewTimer(wait)
		<-timer.C()
		p.mu.Lock()
		now := p.clock.Now()
		quiet := now.Sub(tr.lastAsk)
		p.unlock()
		if quiet >= p.window || now.Sub(began) >= maxRoundWait {
			return
		}
		wait = p.window - quiet
	}
}

// answerChangesLocked answers w from the log, or asks for it to be read; it returns the wake of
// an answered check. A check is read when the round failed or the log cannot answer, when the
// operator wrote its application since writtenFrom, when another asker of the same application
// waits for an answer that differs, and once FullEvery has passed since its last read, when the
// read is compared with the log's answer.
func (p *Planner) answerChangesLocked(tr *tracker, w deltaWait, writtenFrom time.Time, roundErr error) func() {
	if p.askers[w.asker] != w.k {
		return nil // withdrawn, or asking for another application now
	}
	var snap graph.Snapshot
	ok := roundErr == nil
	if ok {
		slack := delta.Slack
		if w.seen.fromLog {
			slack = 0
		}
		snap, ok = tr.log.Answer(w.known, w.seen.read, slack)
	}
	ok = ok && !p.writtenSinceLocked(&batch{sentAt: writtenFrom}, snap.ApplicationObjectID)
	a := p.answers[w.k]
	ok = ok && (a == nil || len(a.askers) == 0 || fingerprint(a.read.Snapshot) == fingerprint(snap))
	due := p.delta.FullEvery > 0 && p.clock.Since(w.seen.realRead) >= p.delta.FullEvery
	if ok && !due {
		p.keepAnswerLocked(w.k, graph.Read{Snapshot: snap}, p.clock.Now(), true, w.asker)
		return w.wake
	}
	if ok {
		p.delta.compare[w.k] = comparison{tr: tr, fromLog: snap}
	}
	p.askLocked(context.Background(), w.cred, w.k, w.asker, w.wake, true, w.waits)
	return nil
}
