package planner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/credwatch/credwatch/internal/graph"
)

// scopedCred is an identity that names its client and tenant, as the operator's do.
type scopedCred struct{ cred }

func (scopedCred) Scope() string { return "client/tenant" }

// deltaReader is a Graph whose delta rounds report what changes holds for the next round.
type deltaReader struct {
	*reader
	mu      sync.Mutex
	rounds  map[graph.Source]int
	changes []graph.Change
	err     error
}

func (d *deltaReader) ReadDelta(_ context.Context, _ azcore.TokenCredential, src graph.Source, link string, _ graph.DeltaStart, visit func(graph.Change)) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rounds[src]++
	if d.err != nil {
		err := d.err
		d.err = nil
		return "", err
	}
	if link != "" {
		kept := d.changes[:0]
		for _, ch := range d.changes {
			if ch.Source == src {
				visit(ch)
			} else {
				kept = append(kept, ch)
			}
		}
		d.changes = kept
	}
	return fmt.Sprintf("link-%s-%d", src, d.rounds[src]), nil
}

func (d *deltaReader) roundsRead() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rounds[graph.Application]
}

// keeper is a DeltaKeeper in memory.
type keeper struct {
	mu       sync.Mutex
	kept     map[string][]byte
	resynced []string
	missed   []string
}

func (k *keeper) Load(_ context.Context, scope string) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.kept[scope], nil
}

func (k *keeper) Save(_ context.Context, scope string, state []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kept[scope] = state
}

func (k *keeper) Resynced(scope string, why error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.resynced = append(k.resynced, scope+": "+why.Error())
}

func (k *keeper) Missed(scope, appID, what string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.missed = append(k.missed, appID+": "+what)
}

// deltaHarness is a planner reading delta rounds, and the credentials each watch knows.
type deltaHarness struct {
	*harness
	d     *deltaReader
	keep  *keeper
	cred  *scopedCred
	known map[string]graph.Snapshot
}

func newDeltaHarness(t *testing.T, keep *keeper, fullEvery time.Duration) *deltaHarness {
	h := newHarness(t)
	d := &deltaReader{reader: h.r, rounds: map[graph.Source]int{}}
	h.r.listFn = func(ids []string) []graph.Read {
		out := found(ids)
		for i := range out {
			out[i].Snapshot.Credentials = []graph.Credential{{KeyID: "k-" + ids[i], Type: graph.Password, Source: graph.Application}}
		}
		return out
	}
	h.p = New(d, h.clock, window)
	if err := h.p.UseDelta(DeltaOptions{Keeper: keep, FullEvery: fullEvery}); err != nil {
		t.Fatal(err)
	}
	return &deltaHarness{harness: h, d: d, keep: keep, cred: &scopedCred{}, known: map[string]graph.Snapshot{}}
}

// sweep asks for each of ids as a watch that knows what it last took, takes the answers, and
// returns how many of them lists read.
func (h *deltaHarness) sweep(ids []string) int {
	h.t.Helper()
	lists, _ := h.r.calls()
	for _, id := range ids {
		ask := graph.Ask{Asker: watchOf(id), Wake: func() { h.wakes <- id }, MayList: true}
		if k, ok := h.known[id]; ok {
			ask.Known, ask.KnownAt = &k, k.ReadAt.Truncate(time.Second)
		}
		if _, err := h.p.Check(context.Background(), h.cred, id, ask); !errors.Is(err, graph.ErrPending) {
			h.t.Fatalf("check %s: %v", id, err)
		}
	}
	h.awaitWakes(len(ids))
	for _, id := range ids {
		k := h.known[id]
		s, err := h.p.Check(context.Background(), h.cred, id, graph.Ask{Asker: watchOf(id), Known: &k, KnownAt: k.ReadAt, MayList: true})
		if err != nil {
			h.t.Fatalf("answer for %s: %v", id, err)
		}
		h.known[id] = s
	}
	h.settle()
	after, _ := h.r.calls()
	n := 0
	for _, l := range after[len(lists):] {
		n += len(l)
	}
	return n
}

func TestAQuietTenantIsAnsweredFromItsChanges(t *testing.T) {
	h := newDeltaHarness(t, &keeper{kept: map[string][]byte{}}, 0)
	ids := appIDs(300)

	// The first sweep: the watches know nothing, and are read; it starts the log. Its reads
	// were sent before the log started, so the next sweep reads them again.
	if read := h.sweep(ids); read != 300 {
		t.Fatalf("first sweep: %d read, want all 300", read)
	}
	h.clock.Step(time.Hour)
	h.sweep(ids)
	h.clock.Step(time.Hour)
	before := h.d.roundsRead()
	if read := h.sweep(ids); read != 0 {
		t.Fatalf("a quiet tenant: %d read", read)
	}
	if r := h.d.roundsRead() - before; r != 1 {
		t.Errorf("%d rounds for a sweep, want 1", r)
	}
	for _, id := range ids {
		if got := h.known[id]; len(got.Credentials) != 1 || got.Credentials[0].KeyID != "k-"+id {
			t.Fatalf("%s answered %+v", id, got)
		}
	}

	// A secret added out of band to one application: its watch learns it from the round.
	changed := ids[7]
	h.d.mu.Lock()
	h.d.changes = append(h.d.changes, graph.Change{Source: graph.Application, ObjectID: "obj-" + changed, HasPasswords: true,
		Passwords: []graph.Credential{{KeyID: "k-" + changed, Type: graph.Password, Source: graph.Application}, {KeyID: "added", Type: graph.Password, Source: graph.Application}}})
	h.d.mu.Unlock()
	h.clock.Step(time.Hour)
	if read := h.sweep(ids); read != 0 {
		t.Fatalf("one change: %d read", read)
	}
	if got := h.known[changed]; len(got.Credentials) != 2 || got.Credentials[1].KeyID != "added" {
		t.Errorf("the changed application: %+v", got.Credentials)
	}
	if got := h.known[ids[8]]; len(got.Credentials) != 1 {
		t.Errorf("an unchanged one: %+v", got.Credentials)
	}
}

