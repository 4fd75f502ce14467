package planner

import (
	"context"
	"testing"
	"time"

	"github.com/credwatch/credwatch/internal/graph"
)

// TestDeletedWatchesGiveTheirRoomBack: the answers of watches deleted before taking them let
// the checks held behind them go at once, not after answerTTL.
func TestDeletedWatchesGiveTheirRoomBack(t *testing.T) {
	h := newHarness(t)
	h.p.readAhead = graph.MaxListedAppIDs
	c := &cred{"reader"}
	ids := appIDs(2 * graph.MaxListedAppIDs)
	first, rest := ids[:graph.MaxListedAppIDs], ids[graph.MaxListedAppIDs:]
	// Shared with a watch that stays: that answer keeps its room until it is taken.
	h.checkAs(c, first[0], "stays")
	for _, id := range first {
		h.check(c, id)
	}
	h.awaitWakes(len(first) + 1)
	for _, id := range rest {
		h.check(c, id)
	}
	h.awaitHeld(c)
	for _, id := range first {
		h.p.Withdraw(watchOf(id))
	}
	h.expectHeld(c, 1)
	if _, err := h.p.Check(context.Background(), c, first[0], graph.Ask{Asker: "stays"}); err != nil {
		t.Errorf("the watch that stays: %v, want its answer", err)
	}
	h.expectHeld(c, 0)
	h.awaitWakes(len(rest))
	h.takeAnswers(c, rest)
	h.expectNothingAhead(c)
	h.expectNoAskers()
}

// TestABatchHeldWhoseWatchesAreDeletedIsDroppedUnread: deleted watches' checks held for room hold
// neither the room nor the batches behind them.
func TestABatchHeldWhoseWatchesAreDeletedIsDroppedUnread(t *testing.T) {
	h := newHarness(t)
	h.p.readAhead = graph.MaxListedAppIDs
	c := &cred{"reader"}
	ids := appIDs(2 * graph.MaxListedAppIDs)
	h.fillThenHold(c, ids, h.check)
	for _, id := range ids[graph.MaxListedAppIDs:] {
		h.p.Withdraw(watchOf(id))
	}
	h.expectHeld(c, 0)
	h.awaitNoneAsked()
	h.awaitQueued(c, 0)
	h.takeAnswers(c, ids[:graph.MaxListedAppIDs])
	if lists, _ := h.r.calls(); len(lists) != 1 {
		t.Errorf("%d lists, want the first batch's alone", len(lists))
	}
	h.expectNothingAhead(c)
	h.expectNoAskers()
}

// TestAWatchMovingOffAHeldBatchDoesNotRejoinIt: a watch that asks for another appId of the batch
// it was held in, whose other checks withdrew, waits in a new batch behind the bound; it does
// not take the dropped batch past the bound and ahead of the queue.
func TestAWatchMovingOffAHeldBatchDoesNotRejoinIt(t *testing.T) {
	h := newHarness(t)
	h.p.readAhead = graph.MaxListedAppIDs
	c := &cred{"reader"}
	ids := appIDs(graph.MaxListedAppIDs + 2)
	h.fillThenHold(c, ids, h.check)
	a, b := ids[graph.MaxListedAppIDs], ids[graph.MaxListedAppIDs+1]
	h.p.Withdraw(watchOf(b))
	h.checkAs(c, b, watchOf(a))
	h.awaitHeld(c)
	h.expectHeld(c, 1)
	if lists, _ := h.r.calls(); len(lists) != 1 {
		t.Errorf("%d lists, want the first batch's alone while the bound is full", len(lists))
	}
	h.takeAnswers(c, ids[:graph.MaxListedAppIDs])
	h.awaitWakes(1)
	if _, err := h.p.Check(context.Background(), c, b, graph.Ask{Asker: watchOf(a)}); err != nil {
		t.Errorf("the moved watch: %v, want its answer", err)
	}
	h.expectNothingAhead(c)
	h.expectNoAskers()
}

