// Package planner reads the credentials of watches in as few Graph requests as a tenant allows.
//
// A check asks for its appId and comes back when woken: its reconcile does not wait on Graph, so
// the checks of a sweep pile up, under each identity, into lists of graph.MaxInList appIds, ten
// lists a $batch (about 0.13 resource unit an appId, where point reads cost two). Reads that
// must see a write just made, a rotation's, wait for a batch sent after they asked. An appId no
// list returned is confirmed by a point read before it is called missing, and so is an
// application a list left out beside its service principal (foreign.go); an identity Graph does
// not let list reads by point reads; and a list Graph throttled is asked again once the budget
// allows, a few times, before its appIds fail.
//
// When the appIds waiting for their turn are a large share of a tenant whose size a listing or a
// tenant scan with the same identity counted, and every watch that asked may scan the tenant,
// one listing of the whole tenant reads them all instead (ChooseReads). A tenant scan
// answers the checks waiting under its identity the same way. Lists keep up with a sweep while
// Graph is quick; the backlog, and the listing, come when the budget holds them back, which is
// when a listing's fewer units matter.
//
// Graph answers a sweep's checks faster than the API server takes their status writes. An
// identity's checks are read no further ahead than readAhead answers waiting to be taken: the
// batches behind them wait, still counted for a listing, and a rotation's reads never do. A
// listing answers every batch it takes at once, beyond the bound: it reads the whole tenant in
// any case, and is chosen when Graph's budget, not memory, is what a sweep lacks.
package planner

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"k8s.io/utils/clock"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
)

// Reader is Graph as the planner reads it: lists of up to graph.MaxListedAppIDs appIds in one
// $batch, point reads of up to graph.MaxBatchAppIDs, and a listing of the whole tenant.
type Reader interface {
	ReadCredentialLists(ctx context.Context, cred azcore.TokenCredential, appIDs []string) []graph.Read
	ReadCredentialsBatch(ctx context.Context, cred azcore.TokenCredential, appIDs []string) []graph.Read
	ScanTenant(ctx context.Context, cred azcore.TokenCredential, filter string, visit func(graph.Object)) error
}

const (
	// batchTimeout bounds one batch, which no caller's context owns, when no caller gave a
	// deadline; waiting for the budget is part of it.
	batchTimeout = 5 * time.Minute
	// answerTTL is how long an answer waits for the check that asked for it. A sweep of many
	// watches wakes them faster than the API server takes their status writes: an answer
	// taken minutes after it came is still far fresher than the check interval, and reading
	// it again would cost the budget twice. Longer than controllers' pendingRecheck, at which a
	// watch whose wake was lost comes back for it.
	answerTTL = 20 * time.Minute
	// throttledTries is how many times a list Graph throttles is sent before its appIds fail.
	throttledTries = 3
	// listRefusedFor is how long an identity Graph refused a list reads by point reads alone.
	listRefusedFor = time.Hour
	// inFlight is how many batches of an identity are read at once: what is sent before Graph
	// answers is sent before the limiter can learn from its answer that the budget is smaller
	// than configured. A sweep's batches all go in the first second; with no bound, a budget of
	// 40 units drew 80 429s at once. Two at a time still read 10,000 appIds in about a second.
	inFlight = 2
	// readAhead is how many answers of an identity may wait for their checks, or be read, before
	// its batches of checks wait for them to be taken. Graph answers a sweep ten times faster
	// than the API server takes its status writes, so with no bound a sweep of 100,000 watches
	// held 100,000 answers, some 50 MB, for minutes; 5,000 are still twenty seconds of writes.
	readAhead = 5000
	// expireEvery is how often a batch held for room drops the answers no check took within
	// answerTTL: a reconcile woken may never come for its answer (its watch deleted, or no longer
	// due), and enough of those would hold the identity's checks for good.
	expireEvery = answerTTL / 10
)

// Planner plans the reads of many watches into few requests.
type Planner struct {
	next   Reader
	clock  clock.Clock
	window time.Duration

	mu sync.Mutex
	// reading holds a token for each batch an identity is reading.
	reading map[any]*turns
	// listRefused is until when an identity reads by point reads alone.
	listRefused map[any]time.Time
	// written is when each application (by object ID, in lower case) was last written.
	written map[string]time.Time
	// sent are the batches being read: a write is kept in written while one read before it
	// may still be answered, however long a tenant's listing takes.
	sent map[*batch]struct{}
	// open holds each identity's batch still taking appIds. A batch already sent may predate
	// a caller's own write, so only a check, never a read that must be fresh, joins one.
	open map[any]*batch
	// asked is the batch, open or sent, that will answer each appId asked for by a check.
	asked map[key]*batch
	// askers is the appId, of one identity, that each asker waits for: asked, or answered and
	// not yet taken.
	askers map[string]key
	// answers wait for the checks that asked for them.
	answers map[key]*answer
	// queued are each identity's batches sent and waiting for a turn to be read: a listing of
	// the tenant may read them together.
	queued map[any][]*batch
	// sizes are the tenants' sizes, by identity, as their last full listing counted them.
	sizes map[any]tenantSize
	// listingRefused is until when an identity does not list its tenant.
	listingRefused map[any]time.Time
	// foreign are the applications a point read found in no tenant of an identity's, as the
	// list that returned their service principal alone suggested, and when.
	foreign map[key]time.Time
	pruned  time.Time
	// ahead counts each identity's answers waiting, and the appIds of the batches let read and
	// not yet answered.
	ahead map[any]int
	// held are each identity's batches waiting for room among ahead, first come first.
	held map[any][]*batch
	// most is how full asked, askers and answers have been: see unlock.
	most most
	// readAhead is the bound on ahead of each identity.
	readAhead int
	// delta answers checks from Graph's changes to the tenant (UseDelta); nil, every check is
	// read.
	delta *deltas
}

