package planner

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/credwatch/credwatch/internal/graph"
)

type batch struct {
	identity any
	// cred reads the batch: any credential of the identity will do.
	cred   azcore.TokenCredential
	appIDs []string
	wants  map[string]*want
	full   chan struct{}
	// timeout is the longest its callers allow, counted from its turn to be read: a check
	// bounded by a minute does not make Graph's silence last five, nor fail for waiting its turn.
	timeout time.Duration
	// sentAt is when it was read: a write after it makes its answers stale.
	sentAt time.Time
	// noListing marks a batch no listing of the tenant may be chosen for: one of its callers
	// may not list the tenant, or must see a write it made. A caller that joins a batch a
	// listing already took is answered by it, having caused nothing.
	noListing bool
	// listed marks a batch a listing read with others: it is answered, and not read again.
	listed bool
	// waited marks a batch an asker waits for where it asked (graph.Ask.Waits).
	waited bool
	// room is closed when a batch held for room may go.
	room chan struct{}
	// reserved is what the batch counts in its identity's ahead until it is answered.
	reserved int
}

// want is who waits for an appId: checks to wake, by who asked, and reads to answer.
type want struct {
	// wakers are nearly always one watch: a slice, where a map per appId would cost a sweep of
	// 100,000 watches tens of megabytes while Graph's budget holds its reads back.
	wakers  []waker
	waiters []chan graph.Read
	tries   int
}

type waker struct {
	asker string
	wake  func()
}

// wakeAlso wakes asker, once however often it asked, when the appId is in.
func (w *want) wakeAlso(asker string, wake func()) {
	for i := range w.wakers {
		if w.wakers[i].asker == asker {
			w.wakers[i].wake = wake
			return
		}
	}
	w.wakers = append(w.wakers, waker{asker, wake})
}

// openLocked is the open batch of cred's identity, opened and timed if there is none.
func (p *Planner) openLocked(cred azcore.TokenCredential) *batch {
	id := identityOf(cred)
	b := p.open[id]
	if b == nil {
		b = &batch{identity: id, cred: cred, wants: map[string]*want{}, full: make(chan struct{})}
		p.open[id] = b
		go p.send(b)
	}
	return b
}

// add is appID's place in b, made if it has none.
func (b *batch) add(appID string) *want {
	w := b.wants[appID]
	if w == nil {
		w = &want{}
		b.wants[appID] = w
		b.appIDs = append(b.appIDs, appID)
	}
	return w
}

// until lets b be read for as long as ctx allows from now, or batchTimeout when ctx has no
// deadline.
func (b *batch) until(ctx context.Context) {
	d := batchTimeout
	if deadline, ok := ctx.Deadline(); ok {
		d = time.Until(deadline)
	}
	b.timeout = min(max(b.timeout, d), batchTimeout)
}

// fullLocked sends b now if it can take no more.
func (b *batch) fullLocked(p *Planner) {
	if len(b.appIDs) == graph.MaxListedAppIDs && p.open[b.identity] == b {
		delete(p.open, b.identity)
		close(b.full)
	}
}

// askLocked asks for k's appId in the batch that will read it, opened if there is none, and
// wakes asker when it is in.
func (p *Planner) askLocked(ctx context.Context, cred azcore.TokenCredential, k key, asker string, wake func(), mayList, waits bool) {
	b := p.asked[k]
	if b == nil {
		b = p.openLocked(cred)
		p.asked[k] = b
	}
	w := b.add(k.appID)
	w.wakeAlso(asker, wake)
	b.noListing = b.noListing || !mayList
	b.waited = b.waited || waits
	b.until(ctx)
	b.fullLocked(p)
}
