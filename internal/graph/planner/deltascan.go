package planner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/graph/delta"
)

// A tenant scan under an identity whose reads may come from Graph's changes (UseDelta) reads the
// tenant from a delta.Tenant. The first scan lists the tenant as it would without delta reads,
// and keeps what the listing found with deltaLinks from just before it; each scan after reads the
// round of changes since and applies it: two requests when little changed, whatever the tenant's
// size. The tenant is listed again when Graph no longer keeps the round's state (or the links are
// older than it keeps them), when a round reports in part an object the tenant does not hold, and
// once FullEvery has passed since the last listing; and when the last round cost more requests
// than a listing would (ChooseScanDelta). That listing is compared with what the rounds
// left, and an object the two differ on, which the next round does not report changed, is one the
// rounds missed: the keeper hears of it. The scans of one identity take turns, as they share its
// tenant.

// scanState is one identity's tenant, as its scans read it.
type scanState struct {
	// turn is held by the scan reading the tenant.
	turn   chan struct{}
	tenant *delta.Tenant
	// used is when a scan last read the tenant: one unused for longer than Graph keeps its links
	// is let go.
	used time.Time
	// reported is how many objects the last round reported: what the next is expected to cost
	// (ChooseScanDelta).
	reported int
	// suspects are the objects, by object ID, a listing found otherwise than the rounds had left
	// them, with their appIds: judged by the next round.
	suspects map[string]string
}

// scanStateOf is cred's tenant, as its scans read it; nil when its scans list the tenant.
func (p *Planner) scanStateOf(cred azcore.TokenCredential) *scanState {
	scope := scopeOf(cred)
	p.mu.Lock()
	defer p.unlock()
	if p.delta == nil || scope == "" {
		return nil
	}
	now := p.clock.Now()
	for s, st := range p.delta.scans {
		if now.Sub(st.used) > delta.TokenLifetime && len(st.turn) == 0 {
			delete(p.delta.scans, s)
		}
	}
	st := p.delta.scans[scope]
	if st == nil {
		st = &scanState{turn: make(chan struct{}, 1)}
		p.delta.scans[scope] = st
	}
	st.used = now
	return st
}

// scanChanges reads the tenant for a scan from the rounds of changes since the scan before, or
// by a listing when they cannot say.
func (p *Planner) scanChanges(ctx context.Context, cred azcore.TokenCredential, st *scanState, visit func(graph.Object)) error {
	select {
	case st.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-st.turn }()
	scope, now := scopeOf(cred), p.clock.Now()
	if t := st.tenant; t != nil && now.Sub(t.Round) > delta.TokenLifetime {
		p.delta.Keeper.Resynced(scope, fmt.Errorf("the tenant scan's delta links are from %s, older than Graph keeps them", t.Round.UTC().Format(time.RFC3339)))
		st.tenant = nil
	}
	if t := st.tenant; t != nil {
		if apps, sps := t.Len(); !ChooseScanDelta(apps, sps, st.reported) {
			// The tenant changes faster than a round pays: it is listed, and rounds go on from then.
			st.tenant, st.reported = nil, 0
		}
	}
	compare := false
	if t := st.tenant; t != nil {
		complete, err := p.applyRound(ctx, cred, st)
		switch {
		case errors.Is(err, graph.ErrResync):
			p.delta.Keeper.Resynced(scope, err)
			st.tenant = nil
		case err != nil:
			return err
		case !complete:
		case p.delta.FullEvery > 0 && now.Sub(t.Listed) >= p.delta.FullEvery:
			compare = true
		default:
			t.Visit(visit)
			apps, sps := t.Len()
			p.mu.Lock()
			p.sizes[identityOf(cred)] = tenantSize{apps: apps, sps: sps, at: now}
			p.unlock()
			return nil
		}
	}
	return p.relist(ctx, cred, st, compare, visit)
}

// applyRound applies the round of changes since st's links to its tenant, and tells the keeper of
// the suspects the round does not explain. complete is false when the round reported in part an
// object the tenant does not hold.
func (p *Planner) applyRound(ctx context.Context, cred azcore.TokenCredential, st *scanState) (complete bool, err error) {
	defer func() {
		// A panic parsing a round fails the scan, not the operator.
		if r := recover(); r != nil {
			err = fmt.Errorf("reading a delta round: panic: %v", r)
		}
	}()
	t, complete, reported := st.tenant, true, 0
	links := maps.Clone(t.Links)
	for _, src := range []graph.Source{graph.Application, graph.ServicePrincipal} {
		next, err := p.delta.reader.ReadDelta(ctx, cred, src, t.Links[src], graph.DeltaLatest, func(ch graph.Change) {
			reported++
			complete = t.Apply(ch) && complete
			delete(st.suspects, strings.ToLower(ch.ObjectID))
		})
		if err != nil {
			return false, err
		}
		links[src] = next
	}
	t.Links, t.Round, st.reported = links, p.clock.Now(), reported
	for id, appID := range st.suspects {
		p.delta.Keeper.Missed(scopeOf(cred), appID, fmt.Sprintf("a listing of the tenant found object %s otherwise than the delta rounds had left it, and no round since reported it", id))
	}
	st.suspects = nil
	return complete, nil
}

// relist lists the tenant for a scan and keeps what the listing found, with the links of the
// round just read, or links from before the listing; compare compares the listing with what the
// rounds left. A tenant whose links cannot be had is listed and not kept.
func (p *Planner) relist(ctx context.Context, cred azcore.TokenCredential, st *scanState, compare bool, visit func(graph.Object)) error {
	var links map[graph.Source]string
	if st.tenant != nil {
		links = maps.Clone(st.tenant.Links)
	} else {
		links = map[graph.Source]string{}
		for _, src := range []graph.Source{graph.Application, graph.ServicePrincipal} {
			link, err := p.delta.reader.ReadDelta(ctx, cred, src, "", graph.DeltaLatest, func(graph.Change) {})
			if err != nil {
				return p.scanListing(ctx, cred, visit)
			}
			links[src] = link
		}
	}
	listed := delta.NewTenant(links, p.clock.Now())
	err := p.scanListing(ctx, cred, func(o graph.Object) {
		listed.Put(o)
		visit(o)
	})
	if err != nil {
		return err
	}
	if compare {
		st.suspects = st.tenant.Differs(listed)
	}
	st.tenant = listed
	return nil
}
