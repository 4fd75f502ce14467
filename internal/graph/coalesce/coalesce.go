// Package coalesce gathers the credential reads of many watches into Graph $batch requests: reads
// that arrive within a short window under one identity share a batch, and watches of the same
// appId share its answer. A sweep of 10,000 watches then costs 1,000 HTTP requests, not 20,000.
package coalesce

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"k8s.io/utils/clock"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
)

// BatchReader reads the credentials of several appIds in one request, each result in the order
// of appIDs.
type BatchReader interface {
	ReadCredentialsBatch(ctx context.Context, cred azcore.TokenCredential, appIDs []string) []graph.Read
}

// batchTimeout bounds one batch, which no single caller's context owns.
const batchTimeout = 2 * time.Minute

// Reader coalesces ReadCredentials calls into batches of at most max appIds.
type Reader struct {
	next   BatchReader
	clock  clock.Clock
	window time.Duration
	max    int

	// open holds each identity's batch still taking reads. Only unsent batches are shared: a
	// batch already sent may predate a caller's own write (a rotation's addPassword), and its
	// answer would hide that write.
	mu   sync.Mutex
	open map[azcore.TokenCredential]*batch
}

type batch struct {
	cred    azcore.TokenCredential
	appIDs  []string
	index   map[string]int
	full    chan struct{}
	done    chan struct{}
	results []graph.Read
}

// New returns a Reader that sends a batch when it holds maxAppIDs appIds or window after its
// first read, whichever is sooner.
func New(next BatchReader, c clock.Clock, window time.Duration, maxAppIDs int) *Reader {
	return &Reader{next: next, clock: c, window: window, max: maxAppIDs, open: map[azcore.TokenCredential]*batch{}}
}

// ReadCredentials reads appID's credentials with cred, in a batch with other reads by cred.
// Credentials are batched by identity, so one must be comparable; one that is not is read alone.
func (r *Reader) ReadCredentials(ctx context.Context, cred azcore.TokenCredential, appID string) (graph.Snapshot, error) {
	if cred == nil || !reflect.ValueOf(cred).Comparable() {
		res := r.next.ReadCredentialsBatch(ctx, cred, []string{appID})
		return res[0].Snapshot, res[0].Err
	}
	b, i := r.join(cred, appID)
	select {
	case <-b.done:
		return b.results[i].Snapshot, b.results[i].Err
	case <-ctx.Done():
		// Sorted as a read that got no answer would be, so the watch shows Graph as slow.
		if ue := azerr.Unanswered(ctx.Err()); ue != nil {
			return graph.Snapshot{}, ue
		}
		return graph.Snapshot{}, ctx.Err()
	}
}

// join adds appID to cred's open batch, opening one if there is none, and returns the batch and
// appID's place in it.
func (r *Reader) join(cred azcore.TokenCredential, appID string) (*batch, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.open[cred]
	if b == nil {
		b = &batch{cred: cred, index: map[string]int{}, full: make(chan struct{}), done: make(chan struct{})}
		r.open[cred] = b
		go r.send(b)
	}
	if i, ok := b.index[appID]; ok {
		return b, i
	}
	i := len(b.appIDs)
	b.index[appID] = i
	b.appIDs = append(b.appIDs, appID)
	if len(b.appIDs) == r.max {
		delete(r.open, cred)
		close(b.full)
	}
	return b, i
}

func (r *Reader) send(b *batch) {
	select {
	case <-b.full:
	case <-r.clock.After(r.window):
		r.mu.Lock()
		if r.open[b.cred] == b {
			delete(r.open, b.cred)
		}
		r.mu.Unlock()
	}
	// No more joins: the batch left r.open under the lock.
	defer close(b.done)
	defer func() {
		// This goroutine is no reconcile's, so controller-runtime's recovery does not reach it: a
		// panic reading one answer would stop the operator. It fails this batch's reads instead.
		if p := recover(); p != nil {
			b.results = graph.FailedReads(len(b.appIDs), fmt.Errorf("reading a batch of %d appIds: panic: %v", len(b.appIDs), p))
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	b.results = r.next.ReadCredentialsBatch(ctx, b.cred, b.appIDs)
	if len(b.results) != len(b.appIDs) {
		b.results = graph.FailedReads(len(b.appIDs), fmt.Errorf("a batch of %d appIds answered %d", len(b.appIDs), len(b.results)))
	}
}
