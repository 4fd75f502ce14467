package planner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
)

const window = 100 * time.Millisecond

type cred struct{ name string }

func (*cred) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{}, nil
}

// reader is a Graph of func fields; by default every appId is found, listed, and a listing of
// the tenant holds the objects of tenant.
type reader struct {
	mu      sync.Mutex
	lists   [][]string
	points  [][]string
	scans   int
	tenant  []graph.Object
	listFn  func(ids []string) []graph.Read
	pointFn func(ids []string) []graph.Read
	scanErr error
	// scanGate, when set, holds each listing of the tenant until it is closed.
	scanGate chan struct{}
}

func found(ids []string) []graph.Read {
	out := make([]graph.Read, len(ids))
	for i, id := range ids {
		out[i].Snapshot = graph.Snapshot{AppID: id, ApplicationObjectID: "obj-" + id}
	}
	return out
}

func (r *reader) ReadCredentialLists(_ context.Context, _ azcore.TokenCredential, ids []string) []graph.Read {
	r.mu.Lock()
	r.lists = append(r.lists, append([]string(nil), ids...))
	fn := r.listFn
	r.mu.Unlock()
	if fn != nil {
		return fn(ids)
	}
	return found(ids)
}

func (r *reader) ReadCredentialsBatch(_ context.Context, _ azcore.TokenCredential, ids []string) []graph.Read {
	r.mu.Lock()
	r.points = append(r.points, append([]string(nil), ids...))
	fn := r.pointFn
	r.mu.Unlock()
	if fn != nil {
		return fn(ids)
	}
	return found(ids)
}

func (r *reader) ScanTenant(_ context.Context, _ azcore.TokenCredential, filter string, visit func(graph.Object)) error {
	r.mu.Lock()
	r.scans++
	tenant, err, gate := r.tenant, r.scanErr, r.scanGate
	r.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if filter != "" {
		return errors.New("the planner lists the whole tenant")
	}
	if err != nil {
		return err
	}
	for _, o := range tenant {
		visit(o)
	}
	return nil
}

// tenantOf is an application and its service principal for each of ids.
func tenantOf(ids []string) []graph.Object {
	var out []graph.Object
	for _, id := range ids {
		out = append(out,
			graph.Object{Source: graph.Application, AppID: id, ObjectID: "obj-" + id, DisplayName: "app " + id},
			graph.Object{Source: graph.ServicePrincipal, AppID: id, ObjectID: "sp-" + id})
	}
	return out
}

func (r *reader) scanned() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.scans
}

func (r *reader) calls() (lists, points [][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]string(nil), r.lists...), append([][]string(nil), r.points...)
}

// harness is a planner on a fake clock, and a count of the wakes each appId got.
type harness struct {
	t     *testing.T
	clock *clocktesting.FakeClock
	r     *reader
	p     *Planner
	wakes chan string
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, clock: clocktesting.NewFakeClock(time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)), r: &reader{},
		wakes: make(chan string, 10000)}
	h.p = New(h.r, h.clock, window)
	return h
}

func appIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
	}
	return out
}

// check asks for id with c as the watch of id, and fails unless the answer is pending.
func (h *harness) check(c azcore.TokenCredential, id string) {
	h.t.Helper()
	h.checkAs(c, id, watchOf(id))
}

// checkAs asks for id with c as asker, and fails unless the answer is pending.
func (h *harness) checkAs(c azcore.TokenCredential, id, asker string) {
	h.t.Helper()
	if _, err := h.p.Check(context.Background(), c, id, graph.Ask{Asker: asker, Wake: func() { h.wakes <- id }}); !errors.Is(err, graph.ErrPending) {
		h.t.Fatalf("check %s as %s: %v, want it pending", id, asker, err)
	}
}

// checkListable asks for id as its watch, whose identity may list the tenant.
func (h *harness) checkListable(c azcore.TokenCredential, id string) {
	h.t.Helper()
	if _, err := h.p.Check(context.Background(), c, id, graph.Ask{Asker: watchOf(id), Wake: func() { h.wakes <- id }, MayList: true}); !errors.Is(err, graph.ErrPending) {
		h.t.Fatalf("check %s: %v, want it pending", id, err)
	}
}

