package planner

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
)

// backlog asks for held by watches whose identity may not list the tenant, holds their lists
// in flight (both of the identity's turns), and then asks for due: their batches wait for a
// turn. It returns what lets Graph answer.
func backlog(h *harness, c *cred, held, due []string, mayList bool) (release func()) {
	h.t.Helper()
	hold, begun := h.holdLists()
	for _, id := range held {
		h.check(c, id)
	}
	<-begun
	<-begun
	for _, id := range due {
		if mayList {
			h.checkListable(c, id)
		} else {
			h.check(c, id)
		}
	}
	h.awaitQueued(c, len(due)/graph.MaxListedAppIDs)
	return func() {
		close(hold)
		go func() {
			for range begun {
			}
		}()
	}
}

// takeAnswers takes the answer of each of ids, and fails on a missing or wrong one.
func (h *harness) takeAnswers(c *cred, ids []string) {
	h.t.Helper()
	for _, id := range ids {
		snap, err := h.p.Check(context.Background(), c, id, graph.Ask{Asker: watchOf(id)})
		if err != nil || snap.AppID != id || snap.ApplicationObjectID != "obj-"+id {
			h.t.Fatalf("answer for %s: %+v, %v", id, snap, err)
		}
	}
}

// TestABacklogOfMostOfTheTenantIsReadInOneListing: a tenant of 1,200 applications lists in four
// pages; 900 appIds waiting for their turn would take 120 lists in twelve requests.
func TestABacklogOfMostOfTheTenantIsReadInOneListing(t *testing.T) {
	tests := []struct {
		name          string
		counted       bool // a listing has counted the tenant
		mayList       bool
		wantListing   bool
		wantListCalls int
	}{
		{"counted and allowed", true, true, true, 2},
		{"a tenant never counted", false, true, false, 8},
		{"an identity not allowed to list", true, false, false, 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			c := &cred{"reader"}
			ids := appIDs(1200)
			held, due, absent := ids[900:], ids[:900], ids[899]
			h.r.tenant = tenantOf(append(append([]string(nil), ids[:899]...), held...)) // Graph's replicas lag for absent
			if tc.counted {
				if err := h.p.Scan(context.Background(), c, func(graph.Object) {}); err != nil {
					t.Fatal(err)
				}
			}
			scansBefore := h.r.scanned()
			backlog(h, c, held, due, tc.mayList)()
			if woken := h.awaitWakes(len(ids)); len(woken) != len(ids) {
				t.Errorf("%d appIds woken, want %d", len(woken), len(ids))
			}
			h.takeAnswers(c, ids)
			lists, points := h.r.calls()
			if listings := h.r.scanned() - scansBefore; listings != map[bool]int{true: 1, false: 0}[tc.wantListing] || len(lists) != tc.wantListCalls {
				t.Errorf("%d listings and %d list calls, want listing %t and %d list calls", listings, len(lists), tc.wantListing, tc.wantListCalls)
			}
			if tc.wantListing && (len(points) != 1 || len(points[0]) != 1 || points[0][0] != absent) {
				t.Errorf("point reads %v, want the one appId the listing did not hold, to confirm it", points)
			}
		})
	}
}

// TestATenantScanAnswersTheChecksWaiting: a tenant scan with the same identity lists the tenant
// anyway, and answers the checks waiting for their turn that may list; those whose lists are in
// flight, and a batch one of whose watches may not list, are read by lists.
func TestATenantScanAnswersTheChecksWaiting(t *testing.T) {
	h := newHarness(t)
	c := &cred{"reader"}
	ids := appIDs(1050)
	h.r.tenant = tenantOf(ids)
	release := backlog(h, c, ids[600:900], ids[:600], true)
	mixed := ids[900:]
	for _, id := range mixed[:149] {
		h.checkListable(c, id)
	}
	h.check(c, mixed[149])
	h.awaitQueued(c, 5)
	visited := 0
	if err := h.p.Scan(context.Background(), c, func(graph.Object) { visited++ }); err != nil {
		t.Fatal(err)
	}
	if visited != 2100 {
		t.Errorf("the scan saw %d objects, want all 2,100", visited)
	}
	release()
	if woken := h.awaitWakes(len(ids)); len(woken) != len(ids) {
		t.Errorf("%d appIds woken, want %d", len(woken), len(ids))
	}
	h.takeAnswers(c, ids)
	if lists, _ := h.r.calls(); len(lists) != 3 || h.r.scanned() != 1 {
		t.Errorf("%d list calls and %d listings, want the two batches in flight and the mixed one listed, and the scan alone", len(lists), h.r.scanned())
	}
}

