package target

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// KeyOf is the watch's key in a Store.
func KeyOf(obj *v1alpha1.CredentialWatch) types.NamespacedName {
	return types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}
}

// Store keeps, in memory and by watch, what a kind's last check found (more than a status lists:
// every cluster of a fleet, every credential of a tenant), what of it the watch's identity lets
// it show now, and when it was last evaluated, for the states the clock moves on between checks
// and for the metrics. A restarted operator checks again. It is safe for concurrent use; what it
// hands out is never modified, by it or by its readers. A nil Store keeps nothing.
type Store[T any] struct {
	mu      sync.RWMutex
	watches map[types.NamespacedName]*kept[T]
}

type kept[T any] struct {
	found, shown T
	viewed       time.Time
}

// NewStore returns an empty Store.
func NewStore[T any]() *Store[T] { return &Store[T]{watches: map[types.NamespacedName]*kept[T]{}} }

// Put records what a watch's check found, replacing the last, all of it shown until Show says
// otherwise. When it was last evaluated carries over: states are a matter of the clock, not of
// the check.
func (s *Store[T]) Put(watch types.NamespacedName, found T) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.watches[watch]; k != nil {
		k.found, k.shown = found, found
		return
	}
	s.watches[watch] = &kept[T]{found: found, shown: found}
}

// Show records the part of what the watch's last check found that may be shown now.
func (s *Store[T]) Show(watch types.NamespacedName, shown T) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.watches[watch]; k != nil {
		k.shown = shown
	}
}

// Get returns what the watch's last check found, and false when this process has not checked
// it (it started since, or the watch is of another kind).
func (s *Store[T]) Get(watch types.NamespacedName) (T, bool) {
	k, ok := s.lookup(watch)
	return k.found, ok
}

// Shown returns what may be shown of the watch's last check, and false when this process has
// not checked it.
func (s *Store[T]) Shown(watch types.NamespacedName) (T, bool) {
	k, ok := s.lookup(watch)
	return k.shown, ok
}

// lookup is a copy of the watch's entry, empty when there is none.
func (s *Store[T]) lookup(watch types.NamespacedName) (kept[T], bool) {
	if s == nil {
		return kept[T]{}, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.watches[watch]
	if !ok {
		return kept[T]{}, false
	}
	return *k, true
}

// Viewed records that the watch's findings were evaluated at t, and returns when they were
// evaluated before: zero when this process has not yet done so.
func (s *Store[T]) Viewed(watch types.NamespacedName, t time.Time) time.Time {
	if s == nil {
		return time.Time{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.watches[watch]
	if k == nil {
		return time.Time{}
	}
	prev := k.viewed
	k.viewed = t
	return prev
}

// Forget drops a watch that is gone or no longer of the kind.
func (s *Store[T]) Forget(watch types.NamespacedName) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watches, watch)
}
