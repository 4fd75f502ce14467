package coalesce

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/clockstep"
	"github.com/credwatch/credwatch/internal/graph"
)

// identity is a comparable credential, as the operator's cached ones are.
type identity struct{ name string }

func (identity) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{}, nil
}

// tokenFunc is a credential that cannot be a map key.
type tokenFunc func() error

func (f tokenFunc) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{}, f()
}

// recorder answers each appId with a snapshot named after it and the identity that read it.
type recorder struct {
	mu      sync.Mutex
	batches [][]string
	creds   []azcore.TokenCredential
}

func (r *recorder) ReadCredentialsBatch(_ context.Context, cred azcore.TokenCredential, appIDs []string) []graph.Read {
	r.mu.Lock()
	r.batches = append(r.batches, append([]string(nil), appIDs...))
	r.creds = append(r.creds, cred)
	r.mu.Unlock()
	out := make([]graph.Read, len(appIDs))
	for i, id := range appIDs {
		out[i].Snapshot.DisplayName = fmt.Sprint(cred, "/", id)
		if id == "missing" {
			out[i].Err = errors.New("not found")
		}
	}
	return out
}

type call struct {
	cred  azcore.TokenCredential
	appID string
}

// readAll runs the calls at once and steps the clock by the window whenever a batch waits for it.
func readAll(t *testing.T, r *Reader, clk *clocktesting.FakeClock, calls []call) []graph.Read {
	t.Helper()
	out := make([]graph.Read, len(calls))
	clockstep.Run(clk, r.window, func() {
		var wg sync.WaitGroup
		for i, c := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i].Snapshot, out[i].Err = r.ReadCredentials(context.Background(), c.cred, c.appID)
			}()
		}
		wg.Wait()
	})
	return out
}

func TestReadsShareBatchesAndAnswers(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	rec := &recorder{}
	r := New(rec, clk, 20*time.Millisecond, 10)
	ops := identity{"operator"}
	var calls []call
	for i := range 24 { // 12 appIds, each asked for twice
		calls = append(calls, call{ops, fmt.Sprintf("app-%02d", i%12)})
	}
	calls = append(calls, call{ops, "missing"})

	got := readAll(t, r, clk, calls)
	for i, c := range calls {
		if want := fmt.Sprint(ops, "/", c.appID); got[i].Snapshot.DisplayName != want {
			t.Errorf("read %d of %s got %q", i, c.appID, got[i].Snapshot.DisplayName)
		}
		if (got[i].Err != nil) != (c.appID == "missing") {
			t.Errorf("read %d of %s: error %v", i, c.appID, got[i].Err)
		}
	}
	// A read that comes after its appId's batch was sent reads afresh, so how often each appId is read
	// depends on scheduling; what may not vary is that a batch is full-size at most and names
	// each appId once.
	seen := map[string]bool{}
	for _, b := range rec.batches {
		if len(b) > 10 {
			t.Errorf("a batch of %d appIds, over the 10 allowed", len(b))
		}
		inBatch := map[string]bool{}
		for _, id := range b {
			if inBatch[id] {
				t.Errorf("batch %v names %s twice", b, id)
			}
			inBatch[id], seen[id] = true, true
		}
	}
	if len(seen) != 13 {
		t.Errorf("batches read %d appIds, want 13", len(seen))
	}
}

// gated is a recorder whose batches wait for the test to open the gate.
type gated struct {
	recorder
	gate chan struct{}
}

func (g *gated) ReadCredentialsBatch(ctx context.Context, cred azcore.TokenCredential, appIDs []string) []graph.Read {
	out := g.recorder.ReadCredentialsBatch(ctx, cred, appIDs)
	<-g.gate
	return out
}

// TestReadAfterABatchIsSentReadsAfresh: once a batch is out, a read of one of its appIds may
// follow the caller's own write (a rotation's addPassword), so it opens a batch of its own.
func TestReadAfterABatchIsSentReadsAfresh(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	rec := &gated{gate: make(chan struct{})}
	r := New(rec, clk, 20*time.Millisecond, 10)
	ops := identity{"operator"}
	first := make(chan error, 1)
	go func() {
		_, err := r.ReadCredentials(context.Background(), ops, "app")
		first <- err
	}()
	for sent := false; !sent; {
		if clk.HasWaiters() {
			clk.Step(r.window)
		}
		rec.mu.Lock()
		sent = len(rec.batches) == 1
		rec.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	// A caller that gives up at once has still joined a batch: a new one, not the one in flight.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.ReadCredentials(ctx, ops, "app"); !errors.Is(err, context.Canceled) {
		t.Fatalf("second read: %v", err)
	}
	r.mu.Lock()
	opened := len(r.open)
	r.mu.Unlock()
	if opened != 1 {
		t.Error("a read of an appId whose batch was already sent joined that batch")
	}
	close(rec.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// panicky panics reading its batch, as the SDK does on some malformed answers.
type panicky struct{}

func (panicky) ReadCredentialsBatch(context.Context, azcore.TokenCredential, []string) []graph.Read {
	panic("assignment to entry in nil map")
}

func TestPanicReadingABatchFailsItsReads(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	r := New(panicky{}, clk, 20*time.Millisecond, 10)
	got := readAll(t, r, clk, []call{{identity{"operator"}, "a"}, {identity{"operator"}, "b"}})
	for _, g := range got {
		if g.Err == nil || !strings.Contains(g.Err.Error(), "panic") {
			t.Errorf("got %v, want the panic as the read's error", g.Err)
		}
	}
}

func TestIdentitiesNeverShareABatch(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	rec := &recorder{}
	r := New(rec, clk, 20*time.Millisecond, 10)
	a, b := identity{"tenant-a"}, identity{"tenant-b"}
	got := readAll(t, r, clk, []call{{a, "app"}, {b, "app"}})
	if got[0].Snapshot.DisplayName == got[1].Snapshot.DisplayName {
		t.Errorf("two identities got one answer: %q", got[0].Snapshot.DisplayName)
	}
	if len(rec.batches) != 2 {
		t.Errorf("%d batches for two identities, want 2", len(rec.batches))
	}
}

func TestCallerStopsWaitingWithItsContext(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	r := New(&recorder{}, clk, time.Hour, 10)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.ReadCredentials(ctx, identity{"operator"}, "app"); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want the context's error while the batch waits", err)
	}
	ctx, cancel = context.WithDeadline(context.Background(), time.Now())
	defer cancel()
	if _, err := r.ReadCredentials(ctx, identity{"operator"}, "app"); azerr.KindOf(err) != azerr.KindUnavailable {
		t.Errorf("a caller out of time got %v, want Graph unanswered, as a single read reports it", err)
	}
}

func TestCredentialThatCannotBeAKeyIsReadAlone(t *testing.T) {
	rec := &recorder{}
	r := New(rec, clocktesting.NewFakeClock(time.Now()), time.Hour, 10)
	if _, err := r.ReadCredentials(context.Background(), tokenFunc(func() error { return nil }), "app"); err != nil {
		t.Fatal(err)
	}
	if len(rec.batches) != 1 || len(rec.batches[0]) != 1 {
		t.Errorf("batches %v, want one of one appId, sent at once", rec.batches)
	}
}
