package planner

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/credwatch/credwatch/internal/graph"
)

// TestAnswersWaitingForTheirChecksAreBounded: a sweep's checks are answered as fast as they take
// their answers, never with more than readAhead waiting when a list is sent, and none is left.
func TestAnswersWaitingForTheirChecksAreBounded(t *testing.T) {
	h := newHarness(t)
	h.p.readAhead = 2 * graph.MaxListedAppIDs
	c := &cred{"reader"}
	most := 0
	h.r.listFn = func(ids []string) []graph.Read {
		h.p.mu.Lock()
		most = max(most, h.p.ahead[identityOf(c)])
		h.p.mu.Unlock()
		return found(ids)
	}
	ids := appIDs(7 * graph.MaxListedAppIDs)
	for _, id := range ids {
		h.check(c, id)
	}
	// Nothing taken: two batches are answered, and the rest wait.
	h.awaitWakes(h.p.readAhead)
	time.Sleep(20 * time.Millisecond)
	if lists, _ := h.r.calls(); len(lists) != 2 {
		t.Errorf("%d lists sent with no answer taken, want 2", len(lists))
	}
	// Taken in the order they come, as reconciles woken would take them.
	woken := h.p.readAhead
	taken := map[string]bool{}
	take := func(id string) {
		if !taken[id] {
			taken[id] = true
			h.takeAnswers(c, []string{id})
		}
	}
	h.p.mu.Lock()
	var ready []string
	for k := range h.p.answers {
		ready = append(ready, k.appID)
	}
	h.p.mu.Unlock()
	for _, id := range ready {
		take(id)
	}
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for woken < len(ids) {
		select {
		case id := <-h.wakes:
			woken++
			take(id)
		case <-tick.C:
			if h.clock.HasWaiters() {
				h.clock.Step(window)
			}
		case <-deadline:
			t.Fatalf("%d of %d checks answered", woken, len(ids))
		}
	}
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	if most > h.p.readAhead {
		t.Errorf("%d answers waiting or being read when a list was sent, want at most %d", most, h.p.readAhead)
	}
	if len(h.p.answers) != 0 || len(h.p.ahead) != 0 || len(h.p.held) != 0 {
		t.Errorf("left: %d answers, %v ahead, %d held", len(h.p.answers), h.p.ahead, len(h.p.held))
	}
}

// TestAFreshReadIsNotHeldForRoom: a rotation's read is answered while checks' batches are held.
func TestAFreshReadIsNotHeldForRoom(t *testing.T) {
	for _, tc := range []struct {
		name string
		read func(h *harness, c azcore.TokenCredential, id string) error
	}{
		{name: "a fresh read", read: func(h *harness, c azcore.TokenCredential, id string) error {
			_, err := h.p.ReadCredentials(context.Background(), c, id)
			return err
		}},
		{name: "a check that waits where it asked, as a fleet's", read: func(h *harness, c azcore.TokenCredential, id string) error {
			woken := make(chan struct{}, 1)
			ask := graph.Ask{Asker: "fleet/" + id, Waits: true, Wake: func() { woken <- struct{}{} }}
			if _, err := h.p.Check(context.Background(), c, id, ask); !errors.Is(err, graph.ErrPending) {
				return err
			}
			<-woken
			_, err := h.p.Check(context.Background(), c, id, ask)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.p.readAhead = graph.MaxListedAppIDs
			c := &cred{"reader"}
			ids := appIDs(2*graph.MaxListedAppIDs + 1)
			h.fillThenHold(c, ids[:2*graph.MaxListedAppIDs], h.check)
			got := make(chan error, 1)
			go func() { got <- tc.read(h, c, ids[len(ids)-1]) }()
			deadline := time.After(5 * time.Second)
			for {
				select {
				case err := <-got:
					if err != nil {
						t.Fatal(err)
					}
					if lists, _ := h.r.calls(); len(lists) != 2 {
						t.Errorf("%d lists, want the checks' first and this read's", len(lists))
					}
					return
				case <-time.After(time.Millisecond):
					h.clock.Step(window)
				case <-deadline:
					t.Fatal("the read waited for the checks to take their answers")
				}
			}
		})
	}
}

