package planner

import "k8s.io/utils/clock"

// When a batch may be read: when there is room for its answers beside those of its identity
// waiting for their checks (readAhead), and then when it has one of its identity's turns
// (inFlight). Held batches are let go, first come first, as checks take answers; the listings
// that answer held batches let those go themselves (unholdLocked), and so does the withdrawal of
// the last check a held batch would answer (withdrawLocked). A batch let go for room is read, or
// dropped unread when all its checks withdrew, and gives its room back either way.

// turns lets inFlight batches of an identity be read at once; users counts the batches that hold
// or wait for one, so that the identity's entry goes when none does.
type turns struct {
	ch    chan struct{}
	users int
}

// dropLocked drops k's answer, making room for a batch held.
func (p *Planner) dropLocked(k key) {
	a := p.answers[k]
	if a == nil {
		return
	}
	p.unaskLocked(k, a)
	delete(p.answers, k)
	p.countLocked(k.identity, -1)
}

// unreserveLocked gives back the room b took when it was let read: its answers now count alone.
func (p *Planner) unreserveLocked(b *batch) {
	n := b.reserved
	b.reserved = 0
	p.countLocked(b.identity, -n)
}

// countLocked adds n to identity's ahead, and lets go, in the order they came, the batches held
// for which there is room.
func (p *Planner) countLocked(identity any, n int) {
	// At zero only: a count gone negative stays, for the tests to see.
	if p.ahead[identity] += n; p.ahead[identity] == 0 {
		delete(p.ahead, identity)
	}
	held := p.held[identity]
	for len(held) > 0 && p.roomLocked(held[0]) {
		p.reserveLocked(held[0])
		close(held[0].room)
		held[0] = nil // the array outlives the slice: a batch let go is not kept by it
		held = held[1:]
	}
	p.setHeldLocked(identity, held)
}

// roomLocked reports whether b's answers fit beside its identity's answers waiting. With nothing
// waiting any batch fits, or one larger than readAhead would wait for good.
func (p *Planner) roomLocked(b *batch) bool {
	n := p.ahead[b.identity]
	return n == 0 || n+len(b.appIDs) <= p.readAhead
}

func (p *Planner) reserveLocked(b *batch) {
	b.reserved = len(b.appIDs)
	p.ahead[b.identity] += b.reserved
}

func (p *Planner) setHeldLocked(identity any, held []*batch) {
	if len(held) == 0 {
		delete(p.held, identity)
		return
	}
	p.held[identity] = held
}

// unholdLocked lets go the batches of identity held for room that will not be read: those a
// listing took, which it answers, or one no check waits for any more. Their goroutines end.
func (p *Planner) unholdLocked(identity any, unread func(*batch) bool) {
	var held []*batch
	for _, b := range p.held[identity] {
		if unread(b) {
			close(b.room)
			continue
		}
		held = append(held, b)
	}
	p.setHeldLocked(identity, held)
}

func takenByListing(b *batch) bool { return b.listed }

// holdLocked is what b waits for before it is read, or nil when it may be read now, having taken
// room for its answers: when they fit beside its identity's answers waiting and no batch held
// came before it. A batch that a listing took, or that a read waits on (a rotation's, which must
// never be held back) or an asker that waits where it asked, takes no room and is never held.
func (p *Planner) holdLocked(b *batch) <-chan struct{} {
	if b.listed || idle(b) || b.waited {
		return nil // read at once, or dropped unread
	}
	for _, w := range b.wants {
		if len(w.waiters) > 0 {
			return nil
		}
	}
	if len(p.held[b.identity]) == 0 && p.roomLocked(b) {
		p.reserveLocked(b)
		return nil
	}
	b.room = make(chan struct{})
	p.held[b.identity] = append(p.held[b.identity], b)
	return b.room
}

// readTurn waits for room for b's answers and then for a turn of b's identity, and returns what
// gives the turn back. A batch held for room stays queued, so a listing of the tenant counts it,
// and holds no turn, so a read that must be fresh is not held behind it. A batch a listing took
// needs no turn.
func (p *Planner) readTurn(b *batch) func() {
	p.mu.Lock()
	room := p.holdLocked(b)
	var expire clock.Timer
	if room != nil {
		// Set with the hold, under the lock: time that passes from then counts.
		expire = p.clock.NewTimer(expireEvery)
	}
	p.unlock()
	for room != nil {
		select {
		case <-room:
			room = nil
			expire.Stop()
		case <-expire.C():
			p.mu.Lock()
			p.expireLocked(p.clock.Now())
			p.unlock()
			expire = p.clock.NewTimer(expireEvery)
		}
	}
	p.mu.Lock()
	// No turn for a batch a listing took, or one left with no check to answer.
	done := b.listed || p.withdrawnLocked(b)
	p.unlock()
	if done {
		return func() {}
	}
	return p.turn(b.identity)
}

// turn waits for one of the identity's turns to read, and returns what gives it back.
func (p *Planner) turn(identity any) func() {
	p.mu.Lock()
	t := p.reading[identity]
	if t == nil {
		t = &turns{ch: make(chan struct{}, inFlight)}
		p.reading[identity] = t
	}
	t.users++
	p.unlock()
	t.ch <- struct{}{}
	return func() {
		<-t.ch
		p.mu.Lock()
		if t.users--; t.users == 0 {
			delete(p.reading, identity)
		}
		p.unlock()
	}
}
