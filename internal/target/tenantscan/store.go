package tenantscan

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// Store holds what each tenant-scan watch's last scan found, between checks: a tenant's
// credentials are too many for a status, which lists those that need attention, while metrics
// report all. It is safe for concurrent use; the slices it hands out are never modified, by it or
// by their readers.
type Store struct {
	mu    sync.RWMutex
	scans map[types.NamespacedName]*scan
}

type scan struct {
	found  Found
	viewed time.Time
}

// NewStore returns an empty Store.
func NewStore() *Store { return &Store{scans: map[types.NamespacedName]*scan{}} }

// Put records what a watch's scan found, replacing the last scan's; when they were last
// evaluated carries over, since states are a matter of the clock, not of the scan.
func (s *Store) Put(watch types.NamespacedName, found Found) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc := s.scans[watch]; sc != nil {
		sc.found = found
		return
	}
	s.scans[watch] = &scan{found: found}
}

// Found returns what the watch's last scan found, and false when this process has not scanned
// for it.
func (s *Store) Found(watch types.NamespacedName) (Found, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sc, ok := s.scans[watch]
	if !ok {
		return Found{}, false
	}
	return sc.found, true
}

// Viewed records that the watch's credentials were evaluated at t, and returns when they were
// evaluated before: zero when this process has not yet done so.
func (s *Store) Viewed(watch types.NamespacedName, t time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := s.scans[watch]
	if sc == nil {
		return time.Time{}
	}
	prev := sc.viewed
	sc.viewed = t
	return prev
}

// Get returns what the watch's last scan found, and false when this process has not scanned for
// it (it started since, or the watch is no tenant scan).
func (s *Store) Get(watch types.NamespacedName) ([]v1alpha1.Credential, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sc, ok := s.scans[watch]
	if !ok {
		return nil, false
	}
	return sc.found.Credentials, true
}

// Forget drops a watch that is gone or no longer scans a tenant.
func (s *Store) Forget(watch types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.scans, watch)
}