// awaitQueued waits until n batches of c's identity wait for their turn.
func (h *harness) awaitQueued(c azcore.TokenCredential, n int) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.p.mu.Lock()
		queued := len(h.p.queued[identityOf(c)])
		h.p.mu.Unlock()
		if queued == n {
			return
		}
		if time.Now().After(deadline) {
			h.p.mu.Lock()
			var open, asked int
			if b := h.p.open[identityOf(c)]; b != nil {
				open = len(b.appIDs)
			}
			asked = len(h.p.asked)
			users := 0
			if t := h.p.reading[identityOf(c)]; t != nil {
				users = t.users
			}
			h.p.mu.Unlock()
			h.t.Fatalf("%d batches wait for their turn, want %d (open %d, asked %d, users %d)", queued, n, open, asked, users)
		}
		time.Sleep(time.Millisecond)
	}
}

func watchOf(id string) string { return "watch-" + id }

// holdLists makes each list call say it has begun on inFlight and wait for release to close.
func (h *harness) holdLists() (release, inFlight chan struct{}) {
	release, inFlight = make(chan struct{}), make(chan struct{}, 2)
	h.r.listFn = func(ids []string) []graph.Read {
		inFlight <- struct{}{}
		<-release
		return found(ids)
	}
	return release, inFlight
}

// elapse waits until the open batches wait on the clock, then moves it past the window.
func (h *harness) elapse() {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !h.clock.HasWaiters() {
		if time.Now().After(deadline) {
			h.t.Fatal("no batch waits for its window")
		}
		time.Sleep(time.Millisecond)
	}
	h.clock.Step(window)
}

