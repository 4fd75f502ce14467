package planner

import (
	"slices"
	"time"

	"github.com/credwatch/credwatch/internal/graph"
)

// An asker waits for one appId at a time. Its answer holds room among its identity's reads ahead
// (readAhead) until taken: a watch deleted, or naming another application, would never take it,
// and enough of those, made by anyone who may create watches under a shared identity, would hold
// back every other namespace's checks on it for answerTTL. So an asker that asks for another
// appId withdraws what it asked before, and a deleted watch withdraws (Withdraw).

// Withdraw forgets what asker asked for: its checks will not come for the answer. An answer no
// other asker waits for is dropped, and gives its room to the batches held.
func (p *Planner) Withdraw(asker string) {
	p.mu.Lock()
	defer p.unlock()
	if k, ok := p.askers[asker]; ok {
		p.withdrawLocked(asker, k)
	}
}

// withdrawLocked takes asker off k, asked or answered.
func (p *Planner) withdrawLocked(asker string, k key) {
	if a := p.answers[k]; a != nil && slices.Contains(a.askers, asker) {
		p.takeLocked(k, a, asker)
		return
	}
	delete(p.askers, asker)
	b := p.asked[k]
	if b == nil {
		return
	}
	// A batch being read keeps its appId; its answer goes to no one.
	if w := b.wants[k.appID]; w != nil {
		w.wakers = slices.DeleteFunc(w.wakers, func(wk waker) bool { return wk.asker == asker })
	}
	if idle(b) && slices.Contains(p.queued[b.identity], b) {
		// Not read yet, and now never to be: it gives back its room, and if held lets the
		// batches behind it go first. Its goroutine finds it withdrawn.
		p.unholdLocked(b.identity, func(o *batch) bool { return o == b })
		p.unqueueLocked(b)
		p.withdrawnLocked(b)
	}
}

// idle reports whether no check or read waits for any of b's appIds.
func idle(b *batch) bool {
	for _, w := range b.wants {
		if len(w.wakers) > 0 || len(w.waiters) > 0 {
			return false
		}
	}
	return true
}

// takeLocked takes asker's answer a to k off those waiting, and drops it when no one else waits.
func (p *Planner) takeLocked(k key, a *answer, asker string) {
	a.askers = slices.DeleteFunc(a.askers, func(s string) bool { return s == asker })
	if p.askers[asker] == k {
		delete(p.askers, asker)
	}
	if len(a.askers) == 0 {
		p.dropLocked(k)
	}
}

// unaskLocked forgets that a's askers wait for it, as it is dropped.
func (p *Planner) unaskLocked(k key, a *answer) {
	for _, s := range a.askers {
		if p.askers[s] == k {
			delete(p.askers, s)
		}
	}
}

// withdrawnLocked reports whether every check that asked b withdrew, and if so drops b unread:
// no check joins it after.
func (p *Planner) withdrawnLocked(b *batch) bool {
	if !idle(b) {
		return false
	}
	for _, appID := range b.appIDs {
		if k := (key{b.identity, appID}); p.asked[k] == b {
			delete(p.asked, k)
		}
	}
	p.unreserveLocked(b)
	return true
}

// keepAnswerLocked keeps r, read at now (by a delta round when fromLog), as the answer to k that
// asker waits for: a newer answer for all, whoever asked before it waits for no older one. An
// answer older than answerTTL lets go of its askers first.
func (p *Planner) keepAnswerLocked(k key, r graph.Read, now time.Time, fromLog bool, asker string) {
	a := p.answers[k]
	if a != nil && now.Sub(a.at) >= answerTTL {
		p.unaskLocked(k, a)
		a.askers = nil
	}
	if a == nil {
		a = &answer{}
		p.answers[k] = a
		p.ahead[k.identity]++
	}
	a.read, a.at, a.fromLog = r, now, fromLog
	if !slices.Contains(a.askers, asker) {
		a.askers = append(a.askers, asker)
	}
	p.askers[asker] = k
}
