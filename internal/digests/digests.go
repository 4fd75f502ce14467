// Package digests keeps what a tenant scan's owner digests need between reconciles, in memory:
// the owners of its applications as read this period, and the pace all digests go out at. A
// restarted operator reads the owners again; what was sent is in the watch's ledger, not here.
package digests

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Store holds, for each watch and its current period, the owners' mail addresses read, by
// application object ID (owners change, so each period reads them again), the messages this
// process sent, and the expiry messages each recipient had. The ledger is what keeps a message
// from going twice across restarts; what this process sent is kept here too, so that a ledger
// edited by whoever may write ConfigMaps in the watch's namespace cannot make it send again.
// Safe for concurrent use.
type Store struct {
	mu      sync.Mutex
	watches map[types.NamespacedName]*period
}

type period struct {
	start   time.Time
	mails   map[string][]string
	sent    map[string]bool
	notices map[string]int
}

// NewStore returns an empty Store.
func NewStore() *Store { return &Store{watches: map[types.NamespacedName]*period{}} }

// at is the watch's period starting at start, a new one when the watch moved on. o.mu is held.
func (o *Store) at(watch types.NamespacedName, start time.Time) *period {
	p := o.watches[watch]
	if p == nil || !p.start.Equal(start) {
		p = &period{start: start, mails: map[string][]string{}, sent: map[string]bool{}, notices: map[string]int{}}
		o.watches[watch] = p
	}
	return p
}

// Lookup returns the watch's owners read in the period starting at start, as
// policy.OwnerMails: an earlier period's are dropped.
func (o *Store) Lookup(watch types.NamespacedName, start time.Time) func(objectID string) ([]string, bool) {
	o.mu.Lock()
	p := o.at(watch, start)
	o.mu.Unlock()
	return func(objectID string) ([]string, bool) {
		o.mu.Lock()
		defer o.mu.Unlock()
		m, ok := p.mails[objectID]
		return m, ok
	}
}

// Put records the mail addresses of an application's owners, read in the period starting at
// start; nothing when the watch has moved on to another period meanwhile.
func (o *Store) Put(watch types.NamespacedName, start time.Time, objectID string, mails []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if p := o.watches[watch]; p != nil && p.start.Equal(start) {
		p.mails[objectID] = mails
	}
}

// Sent reports whether this process sent the message of ledger key in the watch's period.
func (o *Store) Sent(watch types.NamespacedName, start time.Time, key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.at(watch, start).sent[key]
}

// MarkSent records that this process sent the message of ledger key in the watch's period.
func (o *Store) MarkSent(watch types.NamespacedName, start time.Time, key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.at(watch, start).sent[key] = true
}

// Notice counts an expiry message to recipient in the watch's period, and returns how many it
// had before.
func (o *Store) Notice(watch types.NamespacedName, start time.Time, recipient string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.at(watch, start)
	n := p.notices[recipient]
	p.notices[recipient] = n + 1
	return n
}

// Notices is how many expiry messages recipient had in the watch's period.
func (o *Store) Notices(watch types.NamespacedName, start time.Time, recipient string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.at(watch, start).notices[recipient]
}

// Forget drops a watch that is gone, sends no digest, or changed what it may read. A nil Store
// holds nothing to drop.
func (o *Store) Forget(watch types.NamespacedName) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.watches, watch)
}

// Pace lets at most PerMinute messages go in any minute, for all watches together: Exchange
// Online takes 30 a minute from one sender. A sliding window, not a token bucket: a bucket of
// that burst lets twice as many through in the minute it refills.
type Pace struct {
	mu   sync.Mutex
	sent []time.Time // the moments of the last PerMinute messages, oldest first
	per  int
}

// NewPace returns a Pace of perMinute messages a minute; 0 or less means no limit.
func NewPace(perMinute int) *Pace { return &Pace{per: perMinute} }

// Take reserves a message at now, and reports whether it may go; otherwise when one may.
func (p *Pace) Take(now time.Time) (bool, time.Time) {
	if p == nil || p.per <= 0 {
		return true, now
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.sent) == p.per {
		if oldest := p.sent[0]; now.Before(oldest.Add(time.Minute)) {
			return false, oldest.Add(time.Minute)
		}
		p.sent = p.sent[1:]
	}
	p.sent = append(p.sent, now)
	return true, now
}

// Return gives back a reservation made at at that sent nothing, such as one taken for a
// message whose claim could not be written.
func (p *Pace) Return(at time.Time) {
	if p == nil || p.per <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.sent) - 1; i >= 0; i-- {
		if p.sent[i].Equal(at) {
			p.sent = append(p.sent[:i], p.sent[i+1:]...)
			return
		}
	}
}