// awaitWakes waits for n wakes, moving the clock on for batches that open meanwhile, and returns
// how many each appId got.
func (h *harness) awaitWakes(n int) map[string]int {
	h.t.Helper()
	got := map[string]int{}
	deadline := time.After(5 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for woken := 0; woken < n; {
		select {
		case id := <-h.wakes:
			got[id]++
			woken++
		case <-tick.C:
			if h.clock.HasWaiters() {
				h.clock.Step(window)
			}
		case <-deadline:
			h.t.Fatalf("%d wakes of %d", woken, n)
		}
	}
	return got
}

func TestChecksAreListedTogetherAndWakeTheirCallers(t *testing.T) {
	h := newHarness(t)
	c := &cred{"reader"}
	ids := appIDs(40)
	for _, id := range ids {
		h.check(c, id)
	}
	// Asked by another watch too, an appId is read once and answered to each; asked again by
	// the same watch, it is answered to it once.
	h.checkAs(c, ids[0], "other")
	h.check(c, ids[1])
	h.elapse()
	woken := h.awaitWakes(41)
	if woken[ids[0]] != 2 || woken[ids[1]] != 1 || woken[ids[39]] != 1 {
		t.Errorf("wakes %v", woken)
	}
	lists, points := h.r.calls()
	if len(lists) != 1 || len(lists[0]) != 40 || len(points) != 0 {
		t.Fatalf("lists %d (%v), point reads %d: want one list call of 40 appIds", len(lists), lists, len(points))
	}
	// A watch that did not ask is handed nothing: the answer may predate what it follows.
	h.checkAs(c, ids[2], "stranger")
	for _, id := range ids {
		snap, err := h.p.Check(context.Background(), c, id, graph.Ask{Asker: watchOf(id), Wake: func() { t.Errorf("%s woken again", id) }})
		if err != nil || snap.AppID != id {
			t.Errorf("%s: %+v, %v", id, snap, err)
		}
	}
	if snap, err := h.p.Check(context.Background(), c, ids[0], graph.Ask{Asker: "other", Wake: func() {}}); err != nil || snap.AppID != ids[0] {
		t.Errorf("the other watch's check of %s: %+v, %v", ids[0], snap, err)
	}
	// Taken, each answer is gone: the next check asks again.
	h.check(c, ids[1])
	h.check(c, ids[0])
}

func TestAFullBatchGoesWithoutWaiting(t *testing.T) {
	h := newHarness(t)
	c := &cred{"reader"}
	ids := appIDs(graph.MaxListedAppIDs + 1)
	for _, id := range ids {
		h.check(c, id)
	}
	// The full batch is read while the clock stands still.
	deadline := time.Now().Add(5 * time.Second)
	for lists, _ := h.r.calls(); len(lists) == 0; lists, _ = h.r.calls() {
		if time.Now().After(deadline) {
			t.Fatal("the full batch waited for its window")
		}
		time.Sleep(time.Millisecond)
	}
	h.awaitWakes(graph.MaxListedAppIDs + 1)
	lists, _ := h.r.calls()
	if len(lists) != 2 || len(lists[0]) != graph.MaxListedAppIDs || len(lists[1]) != 1 {
		t.Errorf("list calls of %d appIds, want %d then 1", lens(lists), graph.MaxListedAppIDs)
	}
}

func lens(calls [][]string) []int {
	out := make([]int, len(calls))
	for i, c := range calls {
		out[i] = len(c)
	}
	return out
}

func TestIdentitiesAreListedApart(t *testing.T) {
	h := newHarness(t)
	a, b := &cred{"a"}, &cred{"b"}
	id := appIDs(1)[0]
	h.check(a, id)
	h.checkAs(b, id, "other")
	h.elapse()
	h.awaitWakes(2)
	if lists, _ := h.r.calls(); len(lists) != 2 {
		t.Errorf("%d list calls, want one per identity", len(lists))
	}
}

// TestAnApplicationListedWithoutItsObjectIsConfirmed: a list that returns an appId's service
// principal and not its application leaves out both one of another tenant and one the identity
// may not read, and a point read tells them apart. One found in another tenant (404) is kept so,
// and not asked again under that identity for a day; a refusal (403) and a failure are the
// check's, and asked again at the next sweep; another identity asks for itself.
func TestAnApplicationListedWithoutItsObjectIsConfirmed(t *testing.T) {
	h := newHarness(t)
	c := &cred{"reader"}
	ids := appIDs(4)
	foreign, denied, failing := ids[0], ids[1], ids[2]
	spOnly := func(id string) graph.Read {
		return graph.Read{Snapshot: graph.Snapshot{AppID: id, ServicePrincipalObjectID: "sp-" + id}}
	}
	refused := &azerr.Error{Kind: azerr.KindForbidden, Status: 403, Code: "Authorization_RequestDenied"}
	failed := &azerr.Error{Kind: azerr.KindOther, Status: 500, Code: "generalException"}
	h.r.listFn = func(asked []string) []graph.Read {
		out := found(asked)
		for i, id := range asked {
			if id != ids[3] {
				out[i] = spOnly(id)
			}
		}
		return out
	}
	h.r.pointFn = func(asked []string) []graph.Read {
		out := make([]graph.Read, len(asked))
		for i, id := range asked {
			switch id {
			case foreign:
				out[i] = spOnly(id)
			case denied:
				out[i] = graph.Read{Err: refused}
			case failing:
				out[i] = graph.Read{Err: failed}
			}
		}
		return out
	}
	sweep := func(c azcore.TokenCredential, ids ...string) []string {
		t.Helper()
		_, before := h.r.calls()
		for _, id := range ids {
			h.check(c, id)
		}
		h.elapse()
		h.awaitWakes(len(ids))
		for _, id := range ids {
			snap, err := h.p.Check(context.Background(), c, id, graph.Ask{Asker: watchOf(id)})
			switch id {
			case foreign:
				if err != nil || snap.ServicePrincipalObjectID == "" || snap.ApplicationObjectID != "" {
					t.Errorf("the application of another tenant: %+v, %v", snap, err)
				}
			case denied:
				if !errors.Is(err, refused) {
					t.Errorf("the application refused: %v, want the refusal", err)
				}
			case failing:
				if !errors.Is(err, failed) {
					t.Errorf("the application whose read failed: %v, want the failure", err)
				}
			}
		}
		_, after := h.r.calls()
		var pointed []string
		for _, p := range after[len(before):] {
			pointed = append(pointed, p...)
		}
		slices.Sort(pointed)
		return pointed
	}
	if got := sweep(c, ids...); !slices.Equal(got, ids[:3]) {
		t.Errorf("first sweep read %v by point reads, want %v", got, ids[:3])
	}
	h.clock.Step(time.Hour)
	if got := sweep(c, ids...); !slices.Equal(got, []string{denied, failing}) {
		t.Errorf("a sweep later read %v by point reads, want the refused and the failed only", got)
	}
	if got := sweep(&cred{"another"}, foreign); !slices.Equal(got, []string{foreign}) {
		t.Errorf("another identity read %v by point reads, want it to ask for itself", got)
	}
	h.clock.Step(foreignTTL)
	if got := sweep(c, foreign); !slices.Equal(got, []string{foreign}) {
		t.Errorf("a day later read %v by point reads, want the confirmation asked again", got)
	}
}

// TestUnlistedAppIDsAreConfirmed: an appId no list returned is read by a point read, whose answer,
// found or not, is the check's.
func TestUnlistedAppIDsAreConfirmed(t *testing.T) {
	h := newHarness(t)
	c := &cred{"reader"}
	ids := appIDs(12)
	gone := &azerr.Error{Kind: azerr.KindNotFound, Status: 404, Err: errors.New("Request_ResourceNotFound")}
	h.r.listFn = func(ids []string) []graph.Read {
		out := found(ids)
		for i := 0; i < 11; i++ {
			out[i] = graph.Read{Err: fmt.Errorf("appId %s: %w", ids[i], graph.ErrNotListed)}
		}
		return out
	}
	h.r.pointFn = func(asked []string) []graph.Read {
		out := found(asked)
		for i, id := range asked {
			if id == ids[0] {
				out[i] = graph.Read{Err: gone}
			}
		}
		return out
	}
	for _, id := range ids {
		h.check(c, id)
	}
	h.elapse()
	h.awaitWakes(12)
	_, points := h.r.calls()
	if len(points) != 2 || len(points[0]) != graph.MaxBatchAppIDs || len(points[1]) != 1 {
		t.Errorf("point reads of %v appIds, want %d then 1", lens(points), graph.MaxBatchAppIDs)
	}
	if _, err := h.p.Check(context.Background(), c, ids[0], graph.Ask{Asker: watchOf(ids[0])}); !errors.Is(err, gone) {
		t.Errorf("%s, gone by its point read: %v", ids[0], err)
	}
	for _, id := range ids[1:] {
		if snap, err := h.p.Check(context.Background(), c, id, graph.Ask{Asker: watchOf(id)}); err != nil || snap.AppID != id {
			t.Errorf("%s, found by its point read or its list: %+v, %v", id, snap, err)
		}
	}
}

// TestThrottledListsAreAskedAgain: appIds whose list Graph throttled go in the next batch, and fail
// as throttled only after the last try.
func TestThrottledListsAreAskedAgain(t *testing.T) {
	h := newHarness(t)
	c := &cred{"reader"}
	ids := appIDs(20)
	throttled := &azerr.Error{Kind: azerr.KindThrottled, Status: 429, RetryAfter: 3 * time.Second, Err: errors.New("TooManyRequests")}
	h.r.listFn = func(ids []string) []graph.Read {
		out := found(ids)
		for i, id := range ids {
			if id == appIDs(1)[0] {
				out[i] = graph.Read{Err: throttled}
			}
		}
		return out
	}
	for _, id := range ids {
		h.check(c, id)
	}
	h.elapse()
	// The clock moves on for each try as its batch opens.
	if woken := h.awaitWakes(len(ids)); woken[ids[0]] != 1 {
		t.Errorf("%s woken %d times, want once, after its last try", ids[0], woken[ids[0]])
	}
	lists, _ := h.r.calls()
	if got := lens(lists); len(got) != throttledTries || got[1] != 1 || got[2] != 1 {
		t.Errorf("list calls of %v appIds, want 20 then 1 and 1", got)
	}
	if _, err := h.p.Check(context.Background(), c, ids[0], graph.Ask{Asker: watchOf(ids[0])}); azerr.KindOf(err) != azerr.KindThrottled || azerr.RetryAfterOf(err) != 3*time.Second {
		t.Errorf("after %d tries: %v, want throttled with Graph's Retry-After", throttledTries, err)
	}
}

// TestAReadIsNeverAnsweredByABatchSentBeforeIt: a read that must see a write just made waits for a
// batch of its own when the one holding its appId has gone.
func TestAReadIsNeverAnsweredByABatchSentBeforeIt(t *testing.T) {
	h := newHarness(t)
	c := &cred{"reader"}
	id := appIDs(1)[0]
	release, inFlight := h.holdLists()
	h.check(c, id)
	h.elapse()
	<-inFlight

	got := make(chan error, 1)
	go func() {
		_, err := h.p.ReadCredentials(context.Background(), c, id)
		got <- err
	}()
	h.elapse()
	<-inFlight
	close(release)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	h.awaitWakes(1)
	if lists, _ := h.r.calls(); len(lists) != 2 {
		t.Errorf("%d list calls, want the check's and the read's", len(lists))
	}
}

// TestAWriteDropsTheAnswersBeforeIt: an answer read before the application was written is not
// handed to a check after it.
func TestAWriteDropsTheAnswersBeforeIt(t *testing.T) {
	h := newHarness(t)
	c := &cred{"reader"}
	id := appIDs(1)[0]
	h.check(c, id)
	h.elapse()
	h.awaitWakes(1)
	h.p.Forget("obj-" + id)
	h.check(c, id)
}

// TestAnswersNobodyTakesExpire: an answer its check never came for is not handed out after
// answerTTL, and does not stay.
func TestAnswersNobodyTakesExpire(t *testing.T) {
	h := newHarness(t)
	c := &cred{"reader"}
	ids := appIDs(2)
	h.check(c, ids[0])
	h.elapse()
	h.awaitWakes(1)
	h.clock.Step(answerTTL)
	h.check(c, ids[0])
	h.check(c, ids[1])
	h.elapse()
	h.awaitWakes(2)
	h.clock.Step(answerTTL)
	h.check(c, ids[1])
	h.elapse()
	h.awaitWakes(1)
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	if len(h.p.answers) != 1 {
		t.Errorf("%d answers kept, want only the last", len(h.p.answers))
	}
}

// TestAPanicFailsOnlyItsBatch: a panic reading Graph's answer fails the batch's reads, and the
// planner goes on.
func TestAPanicFailsOnlyItsBatch(t *testing.T) {
	h := newHarness(t)
	c := &cred{"reader"}
	ids := appIDs(2)
	h.r.listFn = func([]string) []graph.Read { panic("a malformed answer") }
	h.check(c, ids[0])
	h.elapse()
	h.awaitWakes(1)
	if _, err := h.p.Check(context.Background(), c, ids[0], graph.Ask{Asker: watchOf(ids[0])}); err == nil {
		t.Error("a panicked batch answered")
	}
	h.r.mu.Lock()
	h.r.listFn = nil
	h.r.mu.Unlock()
	h.check(c, ids[1])
	h.elapse()
	h.awaitWakes(1)
}

// TestAnIdentityReadsTwoBatchesAtATime: a sweep's batches wait their turn, so that the limiter
// hears from Graph before it sends the rest; other identities do not wait for it.
func TestAnIdentityReadsTwoBatchesAtATime(t *testing.T) {
	h := newHarness(t)
	release := make(chan struct{})
	var mu sync.Mutex
	active := map[string]int{}
	h.r.listFn = func(ids []string) []graph.Read {
		mu.Lock()
		active[ids[0]]++
		mu.Unlock()
		<-release
		mu.Lock()
		active[ids[0]]--
		mu.Unlock()
		return found(ids)
	}
	a := &cred{"a"}
	ids := appIDs(3*graph.MaxListedAppIDs + 1)
	for _, id := range ids[:3*graph.MaxListedAppIDs] {
		h.check(a, id)
	}
	// Another identity's batch, whose first appId is the last.
	h.check(&cred{"b"}, ids[3*graph.MaxListedAppIDs])
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		mine, theirs := active[ids[0]]+active[ids[graph.MaxListedAppIDs]]+active[ids[2*graph.MaxListedAppIDs]], active[ids[3*graph.MaxListedAppIDs]]
		mu.Unlock()
		if mine == inFlight && theirs == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of a's batches and %d of b's read, want %d and 1", mine, theirs, inFlight)
		}
		if h.clock.HasWaiters() {
			h.clock.Step(window)
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // room for a third of a's to start, were it allowed to
	mu.Lock()
	mine := active[ids[0]] + active[ids[graph.MaxListedAppIDs]] + active[ids[2*graph.MaxListedAppIDs]]
	mu.Unlock()
	close(release)
	if mine != inFlight {
		t.Errorf("%d of a's batches read at once, want %d", mine, inFlight)
	}
	h.awaitWakes(len(ids))
}

// TestAnIdentityThatMayNotListReadsByPointReads: Graph refuses an identity's lists (it owns the
// applications it reads, and may read each, not list them): its appIds are read one by one, and
// its next batch does not try the lists again.
func TestAnIdentityThatMayNotListReadsByPointReads(t *testing.T) {
	h := newHarness(t)
	c := &cred{"owner"}
	refused := &azerr.Error{Kind: azerr.KindForbidden, Status: 403, Err: errors.New("Authorization_RequestDenied")}
	h.r.listFn = func(ids []string) []graph.Read { return graph.FailedReads(len(ids), refused) }
	ids := appIDs(12)
	for _, id := range ids[:11] {
		h.check(c, id)
	}
	h.elapse()
	h.awaitWakes(11)
	for _, id := range ids[:11] {
		if snap, err := h.p.Check(context.Background(), c, id, graph.Ask{Asker: watchOf(id)}); err != nil || snap.AppID != id {
			t.Errorf("%s: %+v, %v", id, snap, err)
		}
	}
	h.check(c, ids[11])
	h.elapse()
	h.awaitWakes(1)
	lists, points := h.r.calls()
	if len(lists) != 1 || len(points) != 3 || len(points[0]) != graph.MaxBatchAppIDs {
		t.Errorf("list calls of %v appIds and point reads of %v, want one list refused, then point reads of 10, 1 and 1", lens(lists), lens(points))
	}
	// An hour on, it tries the lists again.
	h.clock.Step(listRefusedFor)
	h.check(c, ids[0])
	h.elapse()
	h.awaitWakes(1)
	if lists, _ := h.r.calls(); len(lists) != 2 {
		t.Errorf("%d list calls, want the lists tried again", len(lists))
	}
}

// keyed is a credential the cache may build again: a new object, the same identity.
type keyed struct {
	cred
	key string
}

func (k *keyed) PlanKey() string { return k.key }

// TestAnIdentityIsItsKeyNotItsCredential: a check asked with one credential of an identity takes
// its answer with another the cache built since, and the identity's turns go when it reads nothing.
func TestAnIdentityIsItsKeyNotItsCredential(t *testing.T) {
	h := newHarness(t)
	id := appIDs(1)[0]
	h.check(&keyed{cred{"a"}, "secret/t/c#f1"}, id)
	h.elapse()
	h.awaitWakes(1)
	if snap, err := h.p.Check(context.Background(), &keyed{cred{"a, built again"}, "secret/t/c#f1"}, id, graph.Ask{Asker: watchOf(id)}); err != nil || snap.AppID != id {
		t.Errorf("with the identity's new credential: %+v, %v", snap, err)
	}
	// The turn is given back just after the wake.
	h.await("the identity to give its turn back", func() bool { return len(h.p.reading) == 0 })
}

// TestAWriteMakesABatchInFlightStale: an application written while a batch reads it is asked for
// again; the watch gets the answer of a batch read after the write.
func TestAWriteMakesABatchInFlightStale(t *testing.T) {
	h := newHarness(t)
	c := &cred{"writer"}
	id := appIDs(1)[0]
	release, inFlight := h.holdLists()
	h.check(c, id)
	h.elapse()
	<-inFlight
	h.clock.Step(time.Second)
	h.p.Forget("OBJ-" + id) // as Graph writes object IDs, in any case
	close(release)
	h.awaitWakes(1)
	if lists, _ := h.r.calls(); len(lists) != 2 {
		t.Errorf("%d list calls, want the stale batch and one after the write", len(lists))
	}
}

// TestAnIdentityRefusedEverythingStillTriesLists: refused both its lists and its point reads, an
// identity lacks a permission altogether, and keeps trying lists once it has it.
func TestAnIdentityRefusedEverythingStillTriesLists(t *testing.T) {
	h := newHarness(t)
	c := &cred{"nobody"}
	refused := &azerr.Error{Kind: azerr.KindForbidden, Status: 403, Err: errors.New("Authorization_RequestDenied")}
	h.r.listFn = func(ids []string) []graph.Read { return graph.FailedReads(len(ids), refused) }
	h.r.pointFn = func(ids []string) []graph.Read { return graph.FailedReads(len(ids), refused) }
	id := appIDs(1)[0]
	h.check(c, id)
	h.elapse()
	h.awaitWakes(1)
	if _, err := h.p.Check(context.Background(), c, id, graph.Ask{Asker: watchOf(id)}); azerr.KindOf(err) != azerr.KindForbidden {
		t.Errorf("got %v, want the refusal", err)
	}
	h.check(c, id)
	h.elapse()
	h.awaitWakes(1)
	if lists, _ := h.r.calls(); len(lists) != 2 {
		t.Errorf("%d list calls, want lists tried again", len(lists))
	}
}
