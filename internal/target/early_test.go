package target

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestEarlyChecksAreANamespacesShare(t *testing.T) {
	var e EarlyChecks
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	for i := range EarlyChecksPerNamespace {
		if !e.Allow(types.NamespacedName{Namespace: "team-a", Name: fmt.Sprint(i)}, "1", now) {
			t.Fatalf("early check %d of a fresh minute refused", i+1)
		}
	}
	if e.Allow(types.NamespacedName{Namespace: "team-a", Name: "late"}, "1", now) {
		t.Fatalf("check %d in a minute allowed", EarlyChecksPerNamespace+1)
	}
	if !e.Allow(types.NamespacedName{Namespace: "team-a", Name: "0"}, "1", now) {
		t.Fatal("a check granted and not made yet is refused when it comes back")
	}
	if !e.Allow(types.NamespacedName{Namespace: "team-b", Name: "0"}, "1", now) {
		t.Fatal("another namespace pays for team-a's checks")
	}
	if !e.Allow(types.NamespacedName{Namespace: "team-a", Name: "late"}, "1", now.Add(time.Minute/EarlyChecksPerNamespace)) {
		t.Fatal("the allowance does not refill")
	}
}