// TestARefusedListingFallsBackToLists: an identity Graph refuses a listing (as one allowed to
// read only the applications it owns) is read by lists, then and for a while after.
func TestARefusedListingFallsBackToLists(t *testing.T) {
	h := newHarness(t)
	c := &cred{"owner"}
	ids := appIDs(1200)
	h.r.tenant = tenantOf(ids)
	if err := h.p.Scan(context.Background(), c, func(graph.Object) {}); err != nil {
		t.Fatal(err)
	}
	h.r.scanErr = &azerr.Error{Kind: azerr.KindForbidden, Status: 403, Err: errors.New("Authorization_RequestDenied")}
	for range 2 {
		backlog(h, c, ids[900:], ids[:900], true)()
		h.awaitWakes(len(ids))
		h.takeAnswers(c, ids)
	}
	if lists, _ := h.r.calls(); len(lists) != 16 || h.r.scanned() != 2 {
		t.Errorf("%d list calls and %d listings, want the count, one refused listing, and all else by lists (16)", len(lists), h.r.scanned())
	}
}

// TestAThrottledBatchKeepsItsNoListing: the appIds of a batch Graph throttled are asked again in
// a batch of their own, which no listing may read when the first could not.
func TestAThrottledBatchKeepsItsNoListing(t *testing.T) {
	h := newHarness(t)
	c := &cred{"reader"}
	ids := appIDs(10)
	throttled := &azerr.Error{Kind: azerr.KindThrottled, Status: 429, Err: errors.New("TooManyRequests")}
	lists := 0
	h.r.listFn = func(ids []string) []graph.Read {
		if lists++; lists == 1 {
			return graph.FailedReads(len(ids), throttled)
		}
		return found(ids)
	}
	for _, id := range ids[:9] {
		h.checkListable(c, id)
	}
	h.check(c, ids[9])
	h.elapse()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.p.mu.Lock()
		again := h.p.open[identityOf(c)]
		h.p.mu.Unlock()
		if again != nil {
			if !again.noListing {
				t.Error("the batch asked again may be listed; the first could not")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the throttled batch was not asked again")
		}
		time.Sleep(time.Millisecond)
	}
	h.awaitWakes(len(ids))
}

// TestAListingLongerThanABatchMissesNoWrite: a tenant scan's listing may take longer than any
// batch; a write made while it lists still makes its answer stale, and the check is read again.
func TestAListingLongerThanABatchMissesNoWrite(t *testing.T) {
	h := newHarness(t)
	release, begun := h.holdLists()
	c := &cred{"reader"}
	ids := appIDs(3)
	h.r.tenant = tenantOf(ids)
	gate := make(chan struct{})
	h.r.scanGate = gate
	// Two batches being read hold the identity's turns, and a third waits for one.
	h.check(c, ids[0])
	h.elapse()
	<-begun
	h.check(c, ids[1])
	h.elapse()
	<-begun
	h.checkListable(c, ids[2])
	h.elapse()
	h.awaitQueued(c, 1)
	scanned := make(chan error, 1)
	go func() { scanned <- h.p.Scan(context.Background(), c, func(graph.Object) {}) }()
	h.awaitQueued(c, 0)
	h.clock.Step(time.Minute)
	h.p.Forget("obj-" + ids[2])
	// Answered after more than a batch may last: their answers prune what was written.
	h.clock.Step(batchTimeout)
	close(release)
	h.awaitWakes(2)
	close(gate)
	if err := <-scanned; err != nil {
		t.Fatal(err)
	}
	h.awaitWakes(1)
	if lists, _ := h.r.calls(); len(lists) != 3 || lists[2][0] != ids[2] {
		t.Errorf("list calls %v, want %s read again after the listing that began before its write", lists, ids[2])
	}
}
