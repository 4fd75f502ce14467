// Package scans keeps what each tenant scan last found, between checks: a tenant's credentials
// are too many for a status, which lists those that need attention, while metrics report all.
package scans

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// Store holds the credentials of each tenant-scan watch, by watch. It is safe for concurrent use;
// the slices it hands out are never modified, by it or by their readers.
type Store struct {
	mu    sync.RWMutex
	scans map[types.NamespacedName][]v1alpha1.Credential
}

// New returns an empty Store.
func New() *Store { return &Store{scans: map[types.NamespacedName][]v1alpha1.Credential{}} }

// Put records the credentials a watch's scan found, replacing the last scan's.
func (s *Store) Put(watch types.NamespacedName, creds []v1alpha1.Credential) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scans[watch] = creds
}

// Get returns what the watch's last scan found, and false when this process has not scanned for
// it (it started since, or the watch is no tenant scan).
func (s *Store) Get(watch types.NamespacedName) ([]v1alpha1.Credential, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	creds, ok := s.scans[watch]
	return creds, ok
}

// Forget drops a watch that is gone or no longer scans a tenant.
func (s *Store) Forget(watch types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.scans, watch)
}
