package planner

import (
	"strings"
	"time"
)

// An answer read before a write to its application may not show the write: Forget drops the
// answers waiting, and the batches being read when the write was made are read again.

// Forget drops the answers of the application with object ID objectID, and those of batches read
// before now when they come: a write to it makes them stale.
func (p *Planner) Forget(objectID string) {
	p.mu.Lock()
	defer p.unlock()
	p.written[strings.ToLower(objectID)] = p.clock.Now()
	for k, a := range p.answers {
		if strings.EqualFold(a.read.Snapshot.ApplicationObjectID, objectID) {
			p.dropLocked(k)
		}
	}
}

// sentLocked marks b read from now: a write after now makes its answers stale.
func (p *Planner) sentLocked(b *batch, now time.Time) {
	b.sentAt = now
	p.sent[b] = struct{}{}
}

// writtenSinceLocked reports whether the application objectID was written since b was read: b's
// answer for it may not show the write.
func (p *Planner) writtenSinceLocked(b *batch, objectID string) bool {
	at, ok := p.written[strings.ToLower(objectID)]
	return ok && !at.Before(b.sentAt)
}

// pruneWrittenLocked forgets the writes no batch still to be answered was read before, however
// long a tenant's listing takes.
func (p *Planner) pruneWrittenLocked(now time.Time) {
	oldest := now
	for b := range p.sent {
		if b.sentAt.Before(oldest) {
			oldest = b.sentAt
		}
	}
	for obj, at := range p.written {
		if at.Before(oldest) {
			delete(p.written, obj)
		}
	}
}