// An identity is planned by what identityOf says of its credential.
type key struct {
	identity any
	appID    string
}

// identityOf is what the planner knows an identity by: its credential's PlanKey when it has one,
// stable however often the credential is built again, or else the credential itself.
func identityOf(cred azcore.TokenCredential) any {
	if k, ok := cred.(interface{ PlanKey() string }); ok {
		return k.PlanKey()
	}
	return cred
}

// answer waits for the checks that asked for it, and is handed to no one else: an answer is as
// fresh as the asking, and a check that did not ask may follow a change it would hide.
type answer struct {
	read graph.Read
	at   time.Time
	// fromLog: a delta round answered it, from what the asker knew.
	fromLog bool
	// askers are nearly always one watch: a slice, where a map would cost a sweep of 100,000
	// watches some 25 MB while their answers wait for their status writes.
	askers []string
}

// New returns a Planner reading through next, that sends an identity's batch when it holds
// graph.MaxListedAppIDs appIds or window after its first, whichever is sooner.
func New(next Reader, c clock.Clock, window time.Duration) *Planner {
	return &Planner{next: next, clock: c, window: window,
		open: map[any]*batch{}, asked: map[key]*batch{}, askers: map[string]key{}, answers: map[key]*answer{},
		reading: map[any]*turns{}, listRefused: map[any]time.Time{}, written: map[string]time.Time{}, sent: map[*batch]struct{}{},
		queued: map[any][]*batch{}, sizes: map[any]tenantSize{}, listingRefused: map[any]time.Time{}, foreign: map[key]time.Time{},
		ahead: map[any]int{}, held: map[any][]*batch{}, readAhead: readAhead}
}

// Check returns the credentials of appID read with cred since ask.Asker (a watch) asked for them,
// or graph.ErrPending after asking for them; ask.Wake is called when they are in. An asker that
// asks again before they are in is woken once; one that asks for another appId, or through
// another identity, withdraws what it asked before (Withdraw). Credentials are planned by
// identity, so one must be comparable; for one that is not, Check reads at once.
func (p *Planner) Check(ctx context.Context, cred azcore.TokenCredential, appID string, ask graph.Ask) (graph.Snapshot, error) {
	asker := ask.Asker
	if !plannable(cred) {
		return p.ReadCredentials(ctx, cred, appID)
	}
	k := key{identityOf(cred), appID}
	p.mu.Lock()
	defer p.unlock()
	if a := p.answers[k]; a != nil && slices.Contains(a.askers, asker) {
		p.takeLocked(k, a, asker)
		if p.clock.Since(a.at) < answerTTL {
			p.tookLocked(cred, asker, a)
			return a.read.Snapshot, a.read.Err
		}
	}
	if before, ok := p.askers[asker]; ok && before != k {
		// Its watch names another application or identity now.
		p.withdrawLocked(asker, before)
	}
	p.askers[asker] = k
	if p.asked[k] == nil && p.awaitChangesLocked(cred, k, ask) {
		return graph.Snapshot{}, graph.ErrPending
	}
	p.askLocked(ctx, cred, k, asker, ask.Wake, ask.MayList, ask.Waits)
	return graph.Snapshot{}, graph.ErrPending
}

// ReadCredentials reads appID's credentials with cred in the next batch sent, and waits for them.
func (p *Planner) ReadCredentials(ctx context.Context, cred azcore.TokenCredential, appID string) (graph.Snapshot, error) {
	if !plannable(cred) {
		return p.readAlone(ctx, cred, appID)
	}
	got := make(chan graph.Read, 1)
	p.mu.Lock()
	b := p.openLocked(cred)
	w := b.add(appID)
	w.waiters = append(w.waiters, got)
	b.noListing = true
	b.until(ctx)
	b.fullLocked(p)
	p.unlock()
	select {
	case r := <-got:
		return r.Snapshot, r.Err
	case <-ctx.Done():
		// Sorted as a read that got no answer would be, so the watch shows Graph as slow.
		if ue := azerr.Unanswered(ctx.Err()); ue != nil {
			return graph.Snapshot{}, ue
		}
		return graph.Snapshot{}, ctx.Err()
	}
}

func plannable(cred azcore.TokenCredential) bool {
	_, keyed := cred.(interface{ PlanKey() string })
	return cred != nil && (keyed || reflect.ValueOf(cred).Comparable())
}

