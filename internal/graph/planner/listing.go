package planner

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
)

// tenantSize is how many applications and service principals a listing of the whole tenant
// counted under an identity.
type tenantSize struct {
	apps, sps int
	at        time.Time
}

const (
	// sizeTTL is how long a tenant's count chooses between lists and a listing: a tenant grows
	// by thousands in months, not in a day.
	sizeTTL = 24 * time.Hour
	// listingFailedFor is how long an identity whose listing Graph throttled, or that timed out,
	// reads by lists alone.
	listingFailedFor = 10 * time.Minute
)

// Scan reads the whole tenant cred signs in to for a tenant scan, handing every object to visit:
// from Graph's changes since the scan before where delta reads are on (scanChanges), or by a
// listing.
func (p *Planner) Scan(ctx context.Context, cred azcore.TokenCredential, visit func(graph.Object)) error {
	if !plannable(cred) {
		return p.next.ScanTenant(ctx, cred, "", visit)
	}
	if st := p.scanStateOf(cred); st != nil {
		return p.scanChanges(ctx, cred, st, visit)
	}
	return p.scanListing(ctx, cred, visit)
}

// scanListing lists the whole tenant, handing every object to visit. The checks of the same
// identity waiting for their turn, and allowed to list, are answered by the same listing; and
// the tenant's count chooses how later checks are read. A scan takes no turn of the identity's:
// its pages are read one after the other in each list, each after the limiter has seen the
// answer to the last.
func (p *Planner) scanListing(ctx context.Context, cred azcore.TokenCredential, visit func(graph.Object)) error {
	id := identityOf(cred)
	p.mu.Lock()
	var with []*batch
	for _, b := range slices.Clone(p.queued[id]) {
		if !b.noListing {
			p.unqueueLocked(b)
			b.listed = true
			p.sentLocked(b, p.clock.Now())
			with = append(with, b)
		}
	}
	p.unholdLocked(id, takenByListing) // this listing answers those held for room
	p.unlock()
	wanted, err := p.list(ctx, cred, with, visit)
	// The checks' answers are theirs to wait for, not the scan's: the point reads that confirm
	// what the listing did not hold, or the lists read in place of a failed listing, are bounded
	// by the checks' own deadlines.
	go p.answer(cred, with, wanted, err)
	return err
}

// unqueueLocked takes b off its identity's queue.
func (p *Planner) unqueueLocked(b *batch) {
	q := slices.DeleteFunc(p.queued[b.identity], func(o *batch) bool { return o == b })
	if len(q) == 0 {
		delete(p.queued, b.identity)
		return
	}
	p.queued[b.identity] = q
}

// listingLocked is b and the batches queued behind it, when policy reads them in one listing of
// the tenant; they are then marked listed. It is nil when lists read b.
func (p *Planner) listingLocked(b *batch) []*batch {
	size, known := p.sizes[b.identity]
	if b.listed || !known || p.clock.Now().Before(p.listingRefused[b.identity]) {
		return nil
	}
	due := len(b.appIDs)
	var with []*batch
	for _, q := range p.queued[b.identity] {
		if !q.noListing {
			due += len(q.appIDs)
			with = append(with, q)
		}
	}
	if ChooseReads(due, size.apps, size.sps, !b.noListing) != FullListing {
		return nil
	}
	now := p.clock.Now()
	p.sentLocked(b, now)
	for _, q := range with {
		p.unqueueLocked(q)
		q.listed = true
		p.sentLocked(q, now)
	}
	p.unholdLocked(b.identity, takenByListing) // this listing answers those held for room
	return append([]*batch{b}, with...)
}

// timeoutOf is the longest any of batches allows.
func (p *Planner) timeoutOf(batches []*batch) time.Duration {
	p.mu.Lock()
	defer p.unlock()
	var d time.Duration
	for _, b := range batches {
		d = max(d, b.timeout)
	}
	return d
}

// list lists the tenant once, hands each object to visit when it is not nil, counts the tenant,
// and keeps of the objects only those of the appIds batches ask for. An identity whose listing
// failed is read by lists for a while: an hour when Graph refused it, listingFailedFor when it
// throttled or timed out, which is when a backlog, and the next listing, would come.
func (p *Planner) list(ctx context.Context, cred azcore.TokenCredential, batches []*batch, visit func(graph.Object)) (wanted map[string]*graph.Snapshot, err error) {
	defer func() {
		// A tenant scan's or a batch's goroutine, and Graph's answers parsed in it.
		if r := recover(); r != nil {
			err = fmt.Errorf("listing the tenant: panic: %v", r)
		}
		p.mu.Lock()
		defer p.unlock()
		switch id := identityOf(cred); {
		case err == nil:
		case azerr.KindOf(err) == azerr.KindForbidden:
			p.listingRefused[id] = p.clock.Now().Add(listRefusedFor)
		default:
			p.listingRefused[id] = p.clock.Now().Add(listingFailedFor)
		}
	}()
	wanted = map[string]*graph.Snapshot{}
	for _, b := range batches {
		for _, appID := range b.appIDs {
			lower := strings.ToLower(appID)
			wanted[lower] = &graph.Snapshot{AppID: lower}
		}
	}
	var apps, sps int
	err = p.next.ScanTenant(ctx, cred, "", func(o graph.Object) {
		if o.Source == graph.Application {
			apps++
		} else {
			sps++
		}
		if s := wanted[o.AppID]; s != nil {
			s.Add(o)
		}
		if visit != nil {
			visit(o)
		}
	})
	if err == nil {
		p.mu.Lock()
		p.sizes[identityOf(cred)] = tenantSize{apps: apps, sps: sps, at: p.clock.Now()}
		p.unlock()
	}
	return wanted, err
}

// answer delivers each batch's answers from a listing that found wanted: an appId it did not hold
// is confirmed by a point read, as after lists. When the listing failed, lists read the batches
// instead. A panic fails the batches not yet answered.
func (p *Planner) answer(cred azcore.TokenCredential, batches []*batch, wanted map[string]*graph.Snapshot, listingErr error) {
	answered := 0
	defer func() {
		if r := recover(); r != nil {
			for _, b := range batches[answered:] {
				p.deliver(b, panicked(b, r))
			}
		}
	}()
	for _, b := range batches {
		ctx, cancel := context.WithTimeout(context.Background(), p.timeoutOf([]*batch{b}))
		var reads []graph.Read
		if listingErr != nil {
			reads = p.read(ctx, cred, b.appIDs)
		} else {
			reads = make([]graph.Read, len(b.appIDs))
			for i, appID := range b.appIDs {
				s := wanted[strings.ToLower(appID)]
				switch {
				case !graph.IsGUID(appID):
					reads[i] = notGUID(appID)
				case s.ApplicationObjectID == "" && s.ServicePrincipalObjectID == "":
					reads[i].Err = graph.ErrNotListed
				default:
					reads[i].Snapshot = *s
				}
			}
			reads = p.confirm(ctx, cred, b.appIDs, reads)
		}
		cancel()
		answered++
		p.deliver(b, reads)
	}
}
