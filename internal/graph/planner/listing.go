package planner

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/policy"
)

// tenantSize is how many applications and service principals a listing of the whole tenant
// counted under an identity.
type tenantSize struct {
	apps, sps int
	at        time.Time
}

// sizeTTL is how long a tenant's count chooses between lists and a listing: a tenant grows by
// thousands in months, not in a day.
const sizeTTL = 24 * time.Hour

// Scan lists the whole tenant cred signs in to for a tenant scan, handing every object to visit.
// The checks of the same identity waiting for their turn, and allowed to list, are answered by
// the same listing; and the tenant's count chooses how later checks are read.
func (p *Planner) Scan(ctx context.Context, cred azcore.TokenCredential, visit func(graph.Object)) error {
	if !plannable(cred) {
		return p.next.ScanTenant(ctx, cred, "", visit)
	}
	id := identityOf(cred)
	p.mu.Lock()
	var with []*batch
	for _, b := range slices.Clone(p.queued[id]) {
		if !b.noListing {
			p.unqueueLocked(b)
			b.listed = true
			with = append(with, b)
		}
	}
	p.mu.Unlock()
	return p.readListing(ctx, cred, with, visit)
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
	if b.listed || b.noListing || !known || p.clock.Now().Before(p.listingRefused[b.identity]) {
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
	if policy.ChooseReads(due, size.apps, size.sps, true) != policy.FullListing {
		return nil
	}
	for _, q := range with {
		p.unqueueLocked(q)
		q.listed = true
	}
	return append([]*batch{b}, with...)
}

// timeoutOf is the longest any of batches allows.
func (p *Planner) timeoutOf(batches []*batch) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var d time.Duration
	for _, b := range batches {
		d = max(d, b.timeout)
	}
	return d
}

// readListing lists the tenant once, hands each object to visit when it is not nil, counts the
// tenant, and answers batches from the listing: an appId it did not hold is confirmed by a point
// read, as after lists. When the listing fails, lists read the batches instead; an identity Graph
// refused a listing lists no more for a while.
func (p *Planner) readListing(ctx context.Context, cred azcore.TokenCredential, batches []*batch, visit func(graph.Object)) error {
	id := identityOf(cred)
	p.mu.Lock()
	now := p.clock.Now()
	for _, b := range batches {
		b.sentAt = now
	}
	p.mu.Unlock()
	wanted := map[string]*graph.Snapshot{}
	for _, b := range batches {
		for _, appID := range b.appIDs {
			lower := strings.ToLower(appID)
			wanted[lower] = &graph.Snapshot{AppID: lower}
		}
	}
	var apps, sps int
	err := p.next.ScanTenant(ctx, cred, "", func(o graph.Object) {
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
	p.mu.Lock()
	if err == nil {
		p.sizes[id] = tenantSize{apps: apps, sps: sps, at: p.clock.Now()}
	} else if azerr.KindOf(err) == azerr.KindForbidden {
		p.listingRefused[id] = p.clock.Now().Add(listRefusedFor)
	}
	p.mu.Unlock()
	for _, b := range batches {
		var reads []graph.Read
		if err != nil {
			lists, cancel := context.WithTimeout(context.Background(), p.timeoutOf([]*batch{b}))
			reads = p.read(lists, cred, b.appIDs)
			cancel()
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
		p.deliver(b, reads)
	}
	return err
}
