package planner

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
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
// every check that waits for it with what the watch knew and what changed since (delta.Log).
// Checks the log cannot answer are read as any other. A round answers the checks that asked
// before it ended, as a check may join a batch already sent; a rotation's reads, which must see
// its own write, never come here, and an application the operator wrote since the round started
// is read.
// Every FullEvery, a round's checks are read instead and their answers compared with the log's:
// a difference nothing reported since explains is a change the rounds missed, which the keeper
// hears of.

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

// watcherTTL is how long a watch that asked with what it knows counts as watched.
const watcherTTL = 24 * time.Hour

type deltas struct {
	DeltaOptions
	reader   DeltaReader
	trackers map[string]*tracker
	// compare holds, for a round's checks that are read instead, what the log answered.
	compare map[key]comparison
}

// tracker is one identity's rounds.
type tracker struct {
	scope string
	cred  azcore.TokenCredential
	// log is the round goroutine's alone, and nil until loaded.
	log    *delta.Log
	loaded bool
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
	// suspects are differences between reads and the log, judged after the next round.
	suspects []suspect
}

// watcher is when an asker last asked, and when Graph was read for the answer it last took:
// its status keeps that time to the second, and a log started within that second covers the
// read or not by the fraction.
type watcher struct {
	asked, read time.Time
	// sum fingerprints that answer: a watch that asks with other credentials did not record it.
	sum uint64
}

type deltaWait struct {
	k         key
	asker     string
	wake      func()
	known     graph.Snapshot
	knownAt   time.Time
	uncertain time.Duration
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
	p.delta = &deltas{DeltaOptions: o, reader: r, trackers: map[string]*tracker{}, compare: map[key]comparison{}}
	return nil
}

// scopeOf is who an identity signs in as, for the log: its client and tenant, the same however
// its secret changes.
func scopeOf(cred azcore.TokenCredential) string {
	if s, ok := cred.(interface{ Scope() string }); ok {
		return s.Scope()
	}
	return ""
}

// awaitChangesLocked queues k's check for the next round of its identity when delta reads
// answer it; false when it is to be read.
func (p *Planner) awaitChangesLocked(cred azcore.TokenCredential, k key, ask graph.Ask) bool {
	d := p.delta
	scope := scopeOf(cred)
	if d == nil || scope == "" {
		return false
	}
	tr := d.trackers[scope]
	if tr == nil {
		tr = &tracker{scope: scope, watchers: map[string]watcher{}}
		d.trackers[scope] = tr
	}
	now := p.clock.Now()
	seen := tr.watchers[ask.Asker]
	tr.watchers[ask.Asker] = watcher{asked: now, read: seen.read, sum: seen.sum}
	if !ask.MayList || now.Before(tr.failedUntil) || !ChooseDelta(len(tr.watchers), tr.reported, true) {
		return false
	}
	tr.cred = cred
	if ask.Known == nil || ask.KnownAt.IsZero() {
		// A watch that knows nothing yet is read; its sweep starts the log, for the next.
		if !tr.started && !tr.running {
			tr.running = true
			go p.deltaRound(tr)
		}
		return false
	}
	// The watch's status keeps when it checked, to the second and after the read, up to
	// answerTTL: the time its answer was read is the planner's to remember, when the watch
	// recorded that answer.
	w := deltaWait{k: k, asker: ask.Asker, wake: ask.Wake, known: *ask.Known, knownAt: ask.KnownAt, uncertain: answerTTL}
	if !seen.read.IsZero() && fingerprint(*ask.Known) == seen.sum {
		w.knownAt, w.uncertain = seen.read, 0
	}
	tr.lastAsk = now
	if i := slices.IndexFunc(tr.waiting, func(o deltaWait) bool { return o.asker == ask.Asker }); i >= 0 {
		tr.waiting[i] = w
	} else {
		tr.waiting = append(tr.waiting, w)
	}
	if !tr.running {
		tr.running = true
		go p.deltaRound(tr)
	}
	return true
}

