package planner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/graph/delta"
)

// readChanges reads a round into tr's log, loading it first, keeping only the changes of the
// watched objects, and keeps the log at most every saveEvery.
func (p *Planner) readChanges(ctx context.Context, tr *tracker, cred azcore.TokenCredential, start time.Time, watched map[string]bool) (err error) {
	defer func() {
		// This goroutine is no reconcile's: a panic parsing a round fails the round.
		if r := recover(); r != nil {
			err = fmt.Errorf("reading a delta round: panic: %v", r)
		}
	}()
	d := p.delta
	if !tr.loaded {
		tr.log = p.loadLog(ctx, tr.scope, start)
		tr.loaded = true
	}
	l := tr.log
	if l != nil && start.Sub(l.Round) > delta.TokenLifetime {
		d.Keeper.Resynced(tr.scope, fmt.Errorf("the kept delta links are from %s, older than Graph keeps them", l.Round.UTC().Format(time.RFC3339)))
		l = nil
	}
	fresh := l == nil
	if fresh {
		l = delta.New(start)
	}
	reported := 0
	for resynced := false; ; {
		err = p.readRound(ctx, l, cred, watched, &reported)
		if !errors.Is(err, graph.ErrResync) || resynced {
			break
		}
		d.Keeper.Resynced(tr.scope, err)
		resynced, fresh, l, reported = true, true, delta.New(start), 0
	}
	if err != nil {
		tr.log = l // what a failed round read is kept, and reported again by the next
		return err
	}
	end := p.clock.Now()
	if fresh {
		// A link from Graph's latest state reports what changed after Graph answered, at most.
		l.Since = end
	}
	l.Round, l.Reported = end, reported
	l.Prune(end)
	tr.log = l
	if fresh || end.Sub(tr.saved) >= saveEvery {
		if b, encErr := l.Encode(maxKept); encErr == nil {
			d.Keeper.Save(ctx, tr.scope, b)
			tr.saved = end
		}
	}
	return nil
}

// readRound reads both collections' changes since l's links into l, keeping those of watched
// objects, and counting all in reported.
func (p *Planner) readRound(ctx context.Context, l *delta.Log, cred azcore.TokenCredential, watched map[string]bool, reported *int) error {
	for _, src := range []graph.Source{graph.Application, graph.ServicePrincipal} {
		next, err := p.delta.reader.ReadDelta(ctx, cred, src, l.Links[src], graph.DeltaLatest, func(ch graph.Change) {
			*reported++
			if watched[strings.ToLower(ch.ObjectID)] || ch.HasAppID && watched[strings.ToLower(ch.AppID)] {
				l.Add(ch, p.clock.Now())
			}
		})
		if err != nil {
			return err
		}
		l.Links[src] = next
	}
	return nil
}

// loadLog is the log kept for scope, or nil.
func (p *Planner) loadLog(ctx context.Context, scope string, now time.Time) *delta.Log {
	b, err := p.delta.Keeper.Load(ctx, scope)
	if err != nil || len(b) == 0 {
		return nil
	}
	l, err := delta.Decode(b, now)
	if err != nil {
		p.delta.Keeper.Resynced(scope, fmt.Errorf("the kept delta state cannot be read: %w", err))
		return nil
	}
	return l
}
