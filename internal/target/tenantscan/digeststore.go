package tenantscan

// What owner digests need between reconciles is kept in memory: the owners of a scan's
// applications as read this period, and the pace all digests go out at. A restarted operator
// reads the owners again; what was sent is in the watch's ledger, not here.

import (
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// DigestStore holds what owner digests know between reconciles: for each watch and its current period,
// the owners' mail addresses read, by application object ID (owners change, so each period reads
// them again) and the reads that failed; for each watch by UID, the messages this process sent
// in the period; and, for the whole operator, when each address of each tenant last had a digest
// and its expiry messages. The ledger is what keeps a message from going twice across restarts;
// the rest is a second guard that no spec edit clears, so that neither an edited ledger nor a
// watch whose schedule, spec or very existence changes can make this process mail someone
// again and again. Safe for concurrent use.
type DigestStore struct {
	mu     sync.Mutex
	owners map[types.NamespacedName]*ownersPeriod
	sent   map[types.UID]*sentPeriod
	uids   map[types.NamespacedName]types.UID
	// recent is when each tenant's address last had a digest, and its expiry messages.
	recent  map[string]time.Time
	notices map[string][]time.Time
}

type ownersPeriod struct {
	start  time.Time
	mails  map[string][]string
	failed map[string]time.Time
}

type sentPeriod struct {
	start time.Time
	keys  map[string]bool
}

// NoticesPerDay bounds the expiry messages one address of one tenant gets in any 24 hours: anyone
// may create an application, name someone its owner, and give it secrets that expire one by one.
const NoticesPerDay = 5

// NewDigestStore returns an empty DigestStore.
func NewDigestStore() *DigestStore {
	return &DigestStore{owners: map[types.NamespacedName]*ownersPeriod{}, sent: map[types.UID]*sentPeriod{},
		uids: map[types.NamespacedName]types.UID{}, recent: map[string]time.Time{}, notices: map[string][]time.Time{}}
}

// ownersAt is the watch's period starting at start, a new one when the watch moved on. o.mu is held.
func (o *DigestStore) ownersAt(watch types.NamespacedName, start time.Time) *ownersPeriod {
	p := o.owners[watch]
	if p == nil || !p.start.Equal(start) {
		p = &ownersPeriod{start: start, mails: map[string][]string{}, failed: map[string]time.Time{}}
		o.owners[watch] = p
	}
	return p
}

// Lookup returns the watch's owners read in the period starting at start: an earlier period's
// are dropped.
func (o *DigestStore) Lookup(watch types.NamespacedName, start time.Time) func(objectID string) ([]string, bool) {
	o.mu.Lock()
	p := o.ownersAt(watch, start)
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
func (o *DigestStore) Put(watch types.NamespacedName, start time.Time, objectID string, mails []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if p := o.owners[watch]; p != nil && p.start.Equal(start) {
		p.mails[objectID] = mails
		delete(p.failed, objectID)
	}
}

// Failed records that reading an application's owners failed at at, and returns when it first
// failed this period.
func (o *DigestStore) Failed(watch types.NamespacedName, start time.Time, objectID string, at time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.ownersAt(watch, start)
	if first, ok := p.failed[objectID]; ok {
		return first
	}
	p.failed[objectID] = at
	return at
}

// FailedSince is when reading an application's owners first failed this period, zero if it has not.
func (o *DigestStore) FailedSince(watch types.NamespacedName, start time.Time, objectID string) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ownersAt(watch, start).failed[objectID]
}

func (o *DigestStore) sentAt(watch types.NamespacedName, uid types.UID, start time.Time) *sentPeriod {
	o.uids[watch] = uid
	p := o.sent[uid]
	if p == nil || !p.start.Equal(start) {
		p = &sentPeriod{start: start, keys: map[string]bool{}}
		o.sent[uid] = p
	}
	return p
}

// Sent reports whether this process sent the message of ledger key in the watch's period.
func (o *DigestStore) Sent(watch types.NamespacedName, uid types.UID, start time.Time, key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.sentAt(watch, uid, start).keys[key]
}

// MarkSent records that this process sent the message of ledger key in the watch's period.
func (o *DigestStore) MarkSent(watch types.NamespacedName, uid types.UID, start time.Time, key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sentAt(watch, uid, start).keys[key] = true
}

func recipientKey(tenant, address string) string {
	return strings.ToLower(tenant) + "\x00" + strings.ToLower(address)
}

// DigestDue reports whether address of tenant may have a digest at now, and otherwise when.
func (o *DigestStore) DigestDue(tenant, address string, now time.Time) (bool, time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if last, ok := o.recent[recipientKey(tenant, address)]; ok && now.Before(last.Add(DigestGap)) {
		return false, last.Add(DigestGap)
	}
	return true, now
}

// Digested records a digest to address of tenant at now.
func (o *DigestStore) Digested(tenant, address string, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.recent[recipientKey(tenant, address)] = now
	if len(o.recent)%1024 == 0 { // drop what no longer holds anything back, now and then
		for k, t := range o.recent {
			if now.Sub(t) >= DigestGap {
				delete(o.recent, k)
			}
		}
	}
}

// NoticeDue reports whether address of tenant may have an expiry message at now, and otherwise when.
func (o *DigestStore) NoticeDue(tenant, address string, now time.Time) (bool, time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := recipientKey(tenant, address)
	kept := o.notices[k][:0]
	for _, t := range o.notices[k] {
		if now.Sub(t) < 24*time.Hour {
			kept = append(kept, t)
		}
	}
	o.notices[k] = kept
	if len(kept) >= NoticesPerDay {
		return false, kept[0].Add(24 * time.Hour)
	}
	return true, now
}

// Noticed records an expiry message to address of tenant at now.
func (o *DigestStore) Noticed(tenant, address string, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := recipientKey(tenant, address)
	o.notices[k] = append(o.notices[k], now)
}

// Forget drops the owners a watch read: its spec or identity changed, and what it may read with
// them. What it sent stays. A nil Store holds nothing to drop.
func (o *DigestStore) Forget(watch types.NamespacedName) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.owners, watch)
}

// Delete drops all a deleted watch's: its owners and what it sent. The tenant's addresses keep
// their last digests and messages.
func (o *DigestStore) Delete(watch types.NamespacedName) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.owners, watch)
	delete(o.sent, o.uids[watch])
	delete(o.uids, watch)
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
