package aksfleet

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// Found is what one check of a fleet found.
type Found struct {
	// Subscriptions is how many subscriptions were searched.
	Subscriptions int
	Clusters      []Cluster
	// Unread are the subscriptions that could not be listed: their clusters are missing.
	Unread []v1alpha1.UnreadSubscription
	// Uncounted is how many clusters were found beyond the most a fleet holds.
	Uncounted int
	// Complete are the subscriptions listed whole, and "subscription/resource group" for those
	// listed a resource group at a time, in lower case: only there does a cluster's absence prove
	// it gone. None when clusters were left uncounted.
	Complete map[string]bool
}

// Store holds the last Found of each fleet watch between checks: every cluster and its service
// principal's credentials, more than a status lists, for the states the clock moves on and for
// metrics, which report every cluster. It is safe for concurrent use; what it hands out is never
// modified, by it or by its readers. A nil Store keeps nothing, for
// reconcilers that watch no fleet.
type Store struct {
	mu     sync.RWMutex
	fleets map[types.NamespacedName]*fleet
}

// fleet is what a check found, what of it the watch's identity still allows it to show, and when
// its states were last evaluated.
type fleet struct {
	found, shown Found
	viewed       time.Time
}

// NewStore returns an empty Store.
func NewStore() *Store { return &Store{fleets: map[types.NamespacedName]*fleet{}} }

// Put records what a watch's check found, replacing the last; all of it is shown until Show
// says otherwise.
func (s *Store) Put(watch types.NamespacedName, f Found) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if fl := s.fleets[watch]; fl != nil {
		// States are a matter of the clock, not of the check.
		fl.found, fl.shown = f, f
		return
	}
	s.fleets[watch] = &fleet{found: f, shown: f}
}

// Viewed records that the watch's clusters were evaluated at t, and returns when they were
// evaluated before: zero when this process has not yet done so.
func (s *Store) Viewed(watch types.NamespacedName, t time.Time) time.Time {
	if s == nil {
		return time.Time{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fl := s.fleets[watch]
	if fl == nil {
		return time.Time{}
	}
	prev := fl.viewed
	fl.viewed = t
	return prev
}

// Show records the part of what the watch's last check found that may be shown now.
func (s *Store) Show(watch types.NamespacedName, f Found) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if fl := s.fleets[watch]; fl != nil {
		fl.shown = f
	}
}

// Shown returns what may be shown of the watch's last check, and false when this process has
// not checked it.
func (s *Store) Shown(watch types.NamespacedName) (Found, bool) {
	fl, ok := s.lookup(watch)
	return fl.shown, ok
}

// Get returns what the watch's last check found, and false when this process has not checked it
// (it started since, or the watch is no fleet).
func (s *Store) Get(watch types.NamespacedName) (Found, bool) {
	fl, ok := s.lookup(watch)
	return fl.found, ok
}

// lookup is a copy of the watch's entry, empty when there is none.
func (s *Store) lookup(watch types.NamespacedName) (fleet, bool) {
	if s == nil {
		return fleet{}, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	fl, ok := s.fleets[watch]
	if !ok {
		return fleet{}, false
	}
	return *fl, true
}

// Forget drops a watch that is gone or no longer a fleet.
func (s *Store) Forget(watch types.NamespacedName) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.fleets, watch)
}
