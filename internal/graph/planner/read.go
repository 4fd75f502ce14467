package planner

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/graph"
)

func (p *Planner) readAlone(ctx context.Context, cred azcore.TokenCredential, appID string) (graph.Snapshot, error) {
	r := p.read(ctx, cred, []string{appID})[0]
	return r.Snapshot, r.Err
}

// read lists appIDs, and reads by point reads those no list returned, to confirm them, and those
// whose list Graph refused: an identity that owns the applications it reads
// (Application.ReadWrite.OwnedBy) may read each of them and not list them. Such an identity
// reads by point reads alone for a while.
func (p *Planner) read(ctx context.Context, cred azcore.TokenCredential, appIDs []string) []graph.Read {
	id := identityOf(cred)
	p.mu.Lock()
	listing := !p.clock.Now().Before(p.listRefused[id])
	p.unlock()
	reads := graph.FailedReads(len(appIDs), graph.ErrNotListed)
	if listing {
		// An appId that is no GUID fails alone, and names no other watch's appId.
		var listed []int
		var ids []string
		for i, appID := range appIDs {
			if !graph.IsGUID(appID) {
				reads[i] = notGUID(appID)
				continue
			}
			listed, ids = append(listed, i), append(ids, appID)
		}
		var got []graph.Read
		if len(ids) > 0 {
			got = p.next.ReadCredentialLists(ctx, cred, ids)
		}
		if len(got) != len(ids) {
			got = graph.FailedReads(len(ids), fmt.Errorf("a batch of %d appIds answered %d", len(ids), len(got)))
		}
		for j, i := range listed {
			reads[i] = got[j]
		}
	}
	return p.confirm(ctx, cred, appIDs, reads)
}

func notGUID(appID string) graph.Read {
	return graph.Read{Err: fmt.Errorf("appId %q is not a GUID", appID)}
}

// confirm reads by point reads the appIds no list held, those whose list Graph refused, and
// those whose service principal a list returned without their application, unless a point read
// found that application in another tenant within foreignTTL: a 404 is kept as such, a 403 is
// the refusal the watch shows.
func (p *Planner) confirm(ctx context.Context, cred azcore.TokenCredential, appIDs []string, reads []graph.Read) []graph.Read {
	id := identityOf(cred)
	var point, refused, unseen []int
	p.mu.Lock()
	for i, r := range reads {
		switch {
		case errors.Is(r.Err, graph.ErrNotListed):
			point = append(point, i)
		case azerr.KindOf(r.Err) == azerr.KindForbidden:
			point, refused = append(point, i), append(refused, i)
		case r.Err == nil && appUnseen(r.Snapshot) && !p.foreignLocked(id, appIDs[i]):
			point, unseen = append(point, i), append(unseen, i)
		}
	}
	p.unlock()
	for start := 0; start < len(point); start += graph.MaxBatchAppIDs {
		part := point[start:min(start+graph.MaxBatchAppIDs, len(point))]
		ids := make([]string, len(part))
		for j, i := range part {
			ids[j] = appIDs[i]
		}
		got := p.next.ReadCredentialsBatch(ctx, cred, ids)
		for j, i := range part {
			if j < len(got) {
				reads[i] = got[j]
			} else {
				reads[i] = graph.Read{Err: fmt.Errorf("a batch of %d appIds answered %d", len(ids), len(got))}
			}
		}
	}
	p.mu.Lock()
	defer p.unlock()
	for _, i := range unseen {
		if reads[i].Err == nil && appUnseen(reads[i].Snapshot) {
			p.foreign[key{id, strings.ToLower(appIDs[i])}] = p.clock.Now()
		}
	}
	for _, i := range refused {
		if reads[i].Err == nil {
			// Refused a list and allowed a read: this identity may read and not list.
			p.listRefused[id] = p.clock.Now().Add(listRefusedFor)
			break
		}
	}
	return reads
}

// panicked fails b's appIds with r, a panic reading them.
func panicked(b *batch, r any) []graph.Read {
	return graph.FailedReads(len(b.appIDs), fmt.Errorf("reading a batch of %d appIds: panic: %v", len(b.appIDs), r))
}