// deltaRound reads a round of changes a window after the first check asked for one, answers
// the checks waiting by its end, and goes on when more come.
func (p *Planner) deltaRound(tr *tracker) {
	p.awaitQuiet(tr)
	p.mu.Lock()
	cred := tr.cred
	start := p.clock.Now()
	// Writes the operator makes from now on are kept until the round is answered.
	mark := &batch{sentAt: start}
	p.sent[mark] = struct{}{}
	p.unlock()

	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	full, err := p.readChanges(ctx, tr, cred, start)
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
		if f := p.answerChangesLocked(tr, w, start, full, err); f != nil {
			wake = append(wake, f)
		}
	}
	for asker, w := range tr.watchers {
		if now.Sub(w.asked) >= watcherTTL {
			delete(tr.watchers, asker)
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
// an answered check.
func (p *Planner) answerChangesLocked(tr *tracker, w deltaWait, start time.Time, full bool, roundErr error) func() {
	if p.askers[w.asker] != w.k {
		return nil // withdrawn, or asking for another application now
	}
	var snap graph.Snapshot
	ok := roundErr == nil
	if ok {
		snap, ok = tr.log.Answer(w.known, w.knownAt, w.uncertain)
	}
	written := ok && p.writtenSinceLocked(&batch{sentAt: start}, snap.ApplicationObjectID)
	if ok && !full && !written {
		a := p.answers[w.k]
		if a == nil {
			a = &answer{}
			p.answers[w.k] = a
			p.ahead[w.k.identity]++
		}
		a.read, a.at = graph.Read{Snapshot: snap}, p.clock.Now()
		if !slices.Contains(a.askers, w.asker) {
			a.askers = append(a.askers, w.asker)
		}
		return w.wake
	}
	if ok && full && !written {
		p.delta.compare[w.k] = comparison{tr: tr, fromLog: snap}
	}
	p.askLocked(context.Background(), tr.cred, w.k, w.asker, w.wake, true)
	return nil
}

// readChanges reads a round into tr's log, loading it first, and keeps it; full says the
// round's checks are to be read and compared.
func (p *Planner) readChanges(ctx context.Context, tr *tracker, cred azcore.TokenCredential, start time.Time) (full bool, err error) {
	defer func() {
		// This goroutine is no reconcile's: a panic parsing a round fails the round.
		if r := recover(); r != nil {
			err = fmt.Errorf("reading a delta round: panic: %v", r)
		}
	}()
	d := p.delta
	if !tr.loaded {
		tr.log = p.loadLog(ctx, tr.scope)
		tr.loaded = true
	}
	l := tr.log
	if l != nil && start.Sub(l.Round) > delta.TokenLifetime {
		d.Keeper.Resynced(tr.scope, fmt.Errorf("the kept delta links are from %s, older than Graph keeps them", l.Round.UTC().Format(time.RFC3339)))
		l = nil
	}
	if l == nil {
		l = delta.New(start)
	}
	reported := 0
	for resynced := false; ; {
		err = p.readRound(ctx, l, cred, start, &reported)
		if !errors.Is(err, graph.ErrResync) || resynced {
			break
		}
		d.Keeper.Resynced(tr.scope, err)
		resynced, l, reported = true, delta.New(start), 0
	}
	if err != nil {
		tr.log = l // what a failed round read is kept, and reported again by the next
		return false, err
	}
	l.Round, l.Reported = start, reported
	full = d.FullEvery > 0 && start.Sub(l.Full) >= d.FullEvery
	if full {
		l.Full = start
	}
	l.Prune(start)
	tr.log = l
	b, encErr := l.Encode(maxKept)
	if encErr == nil {
		d.Keeper.Save(ctx, tr.scope, b)
	}
	return full, nil
}

// readRound reads both collections' changes since l's links into l.
func (p *Planner) readRound(ctx context.Context, l *delta.Log, cred azcore.TokenCredential, start time.Time, reported *int) error {
	for _, src := range []graph.Source{graph.Application, graph.ServicePrincipal} {
		next, err := p.delta.reader.ReadDelta(ctx, cred, src, l.Links[src], graph.DeltaLatest, func(ch graph.Change) {
			l.Add(ch, start)
			*reported++
		})
		if err != nil {
			return err
		}
		l.Links[src] = next
	}
	return nil
}

// loadLog is the log kept for scope, or nil.
func (p *Planner) loadLog(ctx context.Context, scope string) *delta.Log {
	b, err := p.delta.Keeper.Load(ctx, scope)
	if err != nil || len(b) == 0 {
		return nil
	}
	l, err := delta.Decode(b)
	if err != nil {
		p.delta.Keeper.Resynced(scope, fmt.Errorf("the kept delta state cannot be read: %w", err))
		return nil
	}
	return l
}

// tookLocked notes when Graph was read for the answer asker took, of cred's identity.
func (p *Planner) tookLocked(cred azcore.TokenCredential, asker string, s graph.Snapshot) {
	if p.delta == nil || s.ReadAt.IsZero() {
		return
	}
	if tr := p.delta.trackers[scopeOf(cred)]; tr != nil {
		if w, ok := tr.watchers[asker]; ok {
			w.read, w.sum = s.ReadAt, fingerprint(s)
			tr.watchers[asker] = w
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
