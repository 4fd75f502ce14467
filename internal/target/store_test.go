package target

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestStoreKeepsWhatWasFoundAndShowsWhatIsAllowed(t *testing.T) {
	watch := types.NamespacedName{Namespace: "platform", Name: "fleet"}
	type found struct{ Clusters []string }
	all := found{Clusters: []string{"a", "b"}}
	narrowed := found{Clusters: []string{"a"}}

	s := NewStore[found]()
	if _, ok := s.Get(watch); ok {
		t.Fatal("a new store holds a fleet")
	}
	s.Show(watch, narrowed) // nothing found yet: nothing to narrow
	if _, ok := s.Shown(watch); ok {
		t.Fatal("Show made up a fleet that was never found")
	}
	s.Put(watch, all)
	if got, _ := s.Shown(watch); len(got.Clusters) != 2 {
		t.Errorf("shown after Put: %d clusters, want all 2", len(got.Clusters))
	}
	s.Show(watch, narrowed)
	if got, _ := s.Shown(watch); len(got.Clusters) != 1 {
		t.Errorf("shown after Show: %d clusters, want 1", len(got.Clusters))
	}
	// An identity widened again shows the rest at once, without a new check.
	if got, _ := s.Get(watch); len(got.Clusters) != 2 {
		t.Errorf("found after Show: %d clusters, want the check's 2", len(got.Clusters))
	}
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	if prev := s.Viewed(watch, t0); !prev.IsZero() {
		t.Errorf("first view: previous %v, want none", prev)
	}
	s.Put(watch, all) // a new check: the states seen stay a matter of the clock
	if prev := s.Viewed(watch, t0.Add(time.Hour)); !prev.Equal(t0) {
		t.Errorf("view after a new check: previous %v, want %v", prev, t0)
	}
	s.Forget(watch)
	if _, ok := s.Shown(watch); ok {
		t.Error("a forgotten fleet is shown")
	}

	var none *Store[found]
	none.Put(watch, all)
	none.Viewed(watch, t0)
	none.Show(watch, all)
	none.Forget(watch)
	if _, ok := none.Get(watch); ok {
		t.Error("a nil store holds a fleet")
	}
	if _, ok := none.Shown(watch); ok {
		t.Error("a nil store shows a fleet")
	}
}