func (p *Planner) send(b *batch) {
	timer := p.clock.NewTimer(p.window)
	defer timer.Stop()
	select {
	case <-b.full:
	case <-timer.C():
		p.mu.Lock()
		if p.open[b.identity] == b {
			delete(p.open, b.identity)
		}
		p.unlock()
	}
	// No more joins: the batch left p.open under the lock. Checks may still add their wakers
	// to its appIds while it waits its turn.
	p.mu.Lock()
	p.queued[b.identity] = append(p.queued[b.identity], b)
	p.unlock()
	defer p.readTurn(b)()
	p.mu.Lock()
	p.unqueueLocked(b)
	listed := b.listed
	withdrawn := !listed && p.withdrawnLocked(b)
	var together []*batch
	if !listed && !withdrawn {
		together = p.listingLocked(b)
	}
	p.unlock()
	switch {
	case listed: // a listing read it with others
		return
	case withdrawn:
		return
	case together != nil:
		ctx, cancel := context.WithTimeout(context.Background(), p.timeoutOf(together))
		wanted, err := p.list(ctx, b.cred, together, nil)
		cancel()
		p.answer(b.cred, together, wanted, err)
		return
	}
	var reads []graph.Read
	func() {
		defer func() {
			// This goroutine is no reconcile's, so controller-runtime's recovery does not reach
			// it: a panic reading one answer would stop the operator. It fails this batch instead.
			if r := recover(); r != nil {
				reads = panicked(b, r)
			}
		}()
		// Read under the lock: a check may still extend a batch that left p.open.
		p.mu.Lock()
		timeout := b.timeout
		p.sentLocked(b, p.clock.Now())
		p.unlock()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		reads = p.read(ctx, b.cred, b.appIDs)
	}()
	p.deliver(b, reads)
}

// askAgainLocked asks again, in the next batch, for the appId of k that b asked for and w
// waits for: Graph throttled it, or it was written since b was sent (stale).
func (p *Planner) askAgainLocked(b *batch, k key, w *want, stale bool) {
	// The limiter has seen the 429 and holds the next batch back until Graph allows it.
	again := p.openLocked(b.cred)
	again.noListing = again.noListing || b.noListing
	merged := again.add(k.appID)
	for _, wk := range w.wakers {
		merged.wakeAlso(wk.asker, wk.wake)
	}
	merged.waiters = append(merged.waiters, w.waiters...)
	if !stale {
		merged.tries = max(merged.tries, w.tries+1)
	}
	// Its callers' deadlines may have passed while Graph throttled; the next try waits for the
	// budget as long as a batch may.
	again.until(context.Background())
	if len(w.wakers) > 0 {
		p.asked[k] = again
	}
	again.fullLocked(p)
}

// deliver hands each appId's answer to those who wait for it, or asks again, in the next batch,
// for those Graph throttled.
func (p *Planner) deliver(b *batch, reads []graph.Read) {
	var wake []func()
	p.mu.Lock()
	now := p.clock.Now()
	for i, appID := range b.appIDs {
		w, r := b.wants[appID], reads[i]
		k := key{b.identity, appID}
		if p.asked[k] == b {
			delete(p.asked, k)
		}
		if len(w.wakers) == 0 && len(w.waiters) == 0 {
			continue // all that asked withdrew
		}
		if r.Err == nil {
			r.Snapshot.ReadAt = b.sentAt
		}
		stale := p.writtenSinceLocked(b, r.Snapshot.ApplicationObjectID)
		if stale || (azerr.KindOf(r.Err) == azerr.KindThrottled && w.tries+1 < throttledTries) {
			p.askAgainLocked(b, k, w, stale)
			continue
		}
		for _, ch := range w.waiters {
			ch <- r
		}
		if len(w.wakers) == 0 {
			continue
		}
		p.compareLocked(k, r)
		for _, wk := range w.wakers {
			p.keepAnswerLocked(k, r, now, false, wk.asker)
			wake = append(wake, wk.wake)
		}
	}
	delete(p.sent, b)
	p.unreserveLocked(b)
	p.pruneLocked(now)
	p.unlock()
	for _, f := range wake {
		f()
	}
}

// pruneLocked drops the answers no check came for, at most once per answerTTL.
func (p *Planner) pruneLocked(now time.Time) {
	if now.Sub(p.pruned) < answerTTL {
		return
	}
	p.pruned = now
	p.expireLocked(now)
	for id, until := range p.listRefused {
		if !now.Before(until) {
			delete(p.listRefused, id)
		}
	}
	for id, until := range p.listingRefused {
		if !now.Before(until) {
			delete(p.listingRefused, id)
		}
	}
	for id, size := range p.sizes {
		if now.Sub(size.at) >= sizeTTL {
			delete(p.sizes, id)
		}
	}
	p.pruneWrittenLocked(now)
	p.pruneForeignLocked(now)
}

// expireLocked drops the answers no check took within answerTTL of their coming.
func (p *Planner) expireLocked(now time.Time) {
	for k, a := range p.answers {
		if now.Sub(a.at) >= answerTTL {
			p.dropLocked(k)
		}
	}
}
