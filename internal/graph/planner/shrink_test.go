package planner

import (
	"maps"
	"reflect"
	"testing"
	"unsafe"

	"github.com/credwatch/credwatch/internal/graph"
)

func TestShrink(t *testing.T) {
	for _, tc := range []struct {
		name       string
		held, most int
		anew       bool
		wantMost   int
	}{
		{"growing", 3000, 2000, false, 3000},
		{"emptied to a quarter", 500, 2000, true, 500},
		{"emptied to just over a quarter", 501, 2000, false, 2000},
		{"empty", 0, 4000, true, 0},
		{"never held enough to matter", 0, shrinkFrom - 1, false, shrinkFrom - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := map[int]int{}
			for i := range tc.held {
				m[i] = i
			}
			most := tc.most
			got := shrink(m, &most)
			if anew := addressOf(got) != addressOf(m); anew != tc.anew {
				t.Errorf("made anew: %v, want %v", anew, tc.anew)
			}
			if !maps.Equal(got, m) {
				t.Errorf("%d entries kept of %d", len(got), len(m))
			}
			if most != tc.wantMost {
				t.Errorf("most %d, want %d", most, tc.wantMost)
			}
		})
	}
}

// TestASweepGivesItsRoomBack: the per-ask maps, filled by a sweep's checks, are made anew as
// their answers are taken, not kept at their most for the life of the process.
func TestASweepGivesItsRoomBack(t *testing.T) {
	h := newHarness(t)
	c := &cred{"reader"}
	ids := appIDs(4 * shrinkFrom)
	release := make(chan struct{})
	h.r.listFn = func(ids []string) []graph.Read {
		<-release
		return found(ids)
	}
	for _, id := range ids {
		h.check(c, id)
	}
	h.p.mu.Lock()
	asked, askers := addressOf(h.p.asked), addressOf(h.p.askers)
	if len(h.p.asked) != len(ids) {
		t.Fatalf("%d appIds asked before any list is answered, want %d", len(h.p.asked), len(ids))
	}
	h.p.mu.Unlock()
	close(release)
	h.awaitWakes(len(ids))
	h.p.mu.Lock()
	answers := addressOf(h.p.answers)
	h.p.mu.Unlock()
	h.takeAnswers(c, ids)
	h.expectNoAskers()
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	for _, m := range []struct {
		name        string
		full, after unsafe.Pointer
	}{{"asked", asked, addressOf(h.p.asked)}, {"askers", askers, addressOf(h.p.askers)}, {"answers", answers, addressOf(h.p.answers)}} {
		if m.full == m.after {
			t.Errorf("%s is the map that held %d asks", m.name, len(ids))
		}
	}
}

func addressOf[K comparable, V any](m map[K]V) unsafe.Pointer {
	return reflect.ValueOf(m).UnsafePointer()
}