// TestABatchWithdrawnWhileOpenIsNotHeld: a batch whose checks withdrew before it was sent is
// dropped, not held for room it would never use.
func TestABatchWithdrawnWhileOpenIsNotHeld(t *testing.T) {
	h := newHarness(t)
	h.p.readAhead = graph.MaxListedAppIDs
	c := &cred{"reader"}
	ids := appIDs(graph.MaxListedAppIDs + 1)
	for _, id := range ids[:graph.MaxListedAppIDs] {
		h.check(c, id)
	}
	h.awaitWakes(graph.MaxListedAppIDs)
	last := ids[graph.MaxListedAppIDs]
	h.check(c, last)
	h.p.Withdraw(watchOf(last))
	h.elapse()
	h.awaitNoneAsked()
	h.expectHeld(c, 0)
	if lists, _ := h.r.calls(); len(lists) != 1 {
		t.Errorf("%d lists, want the first batch's alone", len(lists))
	}
}

// TestAWatchAskingForAnotherAppIDGivesItsAnswerUp: a watch that names another application (or
// identity) takes no room for the answer it asked for before.
func TestAWatchAskingForAnotherAppIDGivesItsAnswerUp(t *testing.T) {
	h := newHarness(t)
	h.p.readAhead = graph.MaxListedAppIDs
	c := &cred{"reader"}
	ids := appIDs(2 * graph.MaxListedAppIDs)
	for _, id := range ids[:graph.MaxListedAppIDs] {
		h.check(c, id)
	}
	h.awaitWakes(graph.MaxListedAppIDs)
	other := &cred{"other"}
	for i, id := range ids[graph.MaxListedAppIDs:] {
		if i == 0 {
			// The same appId through another identity is another answer too.
			id = ids[0]
			h.checkAs(other, id, watchOf(ids[i]))
			continue
		}
		h.checkAs(c, id, watchOf(ids[i]))
	}
	h.awaitWakes(graph.MaxListedAppIDs)
	h.expectHeld(c, 0)
	h.p.mu.Lock()
	n := len(h.p.answers)
	h.p.mu.Unlock()
	if n != graph.MaxListedAppIDs {
		t.Errorf("%d answers wait, want the %d asked for last", n, graph.MaxListedAppIDs)
	}
}

// TestAnAskWithdrawnBeforeItsReadIsNotRead: a batch all of whose watches were deleted is not read,
// and the next check of its appIds is answered.
func TestAnAskWithdrawnBeforeItsReadIsNotRead(t *testing.T) {
	h := newHarness(t)
	c := &cred{"reader"}
	id := appIDs(1)[0]
	h.check(c, id)
	h.p.Withdraw(watchOf(id))
	h.elapse()
	h.awaitNoneAsked()
	if lists, _ := h.r.calls(); len(lists) != 0 {
		t.Errorf("%d lists, want none", len(lists))
	}
	h.checkAs(c, id, "next")
	h.awaitWakes(1)
	if _, err := h.p.Check(context.Background(), c, id, graph.Ask{Asker: "next"}); err != nil {
		t.Errorf("the next check: %v, want its answer", err)
	}
	h.expectNothingAhead(c)
}

// TestAnAskWithdrawnWhileReadIsNotKept: the answer of a batch being read when its watch was
// deleted wakes no one and waits for no one.
func TestAnAskWithdrawnWhileReadIsNotKept(t *testing.T) {
	h := newHarness(t)
	release, begun := h.holdLists()
	c := &cred{"reader"}
	id := appIDs(1)[0]
	h.check(c, id)
	h.elapse()
	<-begun
	h.p.Withdraw(watchOf(id))
	close(release)
	h.awaitNoneAsked()
	select {
	case <-h.wakes:
		t.Error("a deleted watch was woken")
	default:
	}
	h.expectNothingAhead(c)
	h.expectNoAskers()
}

// expectHeld fails unless n batches of c's identity are held for room.
func (h *harness) expectHeld(c *cred, n int) {
	h.t.Helper()
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	if got := len(h.p.held[identityOf(c)]); got != n {
		h.t.Errorf("%d batches held, want %d", got, n)
	}
}

// expectNoAskers fails unless no asker waits for anything.
func (h *harness) expectNoAskers() {
	h.t.Helper()
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	if len(h.p.askers) != 0 || len(h.p.answers) != 0 {
		h.t.Errorf("askers %v, %d answers left", h.p.askers, len(h.p.answers))
	}
}

// awaitNoneAsked waits until no batch is to answer a check.
func (h *harness) awaitNoneAsked() {
	h.t.Helper()
	h.await("no appId asked", func() bool { return len(h.p.asked) == 0 })
}

// await waits until done, called under the planner's lock, or fails after five seconds.
func (h *harness) await(what string, done func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.p.mu.Lock()
		ok := done()
		h.p.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("waited 5s for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