// TestAnswersNoCheckTakesExpire: the answers of deleted watches hold the batches behind them for
// answerTTL, not for good.
func TestAnswersNoCheckTakesExpire(t *testing.T) {
	h := newHarness(t)
	h.p.readAhead = graph.MaxListedAppIDs
	c := &cred{"reader"}
	ids := appIDs(2 * graph.MaxListedAppIDs)
	h.fillThenHold(c, ids, h.check)
	h.clock.Step(answerTTL - time.Second)
	select {
	case id := <-h.wakes:
		t.Fatalf("%s answered before the answers ahead of it expired", id)
	case <-time.After(50 * time.Millisecond):
	}
	// Within expireEvery of their expiry.
	h.awaitWakes(graph.MaxListedAppIDs)
	h.takeAnswers(c, ids[graph.MaxListedAppIDs:])
	h.expectNoAskers()
}

// TestATenantScanAnswersBatchesHeldForRoom: a scan answers the checks held behind answers not yet
// taken, and lets their batches go.
func TestATenantScanAnswersBatchesHeldForRoom(t *testing.T) {
	h := newHarness(t)
	h.p.readAhead = graph.MaxListedAppIDs
	c := &cred{"reader"}
	ids := appIDs(2 * graph.MaxListedAppIDs)
	h.r.tenant = tenantOf(ids)
	h.fillThenHold(c, ids, h.checkListable)
	if err := h.p.Scan(context.Background(), c, func(graph.Object) {}); err != nil {
		t.Fatal(err)
	}
	h.expectNoneHeld(c)
	h.awaitWakes(graph.MaxListedAppIDs)
	h.takeAnswers(c, ids)
	h.awaitQueued(c, 0)
	if lists, _ := h.r.calls(); len(lists) != 1 {
		t.Errorf("%d lists, want the first batch's alone", len(lists))
	}
	h.expectNothingAhead(c)
}

// TestAListingAnswersBatchesHeldForRoom: when room lets a batch go and most of a counted tenant is
// held behind it, one listing reads them all.
func TestAListingAnswersBatchesHeldForRoom(t *testing.T) {
	h := newHarness(t)
	h.p.readAhead = graph.MaxListedAppIDs
	c := &cred{"reader"}
	ids := appIDs(1200)
	h.r.tenant = tenantOf(ids)
	if err := h.p.Scan(context.Background(), c, func(graph.Object) {}); err != nil {
		t.Fatal(err)
	}
	h.fillThenHold(c, ids[:1050], h.checkListable)
	h.awaitQueued(c, 6)
	h.takeAnswers(c, ids[:graph.MaxListedAppIDs])
	h.awaitWakes(900)
	h.expectNoneHeld(c)
	h.takeAnswers(c, ids[graph.MaxListedAppIDs:1050])
	if lists, _ := h.r.calls(); len(lists) != 1 || h.r.scanned() != 2 {
		t.Errorf("%d lists and %d listings, want the first batch's list and one listing besides the scan", len(lists), h.r.scanned())
	}
	h.expectNothingAhead(c)
}

func (h *harness) expectNoneHeld(c *cred) {
	h.t.Helper()
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	if n := len(h.p.held[identityOf(c)]); n != 0 {
		h.t.Errorf("%d batches still held", n)
	}
}

// expectNothingAhead fails unless c's identity has no answer waiting and no room taken.
func (h *harness) expectNothingAhead(c *cred) {
	h.t.Helper()
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	if n, ok := h.p.ahead[identityOf(c)]; ok {
		h.t.Errorf("%d ahead, want none", n)
	}
}

// fillThenHold asks for the first readAhead of ids and waits for their answers, then asks for
// the rest, whose batch is held for room.
func (h *harness) fillThenHold(c *cred, ids []string, ask func(c azcore.TokenCredential, id string)) {
	h.t.Helper()
	for _, id := range ids[:h.p.readAhead] {
		ask(c, id)
	}
	h.awaitWakes(h.p.readAhead)
	for _, id := range ids[h.p.readAhead:] {
		ask(c, id)
	}
	h.awaitHeld(c)
}

// awaitHeld waits until a batch of c's identity is held for room, moving the clock on for a
// batch that waits for its window.
func (h *harness) awaitHeld(c *cred) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if h.clock.HasWaiters() {
			h.clock.Step(window)
		}
		h.p.mu.Lock()
		held := len(h.p.held[identityOf(c)]) > 0
		h.p.mu.Unlock()
		if held {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatal("no batch is held for room")
		}
		time.Sleep(time.Millisecond)
	}
}
