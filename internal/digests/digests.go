// Package digests keeps what a tenant scan's owner digests need between reconciles, in memory:
// the owners of its applications as read this period, and the pace all digests go out at. A
// restarted operator reads the owners again; what was sent is in the watch's ledger, not here.
package digests

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Owners holds the owners' mail addresses each watch read, by application object ID, for one
// period: owners change, so each period reads them again. Safe for concurrent use.
type Owners struct {
	mu      sync.Mutex
	watches map[types.NamespacedName]*period
}

type period struct {
	start time.Time
	mails map[string][]string
}

// NewOwners returns an empty Owners.
func NewOwners() *Owners { return &Owners{watches: map[types.NamespacedName]*period{}} }

// Lookup returns the watch's owners read in the period starting at start, as
// policy.OwnerMails: an earlier period's are dropped.
func (o *Owners) Lookup(watch types.NamespacedName, start time.Time) func(objectID string) ([]string, bool) {
	o.mu.Lock()
	p := o.watches[watch]
	if p == nil || !p.start.Equal(start) {
		p = &period{start: start, mails: map[string][]string{}}
		o.watches[watch] = p
	}
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
func (o *Owners) Put(watch types.NamespacedName, start time.Time, objectID string, mails []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if p := o.watches[watch]; p != nil && p.start.Equal(start) {
		p.mails[objectID] = mails
	}
}

// Forget drops a watch that is gone or sends no digest. A nil Owners holds nothing to drop.
func (o *Owners) Forget(watch types.NamespacedName) {
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