func TestFewWatchesAreRead(t *testing.T) {
	h := newDeltaHarness(t, &keeper{kept: map[string][]byte{}}, 0)
	ids := appIDs(10)
	h.sweep(ids)
	h.clock.Step(time.Hour)
	if read := h.sweep(ids); read != 10 {
		t.Errorf("ten watches: %d read, want 10", read)
	}
	if r := h.d.roundsRead(); r != 0 {
		t.Errorf("ten watches read %d rounds: lists cost less", r)
	}
}

func TestAKeptLogSurvivesARestart(t *testing.T) {
	keep := &keeper{kept: map[string][]byte{}}
	h := newDeltaHarness(t, keep, 0)
	ids := appIDs(30)
	h.sweep(ids)
	h.clock.Step(time.Hour)
	h.sweep(ids)

	restarted := newDeltaHarness(t, keep, 0)
	restarted.clock.SetTime(h.clock.Now().Add(time.Hour))
	restarted.known = h.known
	restarted.d.rounds = map[graph.Source]int{graph.Application: 2, graph.ServicePrincipal: 2}
	// Nothing but the planner's own answers is a base for the rounds: each watch is read once.
	if read := restarted.sweep(ids); read != 30 {
		t.Errorf("after a restart: %d read, want 30", read)
	}
	restarted.clock.Step(time.Hour)
	if read := restarted.sweep(ids); read != 0 {
		t.Errorf("the sweep after a restart: %d read, want none", read)
	}
	if len(keep.resynced) != 0 {
		t.Errorf("resynced: %v", keep.resynced)
	}
}

func TestALostStateStartsAgainOnce(t *testing.T) {
	keep := &keeper{kept: map[string][]byte{}}
	h := newDeltaHarness(t, keep, 0)
	ids := appIDs(30)
	h.sweep(ids)
	h.clock.Step(time.Hour)
	h.d.mu.Lock()
	h.d.err = fmt.Errorf("reading changes to applications: %w", graph.ErrResync)
	h.d.mu.Unlock()
	if read := h.sweep(ids); read != 30 {
		t.Errorf("after Graph lost the state: %d read, want 30", read)
	}
	if len(keep.resynced) != 1 || !strings.Contains(keep.resynced[0], "client/tenant") {
		t.Errorf("resynced: %v", keep.resynced)
	}
	// Those reads were sent within a minute of the new log's start, which may not hold a change
	// a replica had not shown them: the next sweep reads again, and the one after is answered.
	h.clock.Step(time.Hour)
	h.sweep(ids)
	h.clock.Step(time.Hour)
	if read := h.sweep(ids); read != 0 {
		t.Errorf("the sweeps after: %d read", read)
	}
	if len(keep.resynced) != 1 {
		t.Errorf("resynced again: %v", keep.resynced)
	}
}

func TestFullRoundsCompareReadsWithTheLog(t *testing.T) {
	keep := &keeper{kept: map[string][]byte{}}
	h := newDeltaHarness(t, keep, 24*time.Hour)
	ids := appIDs(30)
	h.sweep(ids)
	h.clock.Step(time.Hour)
	h.sweep(ids)

	// Graph holds a secret no round reported: the full round reads it, and the keeper hears of it
	// once the round after explains nothing.
	missed := ids[3]
	h.r.listFn = func(ask []string) []graph.Read {
		out := found(ask)
		for i := range out {
			out[i].Snapshot.Credentials = []graph.Credential{{KeyID: "k-" + ask[i], Type: graph.Password, Source: graph.Application}}
			if ask[i] == missed {
				out[i].Snapshot.Credentials = append(out[i].Snapshot.Credentials, graph.Credential{KeyID: "unseen", Type: graph.Password, Source: graph.Application})
			}
		}
		return out
	}
	h.clock.Step(24 * time.Hour)
	if read := h.sweep(ids); read != 30 {
		t.Fatalf("a full round: %d read, want 30", read)
	}
	h.clock.Step(time.Hour)
	h.sweep(ids)
	if len(keep.missed) != 1 || !strings.Contains(keep.missed[0], missed) || !strings.Contains(keep.missed[0], "unseen") {
		t.Errorf("missed: %v", keep.missed)
	}
}

// settle waits until no round runs or waits for its window, moving the clock for those that wait.
func (h *deltaHarness) settle() {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.p.mu.Lock()
		running := false
		for _, tr := range h.p.delta.trackers {
			running = running || tr.running
		}
		h.p.mu.Unlock()
		if !running {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatal("a delta round never ends")
		}
		if h.clock.HasWaiters() {
			h.clock.Step(window)
		}
		time.Sleep(time.Millisecond)
	}
}

// A watch checked every three days is still remembered, and the log still holds what changed,
// at its next check. (Checked weekly, it would not be: Graph keeps a delta link seven days, and
// a link older than delta.TokenLifetime starts the rounds again.)
func TestAWatchCheckedEveryThreeDaysIsAnsweredFromChanges(t *testing.T) {
	h := newDeltaHarness(t, &keeper{kept: map[string][]byte{}}, 0)
	ids := appIDs(30)
	h.sweep(ids)
	h.clock.Step(3 * 24 * time.Hour)
	h.sweep(ids)
	h.clock.Step(3*24*time.Hour + time.Hour)
	if read := h.sweep(ids); read != 0 {
		t.Errorf("three days later: %d read, want none", read)
	}
}
